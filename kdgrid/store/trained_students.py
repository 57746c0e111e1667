"""Trained students kept in the store, for the trials they teach (teacher assistants: `kdgrid.grid.stages`).

Layout: ``<store>/_students/<trial_id>/`` holds a trial's trained student (its weights, config and tokenizer,
as ``save_pretrained`` writes them, and a manifest), written under a hidden temporary name and renamed whole;
``<store>/_students/<trial_id>.wanted`` says, before the run starts, that some trial of a sweep learns from
that trial, so its job keeps the student (no other trial's weights are kept). The done row of such a trial
records the SHA-256 of the weights (``extra["student_weights_sha256"]``): the one record a dependant's teacher is
checked against (`assistant_record`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kdgrid import store as store_rows  # its readers (pandas, pyarrow) are imported when first called
from kdgrid.atomic_files import write_file_atomically
from kdgrid.core.model.trained_teacher import WEIGHTS_SHA256

STUDENTS_DIR = "_students"
WANTED_SUFFIX = ".wanted"


def students_dir(store: Path) -> Path:
    return Path(store) / STUDENTS_DIR


def student_dir(store: Path, trial_id: str) -> Path:
    """Where trial ``trial_id``'s trained student is kept."""
    return students_dir(store) / trial_id


def want_students(store: Path, trial_ids: Iterable[str]) -> None:
    """Record that the students of ``trial_ids`` are to be kept when they finish."""
    for trial_id in sorted(set(trial_ids)):
        marker = students_dir(store) / f"{trial_id}{WANTED_SUFFIX}"
        if not marker.exists():
            marker.parent.mkdir(parents=True, exist_ok=True)
            write_file_atomically(marker, lambda handle: handle.write(b""))


def is_wanted(store: Path, trial_id: str) -> bool:
    """Whether some sweep's trial learns from trial ``trial_id``'s student (`want_students`)."""
    return (students_dir(store) / f"{trial_id}{WANTED_SUFFIX}").exists()


@dataclass(frozen=True)
class AssistantRecord:
    """What the store says of an assistant trial: ``state`` (``done`` / ``failed`` / ``pending``), the SHA-256
    of its kept weights (from its latest done row; None where none was recorded) and its latest error."""

    state: str
    weights_sha256: str | None = None
    error: str = ""


def assistant_record(store: Path, trial_id: str) -> AssistantRecord:
    """The state of trial ``trial_id`` in ``store`` by the store's one rule (`trial_states`), with the hash its
    latest done row recorded of its kept student, or its latest failure."""
    if not Path(store).exists():
        return AssistantRecord("pending")
    table = store_rows.read_table(store, ["trial_id", "status", "extra_json", "error_type", "error_message", "written_at"])
    rows = [row for row in table.to_pylist() if row["trial_id"] == trial_id]
    state = store_rows.trial_states((row["trial_id"], row["status"]) for row in rows).get(trial_id, "pending")
    rows.sort(key=lambda row: str(row["written_at"] or ""))
    if state == "done":
        extra = json.loads([row for row in rows if row["status"] == "done"][-1]["extra_json"] or "{}")
        return AssistantRecord("done", extra.get(WEIGHTS_SHA256))
    failed = [row for row in rows if row["status"] == "failed"]
    if failed:
        last = failed[-1]
        return AssistantRecord(state, error=f"{last['error_type'] or 'Error'}: {last['error_message'] or ''}")
    return AssistantRecord(state)
