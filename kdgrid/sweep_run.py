"""Running a sweep against the results store: the one body of `kdgrid run`, `kdgrid resume` and `kdgrid demo`.

The store is the only state: `run_sweep` runs the trials without any row and, with ``max_attempts``, also
retries failed trials (up to ``max_attempts`` failed rows each); it never runs a trial that has a done row.
Before it runs anything it records the sweep's membership in the store (`kdgrid.store.membership`).

Jobs are planned over the whole sweep (`kdgrid.grid.plan_jobs`): groups of trials sharing a teacher pass, split
to ``max_group_size`` and to a memory budget per job, so trials of different studies that share a group
(`kdgrid.trial.group_key`) share one teacher pass per batch; each row still records its trial's study (the
executor is given `Sweep.study_of`). The budget defaults to ``auto``: the executor's ``memory_budget()``, i.e.
what one job may use on the machine where the executor runs jobs. `kdgrid plan` and `kdgrid status` plan with
the same helpers, so they show the jobs `run_sweep` will start.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kdgrid.bundled_sweeps import find_sweep
from kdgrid.core.train import validate_trials
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.grid import Sweep, load_sweep, plan_jobs, store_problems
from kdgrid.grid.state import SweepState, sweep_state
from kdgrid.launch import Executor, get_executor
from kdgrid.launch.memory import MemoryBudget
from kdgrid.store import compact
from kdgrid.store.layout import rows_dir, visible_files
from kdgrid.store.membership import record_membership
from kdgrid.trial import Trial

AUTO_MEMORY_BUDGET = "auto"
# Compact the store after a run once its loose per-trial files reach this many (reading them gets slow).
COMPACT_ABOVE_FILES = 500

Log = Callable[[str], None]


def _quiet(_line: str) -> None:
    """The default ``log`` of `run_sweep`: a library call prints nothing unless asked to."""


def load_named_sweep(sweep: Path | str, *, store_dir: Path | str | None = None) -> Sweep:
    """`kdgrid.grid.load_sweep` of a sweep file, or of the sweep shipped with kdgrid that a bare name names
    (`kdgrid.bundled_sweeps.find_sweep`)."""
    return load_sweep(find_sweep(sweep), store_dir=store_dir)


def memory_budget(value: float | str, executor: Executor) -> MemoryBudget:
    """The memory budget of one job: ``auto`` (the executor's `Executor.memory_budget`), 0 (no budget) or a
    number of GB (a float or its text, as ``--memory-budget-gb`` gives it).

    Raises:
        ConfigError: anything else (a negative number, NaN, a word), naming the option.
    """
    text = str(value).strip().lower()
    if text == AUTO_MEMORY_BUDGET:
        return executor.memory_budget()
    try:
        gb = float(text)
    except ValueError:
        gb = math.nan
    if not math.isfinite(gb) or gb < 0:
        raise ConfigError(
            f"--memory-budget-gb: expected a number of GB >= 0 (0 = off) or 'auto', got {value!r}"
        )
    if gb == 0:
        return MemoryBudget(None, "off (--memory-budget-gb 0)")
    return MemoryBudget(gb, f"given: --memory-budget-gb {gb:g}")


def executor_and_budget(
    executor: str, settings: Mapping[str, Any] | None, memory_budget_gb: float | str
) -> tuple[Executor, MemoryBudget]:
    """The executor ``executor`` with ``settings`` (built, not started) and the memory budget of one of its
    jobs (`memory_budget`)."""
    runner = get_executor(executor, **dict(settings or {}))
    return runner, memory_budget(memory_budget_gb, runner)


def check_limits(max_group_size: int, max_attempts: int | None = None) -> None:
    """``--max-group-size`` (0 = no limit) and ``--max-attempts`` (None: not retrying) must not be negative.

    Raises:
        ConfigError: naming the option and what it allows.
    """
    if max_group_size < 0:
        raise ConfigError(
            f"--max-group-size: expected a number of trials >= 0 (0 = no limit), got {max_group_size}"
        )
    if max_attempts is not None and max_attempts < 0:
        raise ConfigError(f"--max-attempts: expected a number of failed attempts >= 0, got {max_attempts}")


def plan_sweep_jobs(
    trials: Iterable[Trial], max_group_size: int, budget_gb: float | None
) -> list[list[Trial]]:
    """`kdgrid.grid.plan_jobs` with the commands' conventions: ``max_group_size`` 0 and ``budget_gb`` None
    mean no limit.

    Raises:
        ConfigError: a negative ``max_group_size``, naming the option.
    """
    check_limits(max_group_size)
    return plan_jobs(trials, max_group_size=max_group_size or None, memory_budget_gb=budget_gb)


def count_by_study(sweep: Sweep, trials: Iterable[Trial]) -> dict[str, int]:
    """How many of ``trials`` each study of ``sweep`` holds (studies without any left out; sweep order)."""
    study_of = sweep.study_of()
    counts = dict.fromkeys(sweep.studies, 0)
    for trial in trials:
        counts[study_of[trial.trial_id]] += 1
    return {name: count for name, count in counts.items() if count}


def check_trials_here(trials: list[Trial]) -> None:
    """Pre-flight: the core's checks of each trial on this machine (teacher available, init checkpoint
    shapes), every job checked before any problem is reported.

    Raises:
        ConfigError: every trial that cannot run here, one line each.
    """
    problems: list[str] = []
    for job in plan_sweep_jobs(trials, 0, None):
        try:
            validate_trials(job)
        except KdgridError as error:
            problems.append(str(error))
    if problems:
        raise ConfigError("pre-flight found trials that cannot run on this machine:\n" + "\n".join(problems))


@dataclass(frozen=True)
class SweepCounts:
    """How many trials of a sweep are done, failed (latest row failed) and pending (no row) in the store."""

    done: int
    failed: int
    pending: int

    @classmethod
    def of(cls, state: SweepState) -> SweepCounts:
        return cls(len(state.done), len(state.failed), len(state.pending))


@dataclass(frozen=True)
class FailedTrial:
    """A trial that this run ran and that failed: its id, its study and the error its failure row records."""

    trial_id: str
    study: str
    error: str


@dataclass(frozen=True)
class SweepRun:
    """What `run_sweep` did.

    Attributes:
        sweep: the sweep's name (the ``sweep`` column of its rows).
        trials: how many trials the sweep has.
        before, after: the store's counts of the sweep's trials before and after the run (equal when nothing ran).
        ran: the ids of the trials handed to the executor (empty when nothing was left to run).
        jobs: how many jobs they were planned into.
        memory_budget: the budget per job the plan used.
        done_now: how many trials of ``ran`` are done after the run.
        failed_now: the trials of ``ran`` whose latest row is a failure, with their errors.
    """

    sweep: str
    trials: int
    before: SweepCounts
    after: SweepCounts
    ran: tuple[str, ...]
    jobs: int
    memory_budget: MemoryBudget
    done_now: int
    failed_now: tuple[FailedTrial, ...]

    @property
    def ok(self) -> bool:
        """True when no trial of this run failed."""
        return not self.failed_now


def _to_run(state: SweepState, max_attempts: int | None) -> tuple[list[Trial], str]:
    """The trials to run and a note on the failed ones left out: pending only (``max_attempts`` None), or
    pending plus the failed trials with fewer than ``max_attempts`` failed rows."""
    if max_attempts is None:
        note = f"{len(state.failed)} failed trial(s) not retried (`kdgrid resume` retries them)"
        return list(state.pending), note if state.failed else ""
    retry, given_up = state.to_retry(max_attempts)
    note = f"{len(given_up)} failed trial(s) reached --max-attempts {max_attempts} and are not retried"
    return [*state.pending, *retry], note if given_up else ""


def _per_study(sweep: Sweep, trials: list[Trial], what: str) -> str:
    """``"; <what> per study: a 3, b 1"`` for a sweep of several studies (empty for a sweep of one study)."""
    if len(sweep.studies) < 2:
        return ""
    counts = count_by_study(sweep, trials)
    return f"; {what} per study: " + ", ".join(f"{name} {count:,}" for name, count in counts.items())


def run_sweep(
    sweep: Path | str,
    store: Path | str,
    *,
    executor: str = "local",
    executor_settings: Mapping[str, Any] | None = None,
    memory_budget_gb: float | str = AUTO_MEMORY_BUDGET,
    max_group_size: int = 0,
    max_attempts: int | None = None,
    preflight: bool = True,
    compact_after: bool = True,
    log: Log = _quiet,
) -> SweepRun:
    """Run what a sweep still needs against ``store``, one line of progress at a time through ``log``.

    Args:
        sweep: a sweep file, or the bare name of a sweep shipped with kdgrid (`kdgrid.bundled_sweeps`).
        store: the results store (created if missing).
        executor, executor_settings: where jobs run (`kdgrid.launch.get_executor`) and its settings.
        memory_budget_gb: GB one job's students may need together: ``"auto"`` (the executor's), 0 (none) or a
            number (`memory_budget`).
        max_group_size: at most this many trials per job (0 = no limit).
        max_attempts: None: run the pending trials only (``kdgrid run``); a number: also retry failed trials
            with fewer failed rows than that (``kdgrid resume``).
        preflight: check every trial to run against this machine first (`check_trials_here`).
        compact_after: merge the store's small files when the run ends, once there are many.
        log: called with each progress line (the lines ``kdgrid run`` prints).

    Returns:
        What ran and how it ended; a failed trial is reported there (``failed_now``), never raised.

    Raises:
        ConfigError: an invalid sweep, executor setting or memory budget, a store that cannot be written, or
            trials the pre-flight finds cannot run here; nothing has run then.
    """
    store = Path(store)
    check_limits(max_group_size, max_attempts)
    spec = load_named_sweep(sweep, store_dir=store)  # also checks that the store could be created
    runner, budget = executor_and_budget(executor, executor_settings, memory_budget_gb)
    state = sweep_state(spec, store)  # a store that does not exist yet holds no rows
    before = SweepCounts.of(state)
    to_run, note = _to_run(state, max_attempts)
    log(
        f"{spec.name}: {len(spec.trials)} trials; done {before.done}, failed {before.failed}, "
        f"pending {before.pending}; running {len(to_run)}" + (f"; {note}" if note else "")
    )
    if to_run and preflight:
        check_trials_here(to_run)
    # Created only now: a run refused above leaves no trace in the store.
    problems = store_problems(store, create=True)
    if problems:
        raise ConfigError("; ".join(problems))
    study_of = spec.study_of()
    record_membership(store, spec.name, study_of)
    if not to_run:
        return SweepRun(spec.name, len(spec.trials), before, before, (), 0, budget, 0, ())

    log(f"memory budget per job: {budget.basis}")
    # One plan over every study: a job may mix studies, each row records its own (the executor gets study_of).
    jobs = plan_sweep_jobs(to_run, max_group_size, budget.gb)
    log(f"{len(jobs)} job(s), one teacher pass per batch each" + _per_study(spec, to_run, "running"))
    runner.run(jobs, store, sweep=spec.name, studies=study_of)
    if compact_after and len(visible_files(rows_dir(store))) >= COMPACT_ABOVE_FILES:
        compact(store)

    after_state = sweep_state(spec, store)
    after = SweepCounts.of(after_state)
    ran = tuple(t.trial_id for t in to_run)
    ran_ids = set(ran)
    failed_now = tuple(
        FailedTrial(t.trial_id, study_of[t.trial_id], after_state.errors.get(t.trial_id, ""))
        for t in after_state.failed
        if t.trial_id in ran_ids
    )
    done_now = sum(t.trial_id in ran_ids for t in after_state.done)
    log(
        f"{spec.name}: done {after.done}, failed {after.failed}, pending {after.pending} "
        f"(this run: {done_now} done, {len(failed_now)} failed)"
    )
    for failed in failed_now:
        log(f"failed {failed.trial_id} [{failed.study}]: {failed.error}")
    return SweepRun(spec.name, len(spec.trials), before, after, ran, len(jobs), budget, done_now, failed_now)
