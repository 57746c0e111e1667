"""`kdgrid plan | run | status | resume`: sweeps against the results store.

The store is the only state: ``run`` runs the trials without any row, ``resume`` also retries failed trials (up
to ``--max-attempts`` failed rows each), and neither ever runs a trial that has a done row.

All four plan jobs the same way: groups of trials sharing a teacher pass, split to ``--max-group-size`` and to a
memory budget per job. Jobs are planned over the whole sweep, so trials of different studies that share a
group (`kdgrid.trial.group_key`) share one teacher pass per batch; each row still records its trial's study
(the executor is given `Sweep.study_of`). The budget defaults to ``auto``: the executor's ``memory_budget()``,
i.e. what one job may use on the machine where the executor runs jobs; ``plan`` and ``status`` take the same
``--executor / --set / --profile`` as ``run`` so that they show the jobs ``run`` will start.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from kdgrid.grid import Sweep
    from kdgrid.grid.state import SweepState
    from kdgrid.launch import Executor
    from kdgrid.launch.memory import MemoryBudget
    from kdgrid.trial import Trial

SweepArg = Annotated[Path, typer.Argument(help="A sweep file (sweeps/*.yaml).", show_default=False)]
StoreOpt = Annotated[Path, typer.Option("--store", help="The results store (a directory of Parquet files).")]
JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print one JSON object (keys: trials, jobs, memory_budget_gb, memory_budget, done, failed, ...).",
    ),
]
ExecutorOpt = Annotated[str, typer.Option("--executor", "-e", help="Where jobs run: local, ray or slurm.")]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="An executor setting KEY=VALUE (repeatable), e.g. local_workers=2, ray_gpus_per_job=0.25, "
        "slurm_partition=gpu; VALUE is read as YAML.",
    ),
]
ProfileOpt = Annotated[
    str | None, typer.Option("--profile", help="SLURM: a profile in slurm/profiles (or a YAML path).")
]
GroupOpt = Annotated[
    int, typer.Option("--max-group-size", help="At most this many trials per job (0 = no limit).")
]
MemoryOpt = Annotated[
    str,
    typer.Option(
        "--memory-budget-gb",
        help="GB that one job's students may need together (estimated); a bigger group is split into several "
        "jobs. 'auto': what one job may use where the executor runs it, times 0.9: local: the smallest GPU's "
        "memory (without a GPU the RAM, capped by the cgroup limit) / local_workers; slurm: slurm_mem_gb per "
        "task (RAM: a GPU's memory is unknown before submission unless slurm_gpu_mem_gb is set; no budget "
        "without slurm_mem_gb); ray: ray_gpus_per_job of a GPU, else RAM / concurrent jobs. 0 = no budget.",
    ),
]
PreflightOpt = Annotated[
    bool,
    typer.Option(
        "--preflight/--no-preflight",
        help="Check every trial against this machine (teachers, init checkpoints) before submitting.",
    ),
]
CompactOpt = Annotated[
    bool, typer.Option("--compact/--no-compact", help="Merge the store's small files when the run ends.")
]

DEFAULT_STORE = Path("results")
DEFAULT_MAX_GROUP_SIZE = 0  # no limit: the memory budget splits big groups
DEFAULT_MEMORY_BUDGET = "auto"
COMPACT_ABOVE_FILES = 500


def _print_json(payload: dict[str, Any]) -> None:
    typer.echo(json.dumps(payload, indent=1, sort_keys=True, default=str))


def _plan_jobs(trials: list[Trial], max_group_size: int, memory_budget_gb: float | None) -> list[list[Trial]]:
    from kdgrid.grid import plan_jobs

    return plan_jobs(trials, max_group_size=max_group_size or None, memory_budget_gb=memory_budget_gb)


def _memory_budget(value: str, runner: Executor) -> MemoryBudget:
    """``--memory-budget-gb``: ``auto`` (the executor's `memory_budget`), 0 (no budget) or a number of GB.

    Raises:
        ConfigError: anything else (a negative number, a word), naming the option.
    """
    import math

    from kdgrid.errors import ConfigError
    from kdgrid.launch.memory import MemoryBudget

    text = str(value).strip().lower()
    if text == "auto":
        return runner.memory_budget()
    try:
        gb = float(text)
    except ValueError:
        gb = float("nan")
    if not math.isfinite(gb) or gb < 0:
        raise ConfigError(
            f"--memory-budget-gb: expected a number of GB >= 0 (0 = off) or 'auto', got {value!r}"
        )
    if gb == 0:
        return MemoryBudget(None, "off (--memory-budget-gb 0)")
    return MemoryBudget(gb, f"given: --memory-budget-gb {gb:g}")


def _runner_and_budget(
    executor: str, settings: list[str] | None, profile: str | None, memory_budget: str
) -> tuple[Executor, MemoryBudget]:
    """The executor named on the command line (built, not started) and the memory budget of one of its jobs."""
    from kdgrid.launch import get_executor

    runner = get_executor(executor, **_executor_settings(settings, profile, executor))
    return runner, _memory_budget(memory_budget, runner)


def _count_by_study(sweep: Sweep, trials: list[Trial]) -> dict[str, int]:
    """How many of ``trials`` each study of ``sweep`` holds (studies without any left out; sweep order)."""
    study_of = sweep.study_of()
    counts = dict.fromkeys(sweep.studies, 0)
    for trial in trials:
        counts[study_of[trial.trial_id]] += 1
    return {name: count for name, count in counts.items() if count}


def _per_study(sweep: Sweep, trials: list[Trial], what: str) -> str:
    """``"; <what> per study: a 3, b 1"`` for a sweep of several studies (empty for a sweep of one study)."""
    counts = _count_by_study(sweep, trials)
    if len(sweep.studies) < 2:
        return ""
    return f"; {what} per study: " + ", ".join(f"{name} {count:,}" for name, count in counts.items())


def _summary(sweep: Sweep, state: SweepState, max_group_size: int, budget: MemoryBudget) -> dict[str, Any]:
    from kdgrid.grid.state import estimate_cost

    all_trials = [p.trial for p in sweep.trials]
    jobs = _plan_jobs(all_trials, max_group_size, budget.gb)
    pending_jobs = _plan_jobs(state.pending, max_group_size, budget.gb)
    estimate = estimate_cost(state.pending + state.failed, state.timings)
    return {
        "sweep": sweep.name,
        "file": str(sweep.path),
        "trials": len(sweep.trials),
        "grid_points": sweep.grid_points,
        "repeated": sweep.repeated,
        "studies": _count_by_study(sweep, all_trials),
        "jobs": len(jobs),
        "memory_budget_gb": budget.gb,
        "memory_budget": budget.basis,
        "pending_jobs": len(pending_jobs),
        "done": len(state.done),
        "failed": len(state.failed),
        "pending": len(state.pending),
        "estimate": estimate.to_dict(),
    }


def _failed_lines(state: SweepState, study_of: dict[str, str]) -> list[dict[str, Any]]:
    return [
        {
            "trial_id": t.trial_id,
            "study": study_of.get(t.trial_id),
            "attempts": state.failures.get(t.trial_id, 0),
            "error": state.errors.get(t.trial_id, ""),
        }
        for t in state.failed
    ]


def _print_summary(summary: dict[str, Any], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_header=True)
    table.add_column("")
    table.add_column("value", justify="right")
    rows = [
        ("trials", f"{summary['trials']:,}"),
        ("grid points (repeated merged)", f"{summary['grid_points']:,} ({summary['repeated']:,})"),
        ("jobs (shared teacher pass)", f"{summary['jobs']:,}"),
        (
            "memory budget per job",
            "none" if summary["memory_budget_gb"] is None else f"{summary['memory_budget_gb']:.1f} GB",
        ),
        ("done", f"{summary['done']:,}"),
        ("failed", f"{summary['failed']:,}"),
        ("pending", f"{summary['pending']:,}"),
        ("jobs to run for pending", f"{summary['pending_jobs']:,}"),
    ]
    estimate = summary["estimate"]
    rows.append(
        (
            "estimated cost of pending + failed",
            "unknown" if estimate["seconds"] is None else f"{estimate['hours']:.2f} h",
        )
    )
    for name, value in rows:
        table.add_row(name, value)
    console = Console()
    console.print(table)
    if len(summary["studies"]) > 1:
        console.print("studies: " + ", ".join(f"{k} {v:,}" for k, v in summary["studies"].items()))
    console.print(f"[dim]memory budget: {summary['memory_budget']}[/]", highlight=False)
    if estimate["seconds"] is not None:
        console.print(f"[dim]estimate: {estimate['basis']}[/]")


def plan(
    sweep: SweepArg,
    store: StoreOpt = DEFAULT_STORE,
    as_json: JsonOpt = False,
    executor: ExecutorOpt = "local",
    settings: SetOpt = None,
    profile: ProfileOpt = None,
    max_group_size: GroupOpt = DEFAULT_MAX_GROUP_SIZE,
    memory_budget_gb: MemoryOpt = DEFAULT_MEMORY_BUDGET,
) -> None:
    """Expand and validate a sweep: its trials, how they group into jobs sharing one teacher pass (planned for
    --executor as `kdgrid run` will), the memory budget per job and where it came from, how many trials are
    already done / failed / pending in the store, and a cost estimate from the store's own timings."""
    from kdgrid.grid import load_sweep
    from kdgrid.grid.state import sweep_state

    spec = load_sweep(sweep)
    _, budget = _runner_and_budget(executor, settings, profile, memory_budget_gb)
    summary = _summary(spec, sweep_state(spec, store), max_group_size, budget)
    if as_json:
        _print_json(summary)
    else:
        _print_summary(summary, f"plan of {spec.name} against {store}")


def status(
    sweep: SweepArg,
    store: StoreOpt = DEFAULT_STORE,
    as_json: JsonOpt = False,
    executor: ExecutorOpt = "local",
    settings: SetOpt = None,
    profile: ProfileOpt = None,
    max_group_size: GroupOpt = DEFAULT_MAX_GROUP_SIZE,
    memory_budget_gb: MemoryOpt = DEFAULT_MEMORY_BUDGET,
) -> None:
    """Counts of a sweep's trials by state, and each failed trial with its error on one line (jobs counted as
    `kdgrid plan` counts them)."""
    from kdgrid.grid import load_sweep
    from kdgrid.grid.state import sweep_state

    spec = load_sweep(sweep)
    state = sweep_state(spec, store)
    _, budget = _runner_and_budget(executor, settings, profile, memory_budget_gb)
    summary = _summary(spec, state, max_group_size, budget)
    failed = _failed_lines(state, spec.study_of())
    if as_json:
        _print_json({**summary, "failed_trials": failed})
        return
    _print_summary(summary, f"status of {spec.name} in {store}")
    for item in failed:
        typer.echo(
            f"failed {item['trial_id']} [{item['study']}] attempts={item['attempts']}: {item['error']}"
        )


def _executor_settings(settings: list[str] | None, profile: str | None, executor: str) -> dict[str, Any]:
    import yaml

    from kdgrid.errors import ConfigError

    parsed: dict[str, Any] = {}
    for item in settings or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: write KEY=VALUE (e.g. local_workers=2)")
        parsed[key.strip()] = yaml.safe_load(value) if value.strip() else None
    if profile is not None:
        if executor != "slurm":
            raise ConfigError(f"--profile is a SLURM setting; the executor is {executor!r}")
        parsed["profile"] = profile
    return parsed


def _preflight(trials: list[Trial]) -> None:
    """The core's checks of each trial on this machine (teacher available, init checkpoint shapes), all at once."""
    from kdgrid.core.train import validate_trials
    from kdgrid.errors import ConfigError, KdgridError

    problems: list[str] = []
    for job in _plan_jobs(trials, 0, None):
        try:
            validate_trials(job)
        except KdgridError as error:
            problems.append(str(error))
    if problems:
        raise ConfigError("pre-flight found trials that cannot run on this machine:\n" + "\n".join(problems))


def _execute(
    sweep_path: Path,
    store: Path,
    executor: str,
    settings: list[str] | None,
    profile: str | None,
    max_group_size: int,
    memory_budget_gb: str,
    preflight: bool,
    compact_after: bool,
    *,
    max_attempts: int | None,
) -> None:
    """Shared body of run (``max_attempts`` None: pending only) and resume (pending + failed below the cap)."""
    from kdgrid.errors import ConfigError
    from kdgrid.grid import load_sweep, store_problems
    from kdgrid.grid.state import sweep_state

    spec = load_sweep(sweep_path, store_dir=store)
    runner, budget = _runner_and_budget(executor, settings, profile, memory_budget_gb)
    problems = store_problems(store, create=True)
    if problems:
        raise ConfigError("; ".join(problems))
    state = sweep_state(spec, store)
    to_run = list(state.pending)
    note = ""
    if max_attempts is None:
        if state.failed:
            note = f"{len(state.failed)} failed trial(s) not retried (`kdgrid resume` retries them)"
    else:
        retry, given_up = state.to_retry(max_attempts)
        to_run += retry
        if given_up:
            note = (
                f"{len(given_up)} failed trial(s) reached --max-attempts {max_attempts} and are not retried"
            )
    typer.echo(
        f"{spec.name}: {len(spec.trials)} trials; done {len(state.done)}, failed {len(state.failed)}, "
        f"pending {len(state.pending)}; running {len(to_run)}" + (f"; {note}" if note else "")
    )
    if not to_run:
        return
    if preflight:
        _preflight(to_run)
    typer.echo(f"memory budget per job: {budget.basis}")
    # One plan over every study: a job may mix studies, each row records its own (the executor gets study_of).
    jobs = _plan_jobs(to_run, max_group_size, budget.gb)
    typer.echo(f"{len(jobs)} job(s), one teacher pass per batch each" + _per_study(spec, to_run, "running"))
    runner.run(jobs, store, sweep=spec.name, studies=spec.study_of())
    if compact_after:
        from kdgrid.store import compact
        from kdgrid.store.layout import rows_dir, visible_files

        if len(visible_files(rows_dir(store))) >= COMPACT_ABOVE_FILES:
            compact(store)
    after = sweep_state(spec, store)
    ran = {t.trial_id for t in to_run}
    failed_now = [t for t in after.failed if t.trial_id in ran]
    done_now = sum(t.trial_id in ran for t in after.done)
    typer.echo(
        f"{spec.name}: done {len(after.done)}, failed {len(after.failed)}, pending {len(after.pending)} "
        f"(this run: {done_now} done, {len(failed_now)} failed)"
    )
    study_of = spec.study_of()
    for trial in failed_now:
        typer.echo(
            f"failed {trial.trial_id} [{study_of[trial.trial_id]}]: {after.errors.get(trial.trial_id, '')}"
        )
    if failed_now:
        raise typer.Exit(1)


def run(
    sweep: SweepArg,
    store: StoreOpt = DEFAULT_STORE,
    executor: ExecutorOpt = "local",
    settings: SetOpt = None,
    profile: ProfileOpt = None,
    max_group_size: GroupOpt = DEFAULT_MAX_GROUP_SIZE,
    memory_budget_gb: MemoryOpt = DEFAULT_MEMORY_BUDGET,
    preflight: PreflightOpt = True,
    compact_after: CompactOpt = True,
) -> None:
    """Run every trial of a sweep that has no row in the store yet (never a done trial; failed trials are left
    to `kdgrid resume`). Exits 1 if a trial of this run failed."""
    _execute(
        sweep,
        store,
        executor,
        settings,
        profile,
        max_group_size,
        memory_budget_gb,
        preflight,
        compact_after,
        max_attempts=None,
    )


def resume(
    sweep: SweepArg,
    store: StoreOpt = DEFAULT_STORE,
    executor: ExecutorOpt = "local",
    max_attempts: Annotated[
        int, typer.Option(help="Give up on a trial after this many failed attempts.")
    ] = 3,
    settings: SetOpt = None,
    profile: ProfileOpt = None,
    max_group_size: GroupOpt = DEFAULT_MAX_GROUP_SIZE,
    memory_budget_gb: MemoryOpt = DEFAULT_MEMORY_BUDGET,
    preflight: PreflightOpt = True,
    compact_after: CompactOpt = True,
) -> None:
    """Run what is missing plus what failed (up to --max-attempts failed rows per trial), nothing else.
    A preempted trial continues from its last epoch checkpoint (under <store>/_checkpoints)."""
    _execute(
        sweep,
        store,
        executor,
        settings,
        profile,
        max_group_size,
        memory_budget_gb,
        preflight,
        compact_after,
        max_attempts=max_attempts,
    )


def register(app: typer.Typer) -> None:
    for command in (plan, run, status, resume):
        app.command()(command)
