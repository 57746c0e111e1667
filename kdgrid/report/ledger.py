"""The cost ledger: what sharing one teacher pass per job saved, from the rows' own records.

Every row records its share of the teacher passes (`kdgrid.core.teacher.share`). Per (sweep, study), summed over
every attempt's row:

- forwards run = sum of ``teacher_batches_shared`` (each forward split between the students it fed);
- per-trial forwards = sum of ``teacher_batches`` (what training each trial alone would have run);
- device hours saved = sum of ``teacher_s - teacher_share_s`` / 3600 (the teacher time the other students of a
  batch would have spent again alone), beside the device hours spent (sum of ``wall_time_s``).

Rows written before kdgrid recorded these (or a failure row of a job that never reached a batch) count in
``rows_without_record``; they add nothing to the sums rather than a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from kdgrid.core.teacher.share import (
    TEACHER_BATCHES,
    TEACHER_BATCHES_SHARED,
    TEACHER_SECONDS,
    TEACHER_SHARE_SECONDS,
)
from kdgrid.report.gather import SECONDS_PER_HOUR, parse_json


@dataclass(frozen=True)
class LedgerLine:
    """The ledger of one (sweep, study); ``sweep == study == ""`` for the total."""

    sweep: str
    study: str
    rows: int
    forwards_run: float
    forwards_per_trial: int
    device_hours: float
    hours_saved: float
    rows_without_record: int

    @property
    def forwards_saved(self) -> float:
        return self.forwards_per_trial - self.forwards_run

    @property
    def sharing(self) -> float:
        """Per-trial forwards per forward run (1.0: nothing shared); NaN when nothing was recorded."""
        return self.forwards_per_trial / self.forwards_run if self.forwards_run else float("nan")


def _line(sweep: str, study: str, rows: pd.DataFrame) -> LedgerLine:
    extras = [parse_json(text, {}) for text in rows["extra_json"]]
    recorded = [e for e in extras if isinstance(e, dict) and TEACHER_BATCHES in e]

    def total(key: str) -> float:
        return float(sum(float(e.get(key) or 0.0) for e in recorded))

    seconds = pd.to_numeric(rows["wall_time_s"], errors="coerce").fillna(0.0).sum()
    return LedgerLine(
        sweep=sweep,
        study=study,
        rows=len(rows),
        forwards_run=total(TEACHER_BATCHES_SHARED),
        forwards_per_trial=round(total(TEACHER_BATCHES)),
        device_hours=float(seconds) / SECONDS_PER_HOUR,
        hours_saved=(total(TEACHER_SECONDS) - total(TEACHER_SHARE_SECONDS)) / SECONDS_PER_HOUR,
        rows_without_record=len(rows) - len(recorded),
    )


def cost_ledger(rows: pd.DataFrame) -> list[LedgerLine]:
    """One line per (sweep, study) of ``rows`` (every attempt, the store's columns), sorted, then the total."""
    if rows.empty:
        return [_line("", "", rows)]
    keyed = rows.assign(_sweep=rows["sweep"].fillna(""), _study=rows["study"].fillna(""))
    lines = [
        _line(str(sweep), str(study), group)
        for (sweep, study), group in keyed.groupby(["_sweep", "_study"], sort=True)
    ]
    return [*lines, _line("", "", rows)]
