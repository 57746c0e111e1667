"""Failure rows for the trials of a job that died without writing them (kdgrid.launch.job)."""

from __future__ import annotations

import os
from pathlib import Path

from kdgrid.launch.job import RunRows, record_lost_trials, touch_run_marker, trials_without_rows_since
from kdgrid.store import read_store
from tests.launch import fakes
from tests.launch.fakes import make_trial, store_rows


def test_only_trials_without_a_row_from_this_run_are_recorded_as_lost(tmp_path: Path) -> None:
    before, during, silent = make_trial(0), make_trial(0, k=1), make_trial(0, k=2)
    fakes.job_to_store([before], tmp_path, sweep="s")  # an earlier run's row
    earlier = next((tmp_path / "rows").iterdir())
    os.utime(earlier, (1_000_000, 1_000_000))  # written long before this run's marker
    marker = touch_run_marker(tmp_path, "run")
    fakes.job_to_store([during], tmp_path, sweep="s")  # this run wrote it, then the job died

    assert trials_without_rows_since(tmp_path, [before, during, silent], marker) == [before, silent]
    lost = record_lost_trials(
        tmp_path,
        [during, silent],
        marker=marker,
        sweep="s",
        studies={during.trial_id: "a", silent.trial_id: "b"},  # a job mixing two studies
        reason="SLURM task 7_1 ended CANCELLED",
    )
    assert lost == [silent]
    assert sorted(store_rows(tmp_path)) == sorted(
        [(before.trial_id, "done"), (during.trial_id, "done"), (silent.trial_id, "failed")]
    )
    row = read_store(tmp_path).set_index("trial_id").loc[silent.trial_id]
    assert row["error_type"] == "JobLost" and row["error_message"] == "SLURM task 7_1 ended CANCELLED"
    assert (row["sweep"], row["study"]) == ("s", "b")
    # Recording again finds nothing new: the failed row counts as this run's row.
    assert (
        record_lost_trials(tmp_path, [silent], marker=marker, sweep="s", studies=None, reason="again") == []
    )


def test_markers_live_where_store_readers_do_not_look(tmp_path: Path) -> None:
    marker = touch_run_marker(tmp_path, "run")
    assert marker.parent.name.startswith("_") and marker.is_file()
    assert store_rows(tmp_path) == []


def test_run_rows_count_only_the_rows_written_after_the_run_began(tmp_path: Path) -> None:
    earlier, failing, fine = make_trial(0), make_trial(0, test_raise="no"), make_trial(0, k=3)
    fakes.job_to_store(
        [earlier], tmp_path, sweep="s"
    )  # before the run: never the run's, even within one tick
    rows = RunRows.start(tmp_path, "local-test")
    fakes.job_to_store([failing, fine], tmp_path, sweep="s")
    fakes.job_to_store([failing], tmp_path, sweep="s")
    assert rows.refresh().states() == {failing.trial_id: "failed", fine.trial_id: "done"}
    assert rows.states(among={fine.trial_id}) == {fine.trial_id: "done"}
    assert rows.without_rows([earlier, failing, fine]) == [earlier]
    rows.close()
    assert not rows.marker.exists()
