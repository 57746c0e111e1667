"""The projector and gradient-conflict methods through run_job on a tiny teacher and student: they train, their
numbers reach the row, logging the cosine changes nothing, and DOT with an ensemble and a dual head (and kdgrid's
Adam form of DOT) resume bit for bit."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from kdgrid.result import TrialResult
from kdgrid.trial import Trial
from tests.preemption import preempted_in_epoch
from tests.tiny_trials import tiny_trial as make_trial

pytestmark = pytest.mark.usefixtures("deterministic_torch")  # bit-for-bit comparisons (tests/conftest.py)


def run(
    trials: list[Trial], **kwargs: object
) -> tuple[list[TrialResult], dict[str, dict[str, torch.Tensor]]]:
    from kdgrid.core.training.train import run_job

    weights: dict[str, dict[str, torch.Tensor]] = {}

    def keep(trial: Trial, model: torch.nn.Module) -> None:
        weights[trial.trial_id] = {k: v.detach().clone() for k, v in model.state_dict().items()}

    return run_job(trials, device="cpu", on_model=keep, **kwargs), weights  # type: ignore[arg-type]


def test_ensemble_spectral_and_dot_with_the_cosine_train_and_reach_the_row(teacher: str) -> None:
    ensemble = make_trial(
        teacher, knowledge=("hidden_mse",), strategy="Last", projection="ensemble",
        options={"projector_members": 2, "projector_spectral": 0.01},
    )  # fmt: skip
    dot = make_trial(
        teacher, knowledge=("hidden_mse",), strategy="Last", lr=0.05,
        options={"optimizer": "dot", "grad_cosine_batches": 3},
    )  # fmt: skip
    (r_ensemble, r_dot), _ = run([ensemble, dot])
    assert r_ensemble.status == "done", r_ensemble.error_message
    assert r_dot.status == "done", r_dot.error_message
    one_mlp = 32 * 64 + 64 + 64 * 64 + 64  # Linear(32, 64) -> GELU -> Linear(64, 64)
    assert r_ensemble.extra["projection_params"] == 2 * 2 * one_mlp  # two pairs, two members each
    assert r_ensemble.weights["projector_spectral"] == 0.01
    assert all(c["loss_terms"]["projector_spectral"] > 0 for c in r_ensemble.curve)
    cosines = r_dot.extra["grad_cosine"]
    assert len(cosines) == 2 and all(-1 <= c <= 1 for c in cosines)
    assert r_dot.extra["grad_cosine_batches"] == [3, 3]
    assert "grad_cosine" not in r_ensemble.extra


def test_logging_the_cosine_changes_nothing_in_training(teacher: str) -> None:
    plain = make_trial(teacher, knowledge=("cos",), strategy="First")
    logged = make_trial(teacher, knowledge=("cos",), strategy="First", options={"grad_cosine_batches": 6})
    (r_plain, r_logged), weights = run([plain, logged])
    assert r_plain.curve == r_logged.curve
    for key, value in weights[plain.trial_id].items():
        assert torch.equal(value, weights[logged.trial_id][key]), key
    assert r_logged.extra["grad_cosine_batches"] == [6, 6]
    assert all(math.isfinite(c) for c in r_logged.extra["grad_cosine"])


def test_dot_with_an_ensemble_and_a_dual_head_resumes_bit_for_bit(
    teacher: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    trial = make_trial(
        teacher, knowledge=("hidden_mse",), strategy="Last", projection="ensemble", epochs=3, lr=0.05,
        options={"optimizer": "dot", "grad_cosine_batches": 2, "dual_head": True},
    )  # fmt: skip
    (straight,), straight_weights = run([trial])

    with preempted_in_epoch(monkeypatch, 2):
        run([trial], checkpoint_dir=tmp_path)
    (resumed,), resumed_weights = run([trial], checkpoint_dir=tmp_path)
    assert resumed.extra["resumed_from_epoch"] == 2
    assert resumed.curve == straight.curve
    assert resumed.extra["grad_cosine"] == straight.extra["grad_cosine"]
    for key, value in straight_weights[trial.trial_id].items():
        assert torch.equal(value, resumed_weights[trial.trial_id][key]), key


def test_dot_adam_trains_records_kdgrids_form_and_resumes_bit_for_bit(
    teacher: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kdgrid's Adam form of DOT at the AdamW rate, with a projection (distillation gradient only): it trains, its
    row says it measured kdgrid's extension, and its three moments per parameter survive a checkpoint."""
    trial = make_trial(
        teacher, knowledge=("hidden_mse",), strategy="Last", epochs=3, options={"optimizer": "dot_adam"}
    )
    (straight,), straight_weights = run([trial])
    assert straight.status == "done", straight.error_message
    assert straight.extra["formulation"] == {"optimizer": "dot_adam (kdgrid's Adam form of DOT, not the paper's)"}
    assert straight.extra["projection_params"] > 0  # a one-sided parameter stepped too
    assert all(math.isfinite(v) for point in straight.curve for v in point["loss_terms"].values())

    with preempted_in_epoch(monkeypatch, 2):
        run([trial], checkpoint_dir=tmp_path)
    (resumed,), resumed_weights = run([trial], checkpoint_dir=tmp_path)
    assert resumed.extra["resumed_from_epoch"] == 2
    assert resumed.curve == straight.curve
    for key, value in straight_weights[trial.trial_id].items():
        assert torch.equal(value, resumed_weights[trial.trial_id][key]), key


def test_all_to_one_with_a_weight_copied_student_trains(teacher: str) -> None:
    """Yu, Wen & Mou's all-to-one matching on a student whose layers are copied from the teacher (preload)."""
    trial = make_trial(
        teacher,
        student="w64-l2-h4-f128",
        init="preload",
        knowledge=("hidden_mse",),
        strategy="All-to-one",
        epochs=1,
    )
    (result,), _ = run([trial])
    assert result.status == "done", result.error_message
    assert result.layer_pairs == [(1, 3), (2, 3)]  # both student layers learn the teacher's last
    assert {"hidden_mse@1-3", "hidden_mse@2-3"} <= set(result.loss_terms)
    assert result.extra["projection_params"] == 0  # the teacher's width: nothing to project
