"""The executor interface and the registry that builds one by name.

An executor subclasses `Executor`, whose ``run(jobs, store_dir, *, sweep, studies) -> None`` (written here once
for every executor) turns its arguments into one `kdgrid.launch.job.Launch` value and hands it to the executor's
``launch``, which runs every job (a list of trials sharing one teacher pass) through its job function (its
``job_fn`` argument, `kdgrid.launch.worker.resolve_job_fn`; default `kdgrid.launch.worker.run_job_to_store`) and
returns when they have ended. Results go to the store, never through the return value. A job may hold trials of
several studies of the sweep (they share the teacher pass all the same): ``studies`` maps each trial id to the
study its row records (`kdgrid.grid.Sweep.study_of`), and every row the executor or its jobs write, failure rows
included, takes its study from there (`kdgrid.launch.job.row_studies`).
It also says how much memory one job may use where its jobs run (``memory_budget()``): the planner's default
budget (``--memory-budget-gb auto``).

Settings carry the executor's prefix (``local_workers``, ``ray_gpus_per_job``, ``slurm_partition``), so one flat
set of ``--set KEY=VALUE`` flags can reach any executor; an unknown key raises at once, naming the allowed ones.
Each executor declares its settings as one dataclass (`kdgrid.launch.settings`): `LocalSettings`,
`RaySettings`, `SlurmSettings`.
"""

from __future__ import annotations

import abc
import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kdgrid.errors import ConfigError
from kdgrid.launch.job import Launch
from kdgrid.launch.memory import MemoryBudget
from kdgrid.trial import Trial

# name -> (module, class); modules are imported only when their executor is asked for (submitit is imported by
# the SLURM executor's module; an executor whose dependency is not installed says so when asked for).
EXECUTORS: dict[str, tuple[str, str]] = {
    "local": ("kdgrid.launch.local", "LocalExecutor"),
    "ray": ("kdgrid.launch.ray", "RayExecutor"),
    "slurm": ("kdgrid.launch.slurm", "SlurmExecutor"),
}
# Keyword arguments an executor takes besides its prefixed settings.
PLAIN_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "local": ("job_fn",),
    "ray": ("job_fn",),
    "slurm": ("job_fn", "profile", "wait", "log_dir", "poll_interval_s"),
}


class Executor(abc.ABC):
    """Where jobs run. Subclasses implement `launch` and `memory_budget`; `run` is the same for all."""

    def run(
        self,
        jobs: Sequence[Sequence[Trial]],
        store_dir: Path | str,
        *,
        sweep: str,
        studies: Mapping[str, str] | None = None,
    ) -> None:
        """Run every job; return when all have ended (their rows are in the store). Each row records ``sweep``
        and its trial's study, ``studies[trial_id]`` (``""`` for a trial ``studies`` does not name). Empty jobs
        are dropped."""
        self.launch(Launch.of(jobs, store_dir, sweep=sweep, studies=studies))

    @abc.abstractmethod
    def launch(self, launch: Launch) -> None:
        """Run every job of ``launch`` (`kdgrid.launch.job.Launch`: its jobs, the store, the sweep, the studies);
        return when all have ended."""

    @abc.abstractmethod
    def memory_budget(self) -> MemoryBudget:
        """The memory (GiB) one job's students may need together on the machine where this executor runs jobs,
        with where that figure came from (``gb`` None: unknown, no budget). Derived from the machine and the
        settings (how many jobs share a GPU or a node); `kdgrid.launch.memory` has the readers. Cheap: it must
        not start a runtime or submit anything."""


def get_executor(name: str, **settings: Any) -> Executor:
    """Build the executor ``name`` (``local``, ``ray`` or ``slurm``) with its settings.

    Raises:
        ConfigError: an unknown executor, a setting of another executor (``slurm_partition`` given to ``local``)
            or a setting the executor does not have (the executor names the allowed ones).
    """
    if name not in EXECUTORS:
        raise ConfigError(f"unknown executor {name!r}; allowed: {', '.join(EXECUTORS)}")
    foreign = sorted(
        key for key in settings for other in EXECUTORS if other != name and key.startswith(f"{other}_")
    )
    if foreign:
        raise ConfigError(
            f"setting(s) {', '.join(foreign)} belong to another executor than {name!r}; "
            f"{name} settings start with '{name}_'"
        )
    plain = set(PLAIN_ARGUMENTS[name])
    unprefixed = sorted(k for k in settings if not k.startswith(f"{name}_") and k not in plain)
    if unprefixed:
        raise ConfigError(
            f"executor {name!r}: setting(s) {', '.join(unprefixed)} must carry the prefix '{name}_' "
            f"(e.g. {name}_{unprefixed[0]}); other arguments allowed: {', '.join(sorted(plain))}"
        )
    module_name, class_name = EXECUTORS[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(f"executor {name!r} is not available here: {error}") from None
    return getattr(module, class_name)(**settings)
