"""A tiny real store for the export tests: rows written with the store's own API (done, failed, re-run)."""

from __future__ import annotations

from pathlib import Path

from kdgrid.result import TrialResult
from kdgrid.store import failure_result, write_result
from kdgrid.trial import Trial

DISTILLED = Trial(
    task="mnli", teacher="bert-base", student="bert-mini", knowledge=("attention_ce_mean", "gram"),
    strategy="Last-1", beta="auto", temperature=2.0, alpha=0.2, options={"pkd_scale": "mean"}, epochs=2,
)  # fmt: skip
BASELINE = Trial(task="rte", teacher="bert-base", student="bert-tiny", epochs=2)
BROKEN = Trial(task="rte", teacher="bert-base", student="bert-tiny", seed=3)


def done_result(trial: Trial, accuracy: float) -> TrialResult:
    """A done result of ``trial`` with two epochs of curve, loss terms (one per layer pair) and weights."""
    dev_sets = ("validation_matched", "validation_mismatched") if trial.task == "mnli" else ("validation",)
    curve = [
        {
            "epoch": epoch,
            "scores": {dev: {"accuracy": accuracy - 0.1 / epoch} for dev in dev_sets},
            "loss_terms": {"soft": 1.0 / epoch, "hard": 0.5 / epoch, "gram@4-12": 0.02 / epoch},
        }
        for epoch in (1, 2)
    ]
    return TrialResult(
        trial=trial,
        status="done",
        scores={dev: {"accuracy": accuracy, "f1": accuracy - 0.05} for dev in dev_sets},
        last_scores={dev: {"accuracy": accuracy - 0.01, "f1": accuracy - 0.06} for dev in dev_sets},
        best_epoch=2,
        curve=curve,
        loss_terms=curve[-1]["loss_terms"],
        weights={"soft": 1.0, "hard": 0.2, "gram@4-12": 3.5},
        layer_pairs=[(4, 12)],
        student_params=11_000_000,
        student_flops=2_000_000_000,
        wall_time_s=12.5,
        device="cpu",
        started_at="2026-01-01T00:00:00+00:00",
        ended_at="2026-01-01T00:00:12+00:00",
    )


def failed_result(trial: Trial) -> TrialResult:
    try:
        raise RuntimeError("teacher weights missing")
    except RuntimeError as error:
        return failure_result(trial, error)


def write_tiny_store(store: Path) -> Path:
    """Two done trials (two sweeps) and one failed trial; the distilled trial failed once before it was done."""
    write_result(store, failed_result(DISTILLED), sweep="table6", study="main")
    write_result(store, done_result(DISTILLED, 0.8), sweep="table6", study="main")
    write_result(store, done_result(BASELINE, 0.6), sweep="baselines", study="soft")
    write_result(store, failed_result(BROKEN), sweep="baselines", study="soft")
    return store
