"""Planning: trials into jobs that share one teacher pass, split to a size and memory budget.

Trials with the same `kdgrid.trial.group_key` (task, teacher, data-order seed, batch size, sequence length,
epochs, train subset) see the same batches in the same order, so one teacher forward per batch can feed all of them
(docs/design.md, "The shared teacher pass"). A group larger than ``max_group_size`` trials, or whose students
would need more than ``memory_budget_gb`` at its peak (`kdgrid.grid.memory_estimate`: every student's weights
and optimizer state, one student's activations, the teacher and its features of one batch), is split into several jobs. The split
is deterministic (trials sorted by id), so a re-planned job keeps its checkpoints.

The budget is that of one job where it will run; the commands take it from the executor
(``Executor.memory_budget()``, see `kdgrid.launch.memory`) unless ``--memory-budget-gb`` gives it.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from kdgrid.grid.memory_estimate import JobMemory, estimate_job_memory_gb, estimate_trial_memory_gb
from kdgrid.store.layout import checkpoints_dir
from kdgrid.trial import Trial, group_fields, group_key

Job = list[Trial]

__all__ = [
    "Job",
    "checkpoint_dir_for",
    "estimate_job_memory_gb",
    "estimate_trial_memory_gb",
    "group_hash",
    "plan_jobs",
]


def group_hash(trial: Trial) -> str:
    """16 hex digits naming a trial's group (its checkpoint folder under the store)."""
    return hashlib.sha256(json.dumps(group_fields(trial), sort_keys=True).encode()).hexdigest()[:16]


def checkpoint_dir_for(store_dir: Path, job: Job) -> Path:
    """Where a job keeps its epoch checkpoints: ``<store>/_checkpoints/<group hash>``. The core writes one file
    per trial id inside it, so split jobs of one group can share the folder."""
    return checkpoints_dir(Path(store_dir)) / group_hash(job[0])


def plan_jobs(
    trials: Iterable[Trial],
    *,
    max_group_size: int | None = None,
    memory_budget_gb: float | None = None,
) -> list[Job]:
    """Group trials by `group_key` and split each group into jobs of at most ``max_group_size`` trials whose
    estimated peak (`estimate_job_memory_gb`) is at most ``memory_budget_gb`` (a trial over the budget on its own
    still gets a job of one). Jobs come in a stable order (by group, then trial id).

    Raises:
        ValueError: ``max_group_size`` < 1 or ``memory_budget_gb`` <= 0 (None means no limit for either).
    """
    if max_group_size is not None and max_group_size < 1:
        raise ValueError("max_group_size must be >= 1")
    if memory_budget_gb is not None and not memory_budget_gb > 0:
        raise ValueError(f"memory_budget_gb must be > 0 GB (None = no budget), got {memory_budget_gb!r}")
    groups: dict[tuple, list[Trial]] = defaultdict(list)
    for trial in trials:
        groups[group_key(trial)].append(trial)
    jobs: list[Job] = []
    for key in sorted(groups, key=lambda k: json.dumps(k, default=str)):
        members = sorted(groups[key], key=lambda trial: trial.trial_id)  # Trial caches its id
        job: Job = []
        memory = JobMemory()
        for trial in members:
            # the job with this trial added (per-trial facts are cached by every field they depend on)
            grown = memory.plus(trial) if memory_budget_gb is not None else memory
            full = max_group_size is not None and len(job) >= max_group_size
            over = memory_budget_gb is not None and grown.gb > memory_budget_gb
            if job and (full or over):
                jobs.append(job)
                job, memory = [], JobMemory()
                grown = memory.plus(trial) if memory_budget_gb is not None else memory
            job.append(trial)
            memory = grown
        if job:
            jobs.append(job)
    return jobs
