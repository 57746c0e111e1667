"""The gate tier of the pre-flight: the teacher gate run by `kdgrid run`'s pre-flight, on this machine, before
the store is created (`check_gate`).

A job gates its teacher when it starts (`kdgrid.core.job.loaded_job.load_job`, `kdgrid.core.teacher.gate`); a teacher refused
there fails every trial of its job, and the first run of a sweep would fill the store with failed rows. Where jobs
run on this machine (the local executor), the pre-flight therefore gates each teacher first, once per distinct
(teacher, task, max length, gate switch, declared order) of the trials to run (`gate_inputs`):

- a verdict already cached (`cached_verdict`) is read, nothing loaded;
- otherwise the job's own start-up runs (`load_job`: teacher, label order, tokenized data, gate) on the device
  the local executor's jobs use, the verdict is cached under the gate's key, and everything is freed again. The
  jobs then find the verdict cached, and the task's tokenization in the disk cache, so a run pays mainly one
  extra teacher load per distinct teacher and task. (A teacher without an identity, `teacher_identity`, has no
  cached verdict: its jobs score it again.)

On a GPU the scoring runs in one child process (started with ``spawn``, `score_in_child`), never in the launcher:
a CUDA context created here would make every worker the local executor forks fail ("Cannot re-initialize CUDA in
forked subprocess"), and with spawned workers it would hold GPU memory outside the jobs' budget for the whole run.
The child returns each verdict (or the job's start-up error) and exits, freeing its context. On the CPU the scoring
runs in this process (no context to protect, and no child's start-up to pay).

Ray and SLURM jobs run elsewhere (other GPUs, other caches): their pre-flight reads cached verdicts only
(`kdgrid.core.teacher.gate.cached_refusals`) and each job still gates its teacher at start.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor

import torch

from kdgrid.core.job.loaded_job import load_job
from kdgrid.core.model.runtime import make_runtime
from kdgrid.core.teacher.gate import (
    TeacherGateRefused,
    cached_refusals,
    cached_verdict,
    gate_applies,
    gate_inputs,
)
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.trial import Trial

# A gate verdict as the pre-flight collects it: the gate's report (accepted or refused), or the message of the
# job's start-up error with no report.
Verdict = tuple[dict[str, object] | None, str | None]


def _free_memory() -> None:
    gc.collect()


# torch's fork-safe availability check (NVML, not the CUDA runtime)
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"


def on_gpu(device: str) -> bool:
    """Whether scoring on ``device`` (``auto``, ``cpu``, ``cuda``, ``cuda:N``) would use a GPU, asked without
    initialising CUDA here: torch's availability check goes through NVML (``PYTORCH_NVML_BASED_CUDA_CHECK``),
    which, unlike the CUDA runtime's device count, leaves forked workers able to use CUDA."""
    if device != "auto":
        return device != "cpu"
    saved = os.environ.get(NVML_CHECK)
    os.environ[NVML_CHECK] = "1"
    try:
        return torch.cuda.is_available()
    finally:
        if saved is None:
            del os.environ[NVML_CHECK]
        else:
            os.environ[NVML_CHECK] = saved


def score_teacher(trial: Trial, device: str) -> Verdict:
    """Run ``trial``'s job start-up (`load_job`, its gate included) on ``device`` in this process: the gate's
    report (accepted or refused), or the job's start-up error (a `KdgridError`'s message) with no report."""
    try:
        job = load_job(trial, make_runtime(device))
        report: dict[str, object] = dict(job.teacher_gate)
        del job
        return report, None
    except TeacherGateRefused as refused:
        return refused.report, None
    except KdgridError as error:
        return None, str(error)
    finally:
        _free_memory()


def _score_all(trials: list[Trial], device: str) -> list[Verdict]:
    return [score_teacher(trial, device) for trial in trials]


def score_in_child(trials: list[Trial], device: str) -> list[Verdict]:
    """`score_teacher` of each trial, in one child process started with ``spawn`` (module docstring): its CUDA
    context, and the teacher's memory, end with it. The child inherits this process's environment (the caches,
    ``KDGRID_AMP``, ``CUDA_VISIBLE_DEVICES``)."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(_score_all, trials, device).result()


def gate_teachers_here(
    trials: Iterable[Trial], *, device: str = "auto", log: Callable[[str], None] | None = None
) -> tuple[list[str], list[str]]:
    """Gate the teachers of ``trials`` on this machine (module docstring), each verdict cached.

    Args:
        trials: the trials a run is about to start.
        device: where to score a teacher whose verdict is not cached (``auto``: the GPU if any, as jobs do; a GPU
            is only ever used from a child process).
        log: called with one line per teacher scored here (not for cached verdicts).

    Returns:
        The refusal messages (each names the declaration to add), and the messages of jobs that could not even
        start (their teacher or data cannot be loaded); each message once.
    """
    identities: dict[str, str | None] = {}
    seen: set[tuple[object, ...]] = set()
    verdicts: list[Verdict | Trial] = []  # in trial order; a Trial is still to be scored
    for trial in trials:
        inputs = gate_inputs(trial)
        if inputs in seen:
            continue
        seen.add(inputs)
        if not gate_applies(trial):
            continue
        report = cached_verdict(trial, identities)
        verdicts.append(trial if report is None else (report, None))
    to_score = [v for v in verdicts if isinstance(v, Trial)]
    if to_score:
        gpu = on_gpu(device)
        if log is not None:
            where = f"a child process ({device})" if gpu else "cpu"
            for trial in to_score:
                log(f"teacher gate: scoring teacher {trial.teacher} on task {trial.task} on {where}")
        scored = iter(score_in_child(to_score, device) if gpu else _score_all(to_score, device))
        verdicts = [next(scored) if isinstance(v, Trial) else v for v in verdicts]
    refusals: list[str] = []
    problems: list[str] = []
    for verdict in verdicts:
        assert not isinstance(verdict, Trial)  # every one scored above
        report, problem = verdict
        if problem is not None:
            problems.append(problem)
        elif report is not None and report.get("decision") == "refused":
            refusals.append(str(report.get("message")))
    return list(dict.fromkeys(refusals)), list(dict.fromkeys(problems))


def check_gate(trials: list[Trial], *, here: bool, log: Callable[[str], None] | None = None) -> None:
    """The gate tier of the pre-flight. With ``here`` (jobs run on this machine: the local executor's core jobs)
    the gate runs here once per distinct teacher and task (`gate_teachers_here`: a verdict not cached yet is
    computed and cached, so the jobs read it); else only its cached verdicts are read
    (`kdgrid.core.teacher.gate.cached_refusals`: no teacher is loaded here; each job still gates its teacher
    when it starts).

    Raises:
        ConfigError: jobs that cannot even start here; or every teacher the gate refuses on a task of
            ``trials``, with the gate's message (which names the declaration to add).
    """
    if here:
        refusals, problems = gate_teachers_here(trials, log=log)
        if problems:
            raise ConfigError("pre-flight: these jobs cannot start on this machine:\n" + "\n".join(problems))
        if refusals:
            raise ConfigError(
                "pre-flight: the teacher gate refuses the teacher of these trials (nothing was run):\n"
                + "\n".join(refusals)
            )
        return
    refusals = cached_refusals(trials)
    if refusals:
        raise ConfigError(
            "pre-flight: the teacher gate has already refused the teacher of these trials (its cached verdict; "
            "nothing was run):\n" + "\n".join(refusals)
        )
