"""Failure rows for trials whose job died without a word (SIGKILL, scancel, out of requeues, a dead Ray actor).

A job that is killed cannot write anything, so its unfinished trials would just have no row. The executor that
saw the job end badly writes a ``failed`` row for each trial of that job that got no row during this run, with
the reason (the SLURM state or Ray's error): ``kdgrid status`` then shows why, and ``kdgrid resume`` retries them.
"This run" is decided by file times on the store's own filesystem (a marker touched before submission), so clocks
of the submitting host and the nodes need not agree.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from kdgrid.trial import Trial


def touch_run_marker(store_dir: Path, name: str) -> Path:
    """Create (or refresh) ``<store>/_runs/<name>``; its mtime is this run's start on the store's clock."""
    folder = Path(store_dir) / "_runs"
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / name
    marker.touch()
    os.utime(marker)
    return marker


def trials_without_rows_since(store_dir: Path, trials: Sequence[Trial], marker: Path) -> list[Trial]:
    """The trials with no per-trial row file (done or failed) written at or after ``marker``'s mtime."""
    from kdgrid.store import layout

    since = marker.stat().st_mtime
    written: set[str] = set()
    for path in layout.visible_files(layout.rows_dir(Path(store_dir))):
        parts = layout.RowFileName.parse(path.name)
        if parts is None:
            continue
        try:
            if path.stat().st_mtime >= since:
                written.add(parts.trial_id)
        except FileNotFoundError:  # moved by a compaction meanwhile: it was written, and counted there
            written.add(parts.trial_id)
    return [trial for trial in trials if trial.trial_id not in written]


def record_lost_trials(
    store_dir: Path,
    trials: Sequence[Trial],
    *,
    marker: Path,
    sweep: str,
    studies: Mapping[str, str] | None,
    reason: str,
) -> list[Trial]:
    """Write a failed row (error type ``JobLost``) for each trial of a dead job that got no row since
    ``marker``; each row records its trial's study from ``studies`` (trial id -> study, as `run_job_to_store`
    writes it).

    Returns the trials recorded.
    """
    from kdgrid.launch.jobs import row_studies
    from kdgrid.store import failure_result, write_result

    lost = trials_without_rows_since(store_dir, trials, marker)
    study_of = row_studies(lost, studies)
    for trial in lost:
        result = failure_result(trial, error_type="JobLost", message=reason)
        write_result(store_dir, result, sweep=sweep, study=study_of[trial.trial_id])
    return lost
