"""Bootstrap replicate scores of many runs on one dev set, drawn once and shared by every interval and test.

`kdgrid.analysis.stats` draws a replicate's example sample from ``numpy.random.default_rng(seed)``, and the samples
depend only on the seed, the number of examples N and the number of resamples R (never on the runs scored). So
every cell of a table on one dev set sees the same samples: a `ReplicateBank` draws them once per dev set
(fingerprint), scores every registered run on them in one pass (`stats.replicate_scores`: one matrix product per
block for accuracy), and keeps the generator's state after the draws, from which each interval or test then draws
its seeds exactly as `stats.seed_bootstrap_interval` / `stats.paired_bootstrap_test` would. The numbers are
therefore bit-for-bit those of the one-cell functions; only the work is shared (a reference cell's replicates are
scored once, not once per cell compared with it).

Memory: 8 bytes x R per registered run (10,000 resamples: 80 KB a run).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kdgrid.analysis import stats

RunKey = Hashable
"""What names one run on one dev set, e.g. (row id, dev set)."""


@dataclass
class _DevSet:
    """The registered runs of one (metric, fingerprint), and their scores once drawn."""

    gold: np.ndarray
    runs: dict[RunKey, np.ndarray] = field(default_factory=dict)
    replicates: dict[RunKey, np.ndarray] = field(default_factory=dict)  # key -> [R]
    full: dict[RunKey, float] = field(default_factory=dict)  # key -> the metric on all N examples
    state_after_draws: dict[str, Any] | None = None


class ReplicateBank:
    """Replicate scores ``[R]`` per registered run, for one (resamples, seed)."""

    def __init__(self, resamples: int, seed: int = 0) -> None:
        self.resamples = resamples
        self.seed = seed
        self._dev_sets: dict[tuple[str, str], _DevSet] = {}

    def register(self, metric: str, fingerprint: str, gold: np.ndarray, key: RunKey, run: np.ndarray) -> None:
        """Make run ``key`` (predictions ``[N]`` on the dev set ``fingerprint`` with labels ``gold``) part of the
        next pass over that dev set."""
        dev_set = self._dev_sets.setdefault((metric, fingerprint), _DevSet(gold=np.asarray(gold)))
        dev_set.runs.setdefault(key, np.asarray(run))

    def replicates(
        self, metric: str, fingerprint: str, keys: tuple[RunKey, ...]
    ) -> tuple[np.ndarray, np.ndarray, np.random.Generator]:
        """``([R, K] replicate scores, [K] full-data values, generator)`` of the registered runs ``keys``; the
        generator is a fresh one in the state `stats.replicate_scores` leaves (the caller draws seeds from it)."""
        dev_set = self._dev_sets[(metric, fingerprint)]
        if any(key not in dev_set.replicates for key in keys):
            self._score_pending(metric, dev_set)
        generator = np.random.default_rng(self.seed)
        generator.bit_generator.state = dev_set.state_after_draws
        scores = np.stack([dev_set.replicates[key] for key in keys], axis=1)
        full = np.array([dev_set.full[key] for key in keys])
        return scores, full, generator

    def _score_pending(self, metric: str, dev_set: _DevSet) -> None:
        pending = [key for key in dev_set.runs if key not in dev_set.replicates]
        runs = np.stack([dev_set.runs[key] for key in pending])
        generator = np.random.default_rng(self.seed)
        scores = stats.replicate_scores(metric, dev_set.gold, runs, generator, self.resamples)
        dev_set.state_after_draws = generator.bit_generator.state
        full = stats.full_scores(metric, dev_set.gold, runs)
        for column, key in enumerate(pending):
            dev_set.replicates[key] = scores[:, column].copy()
            dev_set.full[key] = full[column]
