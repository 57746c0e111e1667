"""What a job is to the cluster executors (SLURM, Ray): its key, its checkpoint folder, and which of its trials
are already done, so that a retried or requeued job never runs a finished trial twice."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from kdgrid.trial import Trial


def job_key(trials: Sequence[Trial]) -> str:
    """A stable name for a job: 16 hex digits of the hash of its sorted trial ids."""
    ids = ",".join(sorted(trial.trial_id for trial in trials))
    return hashlib.sha256(ids.encode()).hexdigest()[:16]


def job_checkpoint_dir(store_dir: Path, trials: Sequence[Trial]) -> Path:
    """Where a job keeps its epoch checkpoints: the grid's ``<store>/_checkpoints/<group hash>``, the same folder
    under every executor, so a job preempted on SLURM can be finished by another executor from its checkpoints."""
    from kdgrid.grid.plan import checkpoint_dir_for

    return checkpoint_dir_for(Path(store_dir), list(trials))


def done_trial_ids(store_dir: Path) -> set[str]:
    """Ids of the trials with a done row in the store (read from file names and compacted files: cheap)."""
    from kdgrid.store import read_table

    if not Path(store_dir).exists():
        return set()
    table = read_table(store_dir, ["trial_id", "status"])
    ids = table.column("trial_id").to_pylist()
    return {trial_id for trial_id, status in zip(ids, table.column("status").to_pylist(), strict=True)
            if status == "done"}  # fmt: skip


def not_done(trials: Sequence[Trial], done: set[str]) -> list[Trial]:
    """The trials of a job still to run (order kept)."""
    return [trial for trial in trials if trial.trial_id not in done]
