"""End-of-epoch checkpoints of one trial's training state, written atomically.

One file per trial, ``{checkpoint_dir}/{trial_id}.pt`` (a `torch.save` dict), replaced at the end of every epoch:
the student's weights, its projections, optimizer, scheduler, its RNG stream (CPU and, when used, CUDA), the
gradient scaler (fp16), the data position (epochs finished; an epoch's data order is a function of (seed, epoch)
so the position needs nothing more) and the record so far (curve, best scores, auto weights, loss terms, time).
Checkpoints are keyed by trial id, so a trial resumes the same way whichever job it lands in.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch

CHECKPOINT_VERSION = 1


def checkpoint_path(checkpoint_dir: Path, trial_id: str) -> Path:
    return Path(checkpoint_dir) / f"{trial_id}.pt"


def save_checkpoint(checkpoint_dir: Path, trial_id: str, state: dict[str, Any]) -> Path:
    """Write ``state`` to a temporary file beside the target and rename it over the target (atomic on POSIX)."""
    target = checkpoint_path(checkpoint_dir, trial_id)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f".{trial_id}-", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            torch.save({"version": CHECKPOINT_VERSION, **state}, stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def load_checkpoint(checkpoint_dir: Path | None, trial_id: str) -> dict[str, Any] | None:
    """The trial's last checkpoint, or None when there is none (or it is of another format version)."""
    if checkpoint_dir is None:
        return None
    path = checkpoint_path(checkpoint_dir, trial_id)
    if not path.is_file():
        return None
    state = torch.load(path, map_location="cpu", weights_only=False)
    if state.get("version") != CHECKPOINT_VERSION:
        return None
    return state


def remove_checkpoint(checkpoint_dir: Path | None, trial_id: str) -> None:
    if checkpoint_dir is not None:
        checkpoint_path(checkpoint_dir, trial_id).unlink(missing_ok=True)
