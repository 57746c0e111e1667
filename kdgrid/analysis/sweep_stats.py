"""The statistics of a sweep's own table (`kdgrid.analysis.sweep_tables`): every cell's interval and test
against its reference, the marginal means of each axis, the pairwise comparisons of an axis's values, each
cell's difference from its reference (the forest plot), crossover warnings and the seeds a difference needs.

One model for all of them (`kdgrid.analysis.seed_level`): seed level where every side ran two or more seeds (an
average of cells per seed, so only cells that ran the same seeds average there), else run to run (dev examples
resampled, one seed), else nothing (a number printed without an interval is never given another's). The values
are the ones the table prints (``--kind best`` or ``last``); the run-to-run version needs the per-example
predictions the store keeps of the best epoch, so a ``--kind last`` table has seed-level numbers only.

Tests: each cell against the reference of its condition, corrected (Holm or Benjamini-Hochberg) per family
(``condition``: one per block and reference slice; ``table``: all of them); the pairs of an axis, corrected apart
from the cells' (one family per block, or all the table's pairs with ``table``). Raw and adjusted p are both kept
(`Cell.p_raw`, `Cell.p_vs_reference`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kdgrid.analysis import stats
from kdgrid.analysis.cell_stats import ALPHA, Reference, cell_runs, reference_cells, replicate_means
from kdgrid.analysis.replicate_bank import ReplicateBank
from kdgrid.analysis.seed_level import (
    LEVEL_WORDS,
    RUN_TO_RUN,
    SEED_LEVEL,
    Estimate,
    SeedScores,
    average,
    crossover,
    difference_estimate,
    mean_estimate,
    run_to_run_difference,
    run_to_run_mean,
    seed_scores,
)
from kdgrid.analysis.seed_power import MAX_SEEDS, seeds_needed_paired
from kdgrid.analysis.tables import Block, Cell, Column
from kdgrid.predictions import TrialPredictions

DETECT = 0.01
"""The difference the seeds-needed note sizes for: one point of the metric."""

POWER = 0.8

ScoreKey = tuple[str, str, str]
"""(row id, dev set, metric): one run's value in the table."""


@dataclass(frozen=True)
class Difference:
    """One cell's difference from its reference (the cell minus the reference) with its 95% interval from the
    same procedure as its test (`kdgrid.analysis.seed_level`): the interval excludes 0 exactly when the raw p is
    at most 0.05. ``significant``: after the table's correction; ``level``: seed-level or run-to-run."""

    block: str
    label: str
    difference: float
    low: float
    high: float
    significant: bool
    direction: int
    degenerate: bool
    p_raw: float = math.nan
    level: str = SEED_LEVEL


@dataclass
class SweepStatistics:
    """What `attach_sweep_statistics` found: each tested cell's difference, the notes for under the table."""

    differences: list[Difference] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    levels: set[str] = field(default_factory=set)


@dataclass
class _Numbers:
    """Where the numbers of a group of cells come from: their values per seed, and (the best epoch only) their
    per-example predictions in two replicate banks (intervals, tests)."""

    scores: Mapping[ScoreKey, float]
    predictions: Mapping[str, TrialPredictions]
    interval_bank: ReplicateBank
    test_bank: ReplicateBank
    # (row ids, seeds, dev set, metric) -> the cell's `SeedScores`: a cell's scores are read for its interval, each
    # test and the seeds-needed note; the values never change, so they are sorted once.
    _seed_memo: dict[tuple[Any, ...], SeedScores] = field(default_factory=dict, repr=False)

    def seeds(self, cell: Cell) -> SeedScores:
        dev_set, metric = str(cell.config.get("dev_set")), str(cell.config.get("metric"))
        key = (cell.row_ids, cell.seeds, dev_set, metric)
        found = self._seed_memo.get(key)
        if found is None:
            values = [self.scores[(row_id, dev_set, metric)] for row_id in cell.row_ids]
            found = self._seed_memo[key] = seed_scores(cell.seeds or tuple(range(len(values))), values)
        return found

    def seed_level(self, cells: Sequence[Cell]) -> SeedScores | None:
        """The per-seed average of ``cells``: every one ran two or more seeds, all the same ones."""
        if not cells or any(c.n_seeds < 2 for c in cells):
            return None
        return average(self.seeds(c) for c in cells)

    def replicates(self, cells: Sequence[Cell], bank: ReplicateBank) -> tuple[str, np.ndarray] | None:
        """(dev set fingerprint, ``[R]`` replicates of the mean of ``cells``' seed means), examples resampled,
        seeds kept; None unless each has predictions on one dev set."""
        found = []
        for cell in cells:
            if cell_runs(cell, self.predictions) is None:
                return None
            dev_set = cell.config.get("dev_set") or "validation"
            fingerprint = self.predictions[cell.row_ids[0]][dev_set].fingerprint
            found.append((fingerprint, replicate_means(bank, cell, self.predictions)))
        if not found or len({f for f, _ in found}) != 1:
            return None
        return found[0][0], np.mean([r for _, r in found], axis=0)

    def mean(self, cells: Sequence[Cell]) -> Estimate | None:
        """The mean of ``cells``' values with its interval: seed level, else run to run, else None."""
        value = float(np.mean([c.value for c in cells]))
        scores = self.seed_level(cells)
        if scores is not None:
            estimate = mean_estimate(scores)
            return Estimate(value, estimate.low, estimate.high, math.nan, SEED_LEVEL, "t")
        found = self.replicates(cells, self.interval_bank)
        return None if found is None else run_to_run_mean(value, found[1])

    def difference(self, a: Sequence[Cell], b: Sequence[Cell]) -> Estimate | None:
        """``mean(a) - mean(b)``: seed level where both sides are, else run to run, else None."""
        scores_a, scores_b = self.seed_level(a), self.seed_level(b)
        if scores_a is not None and scores_b is not None:
            return difference_estimate(scores_a, scores_b)
        found_a, found_b = self.replicates(a, self.test_bank), self.replicates(b, self.test_bank)
        if found_a is None or found_b is None or found_a[0] != found_b[0]:
            return None
        value = float(np.mean([c.value for c in a]) - np.mean([c.value for c in b]))
        return run_to_run_difference(value, found_a[1] - found_b[1])


def sweep_numbers(
    scores: Mapping[ScoreKey, float],
    predictions: Mapping[str, TrialPredictions],
    *,
    resamples: int = stats.DEFAULT_RESAMPLES,
    test_resamples: int = stats.DEFAULT_TEST_RESAMPLES,
    seed: int = 0,
) -> _Numbers:
    """The numbers of cells from outside one table (two sweeps compared): each run's value, the predictions of
    the epoch shown, the replicate banks; their means and differences then come from this module's procedure."""
    return _Numbers(scores, predictions, ReplicateBank(resamples, seed), ReplicateBank(test_resamples, seed))


def _scored(blocks: Sequence[Block]) -> list[Cell]:
    return [
        cell
        for block in blocks
        for (_, column), cell in block.cells.items()
        if not column.fact and not cell.missing and cell.row_ids and cell.config
    ]


def attach_sweep_statistics(
    name: str,
    blocks: Sequence[Block],
    reference: Reference,
    scores: Mapping[ScoreKey, float],
    predictions: Mapping[str, TrialPredictions],
    *,
    family: str = "condition",
    correction: str = "holm",
    resamples: int = stats.DEFAULT_RESAMPLES,
    test_resamples: int = stats.DEFAULT_TEST_RESAMPLES,
    seed: int = 0,
    labels: Mapping[str, TrialPredictions] | None = None,
    numbers: _Numbers | None = None,
) -> tuple[SweepStatistics, _Numbers]:
    """Fill the uncertainty fields of the cells of ``blocks`` (the table's own, rows x columns) in place: each
    cell's interval, its reference (``is_reference``), raw and adjusted p against it, mark, direction and level;
    the degenerate mark of a cell whose mean is at or below the majority class's accuracy. ``scores``: each run's
    value as printed; ``predictions``: row id -> per-example predictions of the epoch printed (empty for the
    last epoch's values); ``labels``: where the dev sets' labels come from for the majority-class check (default
    ``predictions``; the labels are the same at every epoch); ``numbers``: the values, predictions and replicate
    banks of an earlier call on the same runs (`sweep_numbers`), so that the same cells tested against another
    reference reuse their bootstrap replicates (the numbers are the same: a bank's samples depend on its seed,
    the dev set and the resamples only).

    Raises:
        ConfigError: an explicit reference that matches no cell, or several in one condition.
    """
    if numbers is None:
        numbers = _Numbers(
            scores, predictions, ReplicateBank(resamples, seed), ReplicateBank(test_resamples, seed)
        )
    out = SweepStatistics()
    cells = _scored(blocks)
    without = 0
    for cell in cells:
        estimate = numbers.mean([cell])
        if estimate is None:
            without += 1
        else:
            cell.ci_low, cell.ci_high, cell.uncertainty = estimate.low, estimate.high, estimate.level
            out.levels.add(estimate.level)
            if cell.n_seeds >= 2:
                cell.paper_low, cell.paper_high = stats.seed_prediction_interval(numbers.seeds(cell).scores)
        _flag_majority_mean(cell, predictions if labels is None else labels)
    references = reference_cells(cells, reference, name)
    tested: list[tuple[Cell, Estimate, tuple[Any, ...], str]] = []
    untested = 0
    block_of = {id(cell): block.title for block in blocks for cell in block.cells.values()}
    names = {
        id(cell): _cell_label(block, row, column)
        for block in blocks
        for (row, column), cell in block.cells.items()
    }
    for cell in cells:
        ref = references.get(id(cell))
        if ref is None:
            continue
        if ref is cell:
            cell.is_reference = True
            continue
        estimate = numbers.difference([cell], [ref])
        if estimate is None:
            untested += 1
            continue
        cell.direction = int(np.sign(round(estimate.value, 12)))
        cell.test_method = "t" if estimate.level == SEED_LEVEL else "normal"
        cell.p_raw = estimate.p
        cell.uncertainty = estimate.level
        out.levels.add(estimate.level)
        key = reference.condition(cell.config) if family == "condition" else ()
        tested.append((cell, estimate, key, block_of[id(cell)]))
    families = _correct([(cell, estimate.p, key) for cell, estimate, key, _ in tested], correction)
    for cell, estimate, _, block in tested:
        out.differences.append(
            Difference(
                block,
                names[id(cell)],
                estimate.value,
                estimate.low,
                estimate.high,
                cell.significant,
                cell.direction,
                bool(cell.degenerate),
                estimate.p,
                estimate.level,
            )
        )
    if cells:
        out.notes.extend(_cell_notes(tested, families, reference, family, correction, untested, without))
        out.notes.extend(
            seeds_needed_notes(cells, references, numbers, max(families.values(), default=1), correction)
        )
    return out, numbers


def _cell_label(block: Block, row: str, column: Column) -> str:
    return " · ".join(x for x in (row, column.label if len(block.columns) > 1 else "") if x)


def _correct(tests: Sequence[tuple[Cell, float, Any]], correction: str) -> dict[Any, int]:
    """Adjust each family's raw p (``(cell, p, family key)``) and mark the cells; returns family -> its size."""
    families: dict[Any, list[tuple[Cell, float]]] = {}
    for cell, p, key in tests:
        families.setdefault(key, []).append((cell, p))
    for members in families.values():
        adjusted = stats.adjust([p for _, p in members], correction)
        for (cell, _), p in zip(members, adjusted, strict=True):
            cell.p_vs_reference = p
            cell.significant = p <= ALPHA
    return {key: len(members) for key, members in families.items()}


def _flag_majority_mean(cell: Cell, predictions: Mapping[str, TrialPredictions]) -> None:
    """Mark an accuracy cell whose mean over seeds is at or below the majority class's accuracy on its dev set
    (from the stored labels) as degenerate. Its interval's width never decides: two healthy seeds far apart give
    a wide interval, not a degenerate cell."""
    if cell.config.get("metric") != "accuracy":
        return
    found = cell_runs(cell, predictions)
    if found is None or not len(found[0]):
        return
    _, counts = np.unique(found[0], return_counts=True)
    majority = float(counts.max() / len(found[0]))
    if cell.value <= majority + 1e-9:
        reason = f"mean at or below the majority class's accuracy {majority:.4f}"
        if reason not in cell.degenerate:
            cell.degenerate = (*cell.degenerate, reason)


def level_note(levels: set[str]) -> str:
    """The note that says which procedure gave the table's intervals and marks (``levels``: those used)."""
    both = len(levels) > 1
    parts = [
        LEVEL_WORDS[level]
        + (" where every side ran two or more seeds" if both and level == SEED_LEVEL else "")
        for level in (SEED_LEVEL, RUN_TO_RUN)
        if level in levels
    ]
    return (
        "uncertainty of every number here (cells, means, pairs, differences from the reference): "
        + "; ".join(parts)
    )


def _family_words(family: str) -> str:
    return (
        "one family per block and reference slice" if family == "condition" else "one family: the whole table"
    )


def _cell_notes(
    tested: Sequence[tuple[Cell, Estimate, Any, str]],
    families: Mapping[Any, int],
    reference: Reference,
    family: str,
    correction: str,
    untested: int,
    without: int,
) -> list[str]:
    better = sum(c.significant and c.direction > 0 for c, *_ in tested)
    worse = sum(c.significant and c.direction < 0 for c, *_ in tested)
    run_level = sum(e.level == RUN_TO_RUN for _, e, *_ in tested)
    notes = [
        f"▲/▼: better/worse than the reference ({reference.label}, marked 'ref'); correction: "
        f"{stats.CORRECTION_LABELS[correction]}, {_family_words(family)} ({len(families)} of them), adjusted "
        f"p <= {ALPHA} over the {len(tested)} compared cells ({better} better, {worse} worse)"
    ]
    if run_level:
        notes.append(
            f"{run_level} comparison(s) are run-to-run (one seed on a side): they count dev-example sampling only "
            "and leave training-seed variance out; run two or more seeds for seed-level marks"
        )
    if untested or without:
        notes.append(
            f"{without} cell(s) without an interval and {untested} comparison(s) untested: one seed and no "
            "per-example predictions of the epoch shown (the store keeps the best epoch's only)"
        )
    return notes


def seeds_needed_notes(
    cells: Sequence[Cell],
    references: Mapping[int, Cell],
    numbers: _Numbers,
    family_size: int,
    correction: str,
    difference: float = DETECT,
    power: float = POWER,
) -> list[str]:
    """Per task, dev set and metric: the seeds per cell the table's own test (paired t over seeds, at the
    correction's strictest threshold ``0.05 / family_size``) needs to find ``difference`` at ``power``. The SD of
    a seed's difference is pooled over the cells compared with their reference on the same seeds (it holds any
    seed variance the two share); without such pairs, √2 times the pooled seed SD of the cells."""
    groups: dict[tuple[str, str, str], list[Cell]] = {}
    for cell in cells:
        key = tuple(str(cell.config.get(k, "")) for k in ("task", "dev_set", "metric"))
        groups.setdefault(key, []).append(cell)  # type: ignore[arg-type]
    notes = []
    alpha = ALPHA / max(family_size, 1)
    for (task, dev_set, metric), members in sorted(groups.items()):
        sd, source = _difference_sd(members, references, numbers)
        if math.isnan(sd):
            notes.append(
                f"seeds needed on {task} {dev_set} ({metric}): unknown, no cell here ran two or more seeds (seed "
                "variance is not measured; run two or more to get seed-level marks and this estimate)"
            )
            continue
        needed = seeds_needed_paired(sd, difference, alpha, power) if sd > 0 else 2
        count = f"{needed} seeds per cell" if needed else f"more than {MAX_SEEDS:,} seeds per cell"
        notes.append(
            f"seeds needed on {task} {dev_set} ({metric}): to detect {difference:g} at {power:.0%} power with the "
            f"paired t-test over seeds at {stats.CORRECTION_LABELS[correction].split(' (')[0]}'s strictest "
            f"threshold for a family of {family_size} (alpha 0.05/{family_size}) you need {count} (SD of a seed's "
            f"difference {sd:.4f}, {source})"
        )
    return notes


def _difference_sd(
    cells: Sequence[Cell], references: Mapping[int, Cell], numbers: _Numbers
) -> tuple[float, str]:
    weighted = total = 0.0
    pairs = 0
    for cell in cells:
        ref = references.get(id(cell))
        if ref is None or ref is cell or cell.n_seeds < 2:
            continue
        a, b = numbers.seeds(cell), numbers.seeds(ref)
        if a.keys != b.keys:
            continue
        d = a.scores - b.scores
        weighted += (len(d) - 1) * float(np.var(d, ddof=1))
        total += len(d) - 1
        pairs += 1
    if total:
        return math.sqrt(weighted / total), f"pooled over {pairs} paired comparison(s)"
    for cell in cells:
        if cell.n_seeds >= 2 and not math.isnan(cell.std):
            weighted += (cell.n_seeds - 1) * cell.std**2
            total += cell.n_seeds - 1
            pairs += 1
    if not total:
        return math.nan, ""
    return math.sqrt(2.0 * weighted / total), f"√2 x the seed SD pooled over {pairs} cell(s)"


# --- marginals and pairs -----------------------------------------------------------------------------------------


def marginal_cell(numbers: _Numbers, members: Sequence[Cell]) -> Cell:
    """The mean of ``members`` with its interval (`_Numbers.mean`)."""
    value = float(np.mean([c.value for c in members]))
    degenerate = tuple(sorted({r for c in members for r in c.degenerate}))
    estimate = numbers.mean(members)
    seeds = min(c.n_seeds for c in members)
    if estimate is None:
        return Cell(value=value, n_seeds=seeds, degenerate=degenerate)
    return Cell(
        value=value,
        n_seeds=seeds,
        degenerate=degenerate,
        ci_low=estimate.low,
        ci_high=estimate.high,
        uncertainty=estimate.level,
    )


@dataclass(frozen=True)
class PairTest:
    """One comparison of two values of an axis over a block: the cell shown, its estimate, its family key."""

    cell: Cell
    estimate: Estimate
    family: Any


def pair_cell(numbers: _Numbers, a: Sequence[Cell], b: Sequence[Cell]) -> tuple[Cell, Estimate | None]:
    """``mean(a) - mean(b)`` as a cell (interval, raw p, direction, level); the estimate, None when untestable."""
    value = float(np.mean([c.value for c in a]) - np.mean([c.value for c in b]))
    estimate = numbers.difference(a, b)
    cell = Cell(
        value=value, n_seeds=min(c.n_seeds for c in (*a, *b)), direction=int(np.sign(round(value, 12)))
    )
    if estimate is not None:
        cell.ci_low, cell.ci_high = estimate.low, estimate.high
        cell.p_raw, cell.uncertainty = estimate.p, estimate.level
        cell.test_method = "t" if estimate.level == SEED_LEVEL else "normal"
    return cell, estimate


def correct_pairs(tests: Sequence[PairTest], correction: str) -> int:
    """Adjust the pairs' raw p per family and mark them; returns the number of families."""
    return len(_correct([(t.cell, t.estimate.p, t.family) for t in tests], correction))


def crossover_warning(
    numbers: _Numbers,
    block: str,
    axis: str,
    a: str,
    b: str,
    slices: Mapping[str, tuple[Sequence[Cell], Sequence[Cell]]],
    shown: Callable[[str], str],
) -> str | None:
    """A warning when ``a`` vs ``b`` of ``axis``, averaged over the other axes' ``slices`` (label -> (cells of
    a, cells of b) there), is better beyond noise in one slice and worse beyond noise in another (raw p <= 0.05
    each, the table's procedure): the average hides a crossover."""
    estimates = {}
    for label, (cells_a, cells_b) in slices.items():
        if cells_a and cells_b:
            estimate = numbers.difference(cells_a, cells_b)
            if estimate is not None:
                estimates[label] = estimate
    found = crossover(estimates, ALPHA)
    if found is None:
        return None
    up, down = found
    return (
        f"warning: {block} — {axis} {shown(a)} vs {shown(b)} averages over a crossover: {shown(a)} is better where "
        f"{up} ({estimates[up].value:+.4f}, p {estimates[up].p:.2g}) and worse where {down} "
        f"({estimates[down].value:+.4f}, p {estimates[down].p:.2g}); read it per slice (--reference {axis}=VALUE "
        "tests within each slice)"
    )


def slices_of(
    members: Sequence[Cell], others: Sequence[str], shown: Callable[[str], str]
) -> dict[str, list[Cell]]:
    """``members`` grouped by their values of the ``others`` axes (label ``axis=value · ...``)."""
    out: dict[str, list[Cell]] = {}
    for cell in members:
        label = " · ".join(f"{axis}={shown(str(cell.config.get(axis, '')))}" for axis in others)
        out.setdefault(label, []).append(cell)
    return out


def pairs_of(values: Sequence[str]) -> list[tuple[str, str]]:
    return list(itertools.combinations(values, 2))
