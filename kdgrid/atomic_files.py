"""Files written whole or not at all, durably: the one home of kdgrid's temporary-name, fsync and rename steps.

A file is first written under a hidden name (``.tmp-<uuid>-<name>``) in its final folder, flushed and fsynced,
renamed into place (atomic on POSIX and NFS within one folder), and then the folder itself is fsynced so the
rename survives a crash. Readers of the store skip names starting with ``.``, so they never see half a file.
Used by the store (rows, parts, memberships, the read cache) and by the checkpoint catalogue.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

# The hidden prefix of a file being written (see the module docstring).
TMP_PREFIX = ".tmp-"


def temporary_path(final: Path) -> Path:
    """A unique hidden name beside ``final`` (same folder, so the rename is atomic)."""
    return final.with_name(f"{TMP_PREFIX}{uuid.uuid4().hex}-{final.name}")


def fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable; a no-op where directories cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_file_atomically(final: Path, fill: Callable[[BinaryIO], None]) -> Path:
    """Write ``final`` whole or not at all: ``fill(handle)`` writes a hidden temporary file beside it, which is
    fsynced and renamed into place, then the folder is fsynced. A failure removes the temporary file and raises.
    Returns ``final``."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_path(final)
    try:
        with open(tmp, "wb") as handle:
            fill(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(final.parent)
    return final
