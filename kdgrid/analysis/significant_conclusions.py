"""The paper's derived claims (`kdgrid.analysis.paper_conclusions`) counting only differences beyond noise, each with a test that
was fixed before looking at the numbers (never a comparison of cells picked as the best or worst):

- Best at First-1/Last-1: per condition (student, task, dev set), the statistic ``D = max over First-1/Last-1
  cells - max over the other strategies' cells`` against its distribution when, within each knowledge type, the
  strategies' results are shuffled (`one_layer_best`): with two or more seeds a cell, the per-seed scores within
  each seed (method level, paired by seed); with one seed, the predictions example by example (run-to-run). Under
  "strategy makes no difference" the shuffles are as likely as the data, so the max over 2 against the max over 3
  is accounted for; counted as "First-1/Last-1 better", "another strategy better" or "within noise".
- Variance across strategies: per (condition, knowledge type), ONE test that all its strategies have the same
  score (`strategies_omnibus`: with two or more seeds, the ANOVA over seed scores, seeds as blocks when the cells
  ran the same seeds; with one seed, Friedman / Cochran's Q over examples for accuracy, a Wald test on the
  bootstrap covariance otherwise), corrected over the rows; in the rows that differ, every pair of strategies is
  tested, Holm within the row.
- Calibrated weights: each cell of Table 8 against the same cell of Table 5 (beta = 1); better, worse, within
  noise (`kdgrid.analysis.cell_stats.paired_test_of_cells`: the paired t-test over seeds with two or more).

Every claim is thus tested at the method level (training-seed variance in the null) when every cell it uses ran
two or more seeds, and is labelled run-to-run otherwise: one-seed tests resample dev examples only, and under a
method-level null with seed noise they reject far more often than their level (the simulations in the tests
measure both).
Each claim's tests are corrected together (Holm, or Benjamini-Hochberg on request) at
`kdgrid.analysis.cell_stats.ALPHA`. Only cells whose rows carry per-example predictions take part; the plain counts
(`kdgrid.analysis.tables_conclusions`) stay beside these.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from kdgrid.analysis import stats
from kdgrid.analysis.cell_stats import ALPHA, cell_runs, paired_test_of_cells, register_cells, replicate_means
from kdgrid.analysis.paper_conclusions import ONE_LAYER_STRATEGIES
from kdgrid.analysis.replicate_bank import ReplicateBank
from kdgrid.analysis.tables import Cell, TableView
from kdgrid.paper import PAPER_STRATEGIES
from kdgrid.predictions import TrialPredictions

Compare = Callable[[Cell, Cell], "stats.PairedTest | None"]

CLAIM_PERMUTATIONS = 4000
"""Draws of `one_layer_best`'s null (exact shuffles or Gaussian draws): floor 2 / 4,001, so a correction over
up to ~100 conditions (a full Table 5 has 27) can still reject at 0.05; a family beyond is warned about."""


@dataclass(frozen=True)
class Tally:
    """Comparisons of a claim: how many favour the first side beyond noise, the second, and neither."""

    first: int
    second: int
    within_noise: int
    unreachable: bool = False  # the family's smallest attainable p cannot pass the correction

    @property
    def total(self) -> int:
        return self.first + self.second + self.within_noise


def _cells(view: TableView) -> list[Cell]:
    return [
        cell
        for block in view.blocks
        for (_, column), cell in block.cells.items()
        if not column.fact
        and not cell.missing
        and cell.config.get("knowledge")
        and cell.config.get("strategy") in PAPER_STRATEGIES  # never a control (docs/uncertainty.md)
        and not cell.selected_over  # a cell that picked its best configuration is no fixed comparison
    ]


def _condition(cell: Cell) -> tuple[str, str, str]:
    return (cell.config["student"], cell.config["task"], cell.config["dev_set"])


def _count(signed: list[tuple[float, float, float]], correction: str) -> Tally:
    """(difference, p, floor) per test -> a `Tally` after the correction over all of them."""
    adjusted = stats.adjust([p for _, p, _ in signed], correction)
    first = sum(p <= ALPHA and d > 0 for (d, _, _), p in zip(signed, adjusted, strict=True))
    second = sum(p <= ALPHA and d < 0 for (d, _, _), p in zip(signed, adjusted, strict=True))
    unreachable = bool(signed) and not stats.family_can_reject([f for _, _, f in signed], ALPHA)
    return Tally(first, second, len(signed) - first - second, unreachable)


def _tally(pairs: list[tuple[Cell, Cell]], compare: Compare, correction: str = "holm") -> Tally:
    tests = [test for a, b in pairs if (test := compare(a, b)) is not None]
    return _count([(t.difference, t.p_value, t.floor) for t in tests], correction)


def one_layer_test(
    cells: list[Cell],
    predictions: Mapping[str, TrialPredictions],
    *,
    resamples: int,
    seed: int,
    bank: ReplicateBank | None = None,
) -> tuple[float, float, float] | None:
    """(D - its null centre, two-sided p, floor) of one condition's `one_layer_best` statistic ``D = max over
    First-1/Last-1 cells - max over the others``, or None (no predictions, or a side without cells).

    The null is "within each knowledge type, the strategy makes no difference", with the choice of the best of 2
    and of 3 redone in every draw:
    - two or more seeds in every cell (method level): the cells' per-seed scores shuffled between the strategies
      of a knowledge type, within each seed when the cells ran the same seeds (paired: a component a seed gives
      every cell cancels), else all runs pooled and dealt back (`_shuffled_seed_means`). Training-seed variance
      is then in the null; the floor also counts how few distinct shuffles a few seeds allow;
    - one seed per cell, accuracy: exact per-example shuffles of which strategy made which prediction
      (`_shuffled_binary_accuracy`), a run-to-run test;
    - otherwise: Gaussian draws around each knowledge type's mean score with the paired bootstrap covariance
      over dev examples from ``bank`` (run-to-run).
    p = 2 min(#{D* >= D} + 1, #{D* <= D} + 1) / (R + 1), at most 1."""
    by_type: dict[str, list[Cell]] = {}
    for cell in cells:
        by_type.setdefault(cell.config["knowledge"], []).append(cell)
    ordered = [cell for members in by_type.values() for cell in members]
    one_rows = [i for i, c in enumerate(ordered) if c.config["strategy"] in ONE_LAYER_STRATEGIES]
    other_rows = [i for i, c in enumerate(ordered) if c.config["strategy"] not in ONE_LAYER_STRATEGIES]
    runs = [cell_runs(c, predictions) for c in ordered]
    if not one_rows or not other_rows or any(r is None for r in runs):
        return None
    metric = ordered[0].config["metric"]

    def statistic(values: np.ndarray) -> np.ndarray:  # [..., cells] -> [...]
        return values[..., one_rows].max(axis=-1) - values[..., other_rows].max(axis=-1)

    rng = np.random.default_rng(seed)
    if all(len(p) >= 2 for _, p in runs):  # method level: the seeds' own scores, strategies shuffled per seed
        per_seed = [_by_seed(c, stats.full_scores(metric, g, p)) for c, (g, p) in zip(ordered, runs, strict=True)]
        observed = float(statistic(np.array([np.mean(list(s.values())) for s in per_seed])))
        blocks, start, arrangements = [], 0, 1.0
        for members in by_type.values():
            block = per_seed[start : start + len(members)]
            one = [c.config["strategy"] in ONE_LAYER_STRATEGIES for c in members]
            shuffled, distinct = _shuffled_seed_means(block, one, rng, resamples)
            blocks.append(shuffled)
            arrangements *= distinct
            start += len(members)
        null = statistic(np.concatenate(blocks, axis=1))
        above, below = int(np.sum(null >= observed - 1e-12)), int(np.sum(null <= observed + 1e-12))
        p_value = min(1.0, 2.0 * (min(above, below) + 1) / (resamples + 1))
        # the identity arrangement alone has probability 1 / arrangements: p cannot go below about twice that
        floor = min(1.0, 2.0 * max(1.0 / (resamples + 1), 1.0 / arrangements))
        return observed - float(np.mean(null)), max(p_value, floor), floor
    if metric == "accuracy" and all(len(p) == 1 for _, p in runs):
        observed = float(statistic(np.array([float((p[0] == g).mean()) for g, p in runs])))
        blocks, start = [], 0
        for members in by_type.values():
            block = np.stack([(p[0] == g) for g, p in runs[start : start + len(members)]]).astype(np.float64)
            blocks.append(_shuffled_binary_accuracy(block, rng, resamples))
            start += len(members)
        null = statistic(np.concatenate(blocks, axis=1))
    else:
        scores = [stats.full_scores(metric, g, p) for g, p in runs]
        values = np.array([s.mean() for s in scores])
        observed = float(statistic(values))
        bank = bank or ReplicateBank(stats.DEFAULT_TEST_RESAMPLES, seed)
        register_cells(bank, ordered, predictions)
        replicates = np.stack([replicate_means(bank, c, predictions) for c in ordered], axis=1)
        covariance = np.cov(replicates, rowvar=False)
        centres, start = np.empty(len(ordered)), 0
        for members in by_type.values():
            centres[start : start + len(members)] = values[start : start + len(members)].mean()
            start += len(members)
        draws = rng.multivariate_normal(np.zeros(len(ordered)), covariance, size=resamples, method="eigh")
        null = statistic(centres + draws)
    above, below = int(np.sum(null >= observed - 1e-12)), int(np.sum(null <= observed + 1e-12))
    p_value = min(1.0, 2.0 * (min(above, below) + 1) / (resamples + 1))
    centre = float(np.mean(null))  # the direction is against the null's own centre, not 0
    return observed - centre, p_value, 2.0 / (resamples + 1)


SeedKey = tuple[float, int]  # (seed, how many runs of the cell had that seed before): a run repeated stays apart


def _by_seed(cell: Cell, scores: np.ndarray) -> dict[SeedKey, float]:
    """A cell's per-seed scores ``[K]`` (in its rows' order) keyed by seed (position when it has no seeds); two
    cells pair run by run exactly when their keys are the same."""
    seeds = cell.seeds if len(cell.seeds) == len(scores) else tuple(float(j) for j in range(len(scores)))
    keys = [(float(s), sum(float(t) == float(s) for t in seeds[:j])) for j, s in enumerate(seeds)]
    return {key: float(v) for key, v in zip(keys, scores, strict=True)}


def _shuffled_seed_means(
    cells: list[dict[SeedKey, float]], one_layer: list[bool], rng: np.random.Generator, resamples: int
) -> tuple[np.ndarray, float]:
    """``([R, k], arrangements)``: one knowledge type's k cells' mean scores after R draws of "the strategy makes
    no difference" at the method level, and how many distinct splits of the scores between its First-1/Last-1
    cells (``one_layer``, one flag a cell) and the others the draws choose from (what bounds the smallest p).

    - the cells ran the same seeds (paired): within each seed, which strategy made which score is shuffled (a
      component the seed gives every cell cancels, as in a paired test);
    - otherwise: the runs of all k cells are pooled and dealt back, each cell keeping its number of seeds.
    Cells: seed -> score (`_by_seed`)."""
    k = len(cells)
    if all(c.keys() == cells[0].keys() for c in cells):
        seeds = sorted(cells[0])
        scores = np.array([[c[s] for s in seeds] for c in cells])  # [k, K]
        order = np.argsort(rng.random((resamples, k, len(seeds))), axis=1)  # a permutation per (draw, seed)
        shuffled = np.take_along_axis(np.broadcast_to(scores, order.shape), order, axis=1)
        return shuffled.mean(axis=2), float(math.comb(k, sum(one_layer))) ** len(seeds)
    pooled = np.concatenate([np.array(list(c.values())) for c in cells])
    sizes = [len(c) for c in cells]
    order = np.argsort(rng.random((resamples, len(pooled))), axis=1)
    dealt = pooled[order]
    bounds = np.cumsum([0, *sizes])
    means = np.stack([dealt[:, a:b].mean(axis=1) for a, b in itertools.pairwise(bounds)], axis=1)
    return means, float(math.comb(len(pooled), sum(n for n, one in zip(sizes, one_layer, strict=True) if one)))


def _shuffled_binary_accuracy(correct: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """``[R, k]``: the k cells' accuracies after R per-example shuffles of 0/1 correctness ``[k, N]``, drawn
    exactly without touching the examples: an example right for c of the k cells gives its c right answers to a
    uniformly random c-subset of the cells, so the n_c such examples together put multinomial(n_c, uniform over
    the C(k, c) subsets) counts on the subsets."""
    k, n = correct.shape
    per_example = correct.sum(axis=0).astype(int)
    totals = np.zeros((resamples, k))
    for c in range(1, k + 1):
        n_c = int(np.sum(per_example == c))
        if n_c == 0:
            continue
        subsets = list(itertools.combinations(range(k), c))
        incidence = np.zeros((len(subsets), k))
        for row, subset in enumerate(subsets):
            incidence[row, list(subset)] = 1.0
        counts = rng.multinomial(n_c, np.full(len(subsets), 1.0 / len(subsets)), size=resamples)
        totals += counts @ incidence
    return totals / n


def one_layer_best(
    view: TableView,
    predictions: Mapping[str, TrialPredictions],
    *,
    resamples: int = CLAIM_PERMUTATIONS,
    seed: int = 0,
    correction: str = "holm",
    bank: ReplicateBank | None = None,
) -> Tally:
    """Per condition: is the best First-1/Last-1 cell better than the best of the other strategies, beyond what
    the choice of the best among 2 and among 3 would give (`one_layer_test`)? ``first``: First-1/Last-1 better."""
    by_condition: dict[tuple[str, str, str], list[Cell]] = {}
    for cell in _cells(view):
        by_condition.setdefault(_condition(cell), []).append(cell)
    results = [
        result
        for cells in by_condition.values()
        if (result := one_layer_test(cells, predictions, resamples=resamples, seed=seed, bank=bank))
        is not None
    ]
    return _count(results, correction)


def strategies_omnibus(
    cells: list[Cell],
    predictions: Mapping[str, TrialPredictions],
    *,
    resamples: int = stats.DEFAULT_TEST_RESAMPLES,
    seed: int = 0,
    bank: ReplicateBank | None = None,
) -> stats.OmnibusTest | None:
    """One test that the cells (k >= 2 strategies of one condition and knowledge type) have the same score:
    over seed scores when every cell ran two or more seeds (method level: the paired, seeds-as-blocks ANOVA when
    they ran the same seeds, else the one-way ANOVA); otherwise over examples (run-to-run):
    Friedman on per-example correctness for accuracy (Cochran's Q with one seed each), for other metrics a Wald
    chi-square test of equal scores with the paired bootstrap covariance over dev examples (``bank``: replicates
    shared with the tests). None when a cell has no predictions."""
    runs = [cell_runs(c, predictions) for c in cells]
    if any(r is None for r in runs):
        return None
    metric = cells[0].config["metric"]
    if all(len(predicted) > 1 for _, predicted in runs):
        per_seed = [_by_seed(c, stats.full_scores(metric, g, p)) for c, (g, p) in zip(cells, runs, strict=True)]
        if all(s.keys() == per_seed[0].keys() for s in per_seed):  # the same seeds: seeds are blocks
            seeds = sorted(per_seed[0])
            return stats.anova_over_paired_seeds([[s[j] for j in seeds] for s in per_seed])
        return stats.anova_over_seeds([list(s.values()) for s in per_seed])
    if metric == "accuracy":
        return stats.friedman_over_examples(np.stack([(p == g[None]).mean(axis=0) for g, p in runs]))
    bank = bank or ReplicateBank(resamples, seed)
    register_cells(bank, cells, predictions)
    values = np.array([stats.full_scores(metric, g, p).mean() for g, p in runs])
    return stats.wald_equal(values, np.stack([replicate_means(bank, c, predictions) for c in cells], axis=1))


@dataclass(frozen=True)
class StrategiesDiffer:
    """`strategies_differ`'s counts: rows (condition, knowledge type) tested and those that differ; in those,
    strategy pairs tested and those that differ (all pairs, Holm within the row)."""

    rows: int
    differ: int
    pairs: int
    pairs_differ: int
    unreachable: bool = False


def strategies_differ(
    view: TableView,
    predictions: Mapping[str, TrialPredictions],
    compare: Compare,
    *,
    seed: int = 0,
    correction: str = "holm",
    bank: ReplicateBank | None = None,
) -> StrategiesDiffer:
    """Per (condition, knowledge type): one test of equality across its strategies (`strategies_omnibus`),
    corrected over the rows; in each row that differs, every pair of strategies by ``compare``, Holm within the
    row. Never the best against the worst (chosen on the same data, that comparison rejects far too often)."""
    groups: dict[tuple[str, ...], list[Cell]] = {}
    for cell in _cells(view):
        groups.setdefault((*_condition(cell), cell.config["knowledge"]), []).append(cell)
    tested = [
        (cells, result)
        for cells in groups.values()
        if len(cells) >= 2
        and (result := strategies_omnibus(cells, predictions, seed=seed, bank=bank)) is not None
    ]
    adjusted = stats.adjust([r.p_value for _, r in tested], correction)
    differ = pairs = pairs_differ = 0
    for (cells, _), p in zip(tested, adjusted, strict=True):
        if p > ALPHA:
            continue
        differ += 1
        results = [t for a, b in itertools.combinations(cells, 2) if (t := compare(a, b)) is not None]
        pairs += len(results)
        pairs_differ += sum(q <= ALPHA for q in stats.holm_bonferroni([t.p_value for t in results]))
    unreachable = bool(tested) and not stats.family_can_reject([r.floor for _, r in tested], ALPHA)
    return StrategiesDiffer(len(tested), differ, pairs, pairs_differ, unreachable)


def weights_improve(
    weighted: TableView, plain: TableView, compare: Compare, correction: str = "holm"
) -> Tally:
    """Each Table 8 cell against the same (condition, knowledge, strategy) cell of Table 5."""
    key = lambda c: (*_condition(c), c.config["knowledge"], c.config["strategy"])  # noqa: E731
    plain_cells = {key(c): c for c in _cells(plain)}
    pairs = [(c, plain_cells[key(c)]) for c in _cells(weighted) if key(c) in plain_cells]
    return _tally(pairs, compare, correction)


def significant_claim_notes(
    name: str,
    view: TableView,
    predictions: Mapping[str, TrialPredictions],
    *,
    table5: TableView | None = None,
    resamples: int = stats.DEFAULT_TEST_RESAMPLES,
    seed: int = 0,
    bank: ReplicateBank | None = None,
    correction: str = "holm",
) -> list[str]:
    """The notes of table ``name`` ("5", "6", "8") counting only significant differences; none where no
    comparison has predictions on both sides. ``bank``: the replicates already drawn for ``view``'s tests
    (`attach_uncertainty`'s ``test_bank``, with ``resamples`` and ``seed``), reused here."""
    if name not in ("5", "6", "8") or not predictions:
        return []

    bank = bank or ReplicateBank(resamples, seed)  # every comparison's replicates drawn once per dev set
    if (bank.resamples, bank.seed) != (resamples, seed):
        raise ValueError(
            f"the bank draws {bank.resamples} resamples with seed {bank.seed}, not {resamples}, {seed}"
        )
    register_cells(bank, _cells(view), predictions)
    if table5 is not None:
        register_cells(bank, _cells(table5), predictions)

    def compare(a: Cell, b: Cell) -> stats.PairedTest | None:
        return paired_test_of_cells(a, b, predictions, bank=bank)

    label = stats.CORRECTION_LABELS[correction].split(" (")[0]
    cells = _cells(view)
    if cells and all(c.n_seeds >= 2 for c in cells):
        beyond = f"beyond noise (seed level; {label} over the claim's tests, alpha {ALPHA})"
    else:  # one seed somewhere: the claim's tests resample dev examples, not training runs
        beyond = (
            f"beyond run-to-run noise (one seed: dev examples resampled, training-seed variance left out, so two "
            f"seeds of one configuration often differ this much; {label} over the claim's tests, alpha {ALPHA})"
        )
    warn = " - warning: this family cannot reach the threshold whatever the data"
    notes = []
    if name in ("5", "6"):
        best = one_layer_best(view, predictions, seed=seed, correction=correction, bank=bank)
        if best.total:
            notes.append(
                f"{beyond}: First-1/Last-1's best cell beats every other strategy's best in {best.first} of "
                f"{best.total} conditions, another strategy's beats it in {best.second}, {best.within_noise} "
                "within noise (strategies shuffled per example to account for picking the best of 2 and of 3)"
                + (warn if best.unreachable else "")
            )
    if name == "5":
        differ = strategies_differ(view, predictions, compare, seed=seed, correction=correction, bank=bank)
        if differ.rows:
            notes.append(
                f"{beyond}: the matching strategies differ in {differ.differ} of {differ.rows} (condition, "
                f"knowledge type) rows; {differ.rows - differ.differ} within noise (one test of equality across "
                f"strategies per row); in those rows {differ.pairs_differ} of {differ.pairs} strategy pairs "
                "differ (all pairs, Holm within the row)" + (warn if differ.unreachable else "")
            )
    if name == "8" and table5 is not None:
        weights = weights_improve(view, table5, compare, correction)
        if weights.total:
            notes.append(
                f"{beyond}: calibrated weights vs beta = 1, cell by cell: {weights.first} better, {weights.second} "
                f"worse, {weights.within_noise} within noise" + (warn if weights.unreachable else "")
            )
    return notes
