"""The trial list's interval column: each done trial's 95% bootstrap interval of its listed score, computed from its
row's predictions as `stats.bootstrap_interval` computes it for that one run, once per row."""

from __future__ import annotations

import dataclasses
import html
import json
import re
from pathlib import Path

import numpy as np
import pytest

from kdgrid.analysis import stats
from kdgrid.predictions import DevSetPredictions
from kdgrid.report import trial_intervals
from kdgrid.report.build import ReportWriter
from kdgrid.report.gather import gather
from kdgrid.report.rows import StoreRows
from kdgrid.report.trial_intervals import TrialIntervals
from tests.analysis.tables_testing import result, write

N = 120
GOLD = np.arange(N) % 2


def run(share: float, seed: int):
    student = np.where(np.arange(N) < round(share * N), GOLD, 1 - GOLD)
    outcome = {"validation": DevSetPredictions(GOLD, student, None, "e" * 64)}
    return dataclasses.replace(result(float(share), task="sst2", seed=seed), predictions=outcome), student


def list_rows(out: Path) -> dict[str, dict]:
    page = (out / "trials.html").read_text()
    found = re.search(r'<script type="application/json" id="trial-data">(.*?)</script>', page)
    blob = json.loads(html.unescape(found.group(1)))
    return {row[0]: dict(zip(blob["columns"], row, strict=True)) for row in blob["rows"]}


def test_each_done_trial_lists_its_own_bootstrap_interval(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (good, good_student), (fair, fair_student) = run(0.9, 0), run(0.6, 1)
    legacy = result(0.7, task="sst2", seed=2)  # a row without predictions: no interval
    failed = result(0.0, task="sst2", seed=3, status="failed")
    write(store, "main", good, fair, legacy, failed, sweep="s")
    ReportWriter(store, tmp_path / "report", figures=False).update()
    rows = list_rows(tmp_path / "report")
    for made, student in ((good, good_student), (fair, fair_student)):
        expected = stats.bootstrap_interval("accuracy", GOLD, student, resamples=1000, seed=0)
        assert expected.low < made.scores["validation"]["accuracy"] < expected.high
        assert rows[made.trial.trial_id]["interval"] == f"[{expected.low:.4f}, {expected.high:.4f}]"
    assert rows[legacy.trial.trial_id]["interval"] is None and rows[failed.trial.trial_id]["interval"] is None
    page = (tmp_path / "report" / "trials.html").read_text()
    assert "95% interval" in page


def test_a_rows_interval_is_computed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "store"
    first, _ = run(0.8, 0)
    write(store, "main", first, sweep="s")
    read: list[list[str]] = []
    real = trial_intervals.load_predictions
    monkeypatch.setattr(
        trial_intervals, "load_predictions", lambda s, ids: read.append(sorted(ids)) or real(s, ids)
    )
    intervals = TrialIntervals(store, resamples=200)
    rows = StoreRows(store)
    rows.refresh()
    assert set(intervals.of(gather(store, rows.frame))) == {first.trial.trial_id}
    second, _ = run(0.7, 1)
    write(store, "main", second, sweep="s")
    rows.refresh()
    both = intervals.of(gather(store, rows.frame))
    assert set(both) == {first.trial.trial_id, second.trial.trial_id}
    assert len(read) == 2 and len(read[1]) == 1  # the second update read only the new row
    low, high = both[second.trial.trial_id]
    assert low <= 0.7 <= high
