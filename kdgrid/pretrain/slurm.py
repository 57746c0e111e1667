"""A pre-training run as ONE SLURM job of one task per GPU across nodes: what its tasks run (`PretrainTask`) and
the job's shape. It is submitted through the same submitter as trials (`kdgrid.launch.slurm.submitter`,
`submit_one`): the same profile translation, job variables, requeue limit and refusal message.

``kdgrid pretrain ... --slurm PROFILE --nodes 4`` reads the profile as trials do (`kdgrid.launch.slurm`: a name
in ``kdgrid/launch/slurm_profiles`` or ``$KDGRID_SLURM_PROFILES``, or a YAML path) and submits one job of
``nodes x tasks_per_node`` tasks. For pre-training the profile's keys read as follows:

- ``gpus``: the GPUs of each node; one task per GPU (``--ntasks-per-node=gpus``, ``--gpus-per-node=gpus``).
  Without GPUs, ``tasks_per_node`` tasks per node (CPU processes on gloo; default 1).
- ``cpus_per_task``, ``time``, ``partition``, ``account``, ``qos``, ``constraint``, ``exclude``, ``setup``,
  ``additional_parameters``, ``job_name``: as for trials; ``mem_gb``: the memory of each node's share.
- ``signal_delay_s``, ``max_num_timeout``: SLURM sends ``SIGUSR2`` this long before the time limit, and a job is
  requeued at most this many times after a time limit (a preemption does not count).

Every task runs `PretrainTask`: it finds the rendezvous from the job's node list (``MASTER_ADDR``, the first
node; ``MASTER_PORT`` from the job id, `kdgrid.pretrain.processes.slurm_rendezvous`) and runs the recipe with
``SLURM_PROCID`` as its rank. The requeue contract is the trials': at a time limit (``SIGUSR2``) or a preemption
(``SIGTERM``) every task stops after the same step, process 0 writes the step checkpoint
(`kdgrid.pretrain.preemption`), and then hands the signal to submitit, which calls `PretrainTask.checkpoint` (the
task resubmitted unchanged: its state is on disk) and requeues the job; the requeued job resumes from the
checkpoint. submitit's folder (scripts, pickles, logs) is ``<cache>/pretrained/<key>.slurm/<job id>/`` unless
given; ``KDGRID_CACHE`` must be on a filesystem all nodes share.
"""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import submitit
from submitit.helpers import Checkpointable, DelayedSubmission

from kdgrid.core.pretrained import artifacts
from kdgrid.core.pretrained.recipe import PretrainRecipe
from kdgrid.errors import ConfigError, LaunchError
from kdgrid.launch.slurm import (
    SlurmSettings,
    check_partition,
    resolve_settings,
    shield_requeue_from_sigterm,
    submit_one,
    submitter,
)
from kdgrid.plugins import load_plugins_or_exit
from kdgrid.pretrain.processes import slurm_rendezvous
from kdgrid.pretrain.train import RunSettings, preflight, run_pretrain

LOG_SUFFIX = ".slurm"


@dataclass(frozen=True)
class JobShape:
    """How many nodes the job takes and how many tasks (processes: one per GPU) run on each."""

    nodes: int
    tasks_per_node: int

    @property
    def world_size(self) -> int:
        return self.nodes * self.tasks_per_node


def job_shape(settings: SlurmSettings, nodes: int, tasks_per_node: int | None) -> JobShape:
    """``nodes`` x (``tasks_per_node``, else the profile's GPUs per node, else 1); with GPUs the tasks must be
    one per GPU. `ConfigError` otherwise."""
    if nodes < 1:
        raise ConfigError(f"--nodes must be at least 1, got {nodes}")
    tasks = tasks_per_node if tasks_per_node is not None else (settings.gpus or 1)
    if tasks < 1:
        raise ConfigError(f"--tasks-per-node must be at least 1, got {tasks}")
    if settings.gpus and tasks != settings.gpus:
        raise ConfigError(
            f"--tasks-per-node {tasks}: a pre-training job runs one task per GPU, and the profile gives "
            f"{settings.gpus} GPU(s) per node (slurm_gpus)"
        )
    return JobShape(nodes, tasks)


def log_folder(recipe: PretrainRecipe) -> Path:
    """submitit's folder for ``recipe``'s jobs (``%j``: the job id), beside the artifact."""
    return artifacts.pretrained_root() / f"{recipe.key}{LOG_SUFFIX}" / "%j"


@dataclass
class PretrainTask(Checkpointable):  # type: ignore[misc]
    """What each task of the job runs (pickled by submitit; the recipe as its dict)."""

    recipe: dict[str, Any]
    settings: RunSettings

    def __call__(self) -> dict[str, Any]:
        """Run the recipe as this task's process; returns process 0's summary (the artifact's path, the steps).
        Stopped by a signal, process 0 hands it to submitit, which requeues the job and exits."""
        load_plugins_or_exit()  # plugins' knowledge functions (KDGRID_PLUGINS exported by the script, entry points)
        environment = submitit.JobEnvironment()
        for name, value in slurm_rendezvous(environment.hostnames, environment.raw_job_id).items():
            os.environ.setdefault(name, value)
        recipe = PretrainRecipe.from_dict(self.recipe)
        outcome = run_pretrain(recipe, self.settings)
        summary = {
            "key": recipe.key,
            "path": str(outcome.path) if outcome.path else None,
            "steps": outcome.steps_done,
            "finished": outcome.finished,
            "stopped_by": outcome.stopped_by,
        }
        if outcome.stopped_by is not None and environment.global_rank == 0:
            _requeue_through_submitit()
        return summary

    def checkpoint(self, *args: Any, **kwargs: Any) -> DelayedSubmission:
        """Called by submitit before it requeues the job: the same task again (the state is on disk)."""
        print(
            f"kdgrid: requeueing pre-training {self.recipe.get('student')} after its step checkpoint",
            flush=True,
        )
        return DelayedSubmission(self, *args, **kwargs)


def _requeue_through_submitit() -> None:
    """Call submitit's handler of the time-limit signal (restored once the run returned): it calls
    `PretrainTask.checkpoint`, requeues the job (counting a time limit against ``max_num_timeout``) and exits."""
    handler = signal.getsignal(signal.SIGUSR2)
    if not callable(handler):
        raise LaunchError("stopped by a signal, but submitit's requeue handler is not installed")
    shield_requeue_from_sigterm()
    handler(signal.SIGUSR2, None)


def submit(
    recipe: PretrainRecipe,
    run_settings: RunSettings,
    profile: str | Path | SlurmSettings,
    *,
    nodes: int = 1,
    tasks_per_node: int | None = None,
    folder: Path | None = None,
) -> Any:
    """Check everything that can be checked here (the profile, the partition, the recipe against the job's
    world size), then submit the job; returns the submitit job. ``profile``: a profile (name or path), or the
    settings a `kdgrid.launch.slurm.SlurmExecutor` resolved (its profile and ``slurm_*`` flags)."""
    settings = profile if isinstance(profile, SlurmSettings) else resolve_settings(profile, {})
    shape = job_shape(settings, nodes, tasks_per_node)
    preflight(recipe, run_settings, world_size=shape.world_size)
    check_partition(settings.partition)
    executor = submitter(
        settings, folder or log_folder(recipe), nodes=shape.nodes, tasks_per_node=shape.tasks_per_node
    )
    job = submit_one(executor, PretrainTask(recipe.to_dict(), run_settings), what="the pre-training job")
    print(
        f"slurm: submitted pre-training {recipe.student} ({recipe.key[:12]}) as job {job.job_id}: "
        f"{shape.nodes} node(s) x {shape.tasks_per_node} task(s); logs in {job.paths.folder}",
        file=sys.stderr,
        flush=True,
    )
    return job


def wait(job: Any) -> dict[str, Any]:
    """Wait for ``job`` (through its requeues) and return process 0's summary; `LaunchError` if it failed."""
    try:
        return job.results()[0]  # type: ignore[no-any-return]
    except Exception as error:
        raise LaunchError(
            f"pre-training job {job.job_id} failed: {str(error).strip()[-1500:]} (logs in {job.paths.folder})"
        ) from None
