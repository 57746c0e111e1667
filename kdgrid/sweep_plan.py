"""Planning a sweep without running it: the sweep by file or bundled name, the executor's memory budget per job,
the jobs, the trials per study.

What `kdgrid plan` and `kdgrid status` need and `kdgrid.sweep_run.run_sweep` shares, so that they show the jobs a
run will start. Nothing here imports torch or transformers (the core is imported by running, not by planning), so
the commands that only plan answer without paying for them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kdgrid.bundled_sweeps import require_sweep
from kdgrid.errors import ConfigError
from kdgrid.grid import Sweep, load_sweep, plan_jobs
from kdgrid.grid.limits import DEFAULT_MAX_TRIALS
from kdgrid.launch import Executor, get_executor
from kdgrid.launch.memory import MemoryBudget
from kdgrid.trial import Trial, group_fields, group_key

AUTO_MEMORY_BUDGET = "auto"


def load_named_sweep(
    sweep: Path | str, *, store_dir: Path | str | None = None, max_trials: int = DEFAULT_MAX_TRIALS
) -> Sweep:
    """`kdgrid.grid.load_sweep` of a sweep file, or of the sweep shipped with kdgrid that a bare name names
    (`kdgrid.bundled_sweeps.find_sweep`); neither: refused naming the close bundled names (`require_sweep`).
    ``max_trials``: the most grid points it may have."""
    return load_sweep(require_sweep(sweep), store_dir=store_dir, max_trials=max_trials)


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


def _shown(value: Any) -> str:
    """A setting's value as a sweep file writes it: names bare, a knowledge list joined by ``+``, a trial's
    options as one ``{key=value, ...}`` (so an axis of options lists one entry per value, not its pairs
    flattened), an unset value as ``(none)``, as the tables write it."""
    if value is None:
        return "(none)"
    if isinstance(value, tuple):
        if value and all(isinstance(item, tuple) and len(item) == 2 for item in value):
            return "{" + ", ".join(f"{key}={item}" for key, item in value) + "}"
        return "+".join(str(item) for item in value) if value else "none"
    return str(value)


def sweep_axes(trials: Iterable[Trial]) -> dict[str, list[str]]:
    """The settings that vary across ``trials`` and their values, in the order the trials first use them: what the
    sweep's axes, overrides and includes produced (a setting every trial shares is not an axis)."""
    trials = list(trials)
    axes: dict[str, list[str]] = {}
    for name in Trial.field_names():
        values = list(dict.fromkeys(_shown(getattr(trial, name)) for trial in trials))
        if len(values) > 1:
            axes[name] = values
    return axes


def job_split(
    trials: Iterable[Trial], jobs: list[list[Trial]], max_group_size: int, budget_gb: float | None
) -> dict[str, Any]:
    """Why ``trials`` run as ``jobs``: the groups (trials sharing one teacher pass: `kdgrid.trial.group_key`), the
    group settings that differ between groups (what keeps trials apart), and the groups split into several jobs,
    with why (``--max-group-size``, else the memory budget)."""
    trials = list(trials)
    groups: dict[tuple[Any, ...], list[Trial]] = defaultdict(list)
    for trial in trials:
        groups[group_key(trial)].append(trial)
    varying = {}
    # every group's fields: some groups have fields others lack (teacher options, a source to start from)
    names = dict.fromkeys(name for group in groups.values() for name in group_fields(group[0]))
    for name in names:
        values = {str(group_fields(group[0]).get(name)) for group in groups.values()}
        if len(values) > 1:
            varying[name] = len(values)
    jobs_of: dict[tuple[Any, ...], int] = defaultdict(int)
    for job in jobs:
        jobs_of[group_key(job[0])] += 1
    split = [key for key, count in jobs_of.items() if count > 1]
    by_size = max_group_size and any(len(groups[key]) > max_group_size for key in split)
    reason = (
        f"--max-group-size {max_group_size}"
        if by_size
        else f"the memory budget ({budget_gb:.1f} GB per job)"
        if budget_gb is not None
        else "the memory budget"
    )
    return {
        "groups": len(groups),
        "group_fields_differing": varying,
        "split_groups": len(split),
        "jobs_of_split_groups": sum(jobs_of[key] for key in split),
        "split_by": reason if split else None,
    }
