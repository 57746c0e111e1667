"""The local executor (the default): jobs one after another in this process, or in a pool of worker processes.

- ``local_workers`` = 0 (default): every job runs here, in order. A job function that raises gets failure rows
  for the trials it left without one; the next job goes on.
- ``local_workers`` = N >= 1: up to N jobs at once, each in its own fresh process (``local_start_method``,
  default ``spawn``: safe with torch). A process that dies (SIGKILL, out of memory) costs only its own job: the
  trials it had not finished get a failure row saying how the process ended, and ``kdgrid resume`` reruns them.
- GPUs: the N workers are spread round robin over the GPUs (``local_gpus``, default the visible ones): worker
  slot i gets GPU ``i mod G`` through ``CUDA_VISIBLE_DEVICES`` in its process's environment, set before the
  process starts, so ceil(N / G) jobs share a GPU at most and the memory budget per job follows from that.
  ``local_jobs_per_gpu=K`` asks for K jobs per GPU (N defaults to K x G). Without workers, jobs run here on the
  default device, as without GPUs.
- Progress (`kdgrid.launch.progress`): trials done / failed / remaining and an ETA, computed from the rows
  appearing in the store, so it counts exactly what ``kdgrid status`` will; one count covers every job of the
  call, whichever studies their trials belong to (a job may mix studies; each row records its own). On a
  terminal it is a live bar; otherwise (a log file, CI, SLURM) plain lines: one per epoch of each job, one per
  job that ends, and a heartbeat at a fixed interval.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
import traceback
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kdgrid.core.job import phases
from kdgrid.device_sharing import EXCLUSIVE, SHARING_VARIABLE, local_sharing
from kdgrid.errors import ConfigError
from kdgrid.launch import memory
from kdgrid.launch.base import Executor
from kdgrid.launch.job import JobFn, JobRun, Launch, RunRows, accepts_on_step
from kdgrid.launch.memory import MemoryBudget
from kdgrid.launch.progress import (
    EpochLines,
    PlainProgress,
    RunProgress,
    planned_seconds,
    print_line,
    run_progress,
)
from kdgrid.launch.settings import ExecutorSettings, setting
from kdgrid.launch.threads import threads_for_training, training_threads, use_threads
from kdgrid.launch.worker import resolve_job_fn
from kdgrid.plugins import load_plugins_or_exit, plugin_environment
from kdgrid.store.run_ledger import current_run
from kdgrid.store.write import StoreWriteError, rows_folder_for_writing
from kdgrid.trial import Trial

# The most worker processes (and jobs per GPU) the local executor starts: far above any one machine's cores, and
# low enough that a mistyped number is refused instead of sizing a list of slots in the billions.
MAX_WORKERS = 4096


@dataclass(frozen=True)
class LocalSettings(ExecutorSettings):
    """The local executor's settings (``--set local_<name>=VALUE``)."""

    PREFIX = "local_"

    workers: int = setting(
        0,
        "jobs at once, each in its own process; 0 = one after another in this process",
        maximum=MAX_WORKERS,
    )
    start_method: str = setting("spawn", "how worker processes start: spawn, forkserver or fork")
    threads: int | None = setting(
        None, "torch threads per worker process (default: the usable CPUs / workers)", minimum=1
    )
    progress: bool = setting(True, "show progress: a live bar on a terminal, plain lines in a log")
    poll_s: float = setting(0.5, "seconds between two looks at the store and the workers")
    gpus: str | None = setting(
        None,
        "GPUs to spread the workers over, as CUDA_VISIBLE_DEVICES names them (e.g. 0,1,2); "
        "default: every GPU this process sees",
    )
    jobs_per_gpu: int | None = setting(
        None,
        "jobs sharing one GPU at once (local_workers then defaults to this x the GPUs)",
        minimum=1,
        maximum=MAX_WORKERS,
    )

    def __post_init__(self) -> None:
        methods = multiprocessing.get_all_start_methods()
        if self.start_method not in methods:
            raise ConfigError(
                f"{self.PREFIX}start_method: {self.start_method!r} is not available; allowed: {', '.join(methods)}"
            )
        if self.gpus is not None and not gpu_list(self.gpus):
            raise ConfigError(f"{self.PREFIX}gpus: expected GPU names such as 0,1,2, got {self.gpus!r}")


def gpu_list(text: str) -> list[str]:
    """The GPU names of a ``CUDA_VISIBLE_DEVICES``-style list (``"0,1, 2"`` -> ``["0", "1", "2"]``)."""
    return [name.strip() for name in text.split(",") if name.strip()]


def gpu_slots(workers: int, gpus: Sequence[str], jobs_per_gpu: int | None) -> list[str | None]:
    """The GPU of each worker slot: slot i gets ``gpus[i mod len(gpus)]`` (round robin, so the workers spread
    evenly); None for every slot without GPUs.

    Raises:
        ConfigError: more workers than ``jobs_per_gpu`` x the GPUs.
    """
    if not gpus:
        return [None] * workers
    if jobs_per_gpu is not None and workers > jobs_per_gpu * len(gpus):
        raise ConfigError(
            f"local_workers={workers} do not fit local_jobs_per_gpu={jobs_per_gpu} on {len(gpus)} GPU(s) "
            f"({', '.join(gpus)}); use at most {jobs_per_gpu * len(gpus)} workers or more jobs per GPU"
        )
    return [gpus[i % len(gpus)] for i in range(workers)]


@contextlib.contextmanager
def _visible_devices(gpu: str | None) -> Iterator[None]:
    """``CUDA_VISIBLE_DEVICES=gpu`` (and ``CUDA_DEVICE_ORDER=PCI_BUS_ID``: ``gpu`` is one of nvidia-smi's indices,
    `memory.DEVICE_ORDER`) in this process's environment while a worker starts (it inherits it), then as it was;
    nothing without a GPU."""
    if gpu is None:
        yield
        return
    variables = {"CUDA_VISIBLE_DEVICES": gpu, **memory.DEVICE_ORDER}  # nvidia-smi's indices: PCI order
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value


def _run_in_child(
    job_fn: JobFn,
    trials: list[Trial],
    store: str,
    sweep: str,
    studies: dict[str, str],
    checkpoint_dir: str,
    threads: int | None,
    gpu: str | None = None,
    plugins: dict[str, str] | None = None,
    sharing: str = EXCLUSIVE,
    epoch_lines: tuple[int, int] | None = None,
) -> None:
    """A worker process's whole life: its GPU (``CUDA_VISIBLE_DEVICES``, set again here for start methods that
    do not inherit the parent's environment at start, such as forkserver; CUDA reads it when first used, which
    is later), limit torch's threads (cores are shared), run one job (``studies``: trial id -> study, for this
    job's trials only), after loading the plugins (``plugins``: the parent's ``KDGRID_PLUGINS``,
    `kdgrid.plugins.plugin_environment`, passed on to this process's own children too). ``epoch_lines``: (this
    job's number, the run's jobs) when the run's output is a log: the job writes a line per epoch to its stdout
    (the parent's, inherited)."""
    os.environ.update(plugins or {})
    os.environ[SHARING_VARIABLE] = sharing  # recorded beside the latency (`kdgrid.device_sharing`)
    load_plugins_or_exit()
    if gpu is not None:
        os.environ.update({"CUDA_VISIBLE_DEVICES": gpu, **memory.DEVICE_ORDER})
    if threads:
        use_threads(threads)  # `kdgrid.launch.threads`: torch reads the variables when the job imports it
    progress: dict[str, Any] = {}
    if epoch_lines is not None and accepts_on_step(job_fn):
        index, jobs = epoch_lines
        progress["on_step"] = EpochLines(trials, index=index, jobs=jobs, emit=print_line,
                                         planned_s=planned_seconds(trials))  # fmt: skip
    with phases.listening(getattr(progress.get("on_step"), "phase", None)):  # the core's phases, as lines
        job_fn(trials, Path(store), sweep=sweep, studies=studies, checkpoint_dir=Path(checkpoint_dir), **progress)


def _exit_reason(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"the worker process was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"the worker process was killed by signal {-exitcode}"
    return f"the worker process exited with status {exitcode} before writing a row for this trial"


@dataclass
class RunSummary:
    """Trials of the last `run`: done, failed (a failed row from this run and no done row), without a row."""

    done: int = 0
    failed: int = 0
    missing: int = 0
    seconds: float = 0.0


class LocalExecutor(Executor):
    """Run jobs on this machine. Settings: `LocalSettings` (prefix ``local_``, which may be left out).

    Args:
        job_fn: what each job runs (a callable or ``module:function``); default
            `kdgrid.launch.worker.run_job_to_store`. With workers it must be importable by reference.
    """

    name = "local"

    def __init__(self, *, job_fn: JobFn | str | None = None, **settings: Any) -> None:
        self.settings = LocalSettings.from_flags(settings, source="local executor")
        self.job_fn = resolve_job_fn(job_fn)
        self.summary = RunSummary()
        if self.settings.jobs_per_gpu is not None:
            self.worker_gpus()  # refuse now workers that do not fit, or jobs per GPU without a GPU

    def gpus(self) -> list[str]:
        """The GPUs the workers are spread over: ``local_gpus``, else those this process sees
        (`memory.visible_gpus`)."""
        return gpu_list(self.settings.gpus) if self.settings.gpus is not None else memory.visible_gpus()

    def workers(self) -> int:
        """Jobs at once: ``local_workers``; where it is 0 and ``local_jobs_per_gpu`` is set, that many per GPU."""
        if self.settings.workers == 0 and self.settings.jobs_per_gpu is not None:
            gpus = self.gpus()
            if not gpus:
                raise ConfigError("local_jobs_per_gpu is set but this machine has no GPU (see local_gpus)")
            return self.settings.jobs_per_gpu * len(gpus)
        return self.settings.workers

    def worker_gpus(self) -> list[str | None]:
        """The GPU of each worker slot (`gpu_slots`); [] when jobs run in this process."""
        return gpu_slots(self.workers(), self.gpus(), self.settings.jobs_per_gpu)

    def memory_budget(self) -> MemoryBudget:
        """The memory one job may use here: `memory.SAFETY_FRACTION` of the smallest visible GPU's memory divided
        by the jobs sharing one GPU at most (the workers spread round robin over the GPUs: `gpu_slots`), or,
        without a GPU, of the RAM (capped by the cgroup limit) divided by the jobs running at once
        (``local_workers``, at least 1)."""
        workers = self.workers()
        jobs = max(1, workers)
        share = f"{jobs} local workers" if workers > 1 else f"{jobs} job at a time"
        gpu_memory = memory.gpu_memory_gb()
        if gpu_memory:
            slots = [gpu for gpu in self.worker_gpus() if gpu is not None]
            per_gpu = max((slots.count(gpu) for gpu in set(slots)), default=jobs)
            if slots:
                gpus = len(set(slots))
                share = f"{per_gpu} job{'s' if per_gpu > 1 else ''} per GPU ({jobs} local workers over {gpus} GPUs)"
            return memory.per_job(min(gpu_memory), "of GPU memory (the smallest visible GPU)", per_gpu, share)
        return memory.per_job(memory.ram_gb(), "of RAM", jobs, share)

    def launch(self, launch: Launch) -> None:
        """Run every job; return when all have ended. Each trial ends with a row in the store, recording the
        sweep and its study."""
        store, study_of = launch.store, dict(launch.studies)
        rows_folder_for_writing(store)  # a store that cannot take rows: one message before any job
        watch = RunRows.start(store, f"local-{uuid.uuid4().hex}", run_id=current_run())
        started = time.monotonic()
        title = _progress_title(launch.sweep, study_of)
        progress = run_progress(
            len(study_of),
            title=title,
            jobs=len(launch.jobs),
            enabled=self.settings.progress,
            job_trials=[list(job.trials) for job in launch.jobs],
        )
        try:
            with progress:
                if self.workers() == 0:
                    # this process trains: the one thread rule (kdgrid.launch.threads), undone after the run
                    with threads_for_training(self.worker_threads(1)):
                        self._run_here(launch, watch, progress)
                else:
                    self._run_pool(launch, watch, progress)
                progress.show(watch.refresh().states(study_of))
        finally:
            watch.close()
        states = list(watch.states(study_of).values())
        done, failed = states.count("done"), states.count("failed")
        self.summary = RunSummary(
            done=done,
            failed=failed,
            missing=len(study_of) - done - failed,
            seconds=time.monotonic() - started,
        )

    @staticmethod
    def _fail_unreported(
        job: JobRun, watch: RunRows, error_type: str, message: str, traceback_text: str | None = None
    ) -> None:
        """A failure row for each trial of ``job`` without a row from this run."""
        unreported = watch.refresh().without_rows(job.trials)
        job.write_failures(unreported, error_type=error_type, message=message, traceback_text=traceback_text)

    def _run_here(self, launch: Launch, watch: RunRows, progress: RunProgress) -> None:
        for index, job in enumerate(launch.jobs, start=1):
            trials = list(job.trials)
            on_step = progress.start_job(index, trials)
            steps = {"on_step": on_step} if on_step is not None and accepts_on_step(self.job_fn) else {}
            try:
                with phases.listening(getattr(on_step, "phase", None) if steps else None):  # the core's phases
                    self.job_fn(trials, job.store, sweep=job.sweep, studies=dict(job.studies),
                                checkpoint_dir=job.checkpoint_dir, **steps)  # fmt: skip
            except StoreWriteError:
                raise  # the store cannot take rows: stop, rather than train jobs that cannot be recorded
            except Exception as error:
                self._fail_unreported(job, watch, type(error).__name__, str(error), traceback.format_exc())
            progress.job_ended(index, trials, watch.refresh().states(launch.studies))

    def worker_threads(self, workers: int) -> int:
        """Torch threads per training process (`kdgrid.launch.threads.training_threads`): ``local_threads``, else
        ``OMP_NUM_THREADS``, else the CPUs this process may use (its affinity mask and cgroup quota,
        `kdgrid.cpus`; not the machine's count, which SLURM and containers restrict) divided among the
        ``workers`` (1: jobs run in this process)."""
        return training_threads(self.settings.threads, workers)

    def _run_pool(self, launch: Launch, watch: RunRows, progress: RunProgress) -> None:
        jobs, study_of = launch.jobs, launch.studies
        slot_gpus = self.worker_gpus()  # a process takes a free slot, and the slot's GPU
        workers = len(slot_gpus)
        context = multiprocessing.get_context(self.settings.start_method)
        threads = self.worker_threads(workers)
        waiting = list(enumerate(jobs, start=1))
        lines = isinstance(progress, PlainProgress)  # a log: each job writes its epoch lines
        running: list[tuple[Any, JobRun, int, int]] = []
        try:
            while waiting or running:
                while waiting and len(running) < workers:
                    index, job = waiting.pop(0)
                    slot = min(set(range(workers)) - {used for _, _, used, _ in running})
                    args = (
                        self.job_fn,
                        list(job.trials),
                        str(job.store),
                        job.sweep,
                        dict(job.studies),  # this job's trials only: pickled for the process
                        str(job.checkpoint_dir),
                        threads,
                        slot_gpus[slot],
                        plugin_environment(),
                        local_sharing(slot_gpus[slot], slot_gpus),
                        (index, len(jobs)) if lines else None,
                    )
                    process = context.Process(target=_run_in_child, args=args, daemon=False)
                    with _visible_devices(slot_gpus[slot]):
                        process.start()
                    running.append((process, job, slot, index))
                time.sleep(self.settings.poll_s)
                still: list[tuple[Any, JobRun, int, int]] = []
                for process, job, slot, index in running:
                    if process.is_alive():
                        still.append((process, job, slot, index))
                        continue
                    process.join()
                    if process.exitcode != 0:
                        self._fail_unreported(job, watch, "WorkerDied", _exit_reason(process.exitcode))
                    progress.job_ended(index, list(job.trials), watch.refresh().states(study_of))
                running = still
                progress.show(watch.refresh().states(study_of))
        finally:
            for process, _, _, _ in running:  # interrupted: stop our own workers, by their pids
                process.terminate()
                process.join(timeout=10)


def _progress_title(sweep: str, study_of: Mapping[str, str]) -> str:
    """``sweep/study`` when every trial of the call is of one study, else ``sweep (n studies)``."""
    names = sorted(set(study_of.values()) - {""})
    if len(names) == 1:
        return f"{sweep}/{names[0]}"
    return f"{sweep} ({len(names)} studies)" if names else sweep
