"""The paper's derived claims (`kdgrid.analysis.claims`) counting only differences beyond noise: each comparison a claim
rests on is a paired bootstrap test between two cells (`kdgrid.analysis.cell_stats.compare_cells`), Holm-corrected over
the comparisons of the claim, significant at `kdgrid.analysis.cell_stats.ALPHA`.

- Best at First-1/Last-1: per condition (student, dev set), the best First-1/Last-1 cell against the best cell of
  any other strategy; counted as "First-1/Last-1 better", "another strategy better" or "within noise".
- Variance across strategies: per (condition, knowledge type), the best strategy against the worst; counted as
  "strategies differ beyond noise" or not.
- Calibrated weights: each cell of Table 8 against the same cell of Table 5 (beta = 1); better, worse, within noise.

Only cells whose rows carry per-example predictions take part; the plain counts (`kdgrid.analysis.tables_claims`) stay
beside these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kdgrid.analysis import stats
from kdgrid.analysis.cell_stats import ALPHA, compare_cells, register_cells
from kdgrid.analysis.claims import ONE_LAYER_STRATEGIES
from kdgrid.analysis.replicate_bank import ReplicateBank
from kdgrid.analysis.tables import Cell, TableView
from kdgrid.paper import PAPER_STRATEGIES
from kdgrid.predictions import TrialPredictions

Compare = Callable[[Cell, Cell], "stats.PairedTest | None"]


@dataclass(frozen=True)
class Tally:
    """Comparisons of a claim: how many favour the first side beyond noise, the second, and neither."""

    first: int
    second: int
    within_noise: int

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
    ]


def _condition(cell: Cell) -> tuple[str, str, str]:
    return (cell.config["student"], cell.config["task"], cell.config["dev_set"])


def _tally(pairs: list[tuple[Cell, Cell]], compare: Compare) -> Tally:
    tests = [(test, a, b) for a, b in pairs if (test := compare(a, b)) is not None]
    adjusted = stats.holm_bonferroni([test.p_value for test, _, _ in tests])
    first = second = 0
    for (test, _, _), p in zip(tests, adjusted, strict=True):
        if p <= ALPHA and test.difference > 0:
            first += 1
        elif p <= ALPHA and test.difference < 0:
            second += 1
    return Tally(first, second, len(tests) - first - second)


def one_layer_best(view: TableView, compare: Compare) -> Tally:
    """Per condition: the best First-1/Last-1 cell against the best cell of any other strategy."""
    pairs = []
    by_condition: dict[tuple[str, str, str], list[Cell]] = {}
    for cell in _cells(view):
        by_condition.setdefault(_condition(cell), []).append(cell)
    for cells in by_condition.values():
        one = [c for c in cells if c.config["strategy"] in ONE_LAYER_STRATEGIES]
        other = [c for c in cells if c.config["strategy"] not in ONE_LAYER_STRATEGIES]
        if one and other:
            pairs.append((max(one, key=lambda c: c.value), max(other, key=lambda c: c.value)))
    return _tally(pairs, compare)


def strategies_differ(view: TableView, compare: Compare) -> Tally:
    """Per (condition, knowledge type): its best strategy's cell against its worst one's (``first``: differ)."""
    groups: dict[tuple[str, ...], list[Cell]] = {}
    for cell in _cells(view):
        groups.setdefault((*_condition(cell), cell.config["knowledge"]), []).append(cell)
    pairs = [
        (max(cells, key=lambda c: c.value), min(cells, key=lambda c: c.value))
        for cells in groups.values()
        if len(cells) >= 2
    ]
    return _tally(pairs, compare)


def weights_improve(weighted: TableView, plain: TableView, compare: Compare) -> Tally:
    """Each Table 8 cell against the same (condition, knowledge, strategy) cell of Table 5."""
    key = lambda c: (*_condition(c), c.config["knowledge"], c.config["strategy"])  # noqa: E731
    plain_cells = {key(c): c for c in _cells(plain)}
    pairs = [(c, plain_cells[key(c)]) for c in _cells(weighted) if key(c) in plain_cells]
    return _tally(pairs, compare)


def significant_claim_notes(
    name: str,
    view: TableView,
    predictions: Mapping[str, TrialPredictions],
    *,
    table5: TableView | None = None,
    resamples: int = stats.DEFAULT_TEST_RESAMPLES,
    seed: int = 0,
    bank: ReplicateBank | None = None,
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
        return compare_cells(a, b, predictions, bank=bank)

    beyond = f"beyond noise (paired bootstrap, Holm over the comparisons, alpha {ALPHA})"
    notes = []
    if name in ("5", "6"):
        best = one_layer_best(view, compare)
        if best.total:
            notes.append(
                f"{beyond}: First-1/Last-1's best cell beats every other strategy's best in {best.first} of "
                f"{best.total} conditions, another strategy's beats it in {best.second}, {best.within_noise} "
                "within noise"
            )
    if name == "5":
        differ = strategies_differ(view, compare)
        if differ.total:
            notes.append(
                f"{beyond}: the best and worst matching strategy differ in {differ.first} of {differ.total} "
                f"(condition, knowledge type) rows; {differ.within_noise} within noise"
            )
    if name == "8" and table5 is not None:
        weights = weights_improve(view, table5, compare)
        if weights.total:
            notes.append(
                f"{beyond}: calibrated weights vs beta = 1, cell by cell: {weights.first} better, {weights.second} "
                f"worse, {weights.within_noise} within noise"
            )
    return notes
