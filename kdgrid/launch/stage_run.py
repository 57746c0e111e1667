"""Jobs run in dependency order: a teacher assistant's job before the jobs of the trials it teaches
(`kdgrid.grid.stages`), in every executor.

- Without a chain (one stage), the executor runs the jobs exactly as it always did.
- Local and Ray: stage after stage; each stage's jobs run as before (in parallel where the executor does), and
  a stage starts once the one before has ended (Ray: one Tune run per stage).
- SLURM: every stage is submitted at once, each stage's arrays with ``--dependency=afterok:<the arrays of the
  stage before>`` and ``--kill-on-invalid-dep=yes``; a task that ran its jobs ends ok even when trials failed
  (failures are rows), so the dependants run and fail, naming their assistant, when it failed. With ``wait``
  (the default) the executor then waits for every stage in order.

Before anything runs, the store records which trials' students are to be kept (`want_students`). A failed stage
(an executor's `LaunchError`) does not stop the next: its dependants fail with a message naming their assistant
(`kdgrid.launch.assistant_worker`), and the first error is raised once every stage has ended.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kdgrid.errors import LaunchError
from kdgrid.grid.stages import assistant_ids, job_stages
from kdgrid.launch.job import Launch
from kdgrid.store.trained_students import want_students
from kdgrid.trial import Trial

Job = list[Trial]


def _quiet(_line: str) -> None:
    pass


def run_in_stages(
    runner: Any,
    jobs: Sequence[Job],
    store: Path,
    *,
    sweep: str,
    studies: Mapping[str, str] | None,
    log: Callable[[str], None] = _quiet,
) -> None:
    """Run ``jobs`` through ``runner`` (an executor) in dependency order (module docstring)."""
    jobs = [job for job in jobs if job]
    keep = assistant_ids(trial for job in jobs for trial in job)
    if keep:
        want_students(store, keep)
    stages = job_stages(jobs)
    if len(stages) <= 1:
        runner.run(jobs, store, sweep=sweep, studies=studies)
        return
    log(f"{len(stages)} stages: teacher assistants train before the trials they teach ("
        + ", ".join(f"stage {n}: {len(stage)} job(s)" for n, stage in enumerate(stages, start=1)) + ")")  # fmt: skip
    if hasattr(runner, "submit") and hasattr(runner, "wait_for"):
        _submit_chained(runner, stages, store, sweep=sweep, studies=studies)
        return
    errors: list[LaunchError] = []
    for number, stage in enumerate(stages, start=1):
        log(f"stage {number} of {len(stages)}: {len(stage)} job(s)")
        try:
            runner.run(stage, store, sweep=sweep, studies=studies)
        except LaunchError as error:
            errors.append(error)
    if errors:
        raise errors[0]


def _submit_chained(
    runner: Any, stages: Sequence[Sequence[Job]], store: Path, *, sweep: str, studies: Mapping[str, str] | None
) -> None:
    """SLURM: each stage submitted with an ``afterok`` dependency on the arrays of the stage before; then, with
    the executor's ``wait``, every stage waited for in order."""
    submissions = []
    after: list[str] = []
    for stage in stages:
        submission = runner.submit(Launch.of(stage, store, sweep=sweep, studies=studies), after=after)
        if submission is not None:
            submissions.append(submission)
            after = sorted({job_id.split("_")[0] for job_id in submission.job_ids}, key=int)
    if not getattr(runner, "wait", True):
        return
    errors: list[LaunchError] = []
    for submission in submissions:
        try:
            runner.wait_for(submission)
        except LaunchError as error:
            errors.append(error)
    if errors:
        raise errors[0]
