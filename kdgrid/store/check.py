"""`kdgrid store check`: every file of a store that is not a kdgrid row, and moving such files aside.

What a row file is, is the store's one rule (`kdgrid.store.listing`); `check_store` applies it to every file and
also decodes every row file (as a read of every column does), so it finds what any command would report.
It also lists the trials with more than one done row (trained twice: each counts once, by its latest done row;
`kdgrid.store.read.duplicate_done_trials`) and counts the superseded rows (written under a lost claim, never
counted), and names the dependants whose teacher no longer exists (`kdgrid.store.stale_teachers`). `quarantine` moves the files it found to ``<store>/_quarantine/<rows|compacted|memberships|_claims>/`` (never deletes: a file named
there can be inspected, repaired and moved back), under the store's maintenance lock held alone, so no
compaction or `forget` runs meanwhile. Once they are moved every command reads the store cleanly, and the trials
whose rows they held read as not run: ``kdgrid resume`` trains them again.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from kdgrid.atomic_files import fsync_dir
from kdgrid.errors import KdgridError
from kdgrid.store import layout
from kdgrid.store.claims import CLAIM_SUFFIX, PROGRESS_SUFFIX, RECLAIM_INFIX, claims_dir, read_claim
from kdgrid.store.compact import maintenance_lock
from kdgrid.store.listing import QUARANTINE_DIR, StrayFile, list_store
from kdgrid.store.membership import membership_problems
from kdgrid.store.read import duplicate_done_trials, read_with_strays
from kdgrid.store.schema import SUPERSEDED
from kdgrid.store.stale_teachers import COLUMNS as STALE_COLUMNS
from kdgrid.store.stale_teachers import stale_dependants


@dataclass(frozen=True)
class StoreCheck:
    """What `check_store` found: the row files it read (``loose`` per-trial files, compacted ``parts``, and
    the ``rows`` they hold) and the ``strays`` (files that are not kdgrid rows, with why), sorted by path."""

    loose: int
    parts: int
    rows: int
    strays: list[StrayFile]
    duplicates: dict[str, list[str]] = field(default_factory=dict)
    superseded: int = 0
    stale: dict[str, str] = field(default_factory=dict)  # dependants whose teacher no longer exists, and why


def quarantine_dir(store: Path) -> Path:
    return Path(store) / QUARANTINE_DIR


def claim_problems(store: Path) -> list[StrayFile]:
    """The visible files of ``_claims/`` that are not claims: a name that is neither ``<trial_id>.json``, a
    takeover lock nor a claim's progress file (``<trial_id>.json.progress``), or a ``.json`` file whose content is
    not a claim (claims are written whole, never partly)."""
    folder = claims_dir(store)
    if folder.is_symlink():
        # listed and moved as the link itself: a check never reaches through it into a folder outside the store
        return [StrayFile(folder, "a symbolic link, not a folder of the store (claims live in the store itself)")]
    try:
        names = sorted(n for n in os.listdir(folder) if not n.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for name in names:
        path = folder / name
        if RECLAIM_INFIX in name or name.endswith(CLAIM_SUFFIX + PROGRESS_SUFFIX):
            continue
        if not name.endswith(CLAIM_SUFFIX):
            found.append(StrayFile(path, f"not a claim file (<trial_id>{CLAIM_SUFFIX})"))
            continue
        claim = read_claim(store, name[: -len(CLAIM_SUFFIX)], now=0.0)
        if claim is not None and claim.pid < 0:
            found.append(StrayFile(path, "not a claim (its content is not a kdgrid claim)"))
    return found


def check_store(store_dir: Path | str) -> StoreCheck:
    """Every file of the store that is not a kdgrid row (by the listing's rule, because its rows do not
    decode, or because they are of a newer schema version), and the files of ``memberships/`` and ``_claims/``
    that are not memberships or claims. Raises `kdgrid.store.listing.StoreLayoutError` when the store is a
    file."""
    store = Path(store_dir)
    table, strays = read_with_strays(store, skip_newer=True)
    strays = [*strays, *(StrayFile(p, why) for p, why in membership_problems(store)), *claim_problems(store)]
    listing = list_store(store)
    unreadable = {s.path for s in strays}
    loose = sum(layout.rows_dir(store) / n not in unreadable for n in listing.loose)
    parts = sum(layout.compacted_dir(store) / n not in unreadable for n in listing.parts)
    pairs = table.select(["trial_id", "status", "row_id"]).to_pandas()
    duplicates = duplicate_done_trials(pairs)
    superseded = int((pairs["status"] == SUPERSEDED).sum())
    stale = stale_dependants(table.select(STALE_COLUMNS).to_pandas())
    return StoreCheck(
        loose, parts, table.num_rows, sorted(strays, key=lambda s: str(s.path)), duplicates, superseded, stale
    )


def _destination(store: Path, path: Path) -> Path:
    """Where ``path`` goes in the quarantine: the same place relative to the store, never over another file."""
    target = quarantine_dir(store) / path.relative_to(store)
    if target.exists():
        target = target.with_name(f"{target.name}.{uuid.uuid4().hex[:8]}")
    return target


def _inside(store: Path, folder: Path) -> bool:
    """Whether ``folder``, with every symbolic link resolved, is the store or inside it."""
    real_store = Path(os.path.realpath(store))
    real = Path(os.path.realpath(folder))
    return real == real_store or real_store in real.parents


def quarantine(store_dir: Path | str, strays: list[StrayFile]) -> list[tuple[Path, Path]]:
    """Move each of ``strays`` into ``<store>/_quarantine/`` (same relative path); returns (from, to) pairs.

    Raises `KdgridError` naming the file that could not be moved and what was moved before it (a read-only
    store: `kdgrid.store.compact.StoreMaintenanceError`, nothing moved)."""
    store = Path(store_dir)
    moved: list[tuple[Path, Path]] = []
    with maintenance_lock(store, exclusive=True):
        for stray in strays:
            if not os.path.lexists(stray.path):
                continue  # moved meanwhile by another check
            target = _destination(store, stray.path)
            if not _inside(store, stray.path.parent):
                raise KdgridError(
                    f"refused to move {stray.path}: its folder is reached through a symbolic link that leads out "
                    f"of the store {store}; moved before it: "
                    + (", ".join(str(source) for source, _ in moved) or "nothing")
                )
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.rename(stray.path, target)
            except OSError as error:
                done = ", ".join(str(source) for source, _ in moved) or "nothing"
                raise KdgridError(
                    f"cannot move {stray.path} to {target} ({error.strerror or error}); moved before it: {done}"
                ) from error
            moved.append((stray.path, target))
        for folder in sorted({target.parent for _, target in moved} | {source.parent for source, _ in moved}):
            fsync_dir(folder)
    return moved
