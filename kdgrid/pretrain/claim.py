"""One maker per checkpoint: an OS file lock per recipe key, so that two runs asked to make the same checkpoint at
once (two `kdgrid run --make-checkpoints`, a run and a `kdgrid pretrain`, two SLURM jobs) never train it twice
nor write into one work folder together.

The lock is ``fcntl.flock`` on ``<cache>/pretrained/<key>.lock`` (`kdgrid.core.pretrained.artifacts.lock_path`), taken
by process 0 of a run where the run executes (on the node of a SLURM job), held until the run returns, and
released by the kernel when its holder dies (a crash or an out-of-memory kill leaves no stale lock; on NFS, the
lock daemon releases a dead client's locks). The file is never removed: removing it would let a process holding
the removed file and one holding a new file both believe they own the key. While held, the file names its
holder (host, pid, since when), for the message of a run that finds it locked.

A run that finds the key locked waits for it (`kdgrid.pretrain.train.run_pretrain` polls every `POLL_S`), then
finds the artifact made (and returns it without training) or, if the holder stopped before the end, resumes from
the holder's step checkpoint. Nothing here imports torch.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path
from typing import IO

POLL_S = 5.0  # seconds between two tries of a lock another run holds


class KeyLock:
    """The lock of one recipe key (``path``); ``try_acquire`` never blocks."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: IO[str] | None = None

    @property
    def held(self) -> bool:
        return self._handle is not None

    def try_acquire(self) -> bool:
        """Take the lock if no other process (or other `KeyLock` of this process) holds it; True if held now."""
        if self._handle is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")  # noqa: SIM115 (held open as long as the lock: closing it releases it)
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        handle.seek(0)
        handle.truncate()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        handle.write(f"host {socket.gethostname()} pid {os.getpid()} since {stamp}\n")
        handle.flush()
        self._handle = handle
        return True

    def release(self) -> None:
        """Give the lock back (the holder line is cleared first); nothing if not held."""
        if self._handle is None:
            return
        handle, self._handle = self._handle, None
        try:
            handle.seek(0)
            handle.truncate()
        finally:
            handle.close()  # closing the last descriptor releases the flock

    def holder(self) -> str:
        """Who holds the lock, as its holder wrote it (``host ... pid ... since ...``), or ``unknown``."""
        try:
            text = self.path.read_text().strip()
        except OSError:
            text = ""
        return text or "unknown"
