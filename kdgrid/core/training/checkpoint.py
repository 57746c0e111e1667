"""End-of-epoch checkpoints of one trial's training state, written atomically.

One file per trial, ``{checkpoint_dir}/{trial_id}.pt`` (a `torch.save` dict), replaced at the end of every epoch:
the student's weights, its projections, optimizer, scheduler, its RNG stream (CPU and, when used, CUDA), the
gradient scaler (fp16), the data position (epochs finished; an epoch's data order is a function of (seed, epoch)
so the position needs nothing more) and the record so far (curve, best scores, auto weights, loss terms, time).
Checkpoints are keyed by trial id, so a trial resumes the same way whichever job it lands in.

A checkpoint holds tensors and plain data only (dicts, lists, numbers, strings; the RNG streams are uint8
tensors) and is read with ``torch.load(..., weights_only=True)``: a checkpoint folder on a shared filesystem
must not be able to run code. A checkpoint that cannot be read (truncated, not a checkpoint, a pickled object,
another format version or another trial's) is never trusted and never deleted: it is renamed
``<trial_id>.pt.unreadable-<utc>`` beside it, a warning names both paths, and the trial starts from scratch.

Fenced writes: a `Fence` is asked right before a trial's checkpoint is put in place (after the temporary file is
written, before the rename) and before a finished trial's checkpoint is removed. Where it answers that this
process no longer holds the trial (another run took it over), the checkpoint is not written (or not removed): a
process that lost its trial never replaces, nor deletes, the checkpoint of the run that now trains it.
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import tempfile
import zipfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from kdgrid.errors import KdgridError
from kdgrid.result import Fence

CHECKPOINT_VERSION = 1
UNREADABLE_SUFFIX = ".unreadable-"  # <trial_id>.pt.unreadable-<utc>: moved aside, never read again
# What every checkpoint holds (see `kdgrid.core.training.train.StudentRun.checkpoint_state`); one missing is unreadable.
REQUIRED_KEYS = frozenset({"version", "trial_id", "model", "optimizer", "scheduler", "epochs_done", "result"})
# What torch.load raises for a file that is not a readable weights-only checkpoint: a bad zip or pickle
# (RuntimeError, UnpicklingError, EOFError...), a forbidden global under weights_only (UnpicklingError).
_UNREADABLE = (RuntimeError, pickle.UnpicklingError, EOFError, ValueError, zipfile.BadZipFile, OSError)

_PLAIN = (torch.Tensor, str, int, float, bool, type(None))

logger = logging.getLogger(__name__)


def checkpoint_path(checkpoint_dir: Path, trial_id: str) -> Path:
    return Path(checkpoint_dir) / f"{trial_id}.pt"


class CheckpointWriteError(KdgridError):
    """A checkpoint could not be written (a full disk, a read-only folder); the message names the file and the
    free space."""


def _check_plain(value: Any, where: str) -> None:
    """Refuse what ``torch.load(weights_only=True)`` would not read back: anything but tensors, dicts, lists,
    tuples, strings, numbers, booleans and None (``where``: the key path, for the message)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, (str, int)):
                raise TypeError(f"checkpoint key {where}/{key!r}: a {type(key).__name__}, not a str or int")
            _check_plain(item, f"{where}/{key}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_plain(item, f"{where}[{index}]")
    elif not isinstance(value, _PLAIN):
        raise TypeError(
            f"checkpoint value {where}: a {type(value).__name__}; checkpoints hold tensors and plain data only "
            "(they are read with weights_only=True)"
        )


def save_checkpoint(
    checkpoint_dir: Path, trial_id: str, state: dict[str, Any], fence: Fence | None = None
) -> Path | None:
    """Write ``state`` (tensors and plain data only, else TypeError) to a temporary file beside the target, fsync
    it and rename it over the target (atomic on POSIX). A write that fails (a full disk) raises
    `CheckpointWriteError` and leaves the previous checkpoint in place. ``fence`` (asked right before the rename):
    where it says the trial is no longer this process's, the temporary file is removed, the target left as it
    is, and None returned."""
    _check_plain(state, "")
    target = checkpoint_path(checkpoint_dir, trial_id)
    tmp: str | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp = tempfile.mkstemp(prefix=f".{trial_id}-", suffix=".tmp", dir=target.parent)
        with os.fdopen(handle, "wb") as stream:
            torch.save({"version": CHECKPOINT_VERSION, **state}, stream)
            stream.flush()
            os.fsync(stream.fileno())
        lost = fence(trial_id) if fence is not None else None
        if lost is not None:
            Path(tmp).unlink(missing_ok=True)
            logger.info("checkpoint of trial %s not written: %s", trial_id, lost)
            return None
        os.replace(tmp, target)
    except (OSError, RuntimeError) as error:  # torch reports a failed write as a RuntimeError
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise CheckpointWriteError(
            f"cannot write the checkpoint {target} ({' '.join(str(error).split())[:300]}); {_free_space(target)}"
        ) from error
    except BaseException:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _free_space(target: Path) -> str:
    try:
        free = shutil.disk_usage(target.parent if target.parent.exists() else target.anchor).free
    except OSError:
        return "free space unknown"
    return f"{free / 2**20:.0f} MiB free there"


def move_aside(path: Path, why: str) -> Path:
    """Rename an unreadable checkpoint to ``<name>.unreadable-<utc>`` beside it (never deleted: it may be
    evidence) and log a warning naming both paths and ``why``. Returns the new path."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    aside = path.with_name(f"{path.name}{UNREADABLE_SUFFIX}{stamp}")
    os.replace(path, aside)
    message = (
        f"checkpoint {path} cannot be read ({why}); moved aside to {aside}; the trial starts from scratch"
    )
    logger.warning(message)
    return aside


def _problem(state: Any, trial_id: str) -> str | None:
    """Why a loaded ``state`` is not this trial's checkpoint of this format, or None when it is."""
    if not isinstance(state, dict):
        return f"holds a {type(state).__name__}, not a checkpoint"
    missing = REQUIRED_KEYS - state.keys()
    if missing:
        return f"lacks {', '.join(sorted(missing))}"
    if state["version"] != CHECKPOINT_VERSION:
        return f"format version {state['version']!r}, this kdgrid reads {CHECKPOINT_VERSION}"
    if state["trial_id"] != trial_id:
        return f"of trial {state['trial_id']!r}"
    return None


def load_checkpoint(checkpoint_dir: Path | None, trial_id: str) -> dict[str, Any] | None:
    """The trial's last checkpoint, or None when there is none. A checkpoint that cannot be read (see the
    module's docstring) is moved aside with a warning (`move_aside`) and None returned: start from scratch."""
    if checkpoint_dir is None:
        return None
    path = checkpoint_path(checkpoint_dir, trial_id)
    if not path.is_file():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except _UNREADABLE as error:
        move_aside(path, f"{type(error).__name__}: {' '.join(str(error).split())[:300]}")
        return None
    problem = _problem(state, trial_id)
    if problem is not None:
        move_aside(path, problem)
        return None
    return state


def remove_checkpoint(checkpoint_dir: Path | None, trial_id: str) -> None:
    if checkpoint_dir is not None:
        checkpoint_path(checkpoint_dir, trial_id).unlink(missing_ok=True)
