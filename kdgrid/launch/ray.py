"""The Ray Tune executor: one Tune trial per job, results written into the store by the job itself.

- Each job (trials sharing one teacher pass, possibly of several studies) is one Tune trial, run by ``job_fn``
  (default `kdgrid.launch.worker.run_job_to_store`) inside a Ray actor; the store must be reachable from every
  node. Each row records its trial's study (``studies``: trial id -> study).
- ``ray_gpus_per_job`` may be a fraction: with 0.25, four small jobs share one GPU. Ray's GPU count is logical,
  so packing can be set up (and tested) on a machine without a GPU by giving ``ray_num_gpus``.
- ``reuse_actors`` (default on) keeps an actor alive between jobs: the Python start-up and imports (torch,
  transformers) are paid once per actor, not once per job.
- Works with a local runtime (``ray.init(num_cpus=..., include_dashboard=False)``, started and stopped here) or
  an existing cluster (``ray_address="auto"`` or ``"ray://host:10001"``; see slurm/README.md for Ray on SLURM).
  Jobs get the driver's Hugging Face variables (offline switches, cache locations) and ``KDGRID_PLUGINS``
  (`kdgrid.launch.environment.job_variables`) through the runtime env of a cluster joined here and, in any case,
  from the trainable itself (a runtime the caller started before kdgrid ran included).
- ``Tuner.fit()`` does not raise when a trial fails: the executor checks ``num_errors`` and raises `LaunchError`
  naming the failed jobs after all jobs have ended. A trial that fails inside a job gets a failed row from the job
  itself; for a job whose actor died (killed, out of memory) the executor writes a failed row (``JobLost``) for
  each trial that got no row, so ``kdgrid status`` shows why and ``kdgrid resume`` runs exactly those again. Once
  ``fit()`` has returned every Tune trial has ended, so their claims (`kdgrid.store.claims`) are stale at once
  (``finished_jobs``), even those of an actor on another node, whose process cannot be probed from here.
- The default memory budget of a job (``--memory-budget-gb auto``, `RayExecutor.memory_budget`) is read on this
  machine: ``ray_gpus_per_job`` of the smallest visible GPU's memory, or without GPU jobs the RAM divided by the
  jobs that can run at once. With ``ray_address`` the nodes may differ from this machine: give the budget then.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kdgrid.cpus import usable_cpus
from kdgrid.device_sharing import SHARING_VARIABLE, ray_sharing
from kdgrid.errors import ConfigError, LaunchError
from kdgrid.launch import memory
from kdgrid.launch.base import Executor
from kdgrid.launch.environment import apply_environment, job_variables
from kdgrid.launch.job import JobFn, Launch, run_pending, touch_run_marker
from kdgrid.launch.memory import MemoryBudget
from kdgrid.launch.settings import ExecutorSettings, setting
from kdgrid.launch.threads import training_threads, use_threads
from kdgrid.launch.worker import resolve_job_fn
from kdgrid.plugins import load_plugins
from kdgrid.store.claims import ray_job_holder
from kdgrid.store.read import done_trial_ids
from kdgrid.trial import Trial

# Ray is imported inside the functions that need it: it takes seconds to import and is needed only once a
# RayExecutor runs (building one, e.g. for its memory budget, must stay cheap).


@dataclass(frozen=True)
class RaySettings(ExecutorSettings):
    """The Ray executor's settings (``--set ray_<name>=VALUE``)."""

    PREFIX = "ray_"

    address: str | None = setting(
        None, "an existing Ray cluster ('auto', 'ray://host:10001'); none = start a local runtime"
    )
    num_cpus: int | None = setting(
        None, "CPUs of the local runtime (default: those this process may use: affinity mask, cgroup quota)"
    )
    num_gpus: int | None = setting(
        None, "GPUs of the local runtime; logical, so it may exceed the real count for testing"
    )
    cpus_per_job: float = setting(1.0, "CPUs each job reserves")
    gpus_per_job: float = setting(
        0.0, "GPUs each job reserves; a fraction lets several small jobs share one GPU (above 1: whole)"
    )
    reuse_actors: bool = setting(True, "keep actors between jobs")
    max_concurrent: int | None = setting(
        None, "at most this many jobs at once (default: as many as resources allow)"
    )
    max_failures: int = setting(
        0, "times Tune retries a job whose actor died (the core resumes from checkpoints)"
    )
    storage_path: str | None = setting(None, "where Tune keeps its experiment folder (default <store>/_ray)")
    verbose: int = setting(0, "Tune's verbosity, 0-3 (0: kdgrid prints its own progress lines)")

    def __post_init__(self) -> None:
        if self.gpus_per_job > 1 and not self.gpus_per_job.is_integer():
            raise ConfigError(f"{self.PREFIX}gpus_per_job: above 1 it must be whole, got {self.gpus_per_job}")


def run_one_job(
    config: dict[str, Any],
    *,
    jobs: Sequence[list[Trial]],
    store_dir: str,
    sweep: str,
    studies: Mapping[str, str],
    job_fn: JobFn,
    workdir: str | None = None,
    environment: Mapping[str, str] | None = None,
) -> None:
    """The Tune trainable: run job ``config["job"]`` in the driver's working directory ``workdir``, with the
    driver's variables ``environment`` (`kdgrid.launch.environment.job_variables`: offline switches, cache
    locations, ``KDGRID_PLUGINS``) and the plugins they name loaded, and report how many trials it held.

    Tune moves each trial into its own folder; relative paths of a sweep (``init_from``, a teacher or task
    directory) mean the directory `kdgrid` was run in, so the job goes back there (on another node, the same
    path of a shared filesystem).

    Module-level (not a closure) so Ray pickles it by reference; the jobs and ``studies`` (trial id -> study
    of every job's trials) travel through Ray's object store (`tune.with_parameters`), not inside every
    trial's config. A job Tune retries after its actor died (``ray_max_failures``) skips the trials it finished
    before.
    """
    from ray import tune

    if environment:
        # The actor may belong to a cluster joined by a ray.init() without them (the caller's own, before kdgrid
        # ran); huggingface_hub may be imported already in a reused actor: `apply_environment` syncs it.
        apply_environment(environment)
    load_plugins()
    use_threads(training_threads(None))  # `kdgrid.launch.threads`: Ray sets OMP_NUM_THREADS to the actor's CPUs
    if workdir is not None:
        try:
            os.chdir(workdir)
        except OSError as error:
            raise LaunchError(
                f"Ray job {config['job']}: the driver's working directory {workdir} is not reachable on this "
                f"node ({error.strerror or error}); relative paths of the sweep resolve against it"
            ) from None
    store = Path(store_dir)
    ran = run_pending(
        job_fn, jobs[config["job"]], store, sweep=sweep, studies=studies, done=done_trial_ids(store)
    )
    tune.report({"trials": len(ran), "finished": 1})


class RayExecutor(Executor):
    """Run jobs as Ray Tune trials (one per job) and wait for all of them.

    Args:
        job_fn: what each job runs (a callable or ``module:function``, importable by reference: Ray pickles
            it); default `kdgrid.launch.worker.run_job_to_store`.
        **settings: ``ray_*`` keys of `RaySettings` (the prefix may be left out).
    """

    name = "ray"

    def __init__(self, *, job_fn: JobFn | str | None = None, **settings: Any) -> None:
        self.settings = RaySettings.from_flags(settings)
        self.job_fn = resolve_job_fn(job_fn)
        self.last_result_grid: Any = None

    def concurrent_jobs(self) -> tuple[int, str]:
        """How many jobs can run at once on a local runtime, and why: the smallest of ``ray_max_concurrent``,
        CPUs / ``ray_cpus_per_job`` and (with GPU jobs) ``ray_num_gpus`` / ``ray_gpus_per_job``; CPUs are
        ``ray_num_cpus`` or those this process may use (`kdgrid.cpus.usable_cpus`), as the local runtime gets."""
        s = self.settings
        cpus = s.num_cpus or usable_cpus()
        limits: list[tuple[int, str]] = []
        if s.max_concurrent:
            limits.append((s.max_concurrent, "ray_max_concurrent"))
        if s.cpus_per_job > 0:
            limits.append((int(cpus // s.cpus_per_job), f"{cpus} CPUs / {s.cpus_per_job:g} per job"))
        if s.gpus_per_job > 0 and s.num_gpus is not None:
            limits.append((int(s.num_gpus // s.gpus_per_job),
                           f"{s.num_gpus} GPUs / {s.gpus_per_job:g} per job"))  # fmt: skip
        if not limits:  # no CPU or GPU reservation: Tune starts about one job per core
            limits.append((cpus, f"{cpus} CPUs"))
        jobs, why = min(limits, key=lambda limit: limit[0])
        return max(1, jobs), why

    def job_environment(self) -> dict[str, str]:
        """The variables every job runs with: the driver's (`job_variables`) and how its device is shared, which
        its rows record beside the latency (`kdgrid.device_sharing`: the GPU fraction, or the jobs at once on the
        CPUs)."""
        sharing = ray_sharing(self.settings.gpus_per_job, self.concurrent_jobs()[0])
        return {**job_variables(), SHARING_VARIABLE: sharing}

    def memory_budget(self) -> MemoryBudget:
        """The memory one job may use: `memory.SAFETY_FRACTION` of ``ray_gpus_per_job`` of the smallest visible
        GPU's memory (a job uses one GPU at most), or of the RAM (capped by the cgroup limit) divided by
        `concurrent_jobs` when jobs take no GPU or this machine has none."""
        fraction = self.settings.gpus_per_job
        gpus = memory.gpu_memory_gb() if fraction > 0 else []
        if gpus:
            share = min(fraction, 1.0)
            return memory.per_job(min(gpus), "of GPU memory (the smallest visible GPU)", 1 / share,
                                  f"{1 / share:g} jobs per GPU (ray_gpus_per_job {fraction:g})")  # fmt: skip
        jobs, why = self.concurrent_jobs()
        budget = memory.per_job(memory.ram_gb(), "of RAM", jobs, f"{jobs} concurrent job(s) ({why})")
        if fraction > 0:  # logical GPUs (tests) or a remote cluster's: their memory is not known here
            return MemoryBudget(budget.gb, budget.basis + "; no GPU visible here, so RAM sizes the jobs")
        return budget

    @contextlib.contextmanager
    def runtime(self) -> Iterator[None]:
        """Ray as this executor runs its jobs: the cluster joined or a local runtime started (and shut down after,
        if started here), its resources checked against one job's (`_check_resources`)."""
        import ray

        started = self._init_ray()
        try:
            self._check_resources()
            yield
        finally:
            if started:
                ray.shutdown()

    def _init_ray(self) -> bool:
        """Connect to the cluster or start a local runtime; True if this call started it."""
        import ray

        if ray.is_initialized():
            return False
        s = self.settings
        if s.address:
            # A joined cluster's workers do not inherit this process's environment: they start with the Hub's
            # variables (set by `kdgrid.sweep_run` once everything is cached) and KDGRID_PLUGINS from the runtime
            # env, before any import; `run_one_job` applies them again for a cluster this process had joined already.
            variables = job_variables()
            runtime_env = {"env_vars": variables} if variables else None
            ray.init(address=s.address, log_to_driver=False, runtime_env=runtime_env)
        else:
            # address="local": always a new runtime, even where `ray start` left a cluster address file behind;
            # CPUs: those this process may use, not the machine's cores (SLURM or a container may grant fewer).
            ray.init(
                address="local",
                num_cpus=s.num_cpus or usable_cpus(),
                num_gpus=s.num_gpus,
                include_dashboard=False,
                log_to_driver=False,
            )
        return True

    def _check_resources(self) -> None:
        """Refuse at once a job that could never be placed (e.g. 1 GPU per job on a runtime without GPUs)."""
        import ray

        total = ray.cluster_resources()
        need = {"CPU": self.settings.cpus_per_job, "GPU": self.settings.gpus_per_job}
        short = {name: amount for name, amount in need.items() if amount > total.get(name, 0.0)}
        if short:
            have = {name: total.get(name, 0.0) for name in need}
            raise ConfigError(f"each job asks for {need} but the Ray cluster has {have}: lower ray_cpus_per_job / "
                              "ray_gpus_per_job or give the runtime more (ray_num_cpus, ray_num_gpus)")  # fmt: skip

    def launch(self, launch: Launch) -> None:
        """Run every job as one Tune trial; raise `LaunchError` afterwards if any did not finish. Each row
        records the sweep and its trial's study."""
        if not launch.jobs:
            return
        launch = launch.resolved()
        jobs, store_dir, sweep, study_of = launch.trial_lists(), launch.store, launch.sweep, dict(launch.studies)
        import ray
        from ray import tune

        storage = Path(self.settings.storage_path or store_dir / "_ray").resolve()
        marker = touch_run_marker(store_dir, f"ray-{uuid.uuid4().hex}")
        started = self._init_ray()
        try:
            self._check_resources()
            trainable = tune.with_parameters(
                run_one_job,
                jobs=jobs,
                store_dir=str(store_dir),
                sweep=sweep,
                studies=study_of,
                job_fn=self.job_fn,
                workdir=str(Path.cwd()),
                environment=self.job_environment(),
            )
            resources = {"cpu": self.settings.cpus_per_job, "gpu": self.settings.gpus_per_job}
            if not self.settings.verbose:
                # Tune's newer console output prints a configuration box regardless of verbose=0.
                os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
            progress = _progress_callback(len(jobs))
            tuner = tune.Tuner(
                tune.with_resources(trainable, resources),
                param_space={"job": tune.grid_search(list(range(len(jobs))))},
                tune_config=tune.TuneConfig(
                    reuse_actors=self.settings.reuse_actors,
                    max_concurrent_trials=self.settings.max_concurrent,
                ),
                run_config=tune.RunConfig(
                    name=_experiment_name(sweep),
                    storage_path=str(storage),
                    verbose=self.settings.verbose,
                    failure_config=tune.FailureConfig(max_failures=self.settings.max_failures),
                    callbacks=[progress],
                ),
            )
            _say(f"ray: running {len(jobs)} job(s) ({resources['cpu']:g} CPU, {resources['gpu']:g} GPU each)")
            grid = tuner.fit()
            self.last_result_grid = grid
            if grid.num_errors:
                # fit() has returned: every Tune trial it started has ended, so the claims of their jobs are stale
                # now, whatever their heartbeat says (a dead actor on another node cannot be probed from here).
                ended = {ray_job_holder(trial_id) for trial_id in progress.trial_ids}
                failed, lost = [], 0
                for result in grid:
                    if result.error is None:
                        continue
                    index = result.config["job"]
                    reason = f"Ray job {index} ended with an error: {_first_line(result.error)}"
                    failed.append(f"job {index} ({len(jobs[index])} trial(s)): {_first_line(result.error)}")
                    recorded = launch.jobs[index].record_lost(marker=marker, reason=reason, finished_jobs=ended)
                    lost += len(recorded)
                raise LaunchError(
                    f"{grid.num_errors} of {len(jobs)} Ray job(s) did not finish: {'; '.join(failed[:10])}; "
                    f"{lost} trial(s) left unfinished got a failed row. `kdgrid status` lists them, "
                    "`kdgrid resume` runs them again."
                )
        finally:
            marker.unlink(missing_ok=True)
            if started:
                ray.shutdown()


def _experiment_name(sweep: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', sweep) or 'sweep'}-{stamp}"


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    # Ray wraps the job's exception; its last line names the original error.
    return (text[-1] if text else type(error).__name__)[:300]


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _progress_callback(total: int) -> Any:
    """A Tune callback printing one line whenever a job finishes or fails, and keeping the ids of the Tune trials
    that started (``trial_ids``; built here: ray imports lazily)."""
    from ray.tune import Callback

    class ProgressCallback(Callback):  # type: ignore[misc]
        def __init__(self) -> None:
            self.done = 0
            self.failed = 0
            self.trial_ids: set[str] = set()

        def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
            self.trial_ids.add(str(trial.trial_id))

        def _print(self) -> None:
            remaining = total - self.done - self.failed
            _say(f"ray: {self.done} finished, {self.failed} failed, {remaining} remaining (of {total} jobs)")

        def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
            self.done += 1
            self._print()

        def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
            self.failed += 1
            self._print()

    return ProgressCallback()
