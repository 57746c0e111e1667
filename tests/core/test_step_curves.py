"""Step-level curves: what a job's students record every N steps, that recording changes nothing in training,
that a resumed trial continues its curve, and that a row keeps them (older rows read from their epoch curve)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from kdgrid.core.training.step_curves import POINTS_ENV, every_for, rounded
from kdgrid.result import TrialResult
from kdgrid.store.read import read_store
from kdgrid.store.schema import SCHEMA
from kdgrid.store.step_curves import read_step_curves, row_curves, row_diagnosis
from kdgrid.store.write import write_result
from kdgrid.trial import Trial
from tests.preemption import preempted_in_epoch
from tests.tiny_trials import tiny_trial as make_trial

pytestmark = pytest.mark.usefixtures("deterministic_torch")

STEPS_PER_EPOCH = 6  # the tiny task: 96 examples in batches of 16


def run(trials: list[Trial], **kwargs: object) -> tuple[list[TrialResult], dict[str, dict[str, torch.Tensor]]]:
    from kdgrid.core.training.train import run_job

    weights: dict[str, dict[str, torch.Tensor]] = {}

    def keep(trial: Trial, model: torch.nn.Module) -> None:
        weights[trial.trial_id] = {k: v.detach().clone() for k, v in model.state_dict().items()}

    return run_job(trials, device="cpu", on_model=keep, **kwargs), weights  # type: ignore[arg-type]


def test_every_is_the_ceiling_of_steps_over_points() -> None:
    assert every_for(12, 6) == 2 and every_for(13, 6) == 3 and every_for(5, 200) == 1
    assert every_for(6300, 200) == 32  # an SST-2 run of 3 epochs: at most 200 points
    assert rounded(0.123456) == 0.1235 and rounded(math.nan) is None


def test_points_hold_each_terms_window_means_weighted_total_lr_and_gradient_norm(
    teacher: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(POINTS_ENV, "6")  # 12 steps -> a point every 2 steps
    trial = make_trial(teacher, knowledge=("hidden_mse",), strategy="Last", beta=0.5, alpha=0.3)
    (result,), _ = run([trial])
    assert result.status == "done", result.error_message
    curves = result.step_curves
    assert curves["every"] == 2 and curves["steps"] == [2, 4, 6, 8, 10, 12]
    assert curves["num_labels"] == 2 and curves["total_steps"] == 12
    names = set(result.loss_terms)
    assert set(curves["terms"]) == names and set(curves["weighted"]) == names
    # The epoch's mean of every term is the mean of its three equal windows (to the 4 digits kept).
    for epoch, entry in enumerate(result.curve):
        for name, mean in entry["loss_terms"].items():
            points = curves["terms"][name][3 * epoch : 3 * epoch + 3]
            assert sum(points) / 3 == pytest.approx(mean, rel=2e-3), name
    for i in range(6):
        weighted = {name: curves["weighted"][name][i] for name in names}
        for name in names:
            assert weighted[name] == pytest.approx(result.weights[name] * curves["terms"][name][i], rel=2e-3)
        assert curves["total"][i] == pytest.approx(sum(weighted.values()), rel=2e-3)
    assert all(norm > 0 for norm in curves["grad_norm"])
    lrs = curves["lr"]
    assert max(lrs) <= trial.lr and lrs[-1] < max(lrs)  # linear decay after warm-up
    assert curves["cosine"] == [None] * 6  # not asked for


def test_recording_changes_nothing_in_training(teacher: str, monkeypatch: pytest.MonkeyPatch) -> None:
    trial = make_trial(teacher, knowledge=("hidden_mse",), strategy="Last", options={"max_grad_norm": 1.0})
    monkeypatch.setenv(POINTS_ENV, "12")  # every step measured
    (dense,), dense_weights = run([trial])
    monkeypatch.setenv(POINTS_ENV, "1")  # the last step only
    (sparse,), sparse_weights = run([trial])
    assert len(dense.step_curves["steps"]) == 12 and sparse.step_curves["steps"] == [12]
    assert dense.curve == sparse.curve
    for key, value in dense_weights[trial.trial_id].items():
        assert torch.equal(value, sparse_weights[trial.trial_id][key]), key


def test_the_sampled_gradient_cosine_and_a_learned_gate_are_curves(
    teacher: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(POINTS_ENV, "4")  # a point every 3 steps
    options = {"grad_cosine_batches": 2, "lad_form": "softmax"}  # the softmax gate: one weight per teacher layer
    trial = make_trial(teacher, knowledge=("hidden_mse",), strategy="LAD", beta=1.0, options=options)
    (result,), _ = run([trial])
    assert result.status == "done", result.error_message
    curves = result.step_curves
    # batches 0 and 3 of each epoch are sampled: steps 1, 4, 7, 10 -> one cosine in each window of 3 steps
    assert all(c is not None and -1 <= c <= 1 for c in curves["cosine"])
    epoch_means = result.extra["grad_cosine"]
    assert (curves["cosine"][0] + curves["cosine"][1]) / 2 == pytest.approx(epoch_means[0], abs=2e-4)
    mapping = curves["mapping"]
    assert mapping["steps"][0] == 3 and mapping["steps"][-1] == 12
    gate = mapping["values"][-1]["weights"]
    assert len(gate) == 2 and all(sum(row) == pytest.approx(1, abs=1e-3) for row in gate)


def test_a_resumed_trial_continues_its_curve(teacher: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(POINTS_ENV, "6")
    trial = make_trial(teacher, knowledge=("hidden_mse",), strategy="Last")
    (straight,), _ = run([trial])
    with preempted_in_epoch(monkeypatch, 1):
        run([trial], checkpoint_dir=tmp_path)
    (resumed,), _ = run([trial], checkpoint_dir=tmp_path)
    assert resumed.extra["resumed_from_epoch"] == 1
    assert resumed.step_curves == straight.step_curves


def test_a_row_keeps_its_curves_and_diagnosis_and_an_older_row_reads_its_epoch_curve(
    teacher: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(POINTS_ENV, "6")
    (result,), _ = run([make_trial(teacher, knowledge=("hidden_mse",), strategy="Last")])
    store = tmp_path / "store"
    write_result(store, result, sweep="s", study="a")
    rows = read_store(store)
    assert "step_curves_json" not in rows.columns  # a large column: read only when asked
    row = rows.iloc[0].to_dict()
    assert row["step_curve_every"] == 2 and json.loads(row["diagnosis_json"]) == row_diagnosis(row)
    recorded = read_step_curves(store, [row["row_id"]])
    assert recorded == {row["row_id"]: json.loads(json.dumps(result.step_curves))}
    # A row of schema version 2 (no step columns): its epoch curve is its curve, one point per epoch.
    old = pa.Table.from_pylist([{**row, "schema_version": 2}]).drop_columns(
        ["step_curve_every", "diagnosis_json"]
    )
    old_dir = tmp_path / "old" / "rows"
    old_dir.mkdir(parents=True)
    pq.write_table(old, old_dir / f"{row['trial_id']}.done.{'a' * 32}.parquet")
    old_row = read_store(tmp_path / "old").iloc[0].to_dict()
    assert old_row["step_curve_every"] is None or math.isnan(old_row["step_curve_every"])
    assert read_step_curves(tmp_path / "old", [old_row["row_id"]]) == {}
    curves = row_curves(old_row)
    assert curves["from_epochs"] and curves["steps"] == [6, 12] and curves["num_labels"] == 2
    assert curves["terms"]["soft"] == [entry["loss_terms"]["soft"] for entry in result.curve]
    assert isinstance(row_diagnosis(old_row), list)
    assert set(SCHEMA.names) >= {"step_curves_json", "step_curve_every", "diagnosis_json"}
