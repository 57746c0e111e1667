"""The teacher gate run by `kdgrid run`'s pre-flight, on this machine, before the store is created.

A job gates its teacher when it starts (`kdgrid.core.job.load_job`, `kdgrid.core.teacher_gate`); a teacher refused
there fails every trial of its job, and the first run of a sweep would fill the store with failed rows. Where jobs
run on this machine (the local executor), the pre-flight therefore gates each teacher first, once per distinct
(teacher, task, max length, gate switch, declared order) of the trials to run (`gate_inputs`):

- a verdict already cached (`cached_verdict`) is read, nothing loaded;
- otherwise the job's own start-up runs (`load_job`: teacher, label order, tokenized data, gate) on the device
  the local executor's jobs use, the verdict is cached under the gate's key, and everything is freed again. The
  jobs then find the verdict cached, and the task's tokenization in the disk cache, so a run pays mainly one
  extra teacher load per distinct teacher and task. (A teacher without an identity, `teacher_identity`, has no
  cached verdict: its jobs score it again.)

Ray and SLURM jobs run elsewhere (other GPUs, other caches): their pre-flight reads cached verdicts only
(`kdgrid.core.teacher_gate.cached_refusals`) and each job still gates its teacher at start.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable

import torch

from kdgrid.core.job import load_job
from kdgrid.core.runtime import make_runtime
from kdgrid.core.teacher_gate import TeacherGateRefused, cached_verdict, gate_applies, gate_inputs
from kdgrid.errors import KdgridError
from kdgrid.trial import Trial


def _free_device_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def gate_teachers_here(
    trials: Iterable[Trial], *, device: str = "auto", log: Callable[[str], None] | None = None
) -> tuple[list[str], list[str]]:
    """Gate the teachers of ``trials`` on this machine (module docstring), each verdict cached.

    Args:
        trials: the trials a run is about to start.
        device: where to score a teacher whose verdict is not cached (``auto``: the GPU if any, as jobs do).
        log: called with one line per teacher scored here (not for cached verdicts).

    Returns:
        The refusal messages (each names the declaration to add), and the messages of jobs that could not even
        start (their teacher or data cannot be loaded); each message once.
    """
    identities: dict[str, str | None] = {}
    seen: set[tuple[object, ...]] = set()
    refusals: list[str] = []
    problems: list[str] = []
    runtime = None
    for trial in trials:
        inputs = gate_inputs(trial)
        if inputs in seen:
            continue
        seen.add(inputs)
        if not gate_applies(trial):
            continue
        report = cached_verdict(trial, identities)
        if report is None:
            runtime = runtime or make_runtime(device)
            if log is not None:
                log(
                    f"teacher gate: scoring teacher {trial.teacher} on task {trial.task} on {runtime.description}"
                )
            try:
                job = load_job(trial, runtime)
                report = dict(job.teacher_gate)
                del job
            except TeacherGateRefused as refused:
                report = refused.report
            except KdgridError as error:
                problems.append(str(error))
                continue
            finally:
                _free_device_memory()
        if report.get("decision") == "refused":
            refusals.append(str(report.get("message")))
    return list(dict.fromkeys(refusals)), list(dict.fromkeys(problems))
