"""Job functions: what an executor runs for each job, how one is named, and how it is run on a job's pending trials.

A job function has `kdgrid.launch.worker.run_job_to_store`'s signature,
``(trials, store_dir, *, sweep, studies, checkpoint_dir[, on_step]) -> None``, and writes one row per trial into
the store. Every executor takes one as its ``job_fn`` argument (a callable, or ``"module:function"`` on the
command line); the default is `run_job_to_store`. Tests pass their own (``tests/launch/fakes.py``). Executors
that run jobs in other processes (worker processes, Ray actors, SLURM tasks) need it importable by reference.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from kdgrid.errors import ConfigError
from kdgrid.launch.jobs import job_checkpoint_dir, not_done, row_studies
from kdgrid.launch.progress import EpochLines, print_line
from kdgrid.launch.worker import accepts_on_step, run_job_to_store
from kdgrid.plugins import load_plugins
from kdgrid.trial import Trial

JobFn = Callable[..., None]
DEFAULT_JOB_FN: JobFn = run_job_to_store
__all__ = ["DEFAULT_JOB_FN", "JobFn", "accepts_on_step", "import_job_fn", "resolve_job_fn", "run_pending"]


def import_job_fn(path: str) -> JobFn:
    """The function named ``module:function``."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"job function {path!r}: write it as 'module:function'")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise ConfigError(f"job function {path!r} cannot be imported: {error}") from None


def resolve_job_fn(job_fn: JobFn | str | None) -> JobFn:
    """A callable as it is, a ``module:function`` path imported, None: `DEFAULT_JOB_FN`."""
    if job_fn is None:
        return DEFAULT_JOB_FN
    if isinstance(job_fn, str):
        return import_job_fn(job_fn)
    return job_fn


def run_pending(
    job_fn: JobFn,
    trials: Sequence[Trial],
    store_dir: Path,
    *,
    sweep: str,
    studies: Mapping[str, str] | None,
    done: set[str],
) -> list[Trial]:
    """Run ``job_fn`` on the trials of one job not in ``done`` (ids of done trials, from
    `kdgrid.store.done_trial_ids`), with the job's checkpoint folder (created) and the studies of those trials
    only. Shared by the Ray trainable and the SLURM array task (a retried or requeued job skips the trials it
    finished before). A job function that takes ``on_step`` writes a line per epoch to this process's output
    (a Ray actor's or SLURM task's log: `kdgrid.launch.progress.EpochLines`). Returns the trials it ran (none:
    ``job_fn`` was not called)."""
    load_plugins()  # this job's process (a Ray actor, a SLURM task) knows the plugins before the job function runs
    todo = not_done(trials, done)
    if todo:
        folder = job_checkpoint_dir(store_dir, trials)
        folder.mkdir(parents=True, exist_ok=True)
        progress = (
            {"on_step": EpochLines(todo, index=None, jobs=None, emit=print_line)}
            if accepts_on_step(job_fn)
            else {}
        )
        job_fn(todo, Path(store_dir), sweep=sweep, studies=row_studies(todo, studies), checkpoint_dir=folder,
               **progress)  # fmt: skip
    return todo
