"""Uncertainty of every cell of a laid-out table: intervals, paired tests against a reference cell, corrected per
family, from the per-example dev predictions the store keeps per row.

`attach_uncertainty` fills the uncertainty fields of each `Cell` (`ci_low`, `ci_high`, `p_vs_reference`,
`significant`, `direction`, `is_reference`, `test_method`, `paper_low`/`paper_high`); the statistics are
`kdgrid.analysis.stats`. Conventions (docs/uncertainty.md says them at length, with what each mark does not test):

- A cell's interval: one seed, the bootstrap over its dev examples (`stats.bootstrap_interval`); two or more, the
  t interval over its seeds' scores (`stats.seed_t_interval`, method level), of the metric the table prints, at
  95%. ``paper_low``/``paper_high``: where one more run would fall (`stats.seed_prediction_interval`, >= 2 seeds).
- The reference of a cell is the one cell of the same condition (task, dev set, student, teacher; less any field
  the reference names) of the same table that matches the reference: by default the soft-labels-only cell
  (no knowledge, soft-label weight not 0). The test (`paired_test_of_cells`) compares the two on the same
  examples (their fingerprints must agree): a t-test over seeds with two or more seeds a side (paired by seed when
  both ran the same seeds), else the exact McNemar test (accuracy) or a z-test on the bootstrap standard error.
- ``p_vs_reference`` is adjusted (Holm or Benjamini-Hochberg) within its family: its condition (default) or the
  whole table; ``significant`` is adjusted p <= 0.05. A cell that shows the best of several configurations
  (``selected_over``) is not tested, nor is a cell whose reference is one.
- Cells whose rows have no predictions (schema-1 rows) keep NaN fields: no interval, no test.

Nothing here reads or writes the store: the predictions come in as a mapping row id -> `TrialPredictions`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kdgrid.analysis import stats
from kdgrid.analysis.replicate_bank import ReplicateBank
from kdgrid.analysis.schema import CONFIG_COLUMNS, LABEL_COLUMNS
from kdgrid.analysis.tables import Cell, TableView
from kdgrid.errors import ConfigError
from kdgrid.predictions import DevSetPredictions, TrialPredictions

ALPHA = 0.05
"""Level of a table's tests: a cell is significant when its adjusted p (Holm: family-wise error; FDR:
Benjamini-Hochberg) is at most this."""

FAMILIES: tuple[str, ...] = ("condition", "table")
"""Families of the correction: one per condition (task x dev set x student x teacher, the default: the
comparisons with one reference cell), or the whole table at once."""

TEST_CHOICES: tuple[str, ...] = ("auto", "bootstrap")
"""``auto``: floor-free tests (`_cell_test`) and, with several seeds, method-level intervals over seeds;
``bootstrap``: the paired bootstrap test and the seeds-then-examples bootstrap interval for every cell."""

CONDITION_FIELDS: tuple[str, ...] = ("task", "dev_set", "student", "teacher", "metric", "role")
"""What a cell and its reference share: the same examples, the same student and teacher, the same metric."""

DEFAULT_REFERENCE_LABEL = "soft labels only"


@dataclass(frozen=True)
class Reference:
    """Which cell of a condition the others are compared with.

    ``fields``: config columns (`kdgrid.analysis.tidy.CONFIG_COLUMNS`) and the values the reference has there; empty for
    the default, the soft-labels-only cell (no knowledge, a soft-label weight that is not 0). ``explicit``: named
    by the user (a reference that matches no cell, or several in one condition, is then refused).
    ``condition_fields``: what a cell and its reference share (`CONDITION_FIELDS`; a sweep's table adds the
    varying fields it lays out in separate blocks, `kdgrid.analysis.sweep_tables`)."""

    fields: tuple[tuple[str, str], ...] = ()
    explicit: bool = False
    condition_fields: tuple[str, ...] = CONDITION_FIELDS

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.fields) or DEFAULT_REFERENCE_LABEL

    def matches(self, config: Mapping[str, Any]) -> bool:
        if not self.fields:
            weight = _number(config.get("soft_weight"))
            return config.get("knowledge", "") == "" and weight != 0.0
        return all(_same(config.get(name), value) for name, value in self.fields)

    def condition(self, config: Mapping[str, Any]) -> tuple[Any, ...]:
        named = {name for name, _ in self.fields}
        return tuple(_text(config.get(name)) for name in self.condition_fields if name not in named)


def parse_reference(text: str | None) -> Reference:
    """``None`` -> the default (soft labels only); ``"knowledge=hidden_mse,strategy=Last-1"`` -> those fields.

    Raises:
        ConfigError: a part without ``=``, or a field that is not a config column.
    """
    if text is None or not text.strip():
        return Reference()
    fields = []
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in CONFIG_COLUMNS:
            raise ConfigError(
                f"--reference takes FIELD=VALUE[,FIELD=VALUE...] with fields among {', '.join(CONFIG_COLUMNS)}; "
                f"got {part.strip()!r}"
            )
        fields.append((name, value.strip()))
    return Reference(tuple(fields), explicit=True)


@dataclass
class _Side:
    """One cell's runs on one dev set: gold ``[N]``, student predictions ``[K, N]``, seeds, fingerprint, and the
    runs' keys in a `ReplicateBank` (row id, dev set)."""

    gold: np.ndarray
    runs: np.ndarray
    seeds: tuple[float, ...]
    fingerprint: str
    keys: tuple[tuple[str, str], ...] = ()


@dataclass
class UncertaintySummary:
    """What `attach_uncertainty` did to a view: cells with an interval, cells tested, cells left without."""

    with_interval: int = 0
    tested: int = 0
    without_predictions: int = 0
    notes: list[str] = field(default_factory=list)
    families: int = 0
    unreachable_families: int = 0  # families whose smallest attainable p cannot pass the correction
    run_level: int = 0  # comparisons with one seed on a side (run-to-run: seed variance left out)
    selected: int = 0  # cells showing the best of several configurations: not tested


def attach_uncertainty(
    view: TableView,
    predictions: Mapping[str, TrialPredictions],
    *,
    reference: Reference | None = None,
    resamples: int = stats.DEFAULT_RESAMPLES,
    test_resamples: int = stats.DEFAULT_TEST_RESAMPLES,
    seed: int = 0,
    test_bank: ReplicateBank | None = None,
    family: str = "condition",
    correction: str = "holm",
    test: str = "auto",
) -> UncertaintySummary:
    """Fill the uncertainty fields of ``view``'s cells in place (see the module docstring).

    Args:
        predictions: row id -> its per-example predictions (rows without any are absent).
        reference: the reference cell of each condition (default: soft labels only).
        resamples: resamples of each interval; test_resamples: of each paired test (>= 1 each).
        seed: the bootstrap's seed (every cell uses it: the same inputs give the same numbers).
        test_bank: where the tests' replicates are drawn and kept, to share with later comparisons on the same
            cells (`kdgrid.analysis.significant_conclusions`); it must have ``test_resamples`` and ``seed``.
        family: `FAMILIES`: the correction runs per condition (default) or over the whole table.
        correction: `kdgrid.analysis.stats.CORRECTIONS`: ``holm`` (family-wise error) or ``fdr`` (Benjamini-Hochberg).
        test: `TEST_CHOICES`: ``auto`` (floor-free tests; method-level over seeds with >= 2 seeds a side) or
            ``bootstrap`` (the paired bootstrap test for every comparison).

    Raises:
        ConfigError: an explicit reference that matches no cell of the table, or several in one condition; a
            cell and its reference that scored different examples (fingerprints differ).
    """
    reference = reference or Reference()
    if resamples < 1 or test_resamples < 1:
        raise ConfigError(f"the bootstrap needs at least 1 resample, got {min(resamples, test_resamples)}")
    check_choices(family, correction, test)
    summary = UncertaintySummary()
    cells = [
        cell for block in view.blocks for (_, column), cell in block.cells.items() if _scored(cell, column)
    ]
    sides: dict[int, _Side] = {}
    interval_bank = ReplicateBank(resamples, seed)
    test_bank = test_bank or ReplicateBank(test_resamples, seed)
    if (test_bank.resamples, test_bank.seed) != (test_resamples, seed):
        raise ValueError(
            f"the test bank draws {test_bank.resamples} resamples with seed {test_bank.seed}, the tests want "
            f"{test_resamples} with seed {seed}"
        )
    for cell in cells:
        side = _side(cell, predictions)
        if side is None:
            summary.without_predictions += 1
            continue
        sides[id(cell)] = side
        register_cell(interval_bank, cell.config["metric"], side)
        register_cell(test_bank, cell.config["metric"], side)
    method_level = 0
    for cell in cells:
        side = sides.get(id(cell))
        if side is not None:
            if test == "auto" and len(side.runs) > 1:
                full = bank_full(interval_bank, cell.config["metric"], side)
                interval = stats.seed_t_interval(full)
                cell.paper_low, cell.paper_high = stats.seed_prediction_interval(full)
                method_level += 1
            else:
                interval = _interval(cell, side, interval_bank)
            cell.ci_low, cell.ci_high = interval.low, interval.high
            _flag_majority(cell, side)
            summary.with_interval += 1
    references = reference_cells(cells, reference, view.name)
    tested: list[tuple[Cell, stats.PairedTest, tuple[Any, ...]]] = []
    for cell in cells:
        ref = references.get(id(cell))
        if ref is None:
            continue
        if ref is cell:
            cell.is_reference = True
            continue
        if cell.selected_over or ref.selected_over:  # a chosen best: its test would ignore the choice
            summary.selected += 1
            continue
        result = (
            compare_cells(cell, ref, predictions, bank=test_bank)
            if test == "bootstrap"
            else paired_test_of_cells(cell, ref, predictions, bank=test_bank)
        )
        if result is None:  # one of the two has no predictions
            continue
        cell.direction = int(np.sign(round(result.difference, 12)))
        cell.test_method = result.method
        key = reference.condition(cell.config) if family == "condition" else ()
        tested.append((cell, result, key))
    families: dict[tuple[Any, ...], list[tuple[Cell, stats.PairedTest]]] = {}
    for cell, result, key in tested:
        families.setdefault(key, []).append((cell, result))
    for members in families.values():
        adjusted = stats.adjust([r.p_value for _, r in members], correction)
        for (cell, _), p in zip(members, adjusted, strict=True):
            cell.p_vs_reference = p
            cell.significant = p <= ALPHA
        if not stats.family_can_reject([r.floor for _, r in members], ALPHA):
            summary.unreachable_families += 1
    summary.tested = len(tested)
    summary.families = len(families)
    summary.run_level = sum(r.method != "t" for _, r, _ in tested)
    if summary.with_interval:
        summary.notes.extend(
            _notes(
                summary,
                [c for c, _, _ in tested],
                [r for _, r, _ in tested],
                reference,
                resamples,
                method_level,
                family,
                correction,
            )
        )
    if summary.selected:
        fields = sorted({f for c in cells for f in c.selected_over})
        summary.notes.append(
            f"{summary.selected} cell(s) not tested: they (or their reference) show the best of several "
            f"configurations ({', '.join(fields)}), and a test of a chosen best does not account for the choice; "
            f"keep one configuration with --where {fields[0]}=VALUE"
        )
    if summary.without_predictions:
        summary.notes.append(
            f"{summary.without_predictions} cell(s) have no interval: their rows carry no per-example predictions "
            "(written by a kdgrid before row schema version 2)"
        )
    return summary


def check_choices(family: str, correction: str, test: str) -> None:
    """Refuse an unknown family, correction or test (`ConfigError` naming the allowed values)."""
    for option, value, allowed in (
        ("--family", family, FAMILIES),
        ("--correction", correction, stats.CORRECTIONS),
        ("--test", test, TEST_CHOICES),
    ):
        if value not in allowed:
            raise ConfigError(f"unknown {option} {value!r}; allowed: {', '.join(allowed)}")


def _notes(
    summary: UncertaintySummary,
    tested: list[Cell],
    results: list[stats.PairedTest],
    reference: Reference,
    resamples: int,
    method_level: int,
    family: str,
    correction: str,
) -> list[str]:
    """What the intervals and marks under a table are, in words (docs/uncertainty.md says it at length)."""
    better = sum(c.significant and c.direction > 0 for c in tested)
    worse = sum(c.significant and c.direction < 0 for c in tested)
    interval = f"[low, high]: 95% bootstrap interval over dev examples ({resamples} resamples) for one seed"
    if method_level:
        interval += (
            f"; over seeds (t interval of the seed scores, method level) for the {method_level} cell(s) with "
            "two or more seeds"
        )
    methods = sorted({r.method for r in results})
    grouping = (
        "one family per condition (task x dev set x student x teacher)"
        if family == "condition"
        else "one family: the whole table"
    )
    notes = [
        interval,
        f"▲/▼: better/worse than the reference ({reference.label}, marked 'ref'); tests: "
        + "; ".join(stats.TEST_METHODS[m] for m in methods)
        + f"; families: {grouping}, {summary.families} of them; correction: "
        f"{stats.CORRECTION_LABELS[correction]}, adjusted p <= {ALPHA} over the {len(tested)} compared cells "
        f"({better} better, {worse} worse)",
    ]
    if summary.run_level:
        notes.append(
            f"{summary.run_level} comparison(s) have one seed on a side: their ▲/▼ are run-to-run comparisons "
            "that count dev-example sampling only and leave training-seed variance out (two runs of one "
            "configuration often differ beyond them); run two or more seeds for method-level marks"
        )
    if summary.unreachable_families:
        notes.append(
            f"warning: {summary.unreachable_families} of {summary.families} families cannot reach adjusted p "
            f"<= {ALPHA} whatever the data (too many tests for the smallest p their tests can give); their cells "
            "are never marked"
        )
    return notes


def bank_full(bank: ReplicateBank, metric: str, side: _Side) -> np.ndarray:
    """``[K]``: the metric of each of a registered cell's runs on all its examples."""
    return bank.replicates(metric, side.fingerprint, side.keys)[1]


def paired_test_of_cells(
    a: Cell,
    b: Cell,
    predictions: Mapping[str, TrialPredictions],
    *,
    bank: ReplicateBank | None = None,
) -> stats.PairedTest | None:
    """The floor-free test of cell ``a`` against cell ``b`` (None when either has no predictions):

    - two or more seeds on both sides: `stats.seed_t_test` over their per-seed scores (paired by seed when both
      ran the same seeds), a method-level test;
    - one run each, accuracy: `stats.mcnemar_test` (exact);
    - otherwise: `stats.normal_test` on the paired bootstrap standard error of the difference of the seed means
      (examples resampled, seeds kept), a run-to-run test.

    Raises:
        ConfigError: the two scored different examples.
    """
    sides = _paired_sides(a, b, predictions)
    if sides is None:
        return None
    side_a, side_b = sides
    metric = a.config["metric"]
    if len(side_a.runs) > 1 and len(side_b.runs) > 1:  # no resampling needed: the seeds' own scores
        full_a = stats.full_scores(metric, side_a.gold, side_a.runs)
        full_b = stats.full_scores(metric, side_b.gold, side_b.runs)
        return stats.seed_t_test(full_a, full_b, paired=sorted(side_a.seeds) == sorted(side_b.seeds))
    if metric == "accuracy" and len(side_a.runs) == len(side_b.runs) == 1:
        return stats.mcnemar_test(side_a.gold, side_a.runs[0], side_b.runs[0])
    bank = bank or ReplicateBank(stats.DEFAULT_TEST_RESAMPLES, 0)
    register_cell(bank, metric, side_a)
    register_cell(bank, metric, side_b)
    replicates_a, full_a, _ = bank.replicates(metric, side_a.fingerprint, side_a.keys)
    replicates_b, full_b, _ = bank.replicates(metric, side_b.fingerprint, side_b.keys)
    difference = float(full_a.mean() - full_b.mean())
    return stats.normal_test(difference, replicates_a.mean(axis=1) - replicates_b.mean(axis=1))


def _paired_sides(
    a: Cell, b: Cell, predictions: Mapping[str, TrialPredictions]
) -> tuple[_Side, _Side] | None:
    """Both cells' runs for a paired comparison; None unless both have predictions; refused on other examples."""
    side_a, side_b = _side(a, predictions), _side(b, predictions)
    if side_a is None or side_b is None:
        return None
    if side_a.fingerprint != side_b.fingerprint:
        raise ConfigError(
            f"{_where(a)} and {_where(b)} scored different dev examples (fingerprints {side_a.fingerprint[:12]} "
            f"and {side_b.fingerprint[:12]}); a paired test needs the same ones"
        )
    return side_a, side_b


def cell_runs(
    cell: Cell, predictions: Mapping[str, TrialPredictions]
) -> tuple[np.ndarray, np.ndarray] | None:
    """A cell's (gold ``[N]``, predictions ``[K, N]`` in seed order) on its dev set; None without predictions."""
    side = _side(cell, predictions)
    return None if side is None else (side.gold, side.runs)


def replicate_means(
    bank: ReplicateBank, cell: Cell, predictions: Mapping[str, TrialPredictions]
) -> np.ndarray:
    """``[R]``: a cell's bootstrap replicate scores over dev examples in ``bank``, mean over its seeds (the cell
    is registered first if it is not yet)."""
    side = _side(cell, predictions)
    if side is None:
        raise ValueError(f"{_where(cell)} has no predictions")
    register_cell(bank, cell.config["metric"], side)
    return bank.replicates(cell.config["metric"], side.fingerprint, side.keys)[0].mean(axis=1)


def _flag_majority(cell: Cell, side: _Side) -> None:
    """Mark an accuracy cell as degenerate when its score cannot be told from predicting the most frequent class
    of its dev set: one seed, its interval over dev examples reaches the majority class's accuracy; two or more,
    its mean over seeds is at or below it (a t interval over two healthy seeds is wide, and says nothing about
    chance)."""
    if cell.config.get("metric") != "accuracy" or not len(side.gold):
        return
    _, counts = np.unique(side.gold, return_counts=True)
    majority = float(counts.max() / len(side.gold))
    if len(side.runs) == 1 and cell.ci_low <= majority + 1e-9:
        reason = f"interval reaches the majority class's accuracy {majority:.4f}"
    elif len(side.runs) > 1 and cell.value <= majority + 1e-9:
        reason = f"mean at or below the majority class's accuracy {majority:.4f}"
    else:
        return
    if reason not in cell.degenerate:
        cell.degenerate = (*cell.degenerate, reason)


def compare_cells(
    a: Cell,
    b: Cell,
    predictions: Mapping[str, TrialPredictions],
    *,
    resamples: int = stats.DEFAULT_TEST_RESAMPLES,
    seed: int = 0,
    bank: ReplicateBank | None = None,
) -> stats.PairedTest | None:
    """The paired bootstrap test of cell ``a`` against cell ``b`` on their dev examples (seeds paired when both
    ran the same seeds); None when either has no predictions.

    ``bank``: where the replicates are drawn and kept (its resamples and seed then replace ``resamples`` and
    ``seed``): pass one bank to many comparisons on the same dev sets, after registering their cells
    (`register_cells`), so that each dev set's samples are drawn and each run scored once. The numbers are the
    same with or without it.

    Raises:
        ConfigError: the two scored different examples.
    """
    sides = _paired_sides(a, b, predictions)
    if sides is None:
        return None
    side_a, side_b = sides
    bank = bank or ReplicateBank(resamples, seed)
    metric = a.config["metric"]
    register_cell(bank, metric, side_a)
    register_cell(bank, metric, side_b)
    replicates_a, full_a, _ = bank.replicates(metric, side_a.fingerprint, side_a.keys)
    replicates_b, full_b, generator = bank.replicates(metric, side_b.fingerprint, side_b.keys)
    return stats.paired_test_from_replicates(
        replicates_a,
        replicates_b,
        full_a,
        full_b,
        generator,
        pair_seeds=sorted(side_a.seeds) == sorted(side_b.seeds),
    )


def register_cells(
    bank: ReplicateBank, cells: Iterable[Cell], predictions: Mapping[str, TrialPredictions]
) -> None:
    """Register the runs of every cell with predictions in ``bank`` (cells without any are skipped)."""
    for cell in cells:
        side = _side(cell, predictions)
        if side is not None:
            register_cell(bank, cell.config["metric"], side)


def register_cell(bank: ReplicateBank, metric: str, side: _Side) -> None:
    """Register one cell's runs, scored with ``metric``."""
    for key, run in zip(side.keys, side.runs, strict=True):
        bank.register(metric, side.fingerprint, side.gold, key, run)


def _scored(cell: Cell, column: Any) -> bool:
    return not column.fact and not cell.missing and bool(cell.row_ids) and bool(cell.config)


def _side(cell: Cell, predictions: Mapping[str, TrialPredictions]) -> _Side | None:
    """The cell's runs on its dev set, in seed order; None unless every one of its rows has predictions there."""
    dev_set = cell.config.get("dev_set") or "validation"
    outcomes: list[DevSetPredictions] = []
    for row_id in cell.row_ids:
        outcome = predictions.get(row_id, {}).get(dev_set)
        if outcome is None:
            return None
        outcomes.append(outcome)
    first = outcomes[0]
    for other in outcomes[1:]:
        if other.fingerprint != first.fingerprint:
            raise ConfigError(
                f"{_where(cell)}: its seeds scored different dev examples (fingerprints {first.fingerprint[:12]} "
                f"and {other.fingerprint[:12]}); they cannot be one cell"
            )
    runs = np.stack([np.asarray(o.student) for o in outcomes])
    keys = tuple((row_id, dev_set) for row_id in cell.row_ids)
    return _Side(
        np.asarray(first.gold), runs, cell.seeds or tuple(range(len(outcomes))), first.fingerprint, keys
    )


def _interval(cell: Cell, side: _Side, bank: ReplicateBank) -> stats.Interval | stats.SeedInterval:
    """`stats.bootstrap_interval` (one seed) or `stats.seed_bootstrap_interval` (several), from ``bank``."""
    replicates, full, generator = bank.replicates(cell.config["metric"], side.fingerprint, side.keys)
    if len(side.runs) == 1:
        return stats.interval_from_replicates(replicates[:, 0], float(full[0]), stats.DEFAULT_CONFIDENCE)
    return stats.seed_interval_from_replicates(replicates, full, generator, stats.DEFAULT_CONFIDENCE)


def reference_cells(cells: Iterable[Cell], reference: Reference, table: str) -> dict[int, Cell]:
    """id(cell) -> its condition's reference cell (itself for the reference); conditions with none are absent."""
    cells = list(cells)
    by_condition: dict[tuple[Any, ...], list[Cell]] = {}
    for cell in cells:
        if reference.matches(cell.config):
            by_condition.setdefault(reference.condition(cell.config), []).append(cell)
    if reference.explicit:
        if not by_condition:
            raise ConfigError(
                f"table {table} has no cell matching --reference {reference.label}; a reference is a cell of the "
                "table (e.g. knowledge=hidden_mse,strategy=Last-1)"
            )
        for members in by_condition.values():
            if len(members) > 1:
                raise ConfigError(
                    f"--reference {reference.label} matches {len(members)} cells of table {table} in one condition "
                    f"({'; '.join(_where(c) for c in members)}); name more fields so that it matches one"
                )
    out: dict[int, Cell] = {}
    for cell in cells:
        members = by_condition.get(reference.condition(cell.config), [])
        if len(members) == 1:  # an ambiguous default reference (several candidates) compares nothing
            out[id(cell)] = members[0]
    return out


def _where(cell: Cell) -> str:
    shown = [f"{k}={v}" for k, v in cell.config.items() if k in LABEL_COLUMNS and _text(v) and k != "table"]
    return "(" + ", ".join(shown) + ")"


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _same(actual: Any, wanted: str) -> bool:
    """A config value equals a --reference value: as numbers where both are numbers, else as text."""
    a, b = _number(actual), _number(wanted)
    if not (math.isnan(a) or math.isnan(b)):
        return a == b
    return _text(actual) == wanted or _text(actual).replace("+", ",") == wanted
