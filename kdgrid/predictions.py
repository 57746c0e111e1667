"""Per-example dev-set outcomes of a trial: what intervals, paired tests and teacher agreement are computed from.

The core fills one `DevSetPredictions` per dev set when it scores a trial at its best epoch; the store keeps them
in the trial's row (schema version 2 and later; see `kdgrid.store.schema`) and `kdgrid.store.predictions` reads
them back; `analysis.stats` resamples them. Conventions:

- ``gold``, ``student`` and ``teacher`` are aligned example by example, in the dev set's own order;
- classification: int64 class ids in the *task's* label order (a teacher whose head orders classes otherwise is
  aligned before its predictions are recorded); regression: float32 scores;
- ``fingerprint`` identifies the examples scored (hex SHA-256 of the dev set's inputs and gold labels in order), so
  two rows are compared example by example only when they scored the same examples (a smoke run that scored the
  first 64 examples has another fingerprint than a full run).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DevSetPredictions:
    """One trial's per-example outcome on one dev set.

    Attributes:
        gold: ``[N]`` gold labels (int64 class ids) or scores (float32, regression).
        student: ``[N]`` the student's predictions at its best epoch, same dtype convention as ``gold``.
        teacher: ``[N]`` the job's teacher's predictions on the same examples, or None when the row has none.
        fingerprint: hex SHA-256 identifying the examples scored (see the module docstring).
    """

    gold: np.ndarray
    student: np.ndarray
    teacher: np.ndarray | None
    fingerprint: str

    def __post_init__(self) -> None:
        n = len(self.gold)
        for name, values in (("student", self.student), ("teacher", self.teacher)):
            if values is not None and len(values) != n:
                raise ValueError(f"{name} predictions have {len(values)} entries; the dev set has {n} examples")


# dev set name (as the task names it: ``validation``, ``validation_matched``, ...) -> its per-example outcome.
TrialPredictions = dict[str, DevSetPredictions]
