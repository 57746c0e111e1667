"""Job functions for testing executors: fast, deterministic, and able to fail on purpose.

`job_to_store` is a plain job function: `kdgrid.launch.worker.run_job_to_store` (the real worker, writing real rows
into the real store) given `fake_run_job`, a core that trains nothing, as its ``run_job``: each trial's behaviour comes from its ``options``
(which are part of the trial and of its id, so a test builds the trials it needs):

- ``test_seconds``: work time of the trial, spread over ``test_epochs`` epochs (default 1); after each epoch the
  progress is saved to ``checkpoint_dir/<trial_id>.epochs`` and a rerun continues from there (as the core's epoch
  checkpoints do), so a requeued job does not start over. As the core's, these checkpoints are fenced: written
  only while the ``fence`` the worker passes says the trial is still this process's, and removed when the trial
  is done only if it still is then.
- ``test_raise``: the trial raises this message: it gets a ``failed`` row and its job mates go on.
- ``test_kill_once``: a path; the first time the trial starts, the file is created and the whole process is
  killed with SIGKILL (no row, no clean-up: a node failure or the OOM killer); later attempts run normally.
- ``test_log``: a path; each start and end of the trial appends ``start|end <trial_id> <pid> <unix time>`` to it,
  so a test can count runs, see which process ran them and when.
- ``test_raise_once``: a path; like ``test_raise`` the first time (creating the file), then the trial succeeds.
- ``test_exit_once``: a path; the first time, the process leaves with `SystemExit` (what submitit's signal
  handler does after requeueing a task at its time limit); no row is written; later attempts run normally.
- ``test_pause_once``: a path; the first time the trial has finished training, the file is created (holding the
  trial id and the process id) and the trial sleeps `PAUSE_S` seconds before handing its result over: the moment a
  test stalls the process (SIGSTOP) between training and the row's write. Removing the file arms it again: the
  next trial with the option to finish pauses.
- ``test_job_log``: a path; each job holding such a trial appends ``job <pid> <trial ids of the job>`` to it
  once when it starts (a job is one teacher pass per batch): a test counts jobs and sees who shared one.

Module-level and importable as ``tests.launch.fakes``, so job processes (local worker processes, Ray actors,
SLURM array tasks) load them by reference: ``tests/launch/conftest.py`` puts the repository root on the
``PYTHONPATH`` those processes inherit.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path

from kdgrid.core.options import register_option
from kdgrid.launch.worker import ClaimsLost, run_job_to_store
from kdgrid.plugins import PLUGINS_VARIABLE
from kdgrid.result import Fence, TrialResult
from kdgrid.store import read_table
from kdgrid.trial import Trial

# The options above, declared so that sweep files using them pass validation (`kdgrid.core.options`).
for _name in (
    "test_raise",
    "test_kill_once",
    "test_log",
    "test_raise_once",
    "test_exit_once",
    "test_job_log",
    "test_pause_once",
):
    register_option(_name, "text", None, "test hook of tests/launch/fakes.py")
register_option("test_seconds", "number", None, "test hook of tests/launch/fakes.py: work time", minimum=0)
register_option("test_epochs", "int", None, "test hook of tests/launch/fakes.py: epochs", minimum=1)
register_option("test_steps", "int", None, "test hook of tests/launch/fakes.py: batches per epoch", minimum=1)
register_option(
    "test_step_s", "number", None, "test hook of tests/launch/fakes.py: seconds per batch", minimum=0
)

# `kdgrid` in a fresh process with this module as a plugin (`kdgrid.plugins`: ``KDGRID_PLUGINS``), so it knows
# the options above and hands them on to the processes that run its jobs: the command line of a test that runs
# the CLI as a subprocess with these hooks (the repository root on its PYTHONPATH: `tests/launch/conftest.py`).
KDGRID_WITH_FAKES = ["env", f"{PLUGINS_VARIABLE}={__name__}", sys.executable, "-m", "kdgrid.cli"]


STEPS_PER_EPOCH = 10
PAUSE_S = 2.0


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def fake_score(trial: Trial) -> float:
    """A deterministic accuracy in [0.5, 1) derived from the trial id."""
    return 0.5 + int(hashlib.sha256(trial.trial_id.encode()).hexdigest()[:8], 16) / 2**33


def _log(trial: Trial, event: str) -> None:
    log = trial.option("test_log")
    if log:
        with open(log, "a") as handle:
            handle.write(f"{event} {trial.trial_id} {os.getpid()} {time.time():.3f}\n")


def _held(trial: Trial, fence: Fence | None) -> bool:
    return fence is None or fence(trial.trial_id) is None


def _run_one(
    trial: Trial,
    checkpoint_dir: Path | None,
    on_step: Callable[[int, int], None] | None = None,
    fence: Fence | None = None,
) -> TrialResult:
    started = _now()
    _log(trial, "start")
    kill_once = trial.option("test_kill_once")
    if kill_once and not Path(kill_once).exists():
        Path(kill_once).touch()
        os.kill(os.getpid(), signal.SIGKILL)
    exit_once = trial.option("test_exit_once")
    if exit_once and not Path(exit_once).exists():
        Path(exit_once).touch()
        raise SystemExit(1)
    if trial.option("test_raise"):
        raise RuntimeError(str(trial.option("test_raise")))
    raise_once = trial.option("test_raise_once")
    if raise_once and not Path(raise_once).exists():
        Path(raise_once).touch()
        raise RuntimeError(f"failing once on purpose ({raise_once})")
    epochs = int(trial.option("test_epochs", 1))
    per_epoch = float(trial.option("test_seconds", 0.0)) / epochs
    progress = checkpoint_dir / f"{trial.trial_id}.epochs" if checkpoint_dir is not None else None
    done_epochs = int(progress.read_text()) if progress is not None and progress.exists() else 0
    curve = []
    for epoch in range(done_epochs + 1, epochs + 1):
        for _ in range(STEPS_PER_EPOCH):  # steps, as the core's, so `on_step` can stop the job between them
            time.sleep(per_epoch / STEPS_PER_EPOCH)
            if on_step is not None:
                on_step(epoch, epochs)
        if progress is not None and epoch < epochs and _held(trial, fence):  # as the core: none after the last
            temporary = progress.with_name(f".{progress.name}.{os.getpid()}.tmp")
            temporary.write_text(str(epoch))
            os.replace(temporary, progress)
        curve.append(
            {"epoch": epoch, "scores": {"validation": {"accuracy": fake_score(trial)}}, "loss_terms": {}}
        )
    scores = {"validation": {"accuracy": fake_score(trial)}}
    pause_once = trial.option("test_pause_once")
    if pause_once and not Path(pause_once).exists():
        Path(pause_once).write_text(f"{trial.trial_id} {os.getpid()}")  # who paused, for a test to stop it
        time.sleep(PAUSE_S)
    _log(trial, "end")
    return TrialResult(
        trial=trial,
        status="done",
        scores=scores,
        last_scores=scores,
        best_epoch=epochs,
        curve=curve,
        wall_time_s=per_epoch * (epochs - done_epochs),
        device="cpu",
        started_at=started,
        ended_at=_now(),
        extra={"resumed_from_epoch": done_epochs, "pid": os.getpid(), "host": socket.gethostname()},
    )


def failed_result(trial: Trial, error: Exception) -> TrialResult:
    """The failed row a core returns for a trial that raised ``error`` (called inside its ``except``)."""
    return TrialResult(
        trial=trial,
        status="failed",
        error_type=type(error).__name__,
        error_message=str(error),
        traceback=traceback.format_exc(),
        started_at=_now(),
        ended_at=_now(),
    )


def fake_run_job(
    trials: list[Trial],
    *,
    checkpoint_dir: Path | None = None,
    device: str = "auto",
    on_result: Callable[[TrialResult], None] | None = None,
    on_step: Callable[[int, int], None] | None = None,
    fence: Fence | None = None,
) -> list[TrialResult]:
    """`kdgrid.core.training.train.run_job`'s contract without training: one result per trial, failures isolated, files
    fenced (a done trial's progress file removed only while ``fence`` says the trial is still this process's)."""
    for job_log in sorted({str(t.option("test_job_log")) for t in trials if t.option("test_job_log")}):
        with open(job_log, "a") as handle:
            handle.write(f"job {os.getpid()} {' '.join(t.trial_id for t in trials)}\n")
    folder = Path(checkpoint_dir) if checkpoint_dir is not None else None

    def handed_over(result: TrialResult) -> None:
        held = _held(result.trial, fence)  # asked before the row, as the core does
        if on_result is not None:
            on_result(result)
        if folder is not None and result.status == "done" and held:
            (folder / f"{result.trial.trial_id}.epochs").unlink(missing_ok=True)

    return each_trial(trials, lambda trial: _run_one(trial, folder, on_step, fence), handed_over)


def each_trial(
    trials: list[Trial],
    run_one: Callable[[Trial], TrialResult],
    on_result: Callable[[TrialResult], None] | None,
) -> list[TrialResult]:
    """A fake core's loop: ``run_one`` each trial in turn, a trial that raises failing alone (`failed_result`),
    each result handed to ``on_result`` as it comes; `ClaimsLost` stops the job, as the real core lets an
    exception of ``on_step`` through."""
    results = []
    for trial in trials:
        try:
            result = run_one(trial)
        except ClaimsLost:
            raise
        except Exception as error:
            result = failed_result(trial, error)
        if on_result is not None:
            on_result(result)
        results.append(result)
    return results


def job_to_store(
    trials: list[Trial],
    store_dir: Path,
    *,
    sweep: str,
    studies: Mapping[str, str] | None = None,
    checkpoint_dir: Path | None = None,
) -> None:
    """`run_job_to_store` itself with `fake_run_job` as its core: the real worker writes the rows (and its crash
    fallback applies); only the training is faked."""
    run_job_to_store(
        trials, store_dir, sweep=sweep, studies=studies, checkpoint_dir=checkpoint_dir, run_job=fake_run_job
    )


def stepping_run_job(
    trials: list[Trial],
    *,
    checkpoint_dir: Path | None = None,
    device: str = "auto",
    on_result: Callable[[TrialResult], None] | None = None,
    on_step: Callable[[int, int], None] | None = None,
) -> list[TrialResult]:
    """`fake_run_job`, after reporting the job's shared batches through ``on_step`` as the core does: ``epochs``
    (the trials' field) x ``test_steps`` (option, default 4) batches, each taking ``test_step_s`` seconds."""
    per_epoch = int(trials[0].option("test_steps", 4))
    pause = float(trials[0].option("test_step_s", 0.0))
    total = trials[0].epochs * per_epoch
    for step in range(1, total + 1):
        time.sleep(pause)
        if on_step is not None:
            on_step(step, total)
    return fake_run_job(trials, checkpoint_dir=checkpoint_dir, device=device, on_result=on_result)


def stepping_job(
    trials: list[Trial],
    store_dir: Path,
    *,
    sweep: str,
    studies: Mapping[str, str] | None = None,
    checkpoint_dir: Path | None = None,
    on_step: Callable[[int, int], None] | None = None,
) -> None:
    """`job_to_store` with `stepping_run_job` as its core (it takes and reports ``on_step``)."""
    run_job_to_store(trials, store_dir, sweep=sweep, studies=studies, checkpoint_dir=checkpoint_dir,
                     on_step=on_step, run_job=stepping_run_job)  # fmt: skip


def crashing_job(
    trials: list[Trial],
    store_dir: Path,
    *,
    sweep: str,
    studies: Mapping[str, str] | None = None,
    checkpoint_dir: Path | None = None,
) -> None:
    """A job function that fails as a whole before writing anything (a broken environment on a node)."""
    raise RuntimeError(f"crashing_job: refusing {len(trials)} trial(s) on purpose")


def hub_environment_job(
    trials: list[Trial],
    store_dir: Path,
    *,
    sweep: str,
    studies: Mapping[str, str] | None = None,
    checkpoint_dir: Path | None = None,
) -> None:
    """`job_to_store`, after writing what the job's process sees of the Hub's offline switches to
    ``<store>/hub-env-<pid>.json`` (`hub_environment_seen`): the variable and what ``huggingface_hub`` and
    ``datasets``, imported first, decide from it."""
    import datasets
    import huggingface_hub

    seen = {
        "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE"),
        "hub_offline": huggingface_hub.is_offline_mode(),
        "datasets_offline": datasets.config.HF_HUB_OFFLINE,
    }
    (Path(store_dir) / f"hub-env-{os.getpid()}.json").write_text(json.dumps(seen))
    job_to_store(trials, store_dir, sweep=sweep, studies=studies, checkpoint_dir=checkpoint_dir)


def hub_environment_seen(store: Path) -> list[dict[str, object]]:
    """What each process that ran a `hub_environment_job` saw."""
    return [json.loads(path.read_text()) for path in sorted(Path(store).glob("hub-env-*.json"))]


# -- helpers for tests that check the store after a run --------------------------------------------------------------
def make_trial(seed: int = 0, **options: object) -> Trial:
    """A trial for `job_to_store`; trials of equal ``seed`` can share a job. ``options`` set its behaviour."""
    return Trial(
        task="synthetic-single-binary", teacher="minilm-l6", student="bert-tiny", seed=seed, options=options
    )


def store_studies(store: Path) -> dict[str, str]:
    """trial id -> the study its rows record, for a store where each trial's rows share one study.

    Raises:
        AssertionError: a trial whose rows record different studies.
    """
    table = read_table(store, ["trial_id", "study"])
    studies: dict[str, str] = {}
    for trial_id, study in zip(
        table.column("trial_id").to_pylist(), table.column("study").to_pylist(), strict=True
    ):
        assert studies.setdefault(trial_id, study) == study, (
            f"trial {trial_id}: rows of {studies[trial_id]!r} and {study!r}"
        )
    return studies


def store_rows(store: Path) -> list[tuple[str, str]]:
    """(trial id, status) of every row in the store, read through the store's own reader."""
    table = read_table(store, ["trial_id", "status"])
    return list(zip(table.column("trial_id").to_pylist(), table.column("status").to_pylist(), strict=True))


def pending_jobs(jobs: list[list[Trial]], store: Path) -> list[list[Trial]]:
    """What a resume runs: each trial without a done row, kept in its original job (empty jobs dropped)."""
    done = {trial_id for trial_id, status in store_rows(store) if status == "done"}
    remaining = [[trial for trial in job if trial.trial_id not in done] for job in jobs]
    return [job for job in remaining if job]


def job_log_jobs(log: Path) -> list[set[str]]:
    """The jobs a ``test_job_log`` file recorded, each as the set of its trial ids, in file order."""
    if not log.exists():
        return []
    return [set(line.split()[2:]) for line in log.read_text().splitlines() if line.startswith("job ")]


def log_events(log: Path) -> list[tuple[str, str, int, float]]:
    """The ``test_log`` lines as (event, trial id, pid, unix time), in file order."""
    if not log.exists():
        return []
    events = []
    for line in log.read_text().splitlines():
        event, trial_id, pid, when = line.split()
        events.append((event, trial_id, int(pid), float(when)))
    return events


def max_overlap(log: Path) -> int:
    """The largest number of trials running at the same instant, from a ``test_log`` file."""
    changes = sorted((when, 1 if event == "start" else -1) for event, _, _, when in log_events(log))
    running = peak = 0
    for _, delta in changes:  # at equal times an end (-1) sorts first: touching runs do not overlap
        running += delta
        peak = max(peak, running)
    return peak
