"""What a job is to the executors: its key, its checkpoint folder, the study each of its trials' rows records,
and which of its trials are still to run, so that a retried or requeued job never runs a finished trial twice.

A job may mix studies: trials of two studies of a sweep that share a group (`kdgrid.trial.group_key`) share
one teacher pass, and each row still records its own study. Executors therefore carry ``studies``, a mapping
trial id -> study name (`kdgrid.grid.Sweep.study_of`), and `row_studies` is the one rule that reads it.
What a job runs, the job function, is `kdgrid.launch.job_fn`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from kdgrid.grid.plan import checkpoint_dir_for
from kdgrid.trial import Trial


def job_key(trials: Sequence[Trial]) -> str:
    """A stable name for a job: 16 hex digits of the hash of its sorted trial ids."""
    ids = ",".join(sorted(trial.trial_id for trial in trials))
    return hashlib.sha256(ids.encode()).hexdigest()[:16]


def row_studies(trials: Iterable[Trial], studies: Mapping[str, str] | None) -> dict[str, str]:
    """The study each trial's row records, by trial id: ``studies[trial_id]``, or ``""`` (no study) for a
    trial ``studies`` does not name or when ``studies`` is None. Also what executors send to a job process:
    only its own trials' entries, not the whole sweep's mapping."""
    given = studies or {}
    return {trial.trial_id: given.get(trial.trial_id, "") for trial in trials}


def job_checkpoint_dir(store_dir: Path, trials: Sequence[Trial]) -> Path:
    """Where a job keeps its epoch checkpoints: the grid's ``<store>/_checkpoints/<group hash>``, the same folder
    under every executor, so a job preempted on SLURM can be finished by another executor from its checkpoints."""
    return checkpoint_dir_for(Path(store_dir), list(trials))


def not_done(trials: Sequence[Trial], done: set[str]) -> list[Trial]:
    """The trials of a job still to run (order kept)."""
    return [trial for trial in trials if trial.trial_id not in done]
