"""`--summary AXIS[=VALUE]` of a sweep: the mean's interval is seed level where the tasks ran the same seeds (the
same procedure as the table's marginal means), ASO runs per task both ways with deepsig's correction, the empty
value is nameable as ``none``, and the soft- and hard-labels-only baselines are never pooled."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from kdgrid.analysis import method_summary as ms
from kdgrid.analysis.sweep_tables import HARD_ONLY_LABEL, method_strata, sweep_runs
from kdgrid.store import read_store
from kdgrid.store.membership import read_memberships
from tests.analysis.tables_testing import result, write

SWEEP = "baselines"
VALUES = {  # (task, knowledge, soft_weight) -> per seed (0, 1, 2)
    ("sst2", (), 1.0): (0.80, 0.82, 0.81),
    ("sst2", (), 0.0): (0.70, 0.71, 0.75),
    ("sst2", ("hidden_mse",), 1.0): (0.83, 0.84, 0.86),
    ("mrpc", (), 1.0): (0.60, 0.66, 0.62),
    ("mrpc", (), 0.0): (0.55, 0.50, 0.52),
    ("mrpc", ("hidden_mse",), 1.0): (0.64, 0.65, 0.69),
}


@pytest.fixture
def runs(tmp_path: Path):
    made = [
        result(
            v, task=task, knowledge=knowledge, strategy="Last-1" if knowledge else "", soft_weight=w, seed=s
        )
        for (task, knowledge, w), seeds in VALUES.items()
        for s, v in enumerate(seeds)
    ]
    path = tmp_path / "store"
    write(path, "main", *made, sweep=SWEEP)
    return sweep_runs(read_store(path), read_memberships(path), SWEEP, "best")


def test_baselines_apart_none_nameable_and_a_seed_level_mean(runs) -> None:
    methods, seeds = method_strata(runs, "knowledge")
    assert list(methods) == ["", "hidden_mse", HARD_ONLY_LABEL]  # soft labels only is the empty value
    assert methods[""]["sst2 · validation · accuracy"] == pytest.approx([0.80, 0.82, 0.81])
    assert methods[HARD_ONLY_LABEL]["mrpc · validation · accuracy"] == pytest.approx([0.55, 0.50, 0.52])
    assert ms.parse_summary("knowledge=none") == ("knowledge", "") == ms.parse_summary("knowledge=(none)")
    [soft, hidden, hard] = ms.summarise_methods(methods, "", resamples=200, aso=False, seeds=seeds)
    # per seed, the mean over the two tasks; then the t interval over the three seeds
    per_seed = np.array([(0.83 + 0.64) / 2, (0.84 + 0.65) / 2, (0.86 + 0.69) / 2])
    half = scipy_stats.t.ppf(0.975, 2) * per_seed.std(ddof=1) / math.sqrt(3)
    assert hidden.mean.how == "seed-level t"
    assert (hidden.mean.low, hidden.mean.high) == pytest.approx(
        (per_seed.mean() - half, per_seed.mean() + half)
    )
    lines = ms.summary_lines("knowledge", "", [soft, hidden, hard])
    assert "knowledge=(none): 6 runs in 2 stratum(s)" in lines[1] and lines[1].endswith("(reference)")
    assert f"knowledge={HARD_ONLY_LABEL}: 6 runs" in lines[3]


def test_aso_is_per_task_both_ways_with_the_correction_for_the_comparisons_made(runs, monkeypatch) -> None:
    with pytest.raises(ValueError, match="one stratum"):  # never pooled across tasks
        ms.almost_stochastic_order({"a": np.ones(3), "b": np.ones(3)}, {"a": np.ones(3)})
    calls = []

    def fake(x, y, num_comparisons=1):
        calls.append((tuple(np.round(x, 3)), tuple(np.round(y, 3)), num_comparisons))
        return 0.25

    monkeypatch.setattr(ms, "almost_stochastic_order", fake)
    methods, seeds = method_strata(runs, "knowledge")
    summaries = ms.summarise_methods(methods, "", resamples=50, seeds=seeds)
    # two methods against the reference, both ways, per task: 4 comparisons a task, never pooled across tasks
    assert len(calls) == 8 and all(n == 4 for *_, n in calls)
    assert ((0.83, 0.84, 0.86), (0.8, 0.82, 0.81), 4) in calls and (
        (0.8, 0.82, 0.81),
        (0.83, 0.84, 0.86),
        4,
    ) in calls
    assert summaries[1].aso == {
        "mrpc · validation · accuracy": (0.25, 0.25),
        "sst2 · validation · accuracy": (0.25, 0.25),
    }
