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

The pre-flight (`kdgrid.preflight`) runs before the store is created, tier by tier: the static rules were applied
when the sweep was loaded; then the local files (init and recipe checkpoints) and the Hub caches; then each job
against this machine, and the teacher gate. Hub access: with the pre-flight on, a sweep that needs models or
datasets from the Hugging Face Hub runs only once they are all in this machine's caches (`kdgrid prefetch SWEEP`
puts them there); its workers then run with ``HF_HUB_OFFLINE=1`` and ``HF_DATASETS_OFFLINE=1``
(`kdgrid.preflight.local.hub_environment`), so thousands of jobs never ask the Hub.
``online=True`` (``--online``) lets every job fetch what it needs itself instead.

Pre-training checkpoints: trials that start from a recipe's checkpoint (option ``init_recipe``) run only once it
is made. With ``make_checkpoints`` (``--make-checkpoints``) the missing ones for the trials to run are made first,
one job each through the run's executor (`kdgrid.pretrain.checkpoint_grid`); if any cannot be made, no trial runs.

`smoke_sweep` (``kdgrid run --smoke``) runs a few trials of every group for a few steps into a throwaway store
and reports per group what failed, before a cluster spends hours on the real grid.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kdgrid.core.options import MAX_DEV_SAMPLES
from kdgrid.core.pretrained.needed import needed_checkpoints
from kdgrid.grid import PlannedTrial, Sweep
from kdgrid.grid.limits import DEFAULT_MAX_TRIALS
from kdgrid.grid.stages import without_assistant_teachers
from kdgrid.grid.state import SweepState, sweep_state
from kdgrid.launch.environment import OFFLINE_ENVIRONMENT, environment
from kdgrid.launch.memory import MemoryBudget
from kdgrid.launch.stage_run import run_in_stages
from kdgrid.launch.worker import DEFAULT_JOB_FN
from kdgrid.preflight.gate import check_gate
from kdgrid.preflight.jobs import check_jobs_here
from kdgrid.preflight.local import check_init_checkpoints, create_store, hub_environment
from kdgrid.pretrain.checkpoint_grid import (
    CheckpointJobSettings,
    MadeCheckpoint,
    failure_message,
    make_missing,
)
from kdgrid.store import compact
from kdgrid.store.layout import rows_dir, visible_files
from kdgrid.store.membership import record_membership
from kdgrid.store.run_ledger import RUN_ENV, read_ledger, remove_ledger
from kdgrid.store.schema import SUPERSEDED
from kdgrid.sweep_plan import (  # noqa: F401 (part of this module's interface, as before)
    AUTO_MEMORY_BUDGET,
    check_limits,
    count_by_study,
    executor_and_budget,
    load_named_sweep,
    memory_budget,
    plan_sweep_jobs,
)
from kdgrid.trial import Trial, assistant_id, data_order_seed, group_key, source_trial_ids, trained_teacher

# Compact the store after a run once its loose per-trial files reach this many (reading them gets slow).
COMPACT_ABOVE_FILES = 500

Log = Callable[[str], None]


def _quiet(_line: str) -> None:
    """The default ``log`` of `run_sweep`: a library call prints nothing unless asked to."""


@dataclass(frozen=True)
class RunOptions:
    """How a sweep runs: one value, built once from the command line (`kdgrid run`, `resume`, ``run --smoke``) or
    by a caller, and passed down whole to `run_sweep` and `smoke_sweep`.

    Attributes:
        executor, executor_settings: where jobs run (`kdgrid.launch.get_executor`) and its settings (``--set``,
            ``--profile``).
        memory_budget_gb: GB one job's students may need together: ``"auto"`` (the executor's), 0 (none) or a
            number (`kdgrid.sweep_plan.memory_budget`).
        max_group_size: at most this many trials per job (0 = no limit).
        max_attempts: None: run the pending trials only (``kdgrid run``); a number: also retry failed trials
            with fewer failed rows than that (``kdgrid resume``).
        preflight: check every trial to run against this machine first (`kdgrid.preflight`), and that what
            they need from the Hub is cached (`kdgrid.preflight.local.hub_environment`: the workers then run
            offline).
        online: with ``preflight``, let the workers fetch from the Hub instead of requiring a prefetch.
        compact_after: merge the store's small files when the run ends, once there are many.
        make_checkpoints: first make the pre-training checkpoints (``init_recipe``) the trials to run need and
            that are missing, one job each through the executor (`kdgrid.pretrain.checkpoint_grid`); without it
            a missing one is refused (with ``preflight``).
        checkpoint_settings: how those jobs run (micro-batch, checkpoint interval, SLURM nodes).
        max_trials: the most grid points the sweep may have (`kdgrid.grid.limits.DEFAULT_MAX_TRIALS`).
    """

    executor: str = "local"
    executor_settings: Mapping[str, Any] = field(default_factory=dict)
    memory_budget_gb: float | str = AUTO_MEMORY_BUDGET
    max_group_size: int = 0
    max_attempts: int | None = None
    preflight: bool = True
    online: bool = False
    compact_after: bool = True
    make_checkpoints: bool = False
    checkpoint_settings: CheckpointJobSettings = field(default_factory=CheckpointJobSettings)
    max_trials: int = DEFAULT_MAX_TRIALS

    def __post_init__(self) -> None:
        object.__setattr__(self, "executor_settings", dict(self.executor_settings or {}))


@dataclass(frozen=True)
class SweepCounts:
    """How many trials of a sweep are done, failed (latest row failed), pending (no row) and running (claimed by
    a live process, `kdgrid.store.claims`) in the store."""

    done: int
    failed: int
    pending: int
    running: int = 0

    @classmethod
    def of(cls, state: SweepState) -> SweepCounts:
        return cls(len(state.done), len(state.failed), len(state.pending), len(state.running))


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
        checkpoints: with ``make_checkpoints``, how each pre-training checkpoint the trials to run need ended
            (made, already there, failed); if any failed, no trial ran.
        superseded: trials this run wrote a ``superseded`` row of (it stalled past the stale limit and another
            run took their claims over; the rows are kept, never counted).
        reclaimed: trials whose stale claims this run took over (a stalled or dead holder's).
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
    checkpoints: tuple[MadeCheckpoint, ...] = ()
    superseded: tuple[str, ...] = ()
    reclaimed: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when no trial of this run failed and every checkpoint it had to make was made."""
        return not self.failed_now and not any(made.failed for made in self.checkpoints)


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
    sweep: Path | str, store: Path | str, options: RunOptions | None = None, *, log: Log = _quiet
) -> SweepRun:
    """Run what a sweep still needs against ``store``, one line of progress at a time through ``log``.

    Args:
        sweep: a sweep file, or the bare name of a sweep shipped with kdgrid (`kdgrid.bundled_sweeps`).
        store: the results store (created if missing).
        options: how it runs (`RunOptions`; default: pending trials only, on the local executor, with the
            pre-flight).
        log: called with each progress line (the lines ``kdgrid run`` prints).

    Returns:
        What ran and how it ended; a failed trial is reported there (``failed_now``), never raised, and so is a
        checkpoint that could not be made (``checkpoints``; no trial ran then).

    Raises:
        ConfigError: an invalid sweep, executor setting or memory budget, a store that cannot be written,
            trials the pre-flight finds cannot run here, or Hub items missing from the cache; nothing has run
            then.
    """
    options = options or RunOptions()
    store = Path(store)
    check_limits(options.max_group_size, options.max_attempts)
    # also checks that the store could be created
    spec = load_named_sweep(sweep, store_dir=store, max_trials=options.max_trials)
    return _run_loaded(spec, str(sweep), store, options, log=log)


def _run_loaded(spec: Sweep, named: str, store: Path, options: RunOptions, *, log: Log) -> SweepRun:
    """The body of `run_sweep` for a loaded sweep (``named``: how the user named it, for messages)."""
    executor, preflight, make_checkpoints = options.executor, options.preflight, options.make_checkpoints
    runner, budget = executor_and_budget(executor, options.executor_settings, options.memory_budget_gb)
    state = sweep_state(spec, store)  # a store that does not exist yet holds no rows
    before = SweepCounts.of(state)
    to_run, note = _to_run(state, options.max_attempts)
    log(
        f"{spec.name}: {len(spec.trials)} trials; done {before.done}, failed {before.failed}, "
        f"pending {before.pending}; to run now {len(to_run)}"  # "running" is the state of a claimed trial
        + (f"; {note}" if note else "")
        + (f"; {before.running} claimed by another run, skipped" if before.running else "")
    )
    worker_environment: dict[str, str] = {}
    if to_run and preflight:
        # Local files first: every missing checkpoint named before the Hub check (only the hand-made ones when
        # the missing recipe checkpoints are to be made).
        check_init_checkpoints(to_run, recipes=not make_checkpoints)
        worker_environment = hub_environment(to_run, named, online=options.online)
    checkpoints: tuple[MadeCheckpoint, ...] = ()
    if to_run and make_checkpoints:
        checkpoints = tuple(make_missing(
            needed_checkpoints(to_run), executor, runner, options.checkpoint_settings, log
        ))  # fmt: skip
        if any(checkpoint.failed for checkpoint in checkpoints):
            log(failure_message(list(checkpoints)))
            return SweepRun(spec.name, len(spec.trials), before, before, (), 0, budget, 0, (), checkpoints)
    if to_run and preflight:
        # The gate runs here where the jobs would run it, on this machine: the local executor's core jobs.
        gate_here = executor == "local" and getattr(runner, "job_fn", None) is DEFAULT_JOB_FN
        # a teacher assistant's dependants: checked against its planned shape; their teacher when their job starts
        checked_here = without_assistant_teachers(to_run)
        with environment(worker_environment):  # the jobs' check and the gate read the caches as the jobs will
            check_jobs_here(checked_here)
            check_gate(checked_here, here=gate_here, log=log)
        if executor != "local":
            log(f"teacher gate: {executor} jobs run elsewhere, so only verdicts cached here were checked; each job "
                "gates its teacher when it starts (a refused teacher fails its job's trials)")
    # Created only now: a run refused above leaves no trace in the store.
    create_store(store)
    study_of = spec.study_of()
    record_membership(store, spec.name, study_of, table=spec.table, studies=tuple(spec.studies))
    if not to_run:
        return SweepRun(spec.name, len(spec.trials), before, before, (), 0, budget, 0, ())

    log(f"memory budget per job: {budget.basis}")
    if worker_environment:
        log("every Hub item is cached: workers run offline (" + ", ".join(f"{k}=1" for k in OFFLINE_ENVIRONMENT) + ")")
    # One plan over every study: a job may mix studies, each row records its own (the executor gets study_of).
    jobs = plan_sweep_jobs(to_run, options.max_group_size, budget.gb)
    log(f"{len(jobs)} job(s), one teacher pass per batch each" + _per_study(spec, to_run, "running"))
    run_id = f"run-{uuid.uuid4().hex}"
    try:
        with environment({**worker_environment, RUN_ENV: run_id}):
            run_in_stages(runner, jobs, store, sweep=spec.name, studies=study_of, log=log)  # assistants first
        ledger = read_ledger(store, run_id)
    finally:
        remove_ledger(store, run_id)
    if options.compact_after and len(visible_files(rows_dir(store))) >= COMPACT_ABOVE_FILES:
        compact(store)

    after_state = sweep_state(spec, store)
    after = SweepCounts.of(after_state)
    ran = tuple(t.trial_id for t in to_run)
    ran_ids = set(ran)
    # This run's own rows (its ledger), not whatever other runs wrote meanwhile; an executor whose jobs could not
    # record into the ledger (a remote cluster not given this environment) leaves it empty: the store decides.
    recorded = bool(ledger.rows) or executor == "local"
    mine_done = ledger.trials("done") if recorded else ran_ids
    mine_failed = ledger.trials("failed") if recorded else ran_ids
    failed_now = tuple(
        FailedTrial(t.trial_id, study_of[t.trial_id], after_state.errors.get(t.trial_id, ""))
        for t in after_state.failed
        if t.trial_id in ran_ids and t.trial_id in mine_failed
    )
    done_now = sum(t.trial_id in ran_ids and t.trial_id in mine_done for t in after_state.done)
    superseded = tuple(sorted(ledger.trials(SUPERSEDED)))
    reclaimed = tuple(sorted(ledger.reclaimed))
    log(
        f"{spec.name}: done {after.done}, failed {after.failed}, pending {after.pending}"
        + (f", running elsewhere {after.running} " if after.running else " ")
        + f"(this run: {done_now} done, {len(failed_now)} failed"
        + (f", {len(superseded)} superseded" if superseded else "")
        + ")"
    )
    if superseded:
        log(f"{len(superseded)} row(s) of this run superseded: it stalled past the stale limit and another run "
            f"took their trials' claims over; kept in the store, not counted ({', '.join(superseded[:5])}"
            + (" ..." if len(superseded) > 5 else "") + ")")  # fmt: skip
    if reclaimed:
        log(f"this run took over {len(reclaimed)} stale claim(s) from stalled or dead holders "
            f"({', '.join(reclaimed[:5])}" + (" ..." if len(reclaimed) > 5 else "") + ")")  # fmt: skip
    for failed in failed_now:
        log(f"failed {failed.trial_id} [{failed.study}]: {failed.error}")
    return SweepRun(spec.name, len(spec.trials), before, after, ran, len(jobs), budget, done_now, failed_now,
                    checkpoints, superseded, reclaimed)  # fmt: skip


# ----------------------------------------------------------------------------------------------------- smoke

# A smoke trial trains SMOKE_STEPS batches of its own batch size (so memory is tried at the real size), on a
# fixed subset of that many training examples, for one epoch.
SMOKE_STEPS = 2
SMOKE_DEV_EXAMPLES = 64  # dev examples a smoke trial is scored on (a QQP dev set has 40,430)


def smoke_trial(trial: Trial) -> Trial:
    """``trial`` cut to a smoke run: one epoch of at most ``SMOKE_STEPS`` batches (``max_train_samples``),
    scored on the first ``SMOKE_DEV_EXAMPLES`` examples of each dev set (option ``max_dev_samples``); everything
    else (teacher, student, init, knowledge, batch size, length) as it is."""
    cap = SMOKE_STEPS * trial.batch_size
    samples = cap if trial.max_train_samples is None else min(trial.max_train_samples, cap)
    options = {**dict(trial.options), MAX_DEV_SAMPLES: SMOKE_DEV_EXAMPLES}
    return dataclasses.replace(trial, max_train_samples=samples, epochs=1, options=options)


def smoke_trials(trials: Iterable[Trial]) -> dict[str, Trial]:
    """Every trial's smoke version (`smoke_trial`) by the trial's id. A trial that learns from or starts from
    another trial of the sweep (``trial:<id>`` as its teacher or init_from: teacher assistants, MOHAWK's stages)
    names that trial's smoke version instead, so a chain runs as a chain."""
    by_id = {trial.trial_id: trial for trial in trials}
    smoke: dict[str, Trial] = {}

    def of(trial: Trial) -> Trial:
        if trial.trial_id not in smoke:
            changes = {}
            for name in ("teacher", "init_from"):
                value = getattr(trial, name)
                source = None if value is None else assistant_id(value)
                if source in by_id:
                    changes[name] = trained_teacher(of(by_id[source]).trial_id)
            smoke[trial.trial_id] = dataclasses.replace(smoke_trial(trial), **changes)
        return smoke[trial.trial_id]

    for trial in by_id.values():
        of(trial)
    return smoke


def with_sources(selection: dict[tuple[Any, ...], list[Trial]], trials: Iterable[Trial]) -> None:
    """Add to ``selection`` (`smoke_selection`'s, in place) every trial of the sweep that a chosen trial learns
    from or starts from, in its own group, and theirs in turn: a chain's smoke run trains its sources too."""
    by_id = {trial.trial_id: trial for trial in trials}
    chosen = {trial.trial_id for picked in selection.values() for trial in picked}
    waiting = [source for picked in selection.values() for trial in picked for source in source_trial_ids(trial)]
    while waiting:
        source = by_id.get(waiting.pop())
        if source is None or source.trial_id in chosen:
            continue
        chosen.add(source.trial_id)
        selection.setdefault(group_key(source), []).append(source)
        waiting.extend(source_trial_ids(source))


def _features(trial: Trial) -> set[tuple[str, Any]]:
    """What a smoke run should try at least once per group: each student, init scheme (and its source),
    knowledge type and strategy of the group."""
    found: set[tuple[str, Any]] = {
        ("student", trial.student),
        ("init", (trial.init, trial.init_from)),
        ("strategy", trial.strategy),
        ("beta", isinstance(trial.beta, str)),
    }
    found.update(("knowledge", name) for name in trial.knowledge)
    return found


def smoke_selection(trials: Iterable[Trial]) -> dict[tuple[Any, ...], list[Trial]]:
    """Per group (`kdgrid.trial.group_key`, in sweep order), the trials a smoke run tries: the group's first
    trial, then each later trial that brings a student, init scheme, knowledge type or strategy not tried yet
    (so every one of them is tried once; a Table 5 group of 150 trials gives about 10)."""
    chosen: dict[tuple[Any, ...], list[Trial]] = {}
    covered: dict[tuple[Any, ...], set[tuple[str, Any]]] = {}
    for trial in trials:
        key = group_key(trial)
        features = _features(trial)
        seen = covered.setdefault(key, set())
        if features - seen:
            chosen.setdefault(key, []).append(trial)
            seen |= features
    return chosen


@dataclass(frozen=True)
class SmokeGroup:
    """One group of a smoke run: its task and teacher, the trials tried, and the distinct errors of those that
    failed (empty when all were done)."""

    task: str
    teacher: str
    data_seed: int  # the group's data-order seed (`kdgrid.trial.data_order_seed`)
    trials: int
    failed: int
    errors: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.failed

    def line(self) -> str:
        head = f"{self.task} / {self.teacher} / data seed {self.data_seed} ({self.trials} trial(s))"
        if self.ok:
            return f"ok      {head}"
        return f"FAILED  {head}: {self.failed} failed: " + " | ".join(self.errors)


@dataclass(frozen=True)
class SmokeRun:
    """What `smoke_sweep` found: one `SmokeGroup` per group of the sweep, and the store it ran into (kept, or
    None once removed)."""

    sweep: str
    groups: tuple[SmokeGroup, ...]
    store: Path | None

    @property
    def ok(self) -> bool:
        return all(group.ok for group in self.groups)


def smoke_sweep(
    sweep: Path | str, options: RunOptions | None = None, *, keep: bool = False, log: Log = _quiet
) -> SmokeRun:
    """Run every group of a sweep for a few steps (`smoke_selection`, `smoke_trial`; a chain with its sources,
    `with_sources`, `smoke_trials`) into a throwaway store (a temporary folder, removed afterwards unless ``keep``)
    and report per group what failed.

    ``options`` as for `run_sweep` (its executor, budget, group size, pre-flight and Hub access; a smoke run
    retries nothing, makes no checkpoint, never compacts); the pre-flight and the Hub check apply as there. Rows of a
    smoke run never reach a real store: smoke trials have their own ids (their training subset differs).

    Raises:
        ConfigError: as `run_sweep` (nothing has run then).
    """
    spec = load_named_sweep(sweep)
    selection = smoke_selection(p.trial for p in spec.trials)
    with_sources(selection, (p.trial for p in spec.trials))
    cut = smoke_trials(p.trial for p in spec.trials)
    study_of = spec.study_of()
    smoke = [
        PlannedTrial(cut[trial.trial_id], study_of[trial.trial_id])
        for trials in selection.values()
        for trial in trials
    ]
    smoke_spec = dataclasses.replace(spec, trials=smoke, grid_points=len(smoke), repeated=0)
    store = Path(tempfile.mkdtemp(prefix=f"kdgrid-smoke-{spec.name}-"))
    log(f"{spec.name}: smoke run of {len(smoke)} trial(s) in {len(selection)} group(s), "
        f"{SMOKE_STEPS} step(s) each, into {store}")  # fmt: skip
    try:
        smoke_options = dataclasses.replace(
            options or RunOptions(), max_attempts=None, compact_after=False, make_checkpoints=False
        )
        _run_loaded(smoke_spec, str(sweep), store, smoke_options, log=log)
        state = sweep_state(smoke_spec, store)
    finally:
        if not keep:
            shutil.rmtree(store, ignore_errors=True)
    failed_ids = {t.trial_id for t in state.failed} | {t.trial_id for t in state.pending}
    groups = []
    for trials in selection.values():
        ids = [cut[t.trial_id].trial_id for t in trials]
        errors = [state.errors.get(i) or "no row (the job did not report)" for i in ids if i in failed_ids]
        first = trials[0]
        groups.append(
            SmokeGroup(first.task, first.teacher, data_order_seed(first), len(ids), len(errors), tuple(dict.fromkeys(errors)))
        )
    outcome = SmokeRun(spec.name, tuple(groups), store if keep else None)
    for group in groups:
        log(group.line())
    failed = sum(not g.ok for g in groups)
    log(f"{spec.name}: smoke run {'passed' if outcome.ok else 'FAILED'}: {len(groups) - failed} of "
        f"{len(groups)} group(s) ok" + (f"; rows kept in {store}" if keep else ""))  # fmt: skip
    return outcome
