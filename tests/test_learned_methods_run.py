"""The learned methods through the real core: LAD, ALP-KD, CTKD with AdaKD weights and a fixed strategy run in one
sweep through the local executor as ONE job (one teacher forward per batch for all of them), each row records what
its method learned, and a preempted job resumes every learned parameter and statistic bit for bit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kdgrid.core.teacher.options import NOT_MEANT_TO_BE_ACCURATE
from kdgrid.grid import load_sweep
from kdgrid.store import read_table
from kdgrid.sweep_run import RunOptions, run_sweep
from kdgrid.trial import Trial
from tests.commands.test_sweep_end_to_end import count_teacher_passes
from tests.preemption import preempted_in_epoch

TASK = "synthetic-single-binary-n96-d32"
LEARNED_TEMPERATURE = {**NOT_MEANT_TO_BE_ACCURATE, "temperature_learner": "ctkd", "ctkd_ramp": 0.5,
                       "example_weight": "adakd", "ctkd_form": "kdgrid"}  # fmt: skip


@pytest.fixture
def deterministic() -> Iterator[None]:
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(False)


def sweep_file(path: Path, teacher: str) -> Path:
    spec = {
        "name": "learned-methods",
        "fixed": {"task": TASK, "teacher": teacher, "student": "w32-l2-h2-f64", "init": "random", "batch_size": 16,
                  "max_length": 24, "epochs": 2, "lr": 2e-2, "seed": 3, "knowledge": ["hidden_mse"], "beta": 1.0,
                  "options": dict(NOT_MEANT_TO_BE_ACCURATE)},
        "studies": {
            "mappings": {"axes": {"strategy": ["LAD", "ALP-KD", "Last-1"]}},
            "temperature": {"include": [{"strategy": "Last-1", "temperature": 2.0, "options": LEARNED_TEMPERATURE}]},
        },
    }  # fmt: skip
    path.write_text(json.dumps(spec))
    return path


def test_fixed_and_learned_methods_share_one_job_and_one_teacher_pass_per_batch(
    tmp_path: Path, teacher: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = count_teacher_passes(monkeypatch)
    sweep, store = sweep_file(tmp_path / "s.yaml", teacher), tmp_path / "store"
    outcome = run_sweep(sweep, store, RunOptions(executor_settings={"local_progress": False}, preflight=False))
    assert outcome.ok and outcome.done_now == 4 and outcome.jobs == 1
    [steps_per_epoch] = seen["jobs"]
    assert len(seen["forwards"]) == 2 * steps_per_epoch  # epochs x batches, whatever the methods
    rows = read_table(
        store, ["status", "strategy", "temperature", "extra_json", "layer_pairs_json"]
    ).to_pylist()
    assert {row["status"] for row in rows} == {"done"}
    by = {(row["strategy"], row["temperature"]): json.loads(row["extra_json"]) for row in rows}
    lad, alp = by[("LAD", 1.0)], by[("ALP-KD", 1.0)]
    # LAD's gate blocks (the default form): one per teacher layer after the first, on the teacher's width 64
    assert lad["mapping"]["form"] == "gates" and lad["mapping"]["targets"] == [1, 3]  # floor(i 3 / 2), at least 1
    assert all(0 < m < 1 for m in lad["mapping"]["last_gate_means"]) and len(lad["mapping"]["last_gate_means"]) == 2
    assert lad["mapping_params"] == 2 * (64 * 64 + 64 + 2 * 24 * 64)  # W, b and the LayerNorm affine [24, 64]
    assert lad["formulation"] == {"lad_form": "gates"} and alp["formulation"] == {"alp_kd_tokens": "cls"}
    attention = torch.tensor(alp["mapping"]["weights"], dtype=torch.float64)
    assert attention.shape == (2, 3) and torch.allclose(attention.sum(-1), torch.ones(2, dtype=torch.float64))
    assert alp["mapping"]["examples"] == [2 * 96, 2 * 96] and alp["mapping_params"] == 32 * 64  # W: 32 -> 64
    fixed = by[("Last-1", 1.0)]
    assert "mapping" not in fixed and "learned_temperature" not in fixed
    learned = by[("Last-1", 2.0)]["learned_temperature"]
    assert learned["method"] == "CTKD" and learned["start"] == 2.0 and 1.0 < learned["temperature"] < 21.0
    assert learned["temperature"] != pytest.approx(2.0, abs=1e-6)  # it moved
    assert learned["reversal_strength"] == pytest.approx(1.0)  # past its ramp (half of training)
    # the row says which formulation of each paper method it measured
    assert by[("Last-1", 2.0)]["formulation"] == {"example_weight": "adakd (trade-off)", "ctkd_form": "kdgrid"}
    assert "formulation" not in fixed


def test_every_learned_parameter_is_checkpointed_and_resumes_bit_for_bit(
    tmp_path: Path, teacher: str, monkeypatch: pytest.MonkeyPatch, deterministic: None
) -> None:
    from kdgrid.core.training.train import run_job

    trials = [
        planned.trial
        for planned in load_sweep(sweep_file(tmp_path / "s.yaml", teacher)).trials
        if planned.trial.strategy != "Last-1" or planned.trial.temperature == 2.0
    ]
    assert len(trials) == 3

    def run(**kwargs: object) -> tuple[list, dict[str, dict[str, torch.Tensor]]]:
        weights: dict[str, dict[str, torch.Tensor]] = {}

        def keep(t: Trial, model: torch.nn.Module) -> None:
            weights[t.trial_id] = {k: v.detach().clone() for k, v in model.state_dict().items()}

        return run_job(trials, device="cpu", on_model=keep, **kwargs), weights  # type: ignore[arg-type]

    straight, straight_weights = run()

    with preempted_in_epoch(monkeypatch, 1):
        run(checkpoint_dir=tmp_path)
    saved = {t.strategy if t.temperature == 1.0 else "CTKD": torch.load(tmp_path / f"{t.trial_id}.pt",
             weights_only=False)["objective"] for t in trials}  # fmt: skip
    assert {"mapping.gates.0.weight", "mapping.norm_weight"} <= set(saved["LAD"])  # trained for an epoch, saved
    assert not torch.equal(saved["LAD"]["mapping.norm_weight"], torch.ones_like(saved["LAD"]["mapping.norm_weight"]))
    assert saved["ALP-KD"]["mapping.weight_count"].tolist() == [96.0, 96.0]
    assert "mapping.query.weight" in saved["ALP-KD"]
    assert saved["CTKD"]["temperature_learner.theta"].item() != 0.0
    resumed, resumed_weights = run(checkpoint_dir=tmp_path)
    for one, other in zip(straight, resumed, strict=True):
        assert other.extra["resumed_from_epoch"] == 1
        assert other.extra.get("mapping") == one.extra.get("mapping")  # learned weights, exactly
        assert other.extra.get("learned_temperature") == one.extra.get("learned_temperature")
        assert other.curve == one.curve and other.scores == one.scores
    for trial_id, state in straight_weights.items():
        for key, value in state.items():
            assert torch.equal(value, resumed_weights[trial_id][key]), (trial_id, key)


def test_the_curriculum_lkd_and_the_learned_rate_run_through_the_local_executor(
    tmp_path: Path, teacher: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = count_teacher_passes(monkeypatch)
    spec = json.loads(sweep_file(tmp_path / "base.yaml", teacher).read_text())
    spec["studies"] = {
        "curriculum": {"include": [{"strategy": "Last", "options": {"layer_curriculum": [0.25, 0.5]}}]},
        "lad_fast": {"include": [{"strategy": "LAD", "options": {"learned_lr_scale": 10.0}}]},
        "lkd": {"include": [{"strategy": "Last", "alpha": 0.5, "options": {"lkd_holdout": 0.25}}]},
    }
    for study in spec["studies"].values():  # the teacher is random: its gate is off, as in the fixed settings
        study["include"][0]["options"] = {**NOT_MEANT_TO_BE_ACCURATE, **study["include"][0]["options"]}
    sweep = tmp_path / "s.yaml"
    sweep.write_text(json.dumps(spec))
    outcome = run_sweep(sweep, tmp_path / "store", RunOptions(executor_settings={"local_progress": False}, preflight=False))
    assert outcome.ok and outcome.done_now == 3
    assert outcome.jobs == 2  # LKD holds out part of the training data: its own batches, its own teacher pass
    assert sorted(seen["jobs"]) == [5, 6]  # 72 and 96 training sentences in batches of 16
    rows = read_table(tmp_path / "store", ["status", "strategy", "extra_json"]).to_pylist()
    extras = [json.loads(row["extra_json"]) for row in rows]
    assert {row["status"] for row in rows} == {"done"}
    assert sum("layer_curriculum" in e for e in extras) == 1 and sum("lkd" in e for e in extras) == 1
    assert sum("mapping" in e for e in extras) == 1
