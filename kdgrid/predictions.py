"""Per-example dev-set outcomes of a trial: what intervals, paired tests and teacher agreement are computed from.

The core fills one `DevSetPredictions` per dev set when it scores a trial at its best epoch; the store keeps them
in the trial's row (schema version 2 and later; see `kdgrid.store.schema`) and `kdgrid.store.predictions` reads
them back; `kdgrid.analysis.stats` resamples them. Conventions:

- ``gold``, ``student`` and ``teacher`` are aligned example by example, in the dev set's own order;
- classification: int64 class ids in the *task's* label order (a teacher whose head orders classes otherwise is
  aligned before its predictions are recorded); regression: float32 scores;
- ``fingerprint`` identifies the examples scored (hex SHA-256 of the dev set's inputs and gold labels in order), so
  two rows are compared example by example only when they scored the same examples (a smoke run that scored the
  first 64 examples has another fingerprint than a full run).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from kdgrid.metrics import pearson


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
                raise ValueError(
                    f"{name} predictions have {len(values)} entries; the dev set has {n} examples"
                )


# dev set name (as the task names it: ``validation``, ``validation_matched``, ...) -> its per-example outcome.
TrialPredictions = dict[str, DevSetPredictions]


def teacher_agreement(dev: DevSetPredictions) -> float:
    """How faithful the student is to its teacher on one dev set: the share of examples where their top-1 classes
    agree (classification), or Pearson's r between their scores (regression; 0.0 when either is constant, as
    `kdgrid.metrics.pearson`). NaN when the row has no teacher predictions or the dev set is empty."""
    if dev.teacher is None or len(dev.gold) == 0:
        return float("nan")
    if is_regression(dev):
        return pearson(dev.student.astype(np.float64), dev.teacher.astype(np.float64))
    return float(np.mean(dev.student == dev.teacher))


def teacher_agreements(predictions: TrialPredictions) -> dict[str, float]:
    """`teacher_agreement` of each dev set, ``{dev_set: agreement}`` (NaN where there is no teacher)."""
    return {name: teacher_agreement(dev) for name, dev in predictions.items()}


def is_regression(dev: DevSetPredictions) -> bool:
    """True for scores (float gold), False for class ids (integer gold)."""
    return bool(np.issubdtype(np.asarray(dev.gold).dtype, np.floating))


# The stored form (one binary value per row, `kdgrid.store.schema`): MAGIC, a little-endian uint32 header length,
# a UTF-8 JSON header (one entry per dev set: name, fingerprint, count, stored dtype, whether a teacher follows),
# then per dev set the raw little-endian arrays gold, student[, teacher]. Class ids are stored in the narrowest
# of int8/int16/int32 that holds them (an MNLI row of 2 dev sets, ~19,650 examples, takes ~59 kB before
# Parquet's compression), scores as float32; no pickle, nothing executable.
MAGIC = b"KDGP1"
_HEADER_LENGTH = np.dtype("<u4")
_INTEGER_DTYPES = ("<i1", "<i2", "<i4")
_SCORE_DTYPE = "<f4"


def _stored_dtype(dev: DevSetPredictions) -> str:
    arrays = [np.asarray(a) for a in (dev.gold, dev.student, dev.teacher) if a is not None]
    if is_regression(dev):
        return _SCORE_DTYPE
    for array in arrays:
        if not np.issubdtype(array.dtype, np.integer):
            raise ValueError(f"class-id predictions must be integers, got {array.dtype}")
    low = min((int(a.min()) for a in arrays if a.size), default=0)
    high = max((int(a.max()) for a in arrays if a.size), default=0)
    for dtype in _INTEGER_DTYPES:
        info = np.iinfo(dtype)
        if info.min <= low and high <= info.max:
            return dtype
    raise ValueError(f"class ids {low}..{high} do not fit in int32")


def encode_predictions(predictions: TrialPredictions) -> bytes:
    """The compact binary form of ``predictions`` (see `MAGIC`'s comment); `decode_predictions` reverses it."""
    header, chunks = [], []
    for name, dev in predictions.items():
        dtype = _stored_dtype(dev)
        header.append(
            {
                "dev_set": name,
                "fingerprint": dev.fingerprint,
                "n": len(dev.gold),
                "dtype": dtype,
                "teacher": dev.teacher is not None,
            }
        )
        for array in (dev.gold, dev.student, dev.teacher):
            if array is not None:
                chunks.append(np.ascontiguousarray(array, dtype=dtype).tobytes())
    text = json.dumps(header, sort_keys=True).encode()
    return b"".join([MAGIC, np.array(len(text), dtype=_HEADER_LENGTH).tobytes(), text, *chunks])


def decode_predictions(blob: bytes) -> TrialPredictions:
    """The predictions `encode_predictions` stored: class ids as int64, scores as float32.

    Raises:
        ValueError: ``blob`` is not in this form (another magic, a truncated value).
    """
    view = memoryview(blob)
    if bytes(view[: len(MAGIC)]) != MAGIC:
        raise ValueError(f"stored predictions do not start with {MAGIC!r}")
    offset = len(MAGIC)
    length = int(np.frombuffer(view, dtype=_HEADER_LENGTH, count=1, offset=offset)[0])
    offset += _HEADER_LENGTH.itemsize
    header = json.loads(bytes(view[offset : offset + length]))
    offset += length
    result: TrialPredictions = {}
    for entry in header:
        dtype = np.dtype(entry["dtype"])
        wanted = np.float32 if dtype.kind == "f" else np.int64
        arrays = []
        for _ in range(3 if entry["teacher"] else 2):
            size = entry["n"] * dtype.itemsize
            if offset + size > len(view):
                raise ValueError("stored predictions are truncated")
            arrays.append(np.frombuffer(view, dtype=dtype, count=entry["n"], offset=offset).astype(wanted))
            offset += size
        teacher = arrays[2] if entry["teacher"] else None
        result[entry["dev_set"]] = DevSetPredictions(arrays[0], arrays[1], teacher, entry["fingerprint"])
    if offset != len(view):
        raise ValueError(f"stored predictions have {len(view) - offset} bytes after their last dev set")
    return result
