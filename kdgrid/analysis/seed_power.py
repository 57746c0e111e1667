"""How many seeds a comparison needs, from the seed variance a store has measured.

With K seeds per cell, a method-level test (`kdgrid.analysis.stats.seed_t_test`) compares two cells through their seeds'
scores; its power to find a true difference of ``delta`` depends on the seed standard deviation and K. This module
turns a measured seed SD into "to detect 1 point at 80% power on this task you need N seeds per cell" (two-sided
two-sample t-test at alpha 0.05, equal seeds a side; the exact power from the noncentral t distribution).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from scipy import stats as scipy_stats

from kdgrid.analysis.tables import Cell, TableView

MAX_SEEDS = 1000
"""Beyond this many seeds per cell the answer is given as "more than 1,000"."""


def _two_sided_power(critical: float, df: float, noncentrality: float) -> float:
    """P(|T| > critical) for T noncentral t(df, noncentrality). SciPy's tail far from the noncentrality comes back
    NaN at few degrees of freedom and a large noncentrality (a tiny seed SD); it is then 0 (it underflows)."""
    upper = float(scipy_stats.nct.sf(critical, df, noncentrality))
    lower = float(scipy_stats.nct.cdf(-critical, df, noncentrality))
    if math.isnan(upper):
        upper = 1.0 if noncentrality > critical else 0.0
    if math.isnan(lower):
        lower = 1.0 if noncentrality < -critical else 0.0
    return upper + lower


def t_test_power(seeds: int, seed_sd: float, difference: float, alpha: float = 0.05) -> float:
    """Power of the two-sided two-sample t-test with ``seeds`` per side to find a true ``difference`` between
    expected scores when each seed's score has standard deviation ``seed_sd`` (same units as ``difference``)."""
    if seeds < 2 or seed_sd <= 0:
        raise ValueError(f"power needs >= 2 seeds and a positive seed SD, got {seeds} and {seed_sd}")
    df = 2 * seeds - 2
    noncentrality = difference / (seed_sd * math.sqrt(2.0 / seeds))
    return _two_sided_power(float(scipy_stats.t.ppf(1 - alpha / 2, df)), df, noncentrality)


def seeds_needed(seed_sd: float, difference: float, power: float = 0.8, alpha: float = 0.05) -> int | None:
    """The fewest seeds per cell for `t_test_power` to reach ``power``; None beyond `MAX_SEEDS`."""
    if not 0 < power < 1 or difference <= 0:
        raise ValueError(
            f"power must lie in (0, 1) and the difference be positive, got {power}, {difference}"
        )
    for seeds in range(2, MAX_SEEDS + 1):
        if t_test_power(seeds, seed_sd, difference, alpha) >= power:
            return seeds
    return None


def paired_t_power(seeds: int, difference_sd: float, difference: float, alpha: float = 0.05) -> float:
    """Power of the two-sided paired t-test over ``seeds`` seed pairs (``seeds - 1`` degrees of freedom) at level
    ``alpha`` to find a true ``difference`` when one seed's difference has standard deviation ``difference_sd``
    (for independent seeds, √2 times the seed SD; less where the two sides share seed variance)."""
    if seeds < 2 or difference_sd <= 0:
        raise ValueError(f"power needs >= 2 seeds and a positive SD, got {seeds} and {difference_sd}")
    df = seeds - 1
    noncentrality = difference / (difference_sd / math.sqrt(seeds))
    return _two_sided_power(float(scipy_stats.t.ppf(1 - alpha / 2, df)), df, noncentrality)


def seeds_needed_paired(
    difference_sd: float, difference: float, alpha: float = 0.05, power: float = 0.8
) -> int | None:
    """The fewest seeds per cell for `paired_t_power` to reach ``power`` at ``alpha`` (a corrected family's
    threshold: 0.05 / m for Holm's first step over m tests); None beyond `MAX_SEEDS`."""
    if not 0 < power < 1 or difference <= 0 or not 0 < alpha < 1:
        raise ValueError(
            f"power and alpha must lie in (0, 1) and the difference be positive, got {power}, {alpha}, {difference}"
        )
    low, high = 2, MAX_SEEDS
    if paired_t_power(high, difference_sd, difference, alpha) < power:
        return None
    while low < high:  # power grows with the seeds: the first that reaches it
        middle = (low + high) // 2
        if paired_t_power(middle, difference_sd, difference, alpha) >= power:
            high = middle
        else:
            low = middle + 1
    return low


def pooled_seed_sd(cells: Iterable[Cell]) -> tuple[float, int]:
    """(pooled standard deviation across seeds, number of cells pooled) over the cells with two or more seeds:
    ``sqrt(sum (K - 1) s^2 / sum (K - 1))``; (NaN, 0) when none has."""
    weighted = total = 0.0
    pooled = 0
    for cell in cells:
        if cell.n_seeds >= 2 and not math.isnan(cell.std):
            weighted += (cell.n_seeds - 1) * cell.std**2
            total += cell.n_seeds - 1
            pooled += 1
    return (math.sqrt(weighted / total), pooled) if total else (math.nan, 0)


def seeds_needed_notes(view: TableView, difference: float = 0.01, power: float = 0.8) -> list[str]:
    """One note per (task, dev set) of ``view`` whose cells ran two or more seeds: the measured seed SD and the
    seeds per cell a method-level test needs to find ``difference`` (1 point) at ``power``."""
    by_dev_set: dict[tuple[str, str], list[Cell]] = {}
    for block in view.blocks:
        for (_, column), cell in block.cells.items():
            if not column.fact and not cell.missing and cell.config:
                key = (str(cell.config.get("task", "")), str(cell.config.get("dev_set", "")))
                by_dev_set.setdefault(key, []).append(cell)
    notes = []
    for (task, dev_set), cells in sorted(by_dev_set.items()):
        sd, pooled = pooled_seed_sd(cells)
        if not pooled or sd <= 0:
            continue
        needed = seeds_needed(sd, difference, power)
        count = f"{needed} seeds per cell" if needed else f"more than {MAX_SEEDS:,} seeds per cell"
        notes.append(
            f"seeds needed on {task} {dev_set}: seed SD {sd:.4f} (pooled over {pooled} cells); to detect "
            f"{difference:g} at {power:.0%} power (two-sided t-test over seeds, alpha 0.05) you need {count}"
        )
    return notes
