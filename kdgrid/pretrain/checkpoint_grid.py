"""A sweep's missing pre-training checkpoints made as a grid of their own, before any of its trials runs
(`kdgrid run --make-checkpoints`): one job per checkpoint (recipe key: one per student shape of Tables 1 and 2),
through the executor the run uses. docs/pretrain.md, "Making a sweep's checkpoints".

One function per executor (`MAKERS`), each making every missing checkpoint and returning how each ended:

- ``local``: one after another, each in a ``kdgrid pretrain`` child process (a crash or an out-of-memory kill
  costs that checkpoint only), data-parallel over the GPUs the local executor uses (``local_gpus``, else the
  visible ones; one process per GPU through torchrun), one process without a GPU. The child's progress bar shows
  on this terminal; its standard error is also appended to ``<cache>/pretrained/<key>.local.log``.
- ``ray``: one Ray task per checkpoint, as many at once as the resources allow, each running the same child with
  ``ray_gpus_per_job`` GPUs (one process per whole GPU) and ``ray_cpus_per_job`` CPUs; its standard error goes
  to ``<key>.ray.log``.
- ``slurm``: one `kdgrid.pretrain.slurm` job per checkpoint (``nodes`` nodes, one task per GPU) through the
  run's profile and ``slurm_*`` settings, all submitted first, then waited for together (through their requeues),
  each reported as it ends; submitit's logs in ``<key>.slurm/<job id>/``.

A checkpoint that another run is making meanwhile is waited for where its job runs (`kdgrid.pretrain.claim`). A
checkpoint that fails keeps its step checkpoints: making it again resumes from the newest; those made stay.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kdgrid.assets import cache_dir
from kdgrid.core.pretrained import artifacts
from kdgrid.core.pretrained.needed import NeededCheckpoint
from kdgrid.core.pretrained.recipe import PretrainRecipe
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.launch.environment import job_variables
from kdgrid.launch.local import LocalExecutor
from kdgrid.launch.ray import RayExecutor
from kdgrid.plugins import plugin_environment
from kdgrid.pretrain.child import ChildOutcome, pretrain_command, run_child, write_recipe
from kdgrid.pretrain.train import RunSettings

if TYPE_CHECKING:
    from kdgrid.launch.slurm import SlurmExecutor

Log = Callable[[str], None]
# Sequences per forward pass at most, unless the run gives --pretrain-micro-batch (`kdgrid pretrain`'s default).
MICRO_BATCH_CAP = RunSettings.micro_batch
MADE, PRESENT, FAILED = "made", "already there", "FAILED"


def auto_micro_batch(global_batch: int, world_size: int) -> int:
    """The largest micro-batch up to `MICRO_BATCH_CAP` that divides each process's share of the global batch
    (so the recipe's batch is kept); `MICRO_BATCH_CAP` when the processes do not divide the global batch at all
    (the run refuses that with its own message)."""
    share, rest = divmod(global_batch, world_size)
    if rest or share < 1:
        return MICRO_BATCH_CAP
    return max(size for size in range(1, min(share, MICRO_BATCH_CAP) + 1) if share % size == 0)


@dataclass(frozen=True)
class CheckpointJobSettings:
    """How `kdgrid run --make-checkpoints` makes checkpoints (nothing here is part of a recipe's key).

    Attributes:
        micro_batch: sequences per forward pass on one process (``--pretrain-micro-batch``); ``None``:
            `auto_micro_batch` of each recipe for its job's processes.
        checkpoint_every: a step checkpoint every this many optimizer steps (``--pretrain-checkpoint-every``):
            what a job killed without warning loses at most.
        nodes: nodes of each SLURM job (``--pretrain-nodes``; one task per GPU on each); the other executors make
            each checkpoint on one machine.
    """

    micro_batch: int | None = None
    checkpoint_every: int = RunSettings.checkpoint_every
    nodes: int = 1

    def __post_init__(self) -> None:
        for option, value in (
            ("--pretrain-micro-batch", self.micro_batch),
            ("--pretrain-checkpoint-every", self.checkpoint_every),
            ("--pretrain-nodes", self.nodes),
        ):
            if value is not None and value < 1:
                raise ConfigError(f"{option} must be at least 1, got {value}")

    def run_settings(self, recipe: PretrainRecipe, world_size: int, *, progress: bool) -> RunSettings:
        """The `RunSettings` of ``recipe``'s job of ``world_size`` processes."""
        micro_batch = self.micro_batch or auto_micro_batch(recipe.global_batch, world_size)
        return RunSettings(micro_batch=micro_batch, checkpoint_every=self.checkpoint_every, progress=progress)


@dataclass(frozen=True)
class MadeCheckpoint:
    """How one needed checkpoint ended: `MADE`, `PRESENT` (there before the run) or `FAILED`; the seconds its
    job took, where its log is and, failed, its error."""

    needed: NeededCheckpoint
    outcome: str
    seconds: float = 0.0
    log: str = ""
    error: str = ""

    @property
    def failed(self) -> bool:
        return self.outcome == FAILED

    def line(self) -> str:
        """The line `kdgrid run` prints for this checkpoint."""
        what = self.needed.describe()
        if self.outcome == PRESENT:
            return f"checkpoint already there: {what}: {self.needed.path}"
        took = f"{self.seconds:.1f} s"
        if self.outcome == MADE:
            return f"checkpoint made in {took}: {what}: {self.needed.path} (log: {self.log})"
        return f"checkpoint FAILED after {took}: {what}: {self.error} (log: {self.log})"


def make_missing(
    needed: list[NeededCheckpoint],
    executor: str,
    runner: Any,
    settings: CheckpointJobSettings,
    log: Log,
) -> list[MadeCheckpoint]:
    """Make every checkpoint of ``needed`` not present yet through ``executor`` (its built ``runner``), one job
    each; one line per checkpoint through ``log``. Returns how each of ``needed`` ended, in order; a failed
    checkpoint is reported there, never raised.

    Raises:
        ConfigError: an executor that cannot make checkpoints, or settings its jobs cannot have (nothing has
            started then).
    """
    ended: dict[str, MadeCheckpoint] = {}
    for present in (n for n in needed if n.present):
        ended[present.key] = MadeCheckpoint(present, PRESENT)
        log(ended[present.key].line())
    missing = [n for n in needed if not n.present]
    if missing:
        maker = MAKERS.get(executor)
        if maker is None:
            raise ConfigError(
                f"--make-checkpoints: the {executor!r} executor cannot make checkpoints; allowed: {', '.join(MAKERS)}"
            )
        log(f"making {len(missing)} pre-training checkpoint(s) through the {executor} executor, one job each, "
            "before any trial")  # fmt: skip
        for made in maker(missing, runner, settings, log):
            ended[made.needed.key] = made
    return [ended[n.key] for n in needed]


def failure_message(made: list[MadeCheckpoint]) -> str:
    """The message of a run stopped by checkpoints that could not be made: each with its error and log."""
    failed = [m for m in made if m.failed]
    lines = [f"{len(failed)} of {len(made)} pre-training checkpoint(s) could not be made, so no trial ran:"]
    lines += [f"  {m.needed.describe()}: {m.error} (log: {m.log})" for m in failed]
    lines.append(
        "Run the same command again (after fixing what a refusal says): the checkpoints made stay, and each "
        "failed one resumes from its newest step checkpoint."
    )
    return "\n".join(lines)


def _ended(needed: NeededCheckpoint, child: ChildOutcome, log: Path | str) -> MadeCheckpoint:
    """`MADE` when the checkpoint is there after its job, else `FAILED` with the job's error."""
    if artifacts.exists(needed.use.recipe):
        return MadeCheckpoint(needed, MADE, child.seconds, str(log))
    if child.status == 0:
        error = "its run ended without the checkpoint"
    else:
        error = f"exit status {child.status}" + (f": {child.error}" if child.error else "")
    return MadeCheckpoint(needed, FAILED, child.seconds, str(log), error)


def _child_variables() -> dict[str, str]:
    """What a checkpoint's child process needs from this one: the Hub's variables, the plugins loaded here, and
    the kdgrid cache this run checks for the checkpoint."""
    return {**job_variables(), **plugin_environment(), "KDGRID_CACHE": str(cache_dir())}


def _command(recipe: PretrainRecipe, settings: RunSettings, processes: int) -> list[str]:
    return pretrain_command(write_recipe(recipe, artifacts.recipe_path(recipe)), settings, processes)


def make_locally(
    missing: list[NeededCheckpoint], runner: LocalExecutor, settings: CheckpointJobSettings, log: Log
) -> list[MadeCheckpoint]:
    """One child process after another, each over every GPU of the local executor (see the module docstring)."""
    gpus = runner.gpus()
    processes = max(1, len(gpus))
    env = {**os.environ, **_child_variables()}
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    where = f"{processes} process(es) on GPU(s) {','.join(gpus)}" if gpus else "1 process on the CPU"
    ended = []
    for needed in missing:
        recipe = needed.use.recipe
        log(f"making {needed.describe()}: {where}")
        log_file = artifacts.log_path(recipe, runner.name)
        run = settings.run_settings(recipe, processes, progress=runner.settings.progress)
        child = run_child(_command(recipe, run, processes), env, log=log_file, cwd=Path.cwd())
        ended.append(_ended(needed, child, log_file))
        log(ended[-1].line())
    return ended


def run_child_in_ray_task(command: list[str], variables: dict[str, str], log: str, cwd: str) -> ChildOutcome:
    """A Ray task's body: the child in the driver's working directory (relative paths of a recipe mean it),
    with the driver's variables on top of the worker's environment (Ray has set its GPUs there)."""
    return run_child(command, {**os.environ, **variables}, log=Path(log), cwd=Path(cwd))


def make_on_ray(
    missing: list[NeededCheckpoint], runner: RayExecutor, settings: CheckpointJobSettings, log: Log
) -> list[MadeCheckpoint]:
    """One Ray task per checkpoint, all submitted at once (see the module docstring)."""
    import ray  # seconds to import: only a run that makes checkpoints on Ray pays for it

    gpus = runner.settings.gpus_per_job
    processes = max(1, int(gpus))
    task = ray.remote(num_cpus=runner.settings.cpus_per_job, num_gpus=gpus, max_retries=0)(
        run_child_in_ray_task
    )
    ended = []
    with runner.runtime():
        jobs: dict[Any, tuple[NeededCheckpoint, Path]] = {}
        for needed in missing:
            recipe = needed.use.recipe
            log_file = artifacts.log_path(recipe, runner.name)
            command = _command(recipe, settings.run_settings(recipe, processes, progress=False), processes)
            reference = task.remote(command, _child_variables(), str(log_file), str(Path.cwd()))
            jobs[reference] = (needed, log_file)
        log(f"ray: {len(jobs)} checkpoint task(s) submitted ({runner.settings.cpus_per_job:g} CPU, {gpus:g} GPU "
            "each)")  # fmt: skip
        began = time.monotonic()
        waiting = list(jobs)
        while waiting:
            done, waiting = ray.wait(waiting, num_returns=1)
            needed, log_file = jobs[done[0]]
            try:
                child = ray.get(done[0])
            except Exception as error:  # the task's worker died, or Ray could not run it
                child = ChildOutcome(-1, str(error).strip().splitlines()[-1][:500], time.monotonic() - began)
            ended.append(_ended(needed, child, log_file))
            log(ended[-1].line())
    return ended


def make_on_slurm(
    missing: list[NeededCheckpoint], runner: SlurmExecutor, settings: CheckpointJobSettings, log: Log
) -> list[MadeCheckpoint]:
    """One SLURM job per checkpoint, all submitted before any is waited for, each reported as it ends (see the
    module docstring)."""
    from kdgrid.pretrain import slurm as pretrain_slurm  # submitit: only a run on SLURM needs it

    shape = pretrain_slurm.job_shape(runner.settings, settings.nodes, None)  # a bad shape: refused now
    ended: dict[str, MadeCheckpoint] = {}
    submitted = []
    for needed in missing:
        recipe = needed.use.recipe
        began = time.monotonic()
        run = settings.run_settings(recipe, shape.world_size, progress=False)
        try:
            job = pretrain_slurm.submit(recipe, run, runner.settings, nodes=settings.nodes)
        except KdgridError as error:  # this recipe refused, or sbatch refused its job: the others still go
            folder = pretrain_slurm.log_folder(recipe).parent
            ended[needed.key] = MadeCheckpoint(needed, FAILED, 0.0, str(folder), str(error))
            log(ended[needed.key].line())
            continue
        submitted.append((needed, job, began))
    while submitted:  # each job reported as it ends (through its requeues), with its own time
        finished = [entry for entry in submitted if entry[1].done()]
        if not finished:
            time.sleep(runner.poll_interval_s)
            continue
        for entry in finished:
            submitted.remove(entry)
            needed, job, began = entry
            try:
                pretrain_slurm.wait(job)
                child = ChildOutcome(0, "", time.monotonic() - began)
            except KdgridError as error:
                child = ChildOutcome(1, str(error), time.monotonic() - began)
            ended[needed.key] = _ended(needed, child, job.paths.folder)
            log(ended[needed.key].line())
    return [ended[n.key] for n in missing]


# executor name -> its maker: the one place that says how each executor makes checkpoints.
Maker = Callable[[list[NeededCheckpoint], Any, CheckpointJobSettings, Log], list[MadeCheckpoint]]
MAKERS: dict[str, Maker] = {
    "local": make_locally,
    "ray": make_on_ray,
    "slurm": make_on_slurm,
}
