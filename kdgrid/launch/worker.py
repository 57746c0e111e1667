"""What every executor runs for one job by default: the core's `run_job`, each result written to the store as
it finishes.

`run_job_to_store` is a module-level function (picklable by reference), so a local process pool, a Ray actor and
a SLURM array task all call the same code. If `run_job` itself crashes (the teacher cannot be loaded, a bug),
every trial of the job without a row from this call gets a failure row carrying the error, so ``kdgrid status``
shows why and ``kdgrid resume`` retries them. A job may mix studies: each row records its trial's study.

The core is a parameter (``run_job``): a test passes a fake core and still gets the real worker writing real rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kdgrid.launch.failure_rows import write_failure_rows
from kdgrid.launch.jobs import row_studies
from kdgrid.result import TrialResult
from kdgrid.store.write import StoreWriteError, write_result
from kdgrid.trial import Trial

# The core's contract: `kdgrid.core.train.run_job(trials, *, checkpoint_dir, on_result, on_step, ...)`.
RunJob = Callable[..., list[TrialResult]]


def core_run_job(trials: list[Trial], **kwargs: Any) -> list[TrialResult]:
    """`kdgrid.core.train.run_job`."""
    # Local: the core imports torch and transformers (seconds); an executor or a job function that never trains
    # (the submitting host, a test fake) does not pay for them.
    from kdgrid.core.train import run_job

    return run_job(trials, **kwargs)


def run_job_to_store(
    trials: list[Trial],
    store_dir: Path | str,
    *,
    sweep: str,
    studies: Mapping[str, str] | None = None,
    checkpoint_dir: Path | str | None = None,
    on_step: Callable[[int, int], None] | None = None,
    run_job: RunJob = core_run_job,
) -> None:
    """Run one job (trials sharing one teacher pass) and write one row per trial into the store.

    Each row records ``sweep`` and its trial's study, ``studies[trial_id]`` (``""`` for a trial it does not
    name, see `kdgrid.launch.jobs.row_studies`): the trials of one job may come from several studies.

    Rows are written as each trial finishes (``on_result``), so a job killed half-way keeps what it finished.
    A result ``run_job`` returns without having reported it is written afterwards; a crash of ``run_job`` writes
    failure rows for the trials that have none yet. Nothing is raised for a failed trial: the row says it.
    ``on_step(done, total)`` receives the job's batch progress (see `kdgrid.core.train.run_job`); ``run_job``
    is the core (default: `kdgrid.core.train.run_job`).
    """
    store = Path(store_dir)
    study_of = row_studies(trials, studies)
    written: set[str] = set()

    def write(result: TrialResult) -> None:
        write_result(store, result, sweep=sweep, study=study_of.get(result.trial.trial_id, ""))
        written.add(result.trial.trial_id)

    def unwritten() -> list[Trial]:
        return [trial for trial in trials if trial.trial_id not in written]

    checkpoints = Path(checkpoint_dir) if checkpoint_dir is not None else None
    if checkpoints is not None:
        checkpoints.mkdir(parents=True, exist_ok=True)
    try:
        progress = {} if on_step is None else {"on_step": on_step}
        results = run_job(list(trials), checkpoint_dir=checkpoints, on_result=write, **progress)
    except StoreWriteError:
        raise  # the store cannot take rows: stop the job (a failure row could not be written either)
    except Exception as error:  # the whole job failed: record it on every trial still without a row
        write_failure_rows(store, unwritten(), sweep=sweep, studies=study_of, error=error)
        return
    for result in results or []:
        if result.trial.trial_id not in written:
            write(result)
    # a core that forgot a trial must not make it look pending forever
    write_failure_rows(store, unwritten(), sweep=sweep, studies=study_of, error_type="MissingResult",
                       message="run_job returned no result for this trial")  # fmt: skip
