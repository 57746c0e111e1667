"""Content hashes of files: the one way kdgrid names a file by its bytes (assets, corpora, task data)."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes, read in blocks (`hashlib.file_digest`), never whole into memory."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
