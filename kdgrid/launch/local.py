"""The local executor (the default): jobs one after another in this process, or in a pool of worker processes.

- ``local_workers`` = 0 (default): every job runs here, in order. A job function that raises gets failure rows
  for the trials it left without one; the next job goes on.
- ``local_workers`` = N >= 1: up to N jobs at once, each in its own fresh process (``local_start_method``,
  default ``spawn``: safe with torch). A process that dies (SIGKILL, out of memory) costs only its own job: the
  trials it had not finished get a failure row saying how the process ended, and ``kdgrid resume`` reruns them.
- A progress bar shows trials done / failed / remaining and an ETA; it is computed from the rows appearing in
  the store, so it counts exactly what ``kdgrid status`` will. One bar covers every job of the call, whichever
  studies their trials belong to (a job may mix studies; each row records its own).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kdgrid.errors import ConfigError
from kdgrid.grid.plan import checkpoint_dir_for
from kdgrid.launch import memory
from kdgrid.launch.jobs import row_studies
from kdgrid.launch.memory import MemoryBudget
from kdgrid.launch.settings import normalize_settings
from kdgrid.store import layout
from kdgrid.trial import Trial

JobFn = Callable[..., None]

PREFIX = "local_"
LOCAL_SETTINGS: dict[str, str] = {
    "workers": "jobs at once, each in its own process; 0 = one after another in this process (default 0)",
    "start_method": "how worker processes start: spawn (default), forkserver or fork",
    "threads": "torch threads per worker process (default: CPU cores / workers)",
    "progress": "show a progress bar (default true)",
    "poll_s": "seconds between two looks at the store and the workers (default 0.5)",
}
POLL_SECONDS = 0.5


def _default_job_fn() -> JobFn:
    from kdgrid.launch.worker import run_job_to_store

    return run_job_to_store


def _resolve_job_fn(job_fn: JobFn | str | None) -> JobFn:
    """A callable, a ``module:function`` path, or None for `run_job_to_store`."""
    if job_fn is None:
        return _default_job_fn()
    if callable(job_fn):
        return job_fn
    from kdgrid.launch.base import import_job_fn

    return import_job_fn(str(job_fn))


def _run_in_child(
    job_fn: JobFn,
    trials: list[Trial],
    store: str,
    sweep: str,
    studies: dict[str, str],
    checkpoint_dir: str,
    threads: int | None,
) -> None:
    """A worker process's whole life: limit torch's threads (cores are shared), run one job (``studies``:
    trial id -> study, for this job's trials only)."""
    if threads:
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))
        if job_fn is _default_job_fn():
            import torch

            torch.set_num_threads(threads)
    job_fn(trials, Path(store), sweep=sweep, studies=studies, checkpoint_dir=Path(checkpoint_dir))


def _exit_reason(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"the worker process was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"the worker process was killed by signal {-exitcode}"
    return f"the worker process exited with status {exitcode} before writing a row for this trial"


@dataclass
class RunSummary:
    """Trials of the last `run`: done, failed (a failed row from this run and no done row), without a row."""

    done: int = 0
    failed: int = 0
    missing: int = 0
    seconds: float = 0.0


class _StoreWatch:
    """Which of this run's trials have a row written since the run began (per-trial files are listed, not read)."""

    def __init__(self, store: Path, trial_ids: set[str]) -> None:
        self.folder = layout.rows_dir(store)
        self.trial_ids = trial_ids
        self.before = set(os.listdir(self.folder)) if self.folder.is_dir() else set()
        self.done: set[str] = set()
        self.failed: set[str] = set()

    def refresh(self) -> None:
        if not self.folder.is_dir():
            return
        for name in set(os.listdir(self.folder)) - self.before:
            parts = layout.RowFileName.parse(name)
            if parts is None or parts.trial_id not in self.trial_ids:
                continue
            (self.done if parts.status == "done" else self.failed).add(parts.trial_id)
        self.failed -= self.done

    def reported(self) -> set[str]:
        return self.done | self.failed


class LocalExecutor:
    """Run jobs on this machine. Settings: `LOCAL_SETTINGS` (prefix ``local_``, which may be left out).

    Args:
        job_fn: what each job runs (a callable or ``module:function``); default
            `kdgrid.launch.worker.run_job_to_store`. With workers it must be importable by reference.
    """

    name = "local"

    def __init__(self, *, job_fn: JobFn | str | None = None, **settings: Any) -> None:
        given = normalize_settings(
            settings, prefix=PREFIX, allowed=list(LOCAL_SETTINGS), source="local executor"
        )
        self.job_fn = _resolve_job_fn(job_fn)
        self.workers = given.get("workers", 0)
        self.start_method = given.get("start_method", "spawn")
        self.threads = given.get("threads")
        self.progress = given.get("progress", True)
        self.poll_s = float(given.get("poll_s", POLL_SECONDS))
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 0:
            raise ConfigError(f"{PREFIX}workers: expected a whole number >= 0, got {self.workers!r}")
        if self.start_method not in multiprocessing.get_all_start_methods():
            raise ConfigError(
                f"{PREFIX}start_method: {self.start_method!r} is not available; allowed: "
                f"{', '.join(multiprocessing.get_all_start_methods())}"
            )
        if self.threads is not None and (not isinstance(self.threads, int) or self.threads < 1):
            raise ConfigError(f"{PREFIX}threads: expected a whole number >= 1, got {self.threads!r}")
        if not isinstance(self.progress, bool):
            raise ConfigError(f"{PREFIX}progress: expected true or false, got {self.progress!r}")
        self.summary = RunSummary()

    def memory_budget(self) -> MemoryBudget:
        """The memory one job may use here: `memory.SAFETY_FRACTION` of the smallest visible GPU's memory (or,
        without a GPU, of the RAM, capped by the cgroup limit) divided by the jobs running at once
        (``local_workers``, at least 1). Every worker's job lands on the same GPU (the core takes the current
        CUDA device; workers are not spread over GPUs), so the workers share one GPU's memory."""
        jobs = max(1, self.workers)
        share = f"{jobs} local workers" if self.workers > 1 else f"{jobs} job at a time"
        gpus = memory.gpu_memory_gb()
        if gpus:
            return memory.per_job(min(gpus), "of GPU memory (the smallest visible GPU)", jobs, share)
        return memory.per_job(memory.ram_gb(), "of RAM", jobs, share)

    def run(
        self,
        jobs: list[list[Trial]],
        store_dir: Path,
        *,
        sweep: str,
        studies: Mapping[str, str] | None = None,
    ) -> None:
        """Run every job; return when all have ended. Each trial ends with a row in the store, recording
        ``sweep`` and its study ``studies[trial_id]`` (``""`` for a trial it does not name)."""
        jobs = [list(job) for job in jobs if job]
        store = Path(store_dir)
        layout.rows_dir(store).mkdir(parents=True, exist_ok=True)
        study_of = row_studies((t for job in jobs for t in job), studies)
        watch = _StoreWatch(store, set(study_of))
        started = time.monotonic()
        with _ProgressBar(
            len(study_of), enabled=self.progress and bool(jobs), title=_progress_title(sweep, study_of)
        ) as bar:
            if self.workers == 0:
                self._run_here(jobs, store, sweep, study_of, watch, bar)
            else:
                self._run_pool(jobs, store, sweep, study_of, watch, bar)
            watch.refresh()
            bar.update(len(watch.done), len(watch.failed))
        self.summary = RunSummary(
            done=len(watch.done),
            failed=len(watch.failed),
            missing=len(set(study_of) - watch.reported()),
            seconds=time.monotonic() - started,
        )

    def _fail_unreported(
        self,
        job: list[Trial],
        store: Path,
        sweep: str,
        study_of: dict[str, str],
        watch: _StoreWatch,
        error_type: str,
        message: str,
        traceback_text: str | None = None,
    ) -> None:
        from kdgrid.store.write import failure_result, write_result

        watch.refresh()
        for trial in job:
            if trial.trial_id not in watch.reported():
                result = failure_result(
                    trial, error_type=error_type, message=message, traceback_text=traceback_text
                )
                write_result(store, result, sweep=sweep, study=study_of[trial.trial_id])
        watch.refresh()

    def _run_here(
        self,
        jobs: list[list[Trial]],
        store: Path,
        sweep: str,
        study_of: dict[str, str],
        watch: _StoreWatch,
        bar: _ProgressBar,
    ) -> None:
        import traceback

        progress = {"on_step": bar.job_steps} if _accepts_on_step(self.job_fn) else {}
        for job in jobs:
            try:
                self.job_fn(
                    job,
                    store,
                    sweep=sweep,
                    studies=row_studies(job, study_of),
                    checkpoint_dir=checkpoint_dir_for(store, job),
                    **progress,
                )
            except Exception as error:
                self._fail_unreported(
                    job,
                    store,
                    sweep,
                    study_of,
                    watch,
                    type(error).__name__,
                    str(error),
                    traceback.format_exc(),
                )
            watch.refresh()
            bar.update(len(watch.done), len(watch.failed))

    def _run_pool(
        self,
        jobs: list[list[Trial]],
        store: Path,
        sweep: str,
        study_of: dict[str, str],
        watch: _StoreWatch,
        bar: _ProgressBar,
    ) -> None:
        context = multiprocessing.get_context(self.start_method)
        threads = self.threads or max(1, (os.cpu_count() or 1) // self.workers)
        waiting = list(jobs)
        running: list[tuple[Any, list[Trial]]] = []
        try:
            while waiting or running:
                while waiting and len(running) < self.workers:
                    job = waiting.pop(0)
                    args = (
                        self.job_fn,
                        job,
                        str(store),
                        sweep,
                        row_studies(job, study_of),  # this job's trials only: pickled for the process
                        str(checkpoint_dir_for(store, job)),
                        threads,
                    )
                    process = context.Process(target=_run_in_child, args=args, daemon=False)
                    process.start()
                    running.append((process, job))
                time.sleep(self.poll_s)
                still: list[tuple[Any, list[Trial]]] = []
                for process, job in running:
                    if process.is_alive():
                        still.append((process, job))
                        continue
                    process.join()
                    if process.exitcode != 0:
                        self._fail_unreported(
                            job, store, sweep, study_of, watch, "WorkerDied", _exit_reason(process.exitcode)
                        )
                running = still
                watch.refresh()
                bar.update(len(watch.done), len(watch.failed))
        finally:
            for process, _ in running:  # interrupted: stop our own workers, by their pids
                process.terminate()
                process.join(timeout=10)


def _progress_title(sweep: str, study_of: Mapping[str, str]) -> str:
    """``sweep/study`` when every trial of the call is of one study, else ``sweep (n studies)``."""
    names = sorted(set(study_of.values()) - {""})
    if len(names) == 1:
        return f"{sweep}/{names[0]}"
    return f"{sweep} ({len(names)} studies)" if names else sweep


def _accepts_on_step(job_fn: JobFn) -> bool:
    """Whether a job function takes the ``on_step`` progress callback (the default one does)."""
    import inspect

    try:
        parameters = inspect.signature(job_fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "on_step" or p.kind is p.VAR_KEYWORD for p in parameters)


class _ProgressBar:
    """A rich progress bar of trials: done / failed / remaining, elapsed time and an ETA."""

    def __init__(self, total: int, *, enabled: bool, title: str) -> None:
        self.total = total
        self.enabled = enabled
        self.title = title
        self._progress: Any = None
        self._task: Any = None
        self._steps: Any = None

    def __enter__(self) -> _ProgressBar:
        if self.enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
            )
            self._progress.start()
            self._task = self._progress.add_task(self.title, total=self.total, info=self._info(0, 0))
        return self

    def job_steps(self, done: int, total: int) -> None:
        """The running job's shared batches (a job of many trials finishes them all at once at its end)."""
        if self._progress is None:
            return
        if self._steps is None:
            self._steps = self._progress.add_task("  batches of this job", total=total, info="")
        self._progress.update(self._steps, completed=done, total=total)

    def _info(self, done: int, failed: int) -> str:
        remaining = self.total - done - failed
        return f"[green]done {done}[/] [red]failed {failed}[/] remaining {remaining}"

    def update(self, done: int, failed: int) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=done + failed, info=self._info(done, failed))

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
