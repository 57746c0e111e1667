"""The trials of a sweep, read from its sweep file, for a report that must say where a pending trial belongs.

A store records which trial ids a sweep listed (`kdgrid.store.membership`), not their configurations; a trial
with no row yet is known by its id alone. Its configuration is in the sweep file: the file a ``--sweep`` option
named (a path), or the sweep of that name that ships with kdgrid. A file is read only when the name it declares
is the sweep's, expanded once per modification, and a file that no longer expands is passed over (the pending
trials then stay counted, unplaced).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kdgrid.bundled_sweeps import bundled_sweep, find_sweep
from kdgrid.errors import KdgridError
from kdgrid.grid.expand import load_sweep
from kdgrid.trial import Trial


class SweepFiles:
    """Sweep name -> its trials by id, from the sweep files ``named`` (``--sweep`` values) or bundled ones."""

    def __init__(self, named: Sequence[str] | None = None) -> None:
        self._named = [find_sweep(w) for w in named or []]
        self._read: dict[Path, tuple[float, str, dict[str, Trial]]] = {}

    def trials(self, sweep: str) -> dict[str, Trial]:
        """The trials (by id) of the sweep file named ``sweep``; empty when no readable file declares that name."""
        bundled = bundled_sweep(sweep)
        candidates = [p for p in self._named if p.is_file()] + ([bundled] if bundled else [])
        for path in candidates:
            name, trials = self._load(path)
            if name == sweep:
                return trials
        return {}

    def _load(self, path: Path) -> tuple[str, dict[str, Trial]]:
        try:
            modified = path.stat().st_mtime
        except OSError:
            return "", {}
        known = self._read.get(path)
        if known is None or known[0] != modified:
            try:
                loaded = load_sweep(path)
                known = (modified, loaded.name, {p.trial.trial_id: p.trial for p in loaded.trials})
            except (KdgridError, OSError):
                known = (modified, "", {})
            self._read[path] = known
        return known[1], known[2]
