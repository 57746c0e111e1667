"""The listing `kdgrid sweeps` prints (name, file, trials, studies, purpose of every bundled sweep), remembered.

Counting a sweep's trials means expanding and validating every one of them: seconds for the bundled sweeps
together. The listing depends only on the sweep files' bytes and on kdgrid's code, so it is kept in
``$KDGRID_CACHE/sweep_listing/<key>.json``, where the key is the SHA-256 of every bundled sweep file (the included
defaults too) and of every source file of the ``kdgrid`` package: any edit of a sweep or of the code makes a new
key, and the listing is computed again. The file is written atomically; an unreadable one is computed again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any

from kdgrid.assets import cache_dir
from kdgrid.atomic_files import write_file_atomically
from kdgrid.bundled_sweeps import BUNDLED_SWEEPS_DIR, bundled_sweep_files

PACKAGE_DIR = Path(__file__).resolve().parent
LISTING_DIR = "sweep_listing"


def listing_key() -> str:
    """The digest of the bundled sweep files and of kdgrid's source files (see the module)."""
    digest = hashlib.sha256()
    files = sorted(BUNDLED_SWEEPS_DIR.glob("*")) + sorted(PACKAGE_DIR.rglob("*.py"))
    for path in files:
        if path.is_file():
            digest.update(str(path.relative_to(path.anchor)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


def sweep_purpose(description: str, path: Path) -> str:
    """A sweep's one-line purpose: its ``description:``, else the first line of its leading comment."""
    if description.strip():
        return " ".join(description.split())
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            if not line.startswith("#"):
                break
            text = line.lstrip("#").strip()
            if text:
                return text
    return ""


def compute_listing() -> list[dict[str, Any]]:
    """Every bundled sweep, expanded: name, file, trials, studies, purpose."""
    from kdgrid.grid.expand import load_sweep

    listed = []
    for path in bundled_sweep_files():
        sweep = load_sweep(path)
        listed.append({"name": path.stem, "file": str(path), "trials": len(sweep.trials),
                       "studies": sweep.studies, "purpose": sweep_purpose(sweep.description, path)})  # fmt: skip
    return listed


def sweep_listing() -> list[dict[str, Any]]:
    """The listing, from the cache when its key matches, else computed and remembered."""
    path = cache_dir() / LISTING_DIR / f"{listing_key()}.json"
    try:
        return list(json.loads(path.read_text()))
    except (OSError, ValueError):
        pass
    listed = compute_listing()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(listed).encode()
        write_file_atomically(path, lambda handle: handle.write(text))
    except OSError:
        pass  # a read-only cache: the listing is still right, only not remembered
    return listed
