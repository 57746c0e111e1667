"""Shared replicates (`kdgrid.analysis.replicate_bank`) and the scoring shortcuts of `kdgrid.analysis.stats`: the same numbers
as scoring one cell at a time, bit for bit."""

from __future__ import annotations

from dataclasses import astuple

import numpy as np
import pytest

from kdgrid.analysis import stats
from kdgrid.analysis.cell_stats import attach_uncertainty, compare_cells
from kdgrid.analysis.replicate_bank import ReplicateBank
from kdgrid.metrics import ROW_METRICS
from tests.analysis.test_cell_stats import GOLD, N, correct_on, demo_row, demo_view, outcome


def plain(metric: str):
    """The metric as a plain function: `kdgrid.analysis.stats` then scores it by a gather per run, without shortcuts."""
    row_metric = ROW_METRICS[metric]
    return lambda predictions, labels: row_metric(predictions, labels)


def runs_and_gold(metric: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    if metric == "pearson":
        gold = rng.uniform(0, 5, n).astype(np.float32)
        runs = (gold + rng.normal(0, 1, (3, n))).astype(np.float32)
        runs[2] = 2.5  # a constant run: Pearson's undefined case
        return runs, gold
    gold = rng.integers(0, 3, n)
    return np.where(rng.random((3, n)) < 0.7, gold, rng.integers(0, 3, (3, n))), gold


@pytest.mark.parametrize("metric", ["accuracy", "pearson", "f1", "matthews_corrcoef"])
@pytest.mark.parametrize("n", [7, 3001])  # 3001: several blocks of index rows with 1,000 resamples
def test_shortcuts_give_the_plain_paths_numbers(metric, n):
    runs, gold = runs_and_gold(metric, n)
    fast = stats.replicate_scores(metric, gold, runs, np.random.default_rng(5), 1000)
    slow = stats.replicate_scores(plain(metric), gold, runs, np.random.default_rng(5), 1000)
    assert np.array_equal(fast, slow)
    a = stats.paired_bootstrap_test(metric, gold, runs[:2], runs[1:], resamples=500)
    b = stats.paired_bootstrap_test(plain(metric), gold, runs[:2], runs[1:], resamples=500)
    assert astuple(a) == astuple(b)


def test_the_samples_do_not_depend_on_the_runs_scored_with_them():
    runs, gold = runs_and_gold("accuracy", 50)
    together = stats.replicate_scores("accuracy", gold, runs, np.random.default_rng(0), 300)
    for k in range(3):
        alone = stats.replicate_scores("accuracy", gold, runs[k : k + 1], np.random.default_rng(0), 300)
        assert np.array_equal(alone[:, 0], together[:, k])


def test_a_bank_gives_the_one_cell_functions_numbers():
    runs, gold = runs_and_gold("accuracy", 120)
    bank = ReplicateBank(400, seed=2)
    for k, run in enumerate(runs):
        bank.register("accuracy", "f" * 64, gold, ("row", k), run)
    replicates, full, generator = bank.replicates("accuracy", "f" * 64, (("row", 0), ("row", 1)))
    expected = stats.seed_bootstrap_interval("accuracy", gold, runs[:2], resamples=400, seed=2)
    got = stats.seed_interval_from_replicates(replicates, full, generator, stats.DEFAULT_CONFIDENCE)
    assert astuple(got) == astuple(expected)
    # A run registered after the first pass is scored on the same samples.
    bank.register("accuracy", "f" * 64, gold, ("late", 0), runs[0])
    late, _, _ = bank.replicates("accuracy", "f" * 64, (("late", 0),))
    assert np.array_equal(late[:, 0], replicates[:, 0])


def test_attach_with_a_shared_bank_gives_the_same_cells_and_refuses_a_mismatched_one():
    students = {"soft": correct_on(0.7), "a": correct_on(0.75, offset=3), "b": correct_on(0.6, offset=9)}
    rows = [
        demo_row("soft"),
        demo_row("a", knowledge="mmd", strategy="First"),
        demo_row("b", knowledge="cos", strategy="First"),
    ]
    predictions = {k: outcome(v) for k, v in students.items()}
    plain_view, shared_view = demo_view(students, [dict(r) for r in rows]), demo_view(students, rows)
    attach_uncertainty(plain_view, predictions, resamples=300, test_resamples=600)
    bank = ReplicateBank(600)
    attach_uncertainty(shared_view, predictions, resamples=300, test_resamples=600, test_bank=bank)
    fields = ("ci_low", "ci_high", "p_vs_reference", "direction", "is_reference")

    def numbers(view):
        return [
            tuple(getattr(cell, f) for f in fields) for block in view.blocks for cell in block.cells.values()
        ]

    assert numbers(plain_view) == numbers(shared_view)
    cells = [c for block in shared_view.blocks for c in block.cells.values() if c.row_ids]
    with_bank = compare_cells(cells[0], cells[1], predictions, bank=bank)
    without = compare_cells(cells[0], cells[1], predictions, resamples=600)
    assert astuple(with_bank) == astuple(without)
    with pytest.raises(ValueError, match="600 resamples"):
        attach_uncertainty(shared_view, predictions, resamples=300, test_resamples=700, test_bank=bank)
    assert len(GOLD) == N
