"""A job as the executors carry it, and what follows from it, in one place.

A job is a list of trials sharing one teacher pass (`kdgrid.grid.plan.plan_jobs`). What an executor is handed by
`kdgrid.launch.base.Executor.run` is one value, `Launch`: the jobs (empty ones dropped) as `JobRun` values, the
store, the sweep, and the study each trial's row records. A `JobRun` knows

- its **key** (`job_key`: a hash of its sorted trial ids) and its **checkpoint folder** (the grid's
  ``<store>/_checkpoints/<group hash>``, the same under every executor, so a job preempted on SLURM can be finished
  by another executor from its checkpoints);
- its **pending** trials (those without a done row), so a retried or requeued job never runs a finished trial
  twice, and how to **run** them through a job function (`run_pending`: the Ray trainable and the SLURM array
  task share it);
- its **failure rows** (`write_failure_rows`, the one writer of ``failed`` rows for trials that ended without a
  row of their own: the worker when the core crashed or forgot a trial, the local executor when a job function
  raised or a worker process died) and its **lost** trials (`record_lost_trials`: ``JobLost`` rows for the trials
  of a job that died without a word, SIGKILL, scancel, out of requeues, a dead Ray actor).

A job may mix studies: trials of two studies of a sweep that share a group (`kdgrid.trial.group_key`) share one
teacher pass, and each row still records its own study. `row_studies` is the one rule that reads a studies mapping
(trial id -> study name, `kdgrid.grid.Sweep.study_of`); a job carries only its own trials' entries (what is sent
to a job's process).

The rows a run wrote: a killed job cannot write anything, so the executor that saw it end badly writes a
``failed`` row for each trial of that job that got no row during this run, with the reason (the SLURM state, Ray's
error, the worker's exit): ``kdgrid status`` then shows why, and ``kdgrid resume`` retries them. `RunRows` is the
one answer to "which trials got a row during this run, and are they done?" (the local executor's progress bar and
summary read it too); done or failed is decided by the store's one rule, `kdgrid.store.trial_states`. A trial that
still holds a live claim (`kdgrid.store.claims`) is never recorded lost: another process is training it (an
earlier submission's task still running, a concurrent run) and its row will come from there. A lost trial's stale
claim is deleted with its ``JobLost`` row. "This run" is decided by the run's ledger where the run has one
(`kdgrid.store.run_ledger`: the rows its own processes wrote, whatever other runs write meanwhile); else on the
store's own filesystem: a row file is the run's when it was not in ``rows/`` when the run began (`RunRows.start`),
or, given only the run's marker (``<store>/_runs/<name>``, touched before submission), when its mtime is not older
than the marker's; so clocks of the submitting host and the nodes need not agree.

What a job runs, the job function, and the default one are `kdgrid.launch.worker`.
"""

from __future__ import annotations

import hashlib
import inspect
import os
from collections.abc import Callable, Collection, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kdgrid import store as store_rows  # its readers (pandas, pyarrow) are imported when first called
from kdgrid.core.job import phases
from kdgrid.grid.plan import checkpoint_dir_for
from kdgrid.launch.progress import EpochLines, planned_seconds, print_line
from kdgrid.plugins import load_plugins
from kdgrid.store import layout
from kdgrid.store.claims import read_claims, release, stale_reason
from kdgrid.store.run_ledger import RUNS_DIR, read_ledger
from kdgrid.store.write import failure_result, write_result
from kdgrid.trial import Trial

# A job function: `kdgrid.launch.worker.run_job_to_store`'s signature,
# ``(trials, store_dir, *, sweep, studies, checkpoint_dir[, on_step]) -> None``.
JobFn = Callable[..., None]


def job_key(trials: Sequence[Trial]) -> str:
    """A stable name for a job: 16 hex digits of the hash of its sorted trial ids."""
    ids = ",".join(sorted(trial.trial_id for trial in trials))
    return hashlib.sha256(ids.encode()).hexdigest()[:16]


def row_studies(trials: Iterable[Trial], studies: Mapping[str, str] | None) -> dict[str, str]:
    """The study each trial's row records, by trial id: ``studies[trial_id]``, or ``""`` (no study) for a
    trial ``studies`` does not name or when ``studies`` is None. Also what executors send to a job process:
    only its own trials' entries, not the whole sweep's mapping."""
    given = studies or {}
    return {trial.trial_id: given.get(trial.trial_id, "") for trial in trials}


def job_checkpoint_dir(store_dir: Path, trials: Sequence[Trial]) -> Path:
    """Where a job keeps its epoch checkpoints: the grid's ``<store>/_checkpoints/<group hash>``, the same folder
    under every executor, so a job preempted on SLURM can be finished by another executor from its checkpoints."""
    return checkpoint_dir_for(Path(store_dir), list(trials))


def not_done(trials: Sequence[Trial], done: Container[str]) -> list[Trial]:
    """The trials of a job still to run (order kept)."""
    return [trial for trial in trials if trial.trial_id not in done]


def accepts_on_step(function: Callable[..., Any]) -> bool:
    """Whether a job function or a core takes the ``on_step`` progress callback (the default ones do)."""
    return accepts_keyword(function, "on_step")


def accepts_keyword(function: Callable[..., Any], name: str) -> bool:
    """Whether ``function`` takes the keyword argument ``name`` (or any, through ``**kwargs``)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in parameters)


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


def run_pending(
    job_fn: JobFn,
    trials: Sequence[Trial],
    store_dir: Path,
    *,
    sweep: str,
    studies: Mapping[str, str] | None,
    done: Container[str],
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
        lines = EpochLines(todo, index=None, jobs=None, emit=print_line, planned_s=planned_seconds(todo))
        progress = {"on_step": lines} if accepts_on_step(job_fn) else {}
        with phases.listening(lines.phase if progress else None):  # the core's phases as lines in the log
            job_fn(todo, Path(store_dir), sweep=sweep, studies=row_studies(todo, studies), checkpoint_dir=folder,
                   **progress)  # fmt: skip
    return todo


def touch_run_marker(store_dir: Path, name: str) -> Path:
    """Create (or refresh) ``<store>/_runs/<name>``; its mtime is this run's start on the store's clock."""
    folder = Path(store_dir) / RUNS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / name
    marker.touch()
    os.utime(marker)
    return marker


class RunRows:
    """The per-trial row files a run wrote (listed by name, never opened; each file looked at once).

    Args:
        store_dir: the store.
        marker: the run's marker (`touch_run_marker`): a file not older than it is the run's.
        before: names ``rows/`` held when the run began: never the run's, whatever their mtime.
        run_id: the run's ledger (`kdgrid.store.run_ledger`), where every process of the run records its rows
            (the local executor's): its rows are exactly the ledger's.
    """

    def __init__(
        self, store_dir: Path, marker: Path, *, before: Iterable[str] = (), run_id: str | None = None
    ) -> None:
        self.folder = layout.rows_dir(Path(store_dir))
        self.marker = marker
        self.since = marker.stat().st_mtime
        self.seen: set[str] = set(before)
        self.rows: list[tuple[str, str]] = []  # (trial id, status) of the run's rows
        self.run_id = run_id  # a run with a ledger: its rows are the ledger's

    @classmethod
    def start(cls, store_dir: Path, name: str, *, run_id: str | None = None) -> RunRows:
        """A run beginning now: ``rows/`` listed, then its marker touched."""
        before = layout.visible_names(layout.rows_dir(Path(store_dir)))
        return cls(store_dir, touch_run_marker(store_dir, name), before=before, run_id=run_id)

    def refresh(self) -> RunRows:
        """Look at the row files that appeared since the last look; returns self."""
        if self.run_id is not None:
            self.rows = read_ledger(self.folder.parent, self.run_id).rows
            return self
        for name in layout.visible_names(self.folder):
            if name in self.seen:
                continue
            self.seen.add(name)
            parts = layout.RowFileName.parse(name)
            if parts is None:
                continue
            try:
                mine = (self.folder / name).stat().st_mtime >= self.since
            except FileNotFoundError:  # moved by a compaction meanwhile: it was written, and counted there
                mine = True
            if mine:
                self.rows.append((parts.trial_id, parts.status))
        return self

    def states(self, among: Container[str] | None = None) -> dict[str, str]:
        """trial id -> ``done`` / ``failed`` for the trials with a row from this run (`trial_states`), only
        those of ``among`` (trial ids) when given."""
        return store_rows.trial_states(row for row in self.rows if among is None or row[0] in among)

    def without_rows(self, trials: Iterable[Trial]) -> list[Trial]:
        """The trials with no row (done or failed) from this run, order kept."""
        reported = {trial_id for trial_id, _ in self.rows}
        return [trial for trial in trials if trial.trial_id not in reported]

    def close(self) -> None:
        """The run has ended: remove its marker."""
        self.marker.unlink(missing_ok=True)


def trials_without_rows_since(store_dir: Path, trials: Sequence[Trial], marker: Path) -> list[Trial]:
    """The trials with no per-trial row file (done or failed) written at or after ``marker``'s mtime."""
    return RunRows(store_dir, marker).refresh().without_rows(trials)


def record_lost_trials(
    store_dir: Path,
    trials: Sequence[Trial],
    *,
    marker: Path,
    sweep: str,
    studies: Mapping[str, str] | None,
    reason: str,
    finished_jobs: Collection[str] = (),
) -> list[Trial]:
    """Write a failed row (error type ``JobLost``) for each trial of a dead job that got no row since
    ``marker`` and holds no live claim; each row records its trial's study from ``studies`` (trial id -> study,
    as `run_job_to_store` writes it). ``finished_jobs``: executor job ids (`kdgrid.store.claims.executor_job_id`)
    the executor saw end, whose claims are stale whatever their heartbeat says. The stale claims of the trials
    recorded are deleted.

    Returns the trials recorded.
    """
    unreported = trials_without_rows_since(store_dir, trials, marker)
    claims = read_claims(store_dir, {trial.trial_id for trial in unreported})
    stale = {
        trial_id: claim
        for trial_id, claim in claims.items()
        if stale_reason(claim, finished_jobs=finished_jobs) is not None
    }
    lost = [trial for trial in unreported if trial.trial_id not in claims or trial.trial_id in stale]
    recorded = write_failure_rows(
        store_dir, lost, sweep=sweep, studies=studies, error_type="JobLost", message=reason
    )
    for trial in recorded:
        if trial.trial_id in stale:
            release(store_dir, stale[trial.trial_id])
    return recorded


@dataclass(frozen=True)
class JobRun:
    """One job of a run, as a value: its trials (sharing one teacher pass), the store its rows go to, the sweep
    they record, and the study of each of its trials (only its own: a job is pickled to its process).

    Picklable (plain data), so a Ray actor or a SLURM task can be handed one."""

    trials: tuple[Trial, ...]
    store: Path
    sweep: str
    studies: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "trials", tuple(self.trials))
        object.__setattr__(self, "store", Path(self.store))
        object.__setattr__(self, "studies", row_studies(self.trials, self.studies))

    @property
    def key(self) -> str:
        """`job_key`: a stable name for the job."""
        return job_key(self.trials)

    @property
    def checkpoint_dir(self) -> Path:
        """`job_checkpoint_dir`: ``<store>/_checkpoints/<group hash>``."""
        return job_checkpoint_dir(self.store, self.trials)

    def pending(self, done: Container[str]) -> list[Trial]:
        """The trials not in ``done`` (ids of done trials), order kept."""
        return not_done(self.trials, done)

    def run_pending(self, job_fn: JobFn, done: Container[str]) -> list[Trial]:
        """`run_pending`: ``job_fn`` on this job's pending trials; the trials it ran."""
        return run_pending(job_fn, self.trials, self.store, sweep=self.sweep, studies=self.studies, done=done)

    def write_failures(self, trials: Sequence[Trial] | None = None, **error: Any) -> list[Trial]:
        """`write_failure_rows` for ``trials`` (default: all of this job's), with ``error`` as there."""
        chosen = self.trials if trials is None else trials
        return write_failure_rows(self.store, chosen, sweep=self.sweep, studies=self.studies, **error)

    def record_lost(self, *, marker: Path, reason: str, finished_jobs: Collection[str] = ()) -> list[Trial]:
        """`record_lost_trials` for this job's trials: ``JobLost`` rows for those without a row since
        ``marker`` and without a live claim."""
        return record_lost_trials(self.store, self.trials, marker=marker, sweep=self.sweep, studies=self.studies,
                                  reason=reason, finished_jobs=finished_jobs)  # fmt: skip


@dataclass(frozen=True)
class Launch:
    """What an executor's `run` is handed, as one value: the jobs (empty ones dropped, order kept), the store,
    the sweep each row records, and the study of every trial (``studies``: `row_studies` of all the jobs)."""

    jobs: tuple[JobRun, ...]
    store: Path
    sweep: str
    studies: Mapping[str, str]

    @classmethod
    def of(
        cls,
        jobs: Iterable[Sequence[Trial]],
        store_dir: Path | str,
        *,
        sweep: str,
        studies: Mapping[str, str] | None = None,
    ) -> Launch:
        """The value of ``Executor.run(jobs, store_dir, sweep=..., studies=...)``."""
        store = Path(store_dir)
        kept = [list(job) for job in jobs if job]
        study_of = row_studies((trial for job in kept for trial in job), studies)
        return cls(tuple(JobRun(tuple(job), store, sweep, study_of) for job in kept), store, sweep, study_of)

    def trial_lists(self) -> list[list[Trial]]:
        """The jobs as lists of trials."""
        return [list(job.trials) for job in self.jobs]

    def resolved(self) -> Launch:
        """The same launch with the store as an absolute path (what jobs on other machines are given)."""
        store = self.store.resolve()
        jobs = tuple(JobRun(job.trials, store, job.sweep, job.studies) for job in self.jobs)
        return Launch(jobs, store, self.sweep, self.studies)
