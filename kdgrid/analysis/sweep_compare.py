"""Two sweeps side by side: ``kdgrid tables --sweep A --sweep B`` (a rerun beside the original, a new version
beside the old, other seeds beside the first ones).

A **cell** is one configuration on one dev set and metric: every trial field and option (`trial_fields`) but the
seeds, and the metric the task reports (as a sweep's own table, `kdgrid.analysis.sweep_tables`). The cells both
sweeps ran are **shared**: each gets A's mean and B's (over their seeds, with their intervals), the difference
``B - A`` with its 95% interval and its test, from the one procedure of a sweep's table
(`kdgrid.analysis.sweep_stats`, `kdgrid.analysis.seed_level`): seed level where both sides ran two or more seeds
(paired by seed where they ran the same seeds, Welch's otherwise), run to run with one seed a side (the paired
z-test on the bootstrap standard error, dev examples resampled together; it needs both sides' predictions of the
same dev examples). The tests are corrected per family (``condition``: task, dev set, metric, student, teacher;
``table``: all of them) by Holm or Benjamini-Hochberg. The cells one sweep ran and the other did not are listed
under the table.

A sweep is named ``NAME`` (in the store of ``--store``) or ``NAME@DIR`` (in the store at ``DIR``), so that a rerun
in another store compares with ``--sweep grid --sweep grid@other-results``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kdgrid.analysis import stats
from kdgrid.analysis.cell_stats import ALPHA, CONDITION_FIELDS, check_choices
from kdgrid.analysis.store_predictions import load_predictions
from kdgrid.analysis.sweep_stats import PairTest, correct_pairs, level_note, sweep_numbers
from kdgrid.analysis.sweep_tables import SweepRuns, sweep_runs
from kdgrid.analysis.tables import Block, Cell, Column, TableView
from kdgrid.analysis.tables_report import filter_rows
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.predictions import TrialPredictions
from kdgrid.store import read_store
from kdgrid.store.membership import read_memberships

RUN_COLUMNS: tuple[str, ...] = (
    "trial_id",
    "row_id",
    "value",
    "seed",
    "degenerate",
    "teacher_agreement",
    "study",
)
"""Columns of `SweepRuns.runs` that are not a cell's settings."""
PLACE_FIELDS: tuple[str, ...] = ("task", "dev_set", "metric")
"""The fields a comparison's block is one value of (the others label its rows)."""
DIFFERENCE = Column("difference")
P_RAW = Column("p (raw)", fact=True)
LISTED = 12
"""Cells named per side in the note of cells only one sweep ran (the count is always given)."""

CellKey = tuple[tuple[str, str], ...]
"""A cell's settings as sorted (field, label) pairs."""


@dataclass(frozen=True)
class SweepSource:
    """One side of a comparison: the sweep's name and the store it is read from, and how it is labelled."""

    name: str
    store: Path
    label: str


def parse_sources(sweeps: Sequence[str], store: Path) -> tuple[SweepSource, SweepSource]:
    """The two sides of ``--sweep A --sweep B``: ``NAME`` in ``store``, ``NAME@DIR`` in the store at ``DIR``.
    Each is labelled by its name, or as written where both sides have the same name.

    Raises:
        ConfigError: other than two sweeps, or an empty name.
    """
    if len(sweeps) != 2:
        raise ConfigError(
            f"--sweep given {len(sweeps)} times ({', '.join(sweeps)}): one lays out a sweep's table, two compare "
            "their shared cells; give one or two"
        )
    parsed = []
    for text in sweeps:
        name, sep, folder = text.partition("@")
        if not name.strip() or (sep and not folder.strip()):
            raise ConfigError(f"--sweep {text!r}: give NAME or NAME@STORE_DIR")
        parsed.append((name.strip(), Path(folder.strip()) if sep else Path(store), text.strip()))
    same = parsed[0][0] == parsed[1][0]
    if same and parsed[0][1].resolve() == parsed[1][1].resolve():
        raise ConfigError(
            f"--sweep {parsed[0][2]} given twice: compare a sweep with another, or with its rerun in another "
            "store (--sweep NAME --sweep NAME@OTHER_STORE)"
        )
    return tuple(SweepSource(name, folder, (text if same else name)) for name, folder, text in parsed)  # type: ignore[return-value]


@dataclass
class SweepComparison:
    """The comparison as a table to render (`view`), and its cells by key: shared, and each side's own."""

    view: TableView
    shared: list[CellKey] = field(default_factory=list)
    only_first: list[CellKey] = field(default_factory=list)
    only_second: list[CellKey] = field(default_factory=list)


def _runs(source: SweepSource, kind: str, where: Iterable[str]) -> SweepRuns:
    if not source.store.exists():
        raise KdgridError(f"no results store at {source.store} (for --sweep {source.label})")
    rows = filter_rows(read_store(source.store), list(where))
    if rows.empty:
        raise KdgridError(f"the store {source.store} has no rows" + (" matching --where" if where else ""))
    return sweep_runs(rows, read_memberships(source.store, skip_bad=True), source.name, kind)


def _cells(runs: pd.DataFrame, fields: Sequence[str], kind: str) -> dict[CellKey, Cell]:
    """The runs of a side grouped into cells by their settings (``fields``; absent ones ``""``)."""
    frame = runs.copy()
    for name in fields:
        if name not in frame.columns:
            frame[name] = ""
    out: dict[CellKey, Cell] = {}
    for key, members in frame.groupby(list(fields), sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        config = {name: str(value) for name, value in zip(fields, key, strict=True)}
        members = members.sort_values("seed", kind="stable")
        scores = members["value"].astype(float)
        reasons = {(r if kind == "best" else f"best epoch: {r}") for rs in members["degenerate"] for r in rs}
        out[tuple(sorted(config.items()))] = Cell(
            value=float(scores.mean()),
            std=float(scores.std(ddof=1)) if len(scores) > 1 else math.nan,
            n_seeds=len(scores),
            degenerate=tuple(sorted(reasons)),
            row_ids=tuple(members["row_id"]),
            seeds=tuple(float(s) for s in members["seed"]),
            trial_ids=tuple(dict.fromkeys(members["trial_id"])),
            config={**config, "role": "student"},
        )
    return out


def _label(key: CellKey, fields: Sequence[str]) -> str:
    config = dict(key)
    return " · ".join(f"{name}={config.get(name, '') or '(none)'}" for name in fields) or "(one cell)"


def _differing(first: Iterable[CellKey], second: Iterable[CellKey]) -> list[str]:
    """Why no cell is shared: each field whose values in one sweep the other never has, with both sets."""
    values: list[dict[str, set[str]]] = [{}, {}]
    for side, keys in enumerate((first, second)):
        for key in keys:
            for name, value in key:
                values[side].setdefault(name, set()).add(value)
    out = []
    for name in sorted(set(values[0]) | set(values[1])):
        a, b = values[0].get(name, {""}), values[1].get(name, {""})
        if not a & b:
            out.append(f"{name} ({', '.join(sorted(a)) or '-'} vs {', '.join(sorted(b)) or '-'})")
    return out


def compare_sweeps(
    first: SweepSource,
    second: SweepSource,
    *,
    kind: str = "best",
    where: Iterable[str] = (),
    intervals: str = "auto",
    family: str = "condition",
    correction: str = "holm",
    resamples: int = stats.DEFAULT_RESAMPLES,
    test_resamples: int = stats.DEFAULT_TEST_RESAMPLES,
    seed: int = 0,
) -> SweepComparison:
    """The shared cells of two sweeps side by side with the difference ``second - first`` and its test (the
    module's procedure), corrected per ``family``; the cells only one side ran listed in the notes.

    Raises:
        KdgridError: a side without a store, a sweep or a done trial; no shared cell (naming the fields whose
            values differ between the sweeps). ConfigError: an unknown family or correction.
    """
    check_choices(family, correction, "auto")
    where = list(where)
    sides = (_runs(first, kind, where), _runs(second, kind, where))
    predictions: dict[str, TrialPredictions] = {}
    if intervals != "off" and kind == "best":  # the stored predictions are the best epoch's
        for side, source in zip(sides, (first, second), strict=True):
            predictions.update(load_predictions(source.store, side.runs["row_id"]))
    return compare_runs(
        sides,
        (first.label, second.label),
        predictions,
        kind=kind,
        intervals=intervals,
        family=family,
        correction=correction,
        resamples=resamples,
        test_resamples=test_resamples,
        seed=seed,
    )


def compare_runs(
    sides: tuple[SweepRuns, SweepRuns],
    labels: tuple[str, str],
    predictions: Mapping[str, TrialPredictions],
    *,
    kind: str = "best",
    intervals: str = "auto",
    family: str = "condition",
    correction: str = "holm",
    resamples: int = stats.DEFAULT_RESAMPLES,
    test_resamples: int = stats.DEFAULT_TEST_RESAMPLES,
    seed: int = 0,
) -> SweepComparison:
    """`compare_sweeps` of two sweeps' runs already read (``labels``: how each is named; ``predictions``: row
    id -> per-example predictions of the epoch shown, both sides').

    Raises:
        KdgridError: no shared cell (naming the fields whose values differ between the sweeps).
    """
    first, second = labels
    fields = list(dict.fromkeys(c for side in sides for c in side.runs.columns if c not in RUN_COLUMNS))
    cells = [_cells(side.runs, fields, kind) for side in sides]
    shared = [key for key in cells[0] if key in cells[1]]
    only = [
        [key for key in cells[0] if key not in cells[1]],
        [key for key in cells[1] if key not in cells[0]],
    ]
    if not shared:
        why = _differing(cells[0], cells[1])
        raise KdgridError(
            f"sweeps {first} and {second} share no cell (a cell: every setting but the seeds, on one dev "
            f"set and metric)" + (f"; they differ in {'; '.join(why)}" if why else "")
        )
    varying = [
        name
        for name in fields
        if name not in PLACE_FIELDS and len({dict(k)[name] for k in [*shared, *only[0], *only[1]]}) > 1
    ]
    numbers = _numbers(sides, predictions, intervals, resamples, test_resamples, seed)
    view = TableView(
        f"{first} vs {second}",
        f"sweep {second} beside sweep {first}: {', '.join(sorted({dict(k)['metric'] for k in shared}))}",
        [],
        axes=("task", "dev_set", *varying, "metric"),
        correction=correction,
    )
    columns = [Column(first), Column(second), DIFFERENCE, P_RAW, _p_column(correction)]
    tests: list[PairTest] = []
    levels: set[str] = set()
    untested = 0
    blocks: dict[tuple[str, ...], Block] = {}
    for key in shared:
        config = dict(key)
        place = tuple(config[name] for name in PLACE_FIELDS)
        block = blocks.get(place)
        if block is None:
            block = blocks[place] = Block(" ".join(place), [], list(columns))
        row = _label(key, varying)
        block.rows.append(row)
        a, b = cells[0][key], cells[1][key]
        for cell, column in ((a, columns[0]), (b, columns[1])):
            if numbers is not None:
                estimate = numbers.mean([cell])
                if estimate is not None:
                    cell.ci_low, cell.ci_high, cell.uncertainty = estimate.low, estimate.high, estimate.level
                    levels.add(estimate.level)
            block.cells[(row, column)] = cell
        difference = Cell(
            value=b.value - a.value,
            n_seeds=min(a.n_seeds, b.n_seeds),
            direction=int(np.sign(round(b.value - a.value, 12))),
            degenerate=tuple(sorted({*a.degenerate, *b.degenerate})),
            trial_ids=(*a.trial_ids, *b.trial_ids),
            config=dict(a.config),
        )
        block.cells[(row, DIFFERENCE)] = difference
        estimate = numbers.difference([b], [a]) if numbers is not None else None
        if estimate is None:
            untested += 1
            continue
        difference.ci_low, difference.ci_high = estimate.low, estimate.high
        difference.p_raw, difference.uncertainty = estimate.p, estimate.level
        difference.test_method = "t" if estimate.level == "seed-level" else "normal"
        levels.add(estimate.level)
        family_key = tuple(config.get(name, "") for name in CONDITION_FIELDS) if family == "condition" else ()
        tests.append(PairTest(difference, estimate, family_key))
    families = correct_pairs(tests, correction)
    for block in blocks.values():
        for row in block.rows:
            cell = block.cells[(row, DIFFERENCE)]
            if not math.isnan(cell.p_raw):
                block.cells[(row, P_RAW)] = Cell(value=cell.p_raw, n_seeds=1)
                block.cells[(row, columns[4])] = Cell(value=cell.p_vs_reference, n_seeds=1)
    view.blocks = list(blocks.values())
    view.notes.extend(
        _notes(first, second, levels, tests, families, family, correction, untested, len(shared))
    )
    for source, keys in zip((first, second), only, strict=True):
        if keys:
            named = "; ".join(_label(k, [*PLACE_FIELDS, *varying]) for k in keys[:LISTED])
            more = f"; and {len(keys) - LISTED} more" if len(keys) > LISTED else ""
            view.notes.append(f"only in {source}: {len(keys)} cell(s): {named}{more}")
    return SweepComparison(view, shared, only[0], only[1])


def _p_column(correction: str) -> Column:
    return Column(f"p ({'Holm' if correction == 'holm' else 'BH'})", fact=True)


def _numbers(
    sides: Sequence[SweepRuns],
    predictions: Mapping[str, TrialPredictions],
    intervals: str,
    resamples: int,
    test_resamples: int,
    seed: int,
) -> Any:
    """Both sides' values and predictions in one place (`kdgrid.analysis.sweep_stats.sweep_numbers`): a
    difference resamples the same dev examples on both sides. None with ``intervals="off"``."""
    if intervals == "off":
        return None
    scores: dict[tuple[str, str, str], float] = {}
    for side in sides:
        frame = side.runs
        for r, d, m, v in zip(
            frame["row_id"], frame["dev_set"], frame["metric"], frame["value"], strict=True
        ):
            scores[(str(r), str(d), str(m))] = float(v)
    return sweep_numbers(scores, predictions, resamples=resamples, test_resamples=test_resamples, seed=seed)


def _notes(
    first: str,
    second: str,
    levels: set[str],
    tests: Sequence[PairTest],
    families: int,
    family: str,
    correction: str,
    untested: int,
    shared: int,
) -> list[str]:
    notes = [level_note(levels)] if levels else []
    better = sum(t.cell.significant and t.cell.direction > 0 for t in tests)
    worse = sum(t.cell.significant and t.cell.direction < 0 for t in tests)
    words = (
        "one family per task, dev set, metric, student and teacher" if family == "condition" else "one family"
    )
    notes.append(
        f"difference: {second} minus {first} over {shared} shared cell(s); ▲/▼ beyond noise after "
        f"{stats.CORRECTION_LABELS[correction]} ({words}, {families} of them), adjusted p <= {ALPHA} "
        f"({better} higher in {second}, {worse} lower)"
    )
    if untested:
        notes.append(
            f"{untested} difference(s) untested: one seed on a side and no per-example predictions of the same dev "
            "examples on both (run two or more seeds for a seed-level test)"
        )
    return notes


def compared_sweeps(sweeps: Sequence[str], store: Path, **options: Any) -> SweepComparison:
    """`compare_sweeps` of the two ``--sweep`` values (`parse_sources`)."""
    first, second = parse_sources(sweeps, store)
    return compare_sweeps(first, second, **options)
