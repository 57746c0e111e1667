"""The size limit of a sweep (a light module: the command line reads it without loading the grid and the core)."""

from __future__ import annotations

from kdgrid.errors import ConfigError

DEFAULT_MAX_TRIALS = 50_000
"""The most grid points a sweep may expand to unless told otherwise (``--max-trials``): a typo in an axis (a
seeds count of 100,000,000, five long axes) is refused at once instead of expanding for minutes."""


MAX_TRIALS_CAP = 10**8  # what --max-trials may raise the limit to: a grid larger than this cannot be held


def check_max_trials(max_trials: object, *, name: str = "--max-trials") -> None:
    """Refuse a cap that is not an integer >= 1."""
    if (
        isinstance(max_trials, bool)
        or not isinstance(max_trials, int)
        or not 1 <= max_trials <= MAX_TRIALS_CAP
    ):
        raise ConfigError(
            f"{name}: expected an integer in 1..{MAX_TRIALS_CAP:,} (the most trials a sweep may expand to), "
            f"got {max_trials!r}"
        )
