"""Test helper: a loaded sweep's trials by study (what the tests read; runtime code keys rows by trial id)."""

from __future__ import annotations

from kdgrid.grid.expand import Sweep
from kdgrid.trial import Trial


def trials_of(sweep: Sweep, study: str) -> list[Trial]:
    """The trials of ``study`` in expansion order."""
    return [p.trial for p in sweep.trials if p.study == study]
