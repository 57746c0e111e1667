"""The one writer of failure rows: a ``failed`` row for each trial that ended without a row of its own.

Every path that learns a trial cannot write its own row goes through `write_failure_rows`: the worker when the
core crashed or forgot a trial (`kdgrid.launch.worker`), the local executor when a job function raised or a worker
process died (`kdgrid.launch.local`), and the Ray and SLURM executors for a job that was killed
(`kdgrid.launch.lost_trials`). Each row records the sweep and its trial's study (`kdgrid.launch.jobs.row_studies`),
so ``kdgrid status`` shows why the trial failed and ``kdgrid resume`` retries it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from kdgrid.launch.jobs import row_studies
from kdgrid.store.write import failure_result, write_result
from kdgrid.trial import Trial


def write_failure_rows(
    store_dir: Path | str,
    trials: Sequence[Trial],
    *,
    sweep: str,
    studies: Mapping[str, str] | None,
    error: BaseException | None = None,
    error_type: str | None = None,
    message: str | None = None,
    traceback_text: str | None = None,
) -> list[Trial]:
    """Write one failed row per trial of ``trials``, with the error (``error``, or ``error_type`` / ``message`` /
    ``traceback_text``; see `kdgrid.store.write.failure_result`); each row records ``sweep`` and
    ``studies[trial_id]`` (``""`` for a trial it does not name). Returns ``trials`` as a list."""
    study_of = row_studies(trials, studies)
    for trial in trials:
        result = failure_result(
            trial, error, error_type=error_type, message=message, traceback_text=traceback_text
        )
        write_result(store_dir, result, sweep=sweep, study=study_of[trial.trial_id])
    return list(trials)
