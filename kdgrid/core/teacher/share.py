"""What each row records of the teacher passes it shared: the raw numbers of the report's cost ledger.

A job's students share one teacher forward per batch (`kdgrid.core.training.train.run_job`). Per batch, every student still
training gets, in its row's ``extra_json``:

- ``teacher_batches`` (+1): the teacher forwards this trial would have run had it trained alone;
- ``teacher_batches_shared`` (+1/N, N students live on that batch): its share of the forwards that ran, so the
  sum over a job's rows is the number of teacher forwards the job ran;
- ``teacher_s`` (+t, the batch's teacher seconds): the teacher time it would have spent alone;
- ``teacher_share_s`` (+t/N): its share of the teacher time that was spent (already part of ``wall_time_s``).

Sums over rows give the ledger (`kdgrid.report.ledger`): forwards run vs per-trial forwards, and the device time
the sharing saved (``teacher_s - teacher_share_s``). The values travel with a trial's checkpointed ``extra``, so a
trial resumed from an epoch checkpoint keeps counting.
"""

from __future__ import annotations

from typing import Any

TEACHER_BATCHES = "teacher_batches"
TEACHER_BATCHES_SHARED = "teacher_batches_shared"
TEACHER_SECONDS = "teacher_s"
TEACHER_SHARE_SECONDS = "teacher_share_s"


def record_teacher_pass(extra: dict[str, Any], seconds: float, students: int) -> None:
    """Add one shared teacher forward of ``seconds`` (device seconds) fed to ``students`` students (>= 1) to a
    trial's ``extra``."""
    extra[TEACHER_BATCHES] = extra.get(TEACHER_BATCHES, 0) + 1
    extra[TEACHER_BATCHES_SHARED] = extra.get(TEACHER_BATCHES_SHARED, 0.0) + 1.0 / students
    extra[TEACHER_SECONDS] = extra.get(TEACHER_SECONDS, 0.0) + seconds
    extra[TEACHER_SHARE_SECONDS] = extra.get(TEACHER_SHARE_SECONDS, 0.0) + seconds / students
