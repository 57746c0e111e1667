"""A sweep against the store: done / failed / pending, retry caps, and the cost estimate from the store's timings."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from kdgrid.grid import load_sweep
from kdgrid.grid.state import estimate_cost, sweep_state
from kdgrid.result import TrialResult
from kdgrid.store import failure_result, write_result
from kdgrid.trial import Trial


def test_cost_estimate_uses_medians_by_student_and_task_then_student_then_all() -> None:
    timings = pd.DataFrame(
        {
            "student": ["bert-tiny", "bert-tiny", "bert-tiny", "bert-mini"],
            "task": ["rte", "rte", "mrpc", "rte"],
            "wall_time_s": [10.0, 30.0, 100.0, 7.0],
        }
    )
    trials = [
        Trial(task="rte", teacher="bert-base", student="bert-tiny"),  # median of (10, 30) = 20
        Trial(task="sst2", teacher="bert-base", student="bert-tiny"),  # student median of (10, 30, 100) = 30
        Trial(task="qqp", teacher="bert-base", student="bert-small"),  # all rows: median of 4 = 20
    ]
    estimate = estimate_cost(trials, timings)
    assert estimate.seconds == pytest.approx(20 + 30 + 20)
    assert estimate.timed_rows == 4 and "1 of 3 trials matched" in estimate.basis
    assert estimate_cost(trials, timings.iloc[:0]).seconds is None


def test_sweep_state_classifies_trials_and_caps_retries(tmp_path: Path) -> None:
    sweep_path = tmp_path / "s.yaml"
    sweep_path.write_text(
        json.dumps(
            {
                "fixed": {"teacher": "bert-base", "student": "bert-tiny"},
                "axes": {"task": ["rte", "mrpc", "qqp"]},
            }
        )
    )
    sweep = load_sweep(sweep_path)
    rte, mrpc, qqp = (p.trial for p in sweep.trials)
    store = tmp_path / "store"
    write_result(store, TrialResult(trial=rte, status="done", wall_time_s=5.0), sweep="other", study="x")
    for _ in range(2):
        write_result(
            store, failure_result(mrpc, error_type="OOM", message="out of\nmemory"), sweep="s", study="main"
        )
    state = sweep_state(sweep, store)
    assert (state.done, state.failed, state.pending) == (
        [rte],
        [mrpc],
        [qqp],
    )  # a done row from another sweep counts
    assert state.failures == {rte.trial_id: 0, mrpc.trial_id: 2}
    assert state.errors[mrpc.trial_id] == "OOM: out of memory"
    assert state.to_retry(3) == ([mrpc], []) and state.to_retry(2) == ([], [mrpc])
    assert list(state.timings["wall_time_s"]) == [5.0]


def test_a_trial_trained_twice_counts_once_in_the_timings_by_its_latest_done_row(tmp_path: Path) -> None:
    sweep_path = tmp_path / "s.yaml"
    sweep_path.write_text(json.dumps({"fixed": {"teacher": "bert-base", "student": "bert-tiny"},
                                      "axes": {"task": ["rte", "mrpc"]}}))  # fmt: skip
    sweep = load_sweep(sweep_path)
    rte, mrpc = (p.trial for p in sweep.trials)
    store = tmp_path / "store"
    for trial, wall in ((rte, 100.0), (rte, 300.0), (mrpc, 200.0)):  # rte trained twice, 300 s the latest
        write_result(store, TrialResult(trial=trial, status="done", wall_time_s=wall), sweep="s", study="main")
    state = sweep_state(sweep, store)
    assert sorted(state.timings["wall_time_s"]) == [200.0, 300.0]  # the duplicate's first row is not a third
    # a new bert-tiny trial on a third task: the student's median over two trials, (200 + 300) / 2, not 200
    assert estimate_cost([Trial(task="qqp", teacher="bert-base", student="bert-tiny")], state.timings).seconds == 250


def test_a_store_without_rows_is_all_pending_without_a_read_and_a_stray_is_still_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A new store (missing, or its folders empty) is not read: every trial pending, no timings. One whose
    ``rows/`` holds anything visible is read as before, so a stray file there is still reported."""
    sweep_path = tmp_path / "s.yaml"
    sweep_path.write_text(json.dumps({"fixed": {"teacher": "bert-base", "student": "bert-tiny"},
                                      "axes": {"task": ["rte", "mrpc"]}}))  # fmt: skip
    sweep = load_sweep(sweep_path)
    trials = [p.trial for p in sweep.trials]
    store = tmp_path / "store"
    for made in ([], ["rows", "compacted"]):  # missing, then with empty rows/ and compacted/
        for folder in made:
            (store / folder).mkdir(parents=True)
        state = sweep_state(sweep, store)
        assert (state.pending, state.done, state.failed, state.running) == (trials, [], [], [])
        assert state.timings is None and estimate_cost(state.pending, state.timings).seconds is None
    (store / "rows" / "notes.txt").write_text("not a row")
    with caplog.at_level("WARNING", logger="kdgrid.store"):
        state = sweep_state(sweep, store)
    assert state.pending == trials
    assert "notes.txt" in caplog.text  # read, and the stray named
