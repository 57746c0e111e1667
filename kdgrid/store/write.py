"""Writing rows: one Parquet file per finished (or failed) attempt of a trial, atomically.

The file is written under a hidden temporary name in its final folder, flushed to disk, and renamed; a crash at
any instant leaves either the whole row or no row. Names are unique per attempt (the row id is a uuid4), so
any number of concurrent writers (SLURM array tasks on a shared filesystem) never touch each other's files.

A row that cannot be written (a full disk, a read-only store, a file where ``rows/`` should be) raises
`StoreWriteError`: one message naming the store and its free space. The worker lets it through (a job that
cannot record its trials stops instead of training more), so the command ends with that message, and
``kdgrid resume`` trains the trials without a row once the store can be written again.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kdgrid.atomic_files import write_file_atomically
from kdgrid.core.data import get_task
from kdgrid.core.model.shapes import student_shape
from kdgrid.core.training.degenerate import degenerate_reasons
from kdgrid.diagnosis import diagnose
from kdgrid.errors import KdgridError
from kdgrid.predictions import encode_predictions, teacher_agreements
from kdgrid.result import TrialResult
from kdgrid.store import layout, provenance, run_ledger
from kdgrid.store.schema import COUNTED_STATUSES, SCHEMA, SCHEMA_VERSION, SUPERSEDED
from kdgrid.trial import Trial


class StoreWriteError(KdgridError):
    """A row could not be written to the store; the message names the store, the error and its free space."""


def free_space(store: Path) -> str:
    """The free space of the disk holding ``store`` (or its nearest existing parent), e.g. ``"12.3 GB"``."""
    where = Path(store)
    while not where.exists() and where.parent != where:
        where = where.parent
    try:
        free = shutil.disk_usage(where).free
    except OSError:
        return "an unknown amount"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if free >= size:
            return f"{free / size:.1f} {unit}"
    return f"{free} bytes"


def store_write_error(store: Path, error: OSError) -> StoreWriteError:
    """The one message of a row that could not be written to ``store``."""
    where = f": {error.filename}" if error.filename else ""
    return StoreWriteError(
        f"cannot write a row to the store {store} ({error.strerror or error}{where}); "
        f"{free_space(store)} free on its disk. The job stopped rather than train trials it cannot record; "
        f"make room (or make the store writable), then `kdgrid resume` trains the trials without a row"
    )


def rows_folder_for_writing(store: Path | str) -> Path:
    """``<store>/rows``, created if missing; `StoreWriteError` when it cannot be (a read-only store, a file
    where the folder should be)."""
    folder = layout.rows_dir(Path(store))
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise store_write_error(Path(store), error) from error
    return folder


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _student_shape_columns(student: str) -> dict[str, int | None]:
    """The student's layers / width / heads / ffn, or nulls when the name cannot be parsed (a failed trial may
    have failed for exactly that reason)."""
    try:
        shape = student_shape(student)
    except Exception:
        return {"student_layers": None, "student_width": None, "student_heads": None, "student_ffn": None}
    return {
        "student_layers": shape.layers,
        "student_width": shape.width,
        "student_heads": shape.heads,
        "student_ffn": shape.ffn,
    }


def trial_columns(trial: Trial) -> dict[str, Any]:
    """Every Trial field as its own column (see `kdgrid.store.schema`)."""
    config = trial.to_dict()
    beta = config.pop("beta")
    config["beta_auto"] = isinstance(beta, str)
    config["beta"] = None if isinstance(beta, str) else float(beta)
    config["options_json"] = _json(config.pop("options"))
    config["knowledge"] = list(trial.knowledge)
    return config


def outcome_of_predictions(result: TrialResult) -> dict[str, Any]:
    """The schema version 2 columns of a result: its encoded predictions, its agreement with the teacher
    (``{dev_set: value}``, null where the row has no teacher predictions) and its degenerate reasons
    (`kdgrid.core.training.degenerate`). Failed results: all null. A done result whose task cannot be resolved here
    (its spec file gone) gets null reasons: not judged, rather than judged healthy."""
    if result.status != "done":
        return dict.fromkeys(
            ["predictions", "prediction_fingerprints_json", "teacher_agreement_json", "degenerate_json"]
        )
    agreement = {
        name: None if math.isnan(value) else value
        for name, value in teacher_agreements(result.predictions).items()
    }
    try:
        reasons: list[str] | None = degenerate_reasons(
            get_task(result.trial.task), result.predictions, result.scores
        )
    except KdgridError:
        reasons = None
    return {
        "predictions": encode_predictions(result.predictions) if result.predictions else None,
        "prediction_fingerprints_json": (
            _json({name: dev.fingerprint for name, dev in result.predictions.items()})
            if result.predictions
            else None
        ),
        "teacher_agreement_json": _json(agreement),
        "degenerate_json": None if reasons is None else _json(reasons),
    }


def outcome_of_step_curves(result: TrialResult) -> dict[str, Any]:
    """The schema version 3 columns of a result: its step curves (compact JSON, null when it recorded none),
    their ``every`` and the diagnosis (`kdgrid.diagnosis.diagnose`) of its curves, status and learned parts."""
    curves = result.step_curves or None
    flags = diagnose(curves, status=result.status, weights=result.weights, extra=result.extra)
    return {
        "step_curves_json": None if curves is None else json.dumps(curves, separators=(",", ":")),
        "step_curve_every": None if curves is None else int(curves["every"]),
        "diagnosis_json": _json(flags),
    }


def result_row(
    result: TrialResult, *, sweep: str, study: str, row_id: str | None = None, superseded: str | None = None
) -> dict[str, Any]:
    """The store row of a result: identity, every config field, derived shape, outcome and provenance.

    ``superseded``: why the process that produced ``result`` no longer held its trial's claim; the row is then
    recorded with status ``superseded`` (never counted), its outcome kept and ``extra_json`` naming the reason
    and the status it would have had (``{"superseded": {"reason": ..., "status": ...}}``)."""
    if result.status not in COUNTED_STATUSES:
        raise ValueError(f"result status {result.status!r} is not one of {COUNTED_STATUSES}")
    extra = result.extra
    if superseded is not None:
        extra = {**result.extra, SUPERSEDED: {"reason": superseded, "status": result.status}}
    trial = result.trial
    row: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "row_id": row_id or layout.new_row_id(),
        "trial_id": trial.trial_id,
        "sweep": sweep,
        "study": study,
        "status": SUPERSEDED if superseded is not None else result.status,
        "trial_json": trial.canonical_json(),
        **trial_columns(trial),
        **_student_shape_columns(trial.student),
        "student_params": result.student_params,
        "student_flops": result.student_flops,
        "layer_pairs_json": _json([list(pair) for pair in result.layer_pairs]),
        "scores_json": _json(result.scores),
        "last_scores_json": _json(result.last_scores),
        "best_epoch": result.best_epoch,
        "curve_json": _json(result.curve),
        "loss_terms_json": _json(result.loss_terms),
        "weights_json": _json(result.weights),
        "extra_json": _json(extra),
        **outcome_of_predictions(result),
        **outcome_of_step_curves(result),
        "error_type": result.error_type,
        "error_message": result.error_message,
        "traceback": result.traceback,
        "wall_time_s": result.wall_time_s,
        "device": result.device,
        "started_at": result.started_at,
        "ended_at": result.ended_at,
        "written_at": _utc_now(),
        "host": provenance.host_name(),
        "pid": os.getpid(),
        "git_commit": provenance.git_commit(),
        "kdgrid_version": provenance.package_versions().get("kdgrid"),
        "package_versions_json": _json(provenance.package_versions()),
    }
    return row


def write_table_atomically(
    table: pa.Table, final: Path, *, compression: str = "zstd", statistics: bool = True
) -> Path:
    """Write ``table`` to ``final`` through a hidden temporary file, fsync, rename. Returns ``final``.

    ``compression`` and ``statistics`` go to `pyarrow.parquet.write_table` (``write_statistics``)."""
    return write_file_atomically(
        final,
        lambda handle: pq.write_table(table, handle, compression=compression, write_statistics=statistics),
    )


def write_result(
    store_dir: Path | str, result: TrialResult, *, sweep: str, study: str, superseded: str | None = None
) -> Path:
    """Write one result as its own Parquet file under ``<store>/rows/``; returns the file's path.

    Failed results are rows too (status ``failed`` with error type, message and traceback); ``superseded``
    (why its writer lost the trial's claim) records it as a ``superseded`` row (`result_row`). Raises
    `StoreWriteError` when the row cannot be written (nothing is left behind: no half file, no row).
    """
    row = result_row(result, sweep=sweep, study=study, superseded=superseded)
    table = pa.Table.from_pylist([row], schema=SCHEMA)
    name = layout.RowFileName(row["trial_id"], row["status"], row["row_id"]).name
    folder = rows_folder_for_writing(store_dir)
    # One row per file: snappy and no column statistics decode about twice as fast as zstd with statistics
    # (a cold read of 26,000 loose files is per-file decoding), and compaction rewrites them with zstd anyway.
    try:
        path = write_table_atomically(table, folder / name, compression="snappy", statistics=False)
    except OSError as error:
        raise store_write_error(Path(store_dir), error) from error
    run_ledger.note_row(store_dir, name)  # the run's own summary counts it (`kdgrid.store.run_ledger`)
    return path


def failure_result(
    trial: Trial,
    error: BaseException | None = None,
    *,
    error_type: str | None = None,
    message: str | None = None,
    traceback_text: str | None = None,
) -> TrialResult:
    """A failed `TrialResult` for a trial that produced none (its job crashed, its worker was killed)."""
    if error is not None:
        error_type = error_type or type(error).__name__
        message = message or str(error)
        traceback_text = traceback_text or "".join(
            traceback.format_exception(type(error), error, error.__traceback__)
        )
    now = _utc_now()
    return TrialResult(
        trial=trial,
        status="failed",
        error_type=error_type or "Error",
        error_message=message or "",
        traceback=traceback_text,
        started_at=now,
        ended_at=now,
    )
