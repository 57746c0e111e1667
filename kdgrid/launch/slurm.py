"""The SLURM executor: one submitit array task per job (or a few tiny jobs per task), results written by the job.

How a sweep maps onto SLURM:

- Each job (trials sharing one teacher pass, possibly of several studies) becomes one array task; with
  ``slurm_jobs_per_task = n`` a task runs ``n`` jobs one after another (for jobs of a few minutes, where
  queueing would cost more than running). A task carries the study of each of its trials (trial id -> study,
  only its own), which its rows and the failed rows written for it record.
- Arrays are split so that none exceeds the cluster's ``MaxArraySize`` (read from ``scontrol show config``;
  1001 when it cannot be read); ``slurm_array_parallelism`` caps how many tasks of one array run at once.
- Partition, account, qos, time, GPUs, CPUs and memory come from a profile (a name: ``local``, ``example``,
  shipped with the package in ``kdgrid/launch/slurm_profiles/``, or one in ``$KDGRID_SLURM_PROFILES``; or a path
  to a YAML file) and from ``slurm_*`` flags, which win; both are read into `SlurmSettings`. An unknown key is refused, naming it and the allowed ones; a
  partition that ``sinfo`` does not list is refused before anything is submitted.
- Each task is an `ArrayTask`, a `submitit.helpers.Checkpointable`: on preemption or at its time limit SLURM
  signals it, submitit calls `ArrayTask.checkpoint`, which resubmits the task itself; the requeued task skips
  the jobs it already finished (a marker per job) and the core resumes the unfinished one from its last epoch
  checkpoint (``run_job``'s ``checkpoint_dir``: ``<store>/_checkpoints/<group hash>`` on the shared filesystem).
- The job writes its rows into the store itself (the store must be on a filesystem the nodes share). The
  executor waits (unless ``wait=False``), printing progress. For a task that ended without finishing
  (cancelled, killed, out of requeues) it writes a failed row (``JobLost``, with the SLURM state) for each trial
  left without a row and without a live claim (a trial another task is still training, e.g. one of an earlier
  submission whose waiting driver was killed, is left to it), then raises `LaunchError` naming the tasks:
  ``kdgrid status`` shows why, and ``kdgrid resume`` runs exactly the trials without a done row and without a
  live claim. A task skips the trials another live process has claimed (`kdgrid.store.claims`), so a resume
  while an earlier array still runs trains each trial once. If ``sacct`` stays broken (or lists none of the
  unfinished tasks) for ``slurm_sacct_give_up_s`` (default 30 min), it stops waiting with a `LaunchError` naming
  the tasks, which may still be running; it writes no failed row then (nothing is known to have failed).
- The Hugging Face variables of the submitting process (offline switches set by `kdgrid run` once everything is
  prefetched, cache locations) and ``KDGRID_PLUGINS`` (`kdgrid.launch.environment.job_variables`) are exported
  by the first setup lines of every task's script, so they hold under a profile with ``--export=NONE`` too; such
  a profile's scripts also set ``SLURM_EXPORT_ENV=ALL``, so the ``srun`` step submitit runs the task in gets the
  script's environment.
- The default memory budget of a job (``--memory-budget-gb auto``, `SlurmExecutor.memory_budget`) is 0.9 x
  ``slurm_mem_gb``, the task's RAM; a GPU's memory is not known before submission, so GPU jobs are sized to
  ``slurm_gpu_mem_gb`` if given, else to the RAM. Without ``slurm_mem_gb`` there is no budget.

The submitit executor is chosen explicitly (`submitit.SlurmExecutor`), never auto-detected.
"""

from __future__ import annotations

import os
import pickle
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import submitit
import yaml
from submitit.helpers import Checkpointable, DelayedSubmission
from submitit.slurm.slurm import SlurmInfoWatcher

from kdgrid.errors import ConfigError, LaunchError
from kdgrid.grid.spec import TOO_DEEP, yaml_error_message
from kdgrid.launch import memory
from kdgrid.launch.base import Executor
from kdgrid.launch.environment import export_lines, job_variables
from kdgrid.launch.job import (
    JobFn,
    Launch,
    job_checkpoint_dir,
    job_key,
    record_lost_trials,
    row_studies,
    run_pending,
    touch_run_marker,
)
from kdgrid.launch.memory import MemoryBudget
from kdgrid.launch.settings import ExecutorSettings, setting
from kdgrid.launch.threads import training_threads, use_threads
from kdgrid.launch.worker import DEFAULT_JOB_FN, resolve_job_fn
from kdgrid.plugins import load_plugins_or_exit
from kdgrid.store.claims import slurm_job_holder
from kdgrid.store.read import done_trial_ids
from kdgrid.trial import Trial

DEFAULT_MAX_ARRAY_SIZE = 1001
PROFILES_ENV = "KDGRID_SLURM_PROFILES"
# sacct states after which an array task will not run again.
FINISHED_OK = {"COMPLETED"}
UNFINISHED = {"READY", "PENDING", "RUNNING", "UNKNOWN", "REQUEUED", "COMPLETING", "PREEMPTED", "CONFIGURING",
              "RESIZING", "SUSPENDED", "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING", "STAGE_OUT"}  # fmt: skip


# -- settings -------------------------------------------------------------------------------------------------------
def parse_time_minutes(value: int | float | str, source: str = "slurm_time") -> int:
    """SLURM time limit as whole minutes: ``90``, ``"90"``, ``"1:30:00"``, ``"2-00:00:00"``, ``"45:00"`` (MM:SS)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        minutes = int(value)
    else:
        match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", str(value).strip())
        if match is None:
            raise ConfigError(f"{source}: time {value!r} is not minutes or [D-]HH:MM[:SS]")
        days, first, second, third = match.groups()
        if second is None and days is None:
            minutes = int(first)
        elif third is None and days is None:  # MM:SS, as sbatch reads it
            minutes = int(first) + (1 if int(second) else 0)
        else:
            hours, mins, secs = int(first), int(second or 0), int(third or 0)
            minutes = int(days or 0) * 1440 + hours * 60 + mins + (1 if secs else 0)
    if minutes < 1:
        raise ConfigError(f"{source}: time {value!r} must be at least one minute")
    return minutes


@dataclass(frozen=True)
class SlurmSettings(ExecutorSettings):
    """The SLURM executor's settings (``--set slurm_<name>=VALUE``, or a profile's ``<name>:``)."""

    PREFIX = "slurm_"

    partition: str | None = setting(None, "partition to submit to (checked against sinfo before submission)")
    account: str | None = setting(None, "account charged (sbatch --account)")
    qos: str | None = setting(None, "quality of service (sbatch --qos)")
    time: int = setting(
        60, "time limit of one array task: minutes, or [D-]HH:MM[:SS]", parse=parse_time_minutes
    )
    gpus: int | None = setting(None, "GPUs per task (sbatch --gpus-per-node; one task per node)")
    cpus_per_task: int | None = setting(None, "CPU cores per task", minimum=1)
    mem_gb: float | None = setting(
        None, "memory per task in GB (also the default memory budget of a job: --memory-budget-gb auto)",
        positive=True,
    )  # fmt: skip
    gpu_mem_gb: float | None = setting(
        None, "memory of one GPU of the partition in GB; only sizes jobs to the GPU (--memory-budget-gb auto)",
        positive=True,
    )  # fmt: skip
    array_parallelism: int = setting(256, "at most this many tasks of one array run at once", minimum=1)
    jobs_per_task: int = setting(
        1, "jobs run one after another in one array task (>1 for tiny jobs)", minimum=1
    )
    max_array_size: int | None = setting(
        None, "split arrays to at most this many tasks (default: the cluster's MaxArraySize)", minimum=1
    )
    max_num_timeout: int = setting(
        3, "how many times a task may be requeued after a time limit or preemption"
    )
    signal_delay_s: int = setting(
        120, "seconds before the time limit at which SLURM signals the task to checkpoint"
    )
    constraint: str | None = setting(None, "node features required (sbatch --constraint)")
    exclude: str | None = setting(None, "nodes to avoid (sbatch --exclude)")
    job_name: str = setting("kdgrid", "the name jobs show in squeue")
    setup: list[str] | None = setting(
        None, "shell lines run before the task (module load ..., source venv/bin/activate)"
    )
    additional_parameters: dict[str, Any] | None = setting(
        None, "any other sbatch option, as a mapping {option: value}"
    )
    sacct_give_up_s: float = setting(
        1800.0, "stop waiting when sacct has failed, or listed none of the unfinished tasks, for this many "
        "seconds; the tasks keep running (0 = wait forever)",
    )  # fmt: skip


def profile_dirs() -> list[Path]:
    """Where profiles are looked up by name: ``$KDGRID_SLURM_PROFILES`` (if set), then the profiles shipped with
    the package (``kdgrid/launch/slurm_profiles``)."""
    extra = os.environ.get(PROFILES_ENV)
    shipped = Path(str(resources.files("kdgrid.launch") / "slurm_profiles"))
    return ([Path(extra)] if extra else []) + [shipped]


def find_profile(profile: str | Path) -> Path:
    """A profile by path, or by name in `profile_dirs`; the error lists the profiles there."""
    path = Path(profile)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return path
    for folder in profile_dirs():
        candidate = folder / f"{profile}.yaml"
        if candidate.is_file():
            return candidate
    known = sorted({p.stem for folder in profile_dirs() if folder.is_dir() for p in folder.glob("*.yaml")})
    raise ConfigError(
        f"SLURM profile {str(profile)!r} not found (a .yaml path, or one of: {', '.join(known)})"
    )


def load_profile(profile: str | Path) -> dict[str, Any]:
    """Read a profile file: a mapping of `SlurmSettings` keys (with or without ``slurm_``), unprefixed."""
    path = find_profile(profile)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {yaml_error_message(error)}") from None
    except RecursionError:  # PyYAML composes nested collections recursively
        raise ConfigError(f"{path}: refused: {TOO_DEEP}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not a UTF-8 text file ({error.reason} at byte {error.start})") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the profile ({error.strerror or error})") from None
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: a profile is a mapping of settings, got {type(data).__name__}")
    return SlurmSettings.normalize(data, source=str(path))


def resolve_settings(profile: str | Path | None, flags: Mapping[str, Any]) -> SlurmSettings:
    """Defaults, then the profile, then the flags; validated and typed."""
    values = load_profile(profile) if profile is not None else {}
    values.update(SlurmSettings.normalize(flags, source="executor settings"))
    return SlurmSettings.build(values)


SRUN_EXPORT_ENV = "SLURM_EXPORT_ENV"  # srun's --export default, read from the environment


def submitit_parameters(
    settings: SlurmSettings,
    environment: Mapping[str, str] | None = None,
    *,
    nodes: int | None = None,
    tasks_per_node: int | None = None,
) -> dict[str, Any]:
    """Translate our settings to `submitit.SlurmExecutor.update_parameters` keywords: for trials' array tasks, or
    with ``nodes`` for one job of ``nodes`` x ``tasks_per_node`` tasks (a pre-training run: not an array, so no
    ``array_parallelism``). ``environment`` (the Hub's
    variables and ``KDGRID_PLUGINS`` of the submitting process, `kdgrid.launch.environment.job_variables`) is
    exported by the first setup lines of every task's script: a profile may set ``--export=NONE``, and the
    variables must be there before Python imports the Hugging Face libraries. Under such a profile the script's
    environment is handed on to the task's ``srun`` step (``SLURM_EXPORT_ENV=ALL``): it starts from nothing
    otherwise."""
    direct = ("partition", "account", "qos", "time", "cpus_per_task", "array_parallelism", "signal_delay_s",
              "constraint", "exclude", "job_name", "setup", "additional_parameters")  # fmt: skip
    params = {name: getattr(settings, name) for name in direct if getattr(settings, name) is not None}
    exported = str((settings.additional_parameters or {}).get("export", "ALL"))
    if not exported.upper().startswith("ALL"):
        # sbatch --export=NONE (or a list) also sets SLURM_EXPORT_ENV for the job, so the `srun` step submitit runs
        # the task in would start without the script's environment, its setup lines and SUBMITIT_EXECUTOR included.
        params["setup"] = [f"export {SRUN_EXPORT_ENV}=ALL", *params.get("setup", [])]
    if environment:
        params["setup"] = [*export_lines(environment), *params.get("setup", [])]
    if settings.gpus:
        params["gpus_per_node"] = settings.gpus
    if settings.mem_gb is not None:
        mem_gb = settings.mem_gb
        params["mem"] = f"{int(mem_gb)}GB" if mem_gb.is_integer() else f"{round(mem_gb * 1024)}MB"
    if nodes is not None:
        params.pop("array_parallelism", None)  # one job, not an array
        params["nodes"] = nodes
        params["ntasks_per_node"] = tasks_per_node or 1
    return params


def submitter(
    settings: SlurmSettings, folder: Path, *, nodes: int | None = None, tasks_per_node: int | None = None
) -> submitit.SlurmExecutor:
    """The one submitit executor kdgrid submits through, for trials (`SlurmExecutor`: array tasks) and for
    pre-training (`kdgrid.pretrain.slurm`: one job of ``nodes`` x ``tasks_per_node`` tasks): the profile's
    parameters (`submitit_parameters`, with this process's job variables exported by each task's script), its
    requeue limit (``slurm_max_num_timeout``) and submitit's ``folder`` (scripts, pickles, logs)."""
    executor = submitit.SlurmExecutor(folder=folder, max_num_timeout=settings.max_num_timeout)
    executor.update_parameters(
        **submitit_parameters(settings, job_variables(), nodes=nodes, tasks_per_node=tasks_per_node)
    )
    return executor


def submit_one(executor: submitit.SlurmExecutor, task: Any, *, what: str) -> Any:
    """Submit one task (a `submitit.helpers.Checkpointable`, so submitit requeues it) as one job; the submitit
    job. `LaunchError` naming ``what`` when sbatch refuses (a bad account, qos, limits)."""
    try:
        return executor.submit(task)
    except Exception as error:
        raise LaunchError(f"sbatch refused {what}: {str(error).strip()[-800:]}") from None


def after_parameters(settings: SlurmSettings, after: Sequence[str]) -> dict[str, Any]:
    """The profile's sbatch parameters plus a dependency on the arrays ``after`` (each ended ok); a dependant
    whose dependency can never be met is cancelled rather than left pending."""
    return {**(settings.additional_parameters or {}), "dependency": "afterok:" + ":".join(after),
            "kill_on_invalid_dep": "yes"}  # fmt: skip


# -- the cluster ----------------------------------------------------------------------------------------------------
def _query(command: list[str]) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    except FileNotFoundError:
        raise LaunchError(f"`{command[0]}` is not on PATH: is this a SLURM login node?") from None
    except subprocess.TimeoutExpired:
        raise LaunchError(f"`{' '.join(command)}` did not answer within 30 s: is slurmctld up?") from None
    if done.returncode != 0:
        raise LaunchError(f"`{' '.join(command)}` failed: {done.stderr.strip()[-500:]}")
    return done.stdout


def cluster_max_array_size() -> int:
    """``MaxArraySize`` from ``scontrol show config`` (arrays hold indices 0 .. MaxArraySize - 1)."""
    match = re.search(r"^MaxArraySize\s*=\s*(\d+)", _query(["scontrol", "show", "config"]), re.MULTILINE)
    return int(match.group(1)) if match else DEFAULT_MAX_ARRAY_SIZE


def cluster_partitions() -> list[str]:
    """Partition names ``sinfo`` knows (without the ``*`` that marks the default)."""
    return sorted({line.strip() for line in _query(["sinfo", "-h", "-o", "%R"]).splitlines() if line.strip()})


def sacct_states(array_ids: Sequence[str]) -> dict[str, str]:
    """``{array task id ("123_4"): state ("RUNNING", "CANCELLED", ...)}`` of the given arrays, in one ``sacct``
    call (the one submitit's watcher makes, parsed by submitit, pending ranges ``123_[5-9]`` expanded).

    Called here rather than through submitit's watcher because the watcher swallows a failing ``sacct`` and keeps
    its stale states, so a broken ``sacct`` could not be told from tasks that are still running.

    Raises:
        LaunchError: ``sacct`` is missing, failed or did not answer within 30 s.
    """
    command = ["sacct", "-o", "JobID,State", "--parsable2"]
    for array_id in array_ids:
        command.extend(["-j", array_id])
    info = SlurmInfoWatcher().read_info(_query(command))
    return {job_id: fields["State"].split()[0].upper() for job_id, fields in info.items()
            if fields.get("State", "").strip()}  # fmt: skip


def check_partition(partition: str | None) -> None:
    if partition is None:
        return
    known = cluster_partitions()
    if partition not in known:
        raise ConfigError(f"{SlurmSettings.PREFIX}partition: {partition!r} is not a partition of this cluster (sinfo lists: "
                          f"{', '.join(known) or 'none'})")  # fmt: skip


# -- packing --------------------------------------------------------------------------------------------------------
def pack_tasks(jobs: Sequence[list[Trial]], jobs_per_task: int) -> list[list[list[Trial]]]:
    """Group consecutive jobs into array tasks of at most ``jobs_per_task`` jobs each (order kept)."""
    return [list(jobs[i : i + jobs_per_task]) for i in range(0, len(jobs), jobs_per_task)]


def split_arrays(tasks: Sequence[Any], max_array_size: int) -> list[list[Any]]:
    """Split tasks into arrays of at most ``max_array_size`` tasks each (order kept)."""
    return [list(tasks[i : i + max_array_size]) for i in range(0, len(tasks), max_array_size)]


# -- what runs on the node ------------------------------------------------------------------------------------------
def shield_requeue_from_sigterm() -> None:
    """Ignore ``SIGTERM`` in this process and the children it starts from now on: call it just before submitit
    runs ``scontrol requeue`` (from a ``checkpoint`` method, which submitit calls first, or before handing a signal
    to submitit's handler).

    ``scontrol requeue`` makes SLURM send ``SIGTERM`` to every process of the job, the ``scontrol`` child
    included. When that lands before ``scontrol`` has exited, submitit sees its child die, fails the job instead of
    requeueing it, and the job's work is lost (seen under load). An ignored signal stays ignored across ``exec``,
    so ``scontrol`` finishes; this process exits right after the requeue anyway. Main thread only (where submitit's
    signal handler runs).
    """
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


@dataclass
class ArrayTask(Checkpointable):  # type: ignore[misc]
    """One array task: runs its jobs in order through ``job_fn`` (default: ``run_job_to_store``).

    Attributes:
        jobs: the jobs of this task; each a list of trials sharing one teacher pass.
        store_dir, sweep: where and under which sweep name the rows are written.
        studies: trial id -> the study its row records, for this task's trials (`row_studies`).
        run_id: names this submission; a job finished in an earlier attempt of this same task (before a requeue)
            leaves the marker ``.finished-<run_id>-<job key>`` in its checkpoint folder and is skipped.
        job_fn: a module-level function with ``run_job_to_store``'s signature (picklable by reference).

    Each job keeps its epoch checkpoints in `job_checkpoint_dir` (``<store>/_checkpoints/<group hash>``).
    """

    jobs: list[list[Trial]]
    store_dir: str
    sweep: str
    studies: dict[str, str]
    run_id: str
    job_fn: JobFn = field(default=DEFAULT_JOB_FN)

    def job_dir(self, trials: Sequence[Trial]) -> Path:
        return job_checkpoint_dir(Path(self.store_dir), trials)

    def finished_marker(self, trials: Sequence[Trial]) -> Path:
        return self.job_dir(trials) / f".finished-{self.run_id}-{job_key(trials)}"

    def __call__(self) -> int:
        """Run every job of the task not yet finished, minus trials already done in the store; returns how many
        jobs ran in this attempt."""
        load_plugins_or_exit()  # KDGRID_PLUGINS from the script's setup lines, and the entry points
        use_threads(training_threads(None))  # `kdgrid.launch.threads`: the task's CPUs, one training process
        store = Path(self.store_dir)
        # Trials done before this attempt (a requeue that struck after some rows were written) never run again.
        done = done_trial_ids(store)
        ran = 0
        for trials in self.jobs:
            marker = self.finished_marker(trials)
            if marker.exists():  # finished before a requeue: its rows are in the store already
                continue
            if run_pending(self.job_fn, trials, store, sweep=self.sweep, studies=self.studies, done=done):
                ran += 1
            marker.touch()
        for trials in self.jobs:  # the whole task is done: no attempt of it will look for its markers again
            self.finished_marker(trials).unlink(missing_ok=True)
        return ran

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """Called by submitit on preemption or time limit: resubmit this same task.

        The state worth keeping is on disk (job markers, the core's epoch checkpoints), so the task itself is
        resubmitted unchanged.
        """
        print(
            f"kdgrid: requeueing a task of {len(self.jobs)} job(s) at its time limit or preemption",
            flush=True,
        )
        shield_requeue_from_sigterm()  # submitit runs `scontrol requeue` right after this returns
        return DelayedSubmission(self, *args, **kwargs)


# -- the executor ---------------------------------------------------------------------------------------------------
class SlurmExecutor(Executor):
    """Submit jobs as SLURM arrays through submitit and (by default) wait for them.

    Args:
        profile: a profile name (`profile_dirs`) or a path to a profile YAML; ``None`` = defaults only.
        wait: wait for every task and report; ``False`` returns right after submission (``--no-wait``).
        log_dir: submitit's folder (sbatch scripts, pickles, logs), on the shared filesystem; default
            ``<store_dir>/_slurm/<sweep>/<job id>``. Epoch checkpoints go to ``<store_dir>/_checkpoints/<group>``.
        poll_interval_s: seconds between two ``sacct`` calls while waiting.
        job_fn: what each job runs (a callable or ``module:function``, importable by reference: the task is
            pickled); default `kdgrid.launch.worker.run_job_to_store`.
        **settings: ``slurm_*`` keys of `SlurmSettings` (they override the profile).

    Bad settings and unknown partitions raise `ConfigError` here or in `run`, before any submission.
    """

    name = "slurm"

    def __init__(
        self,
        profile: str | Path | None = None,
        *,
        wait: bool = True,
        log_dir: str | Path | None = None,
        poll_interval_s: float = 10.0,
        job_fn: JobFn | str | None = None,
        **settings: Any,
    ) -> None:
        self.settings = resolve_settings(profile, settings)
        self.wait = wait
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self.poll_interval_s = poll_interval_s
        self.job_fn = resolve_job_fn(job_fn)

    def memory_budget(self) -> MemoryBudget:
        """The memory one job may use on a node: `memory.SAFETY_FRACTION` of the task's ``slurm_mem_gb`` (RAM),
        or of ``slurm_gpu_mem_gb`` when the task has GPUs and that is given (a GPU's memory is not known before
        submission). Without ``slurm_mem_gb`` there is no budget. Jobs packed into one task
        (``slurm_jobs_per_task``) run one after another, so each has the whole task's memory."""
        gpus, gpu_mem, mem = self.settings.gpus, self.settings.gpu_mem_gb, self.settings.mem_gb
        alone = "1 job at a time per task"
        if gpus and gpu_mem is not None:
            return memory.per_job(gpu_mem, "of GPU memory (slurm_gpu_mem_gb)", 1, alone)
        if mem is None:
            return MemoryBudget(None, "none: slurm_mem_gb is not set, so a task's memory is unknown before "
                                "submission (set slurm_mem_gb, or give --memory-budget-gb)")  # fmt: skip
        budget = memory.per_job(mem, "of RAM per task (slurm_mem_gb)", 1, alone)
        if gpus:
            note = "; GPU memory is unknown before submission, so RAM sizes the jobs: set slurm_gpu_mem_gb"
            return MemoryBudget(budget.gb, budget.basis + note)
        return budget

    def _log_folder(self, store_dir: Path, sweep: str) -> Path:
        """submitit's folder (store readers skip folders whose names start with ``_``)."""
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", sweep) or "sweep"
        return (self.log_dir or store_dir / "_slurm") / safe / "%j"

    def make_tasks(self, launch: Launch, *, run_id: str) -> list[ArrayTask]:
        """One `ArrayTask` per ``slurm_jobs_per_task`` jobs of ``launch``, each carrying the studies of its own
        trials only (a task is pickled to the shared filesystem: not the whole sweep's mapping in each)."""
        tasks = []
        for group in pack_tasks(launch.trial_lists(), self.settings.jobs_per_task):
            own = row_studies((trial for job in group for trial in job), launch.studies)
            tasks.append(ArrayTask(group, str(launch.store), launch.sweep, own, run_id, self.job_fn))
        return tasks

    def launch(self, launch: Launch) -> None:
        """Submit the jobs (arrays split at MaxArraySize) and, unless ``wait=False``, wait for all of them.
        Each row records the sweep and its trial's study."""
        submission = self.submit(launch)
        if submission is not None and self.wait:
            self.wait_for(submission)

    def submit(self, launch: Launch, *, after: Sequence[str] = ()) -> Submission | None:
        """Check the settings against the cluster, then submit; returns what `wait_for` needs (None: no jobs).
        ``after``: array ids these arrays start after, each ended ok (`kdgrid.launch.stage_run`)."""
        if not launch.jobs:
            return None
        launch = launch.resolved()
        jobs, store_dir, sweep = launch.trial_lists(), launch.store, launch.sweep
        check_partition(self.settings.partition)
        max_array = min(self.settings.max_array_size or DEFAULT_MAX_ARRAY_SIZE, cluster_max_array_size())
        log_folder = self._log_folder(store_dir, sweep)
        run_id = uuid.uuid4().hex
        tasks = self.make_tasks(launch, run_id=run_id)
        marker = touch_run_marker(store_dir, f"slurm-{run_id}")

        executor = submitter(self.settings, log_folder)
        if after:
            executor.update_parameters(additional_parameters=after_parameters(self.settings, after))
        submitted: list[Any] = []
        for array in split_arrays(tasks, max_array):
            # The submitted callable must be the Checkpointable itself (submitit only checkpoints those), so
            # each task is submitted on its own inside a batch, which submitit sends as one array.
            batch: list[Any] = []
            try:
                with executor.batch():
                    batch.extend(executor.submit(task) for task in array)
            except (
                Exception
            ) as error:  # sbatch refused (bad account, qos, limits): say what is already queued
                queued = sorted({str(job.job_id).split("_")[0] for job in submitted})
                raise LaunchError(
                    f"sbatch refused an array of {len(array)} task(s): {str(error).strip()[-800:]}"
                    + (f" (arrays already submitted: {', '.join(queued)})" if queued else "")
                ) from None
            submitted.extend(batch)
        submission = Submission(list(zip(submitted, tasks, strict=True)), store_dir, sweep, marker)
        array_ids = sorted({str(job.job_id).split("_")[0] for job in submitted}, key=int)
        _say(f"slurm: submitted {len(jobs)} job(s) as {len(tasks)} array task(s) in {len(array_ids)} array(s): "
             f"{', '.join(array_ids)}; logs in {log_folder.parent}")  # fmt: skip
        return submission

    def wait_for(self, submission: Submission) -> dict[str, str]:
        """Poll sacct until every task has ended, printing progress. Tasks that did not complete (cancelled,
        killed, out of requeues) get a failed row for each of their trials left without one, then `LaunchError`.
        If sacct tells nothing about the unfinished tasks for ``slurm_sacct_give_up_s``, `LaunchError` at once,
        naming them; no row is written (they may still be running).

        Returns ``{slurm job id: final state}``.
        """
        submitted = [job for job, _ in submission.tasks]
        try:
            states = self._poll_until_ended(submitted)
        except KeyboardInterrupt:
            arrays = sorted({job_id.split("_")[0] for job_id in submission.job_ids}, key=int)
            _say(f"slurm: stopped waiting; the tasks keep running (`scancel {' '.join(arrays)}` stops them; "
                 "`kdgrid status` shows how far they got)")  # fmt: skip
            raise
        except _SacctGaveUp as blind:
            # The tasks may well be running: write no failed rows (they would be false), keep what is in the store.
            submission.marker.unlink(missing_ok=True)
            raise LaunchError(str(blind)) from None
        bad = [(job, task) for job, task in submission.tasks if states[str(job.job_id)] not in FINISHED_OK
               or not _result_ok(job, states[str(job.job_id)])]  # fmt: skip
        if bad:
            lost = 0
            ended = {slurm_job_holder(job_id) for job_id in submission.job_ids}
            for job, task in bad:
                reason = f"SLURM task {job.job_id} ended {states[str(job.job_id)]}{_error_hint(job)}"
                trials = [trial for trials in task.jobs for trial in trials]
                recorded = record_lost_trials(
                    submission.store_dir,
                    trials,
                    marker=submission.marker,
                    sweep=submission.sweep,
                    studies=task.studies,
                    reason=reason,
                    finished_jobs=ended,  # their claims are stale at once, whatever their heartbeat says
                )
                lost += len(recorded)
            submission.marker.unlink(missing_ok=True)
            details = "; ".join(
                f"{job.job_id}: {states[str(job.job_id)]}{_error_hint(job)}" for job, _ in bad[:10]
            )
            raise LaunchError(
                f"{len(bad)} of {len(submitted)} SLURM array task(s) did not finish ({details}); {lost} trial(s) "
                "left unfinished got a failed row. `kdgrid status` lists them, `kdgrid resume` runs them again."
            )
        submission.marker.unlink(missing_ok=True)
        return states

    def _poll_until_ended(self, submitted: Sequence[Any]) -> dict[str, str]:
        """``{job id: state}`` once every task has ended; one ``sacct`` call per poll, a line per change.

        A task whose result pickle exists has ended whatever ``sacct`` says (it may lag). If ``sacct`` fails, or
        lists none of the unfinished tasks, for ``slurm_sacct_give_up_s`` in a row (nothing learnt meanwhile from
        result pickles either), raises `_SacctGaveUp` naming the tasks, which may still be running.
        """
        give_up_s = self.settings.sacct_give_up_s
        states = {str(job.job_id): "UNKNOWN" for job in submitted}
        last_line = ""
        blind_since: float | None = None  # time.monotonic() of the first poll that learnt nothing
        while True:
            open_jobs = [job for job in submitted if states[str(job.job_id)] in UNFINISHED]
            problem = ""
            try:
                reported = sacct_states(sorted({str(job.job_id).split("_")[0] for job in open_jobs}, key=int))
            except LaunchError as error:
                reported, problem = {}, str(error)
            learnt = False
            for job in open_jobs:
                job_id = str(job.job_id)
                state = reported.get(job_id) or states[job_id]
                learnt = learnt or job_id in reported
                if job.paths.result_pickle.exists() and state in UNFINISHED:
                    state = "COMPLETED" if _result_ok(job, state) else "FAILED"
                    learnt = True
                states[job_id] = state
            ended = [s for s in states.values() if s not in UNFINISHED]
            failed = [s for s in ended if s not in FINISHED_OK]
            running = sum(s == "RUNNING" for s in states.values())
            line = (f"slurm: {len(ended) - len(failed)} completed, {len(failed)} failed, {running} running, "
                    f"{len(states) - len(ended) - running} waiting (of {len(states)} array tasks)")  # fmt: skip
            if line != last_line:
                _say(line)
                last_line = line
            if len(ended) == len(states):
                return states
            if learnt:
                blind_since = None
            else:
                now = time.monotonic()
                blind_since = now if blind_since is None else blind_since
                if give_up_s and now - blind_since >= give_up_s:
                    unfinished = [job_id for job_id, state in states.items() if state in UNFINISHED]
                    raise _SacctGaveUp(_gave_up_message(unfinished, give_up_s, problem))
            time.sleep(self.poll_interval_s)


class _SacctGaveUp(Exception):
    """`SlurmExecutor.wait_for` stopped waiting: ``sacct`` told nothing about the unfinished tasks for too long."""


def _gave_up_message(unfinished: Sequence[str], give_up_s: float, problem: str) -> str:
    arrays = sorted({job_id.split("_")[0] for job_id in unfinished}, key=int)
    shown = ", ".join(unfinished[:20]) + (f" and {len(unfinished) - 20} more" if len(unfinished) > 20 else "")
    why = problem or "sacct answered but listed none of them"
    return (
        f"slurm: stopped waiting: for {give_up_s:g} s (slurm_sacct_give_up_s) sacct told nothing about the "
        f"{len(unfinished)} unfinished array task(s) ({why}). They may still be running: {shown} (arrays "
        f"{', '.join(arrays)}; `squeue -j {','.join(arrays)}` shows them, `scancel {' '.join(arrays)}` stops "
        "them). Rows already written stay in the store and tasks still running keep writing theirs: nothing is "
        "lost. Later, `kdgrid status` shows how far they got and `kdgrid resume` runs whatever is missing."
    )


@dataclass
class Submission:
    """What was submitted: (submitit job, its `ArrayTask`) pairs, and where their rows go (each task carries
    the studies of its trials)."""

    tasks: list[tuple[Any, ArrayTask]]
    store_dir: Path
    sweep: str
    marker: Path

    @property
    def job_ids(self) -> list[str]:
        return [str(job.job_id) for job, _ in self.tasks]


def _result_ok(job: Any, state: str) -> bool:
    """Whether a task's callable returned: its result pickle says success or, without one, ``state`` (sacct's)
    is COMPLETED."""
    path = job.paths.result_pickle
    if not path.exists():
        return state.upper().startswith("COMPLETED")
    try:
        with open(path, "rb") as handle:
            outcome, _ = pickle.load(handle)
    except Exception:
        return False
    return outcome == "success"


def _error_hint(job: Any) -> str:
    path = job.paths.stderr
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return f" (last log line: {lines[-1][:200]})" if lines else ""


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
