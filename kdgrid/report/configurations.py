"""The configurations of each sweep, seeds aggregated, for the report's explore and pivot pages: computed here, in
Python, at build time, by the sweep tables' own code (`kdgrid.analysis.sweep_tables.build_sweep_table` lays the
cells out, `kdgrid.analysis.sweep_stats.attach_sweep_statistics` gives them their statistics,
`kdgrid.analysis.frames.cells_of` reads them), so that the pages show the very intervals, tests and marks
``kdgrid tables --sweep NAME`` prints; the pages' scripts only arrange and filter them.

A **configuration** is one cell of a sweep's table: one value of every axis (the trial fields that vary), on one
task, dev set and metric, its seeds aggregated: mean, standard deviation, seed count, 95% interval (seed-level
with two or more seeds, run-to-run with one and stored predictions, none otherwise) and its trials. Its interval
does not depend on the layout (a sweep's table never averages two configurations into a cell), so one
computation serves every rows x columns the pivot page offers.

**References**: for each value of each axis (``AXIS=VALUE``), each configuration's test against the configuration
that differs from it in that axis only (the reference of its slice: every other axis held), corrected per slice
(`--family condition`) by Holm, exactly as ``kdgrid tables --sweep NAME --reference AXIS=VALUE`` does for any
rows and columns (the reference names one axis, so its condition is every other axis whatever the layout).
Computed for sweeps of at most `MAX_REFERENCE_CONFIGURATIONS` configurations, of which at most
`MAX_RUN_TO_RUN_CONFIGURATIONS` one-seed ones with run-to-run intervals (each of their tests resamples the dev
examples 10,000 times: about 0.1 s a configuration on an 872-example dev set), and at most `MAX_REFERENCES`
references (a value of each axis in turn); the page says when a sweep has none or fewer. One set of bootstrap
replicates serves the intervals and every reference (the numbers are those of separate runs: a replicate bank's
samples depend on its seed, the dev set and the resamples only).

Axis types (how the explore page spaces an axis): ``categorical`` unless every value is a number; numbers
``log`` when all are positive and the largest is at least `LOG_SPAN` times the smallest, else ``numeric``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from kdgrid.analysis.cell_stats import CONDITION_FIELDS, Reference
from kdgrid.analysis.frames import cells_of
from kdgrid.analysis.seed_level import RUN_TO_RUN
from kdgrid.analysis.store_predictions import load_predictions
from kdgrid.analysis.sweep_stats import attach_sweep_statistics, sweep_numbers
from kdgrid.analysis.sweep_tables import (
    NONE_LABEL,
    SweepLayout,
    SweepRuns,
    SweepTable,
    build_sweep_table,
    store_sweeps,
    sweep_runs,
)
from kdgrid.analysis.tables import Block, Cell, TableView
from kdgrid.errors import KdgridError
from kdgrid.predictions import TrialPredictions
from kdgrid.store.membership import SweepMembership

MAX_REFERENCE_CONFIGURATIONS = 5000
MAX_REFERENCES = 24
MAX_RUN_TO_RUN_CONFIGURATIONS = 500
LOG_SPAN = 100.0
PLACE_FIELDS: tuple[str, ...] = ("task", "dev_set", "metric")
# A configuration's mark against a reference, as the pages receive it.
MARKS = {"ref": "ref", "▲": "up", "▼": "down", "": ""}


def axis_type(values: Iterable[str]) -> str:
    """``categorical``, ``numeric`` or ``log`` for an axis whose values are these labels (the module's rule);
    the empty value (nothing set) does not count."""
    numbers = []
    for value in values:
        if value == "":
            continue
        try:
            numbers.append(float(value))
        except ValueError:
            return "categorical"
    if not numbers or not all(math.isfinite(n) for n in numbers):
        return "categorical"
    if min(numbers) > 0 and max(numbers) >= LOG_SPAN * min(numbers):
        return "log"
    return "numeric"


def _number(value: Any) -> float | None:
    """A score for JSON, to 6 decimals: None for NaN."""
    value = float(value)
    return None if math.isnan(value) else round(value, 6)


def _p(value: Any) -> float | None:
    """A p-value for JSON, to 6 significant digits (2.6e-19 is not 0): None for NaN."""
    value = float(value)
    return None if math.isnan(value) else float(f"{value:.6g}")


def sweep_configurations(
    runs: SweepRuns, predictions: Mapping[str, TrialPredictions], *, references: bool = True
) -> dict[str, Any]:
    """One sweep's configurations and references as the pages read them (JSON-ready, columnar: one list per
    field, one entry per configuration).

    Keys: ``name``; ``axes`` ``[{"name", "type", "values"}]``; ``places`` (``task · dev set · metric`` labels);
    ``configs``: ``axes`` (per configuration, each axis's value index), ``place`` (index), ``mean``, ``std``,
    ``n``, ``low``, ``high``, ``level`` (``seed-level``, ``run-to-run`` or ``""``), ``degenerate`` (0/1),
    ``trials`` (ids); ``references``: ``[{"label", "axis", "value", "mark", "p"}]`` (``mark`` per configuration:
    ``ref``, ``up``, ``down`` or ``""``; ``p``: the corrected p, None where untested); ``reference_note``: why a
    sweep has none, else ``""``.
    """
    axes = [a for a in runs.axes]
    layout = SweepLayout(tuple(axes[:1]), (), tuple(axes[1:]))
    base = build_sweep_table(runs, layout, predictions, intervals=False)
    frame = runs.runs
    scores = {
        (str(r), str(d), str(m)): float(v)
        for r, d, m, v in zip(frame["row_id"], frame["dev_set"], frame["metric"], frame["value"], strict=True)
    }
    # one set of values and bootstrap replicates for the intervals and every reference's tests
    numbers = sweep_numbers(scores, predictions)
    # the intervals (and the majority-class marks) as the table's, with no test: a reference that is no cell
    untested = Reference(
        ((_NO_FIELD, _NO_FIELD),), explicit=False, condition_fields=(*CONDITION_FIELDS, *axes)
    )
    cells = cells_of(_tested(base, untested, numbers))
    values = {axis: [v for v in base.values[axis]] for axis in axes}
    index = {axis: {v: i for i, v in enumerate(values[axis])} for axis in axes}
    records = cells.to_dict("records")
    place_of = [" · ".join(str(r[f]) for f in PLACE_FIELDS) for r in records]
    places = list(dict.fromkeys(place_of))
    place_index = {p: i for i, p in enumerate(places)}
    keys = [_key(row, axes) for row in records]
    configs = {
        "axes": [[index[a][str(row[a])] for a in axes] for row in records],
        "place": [place_index[p] for p in place_of],
        "mean": [_number(v) for v in cells["value"]],
        "std": [_number(v) for v in cells["std"]],
        "n": [int(v) for v in cells["n_seeds"]],
        "low": [_number(v) for v in cells["ci_low"]],
        "high": [_number(v) for v in cells["ci_high"]],
        "level": [str(v) for v in cells["uncertainty"]],
        "degenerate": [int(bool(v)) for v in cells["degenerate"]],
        "trials": [str(v).split("+") if v else [] for v in cells["trial_ids"]],
    }
    found: list[dict[str, Any]] = []
    note = ""
    if not axes:
        note = "one configuration: nothing to compare"
    elif not references:
        note = "references not computed"
    elif (cells["uncertainty"] == RUN_TO_RUN).sum() > MAX_RUN_TO_RUN_CONFIGURATIONS:
        note = (
            f"{int((cells['uncertainty'] == RUN_TO_RUN).sum()):,} one-seed configurations: their run-to-run tests "
            f"resample the dev examples 10,000 times each, computed here for sweeps of at most "
            f"{MAX_RUN_TO_RUN_CONFIGURATIONS:,} (kdgrid tables --sweep {runs.sweep} --reference AXIS=VALUE gives them)"
        )
    elif len(cells) > MAX_REFERENCE_CONFIGURATIONS:
        note = (
            f"{len(cells):,} configurations: tests against a reference are computed for sweeps of at most "
            f"{MAX_REFERENCE_CONFIGURATIONS:,} (kdgrid tables --sweep {runs.sweep} --reference AXIS=VALUE gives them)"
        )
    else:
        for axis, value in _reference_choices(axes, values):
            found.append(_reference(base, axes, axis, value, numbers, keys))
        if sum(len(values[a]) for a in axes) > len(found):
            note = (
                f"tests against the first {len(found)} references only (kdgrid tables --reference gives any)"
            )
    return {
        "name": runs.sweep,
        "axes": [{"name": a, "type": axis_type(values[a]), "values": values[a]} for a in axes],
        "places": places,
        "configs": configs,
        "references": found,
        "reference_note": note,
    }


def _key(row: Mapping[str, Any], axes: list[str]) -> tuple[str, ...]:
    return tuple(str(row[f]) for f in (*axes, *PLACE_FIELDS))


def _reference_choices(axes: list[str], values: Mapping[str, list[str]]) -> list[tuple[str, str]]:
    """Every (axis, value) in order, taken a value of each axis in turn, at most `MAX_REFERENCES`."""
    choices: list[tuple[str, str]] = []
    depth = 0
    while len(choices) < MAX_REFERENCES and any(depth < len(values[a]) for a in axes):
        choices += [(a, values[a][depth]) for a in axes if depth < len(values[a])]
        depth += 1
    return choices[:MAX_REFERENCES]


def _fresh(cell: Cell) -> Cell:
    """A configuration's cell before any test: its numbers and runs, none of a previous reference's marks."""
    return Cell(
        value=cell.value,
        std=cell.std,
        n_seeds=cell.n_seeds,
        degenerate=cell.degenerate,
        row_ids=cell.row_ids,
        seeds=cell.seeds,
        trial_ids=cell.trial_ids,
        teacher_agreement=cell.teacher_agreement,
        config=cell.config,
    )


_NO_FIELD = "\u0000"
"""A field no configuration has: the reference of the untested pass (intervals only)."""


def _tested(base: SweepTable, reference: Reference, numbers: Any) -> SweepTable:
    """``base``'s cells (laid out, without statistics) with the table's statistics against ``reference``
    (`kdgrid.analysis.sweep_stats.attach_sweep_statistics`, as `build_sweep_table` attaches them: Holm, one
    family per condition, the predictions' labels for the majority-class check), on fresh copies."""
    blocks = [
        Block(b.title, list(b.rows), list(b.columns), {k: _fresh(c) for k, c in b.cells.items()})
        for b in base.view.blocks[: base.main_blocks]
    ]
    attach_sweep_statistics(
        base.view.name, blocks, reference, numbers.scores, numbers.predictions, numbers=numbers
    )
    view = TableView(base.view.name, "", blocks, axes=base.view.axes)
    return SweepTable(view, base.layout, reference, base.values, main_blocks=len(blocks))


def _reference(
    base: SweepTable,
    axes: list[str],
    axis: str,
    value: str,
    numbers: Any,
    keys: list[tuple[str, ...]],
) -> dict[str, Any]:
    """The tests of every configuration against ``axis=value`` of its slice: the table's own statistics
    (`kdgrid.analysis.sweep_stats.attach_sweep_statistics`) with the reference ``kdgrid tables --reference
    AXIS=VALUE`` parses to, whose condition is every other axis whatever the layout (one family per slice)."""
    reference = Reference(((axis, value),), explicit=True, condition_fields=(*CONDITION_FIELDS, *axes))
    cells = cells_of(_tested(base, reference, numbers))
    by_key = {_key(row, axes): row for row in cells.to_dict("records")}
    marks, ps = [], []
    for key in keys:
        row = by_key.get(key)
        marks.append(MARKS[str(row["mark"])] if row is not None else "")
        ps.append(_p(row["p_adjusted"]) if row is not None else None)
    return {"label": f"{axis}={value or NONE_LABEL}", "axis": axis, "value": value, "mark": marks, "p": ps}


@dataclass
class ReportSweeps:
    """What the report read of each sweep for these pages: the pages' data (`sweep_configurations`), each sweep's
    runs and their stored predictions (the comparisons of sweeps reuse them), and why a sweep could not be read."""

    configurations: list[dict[str, Any]] = field(default_factory=list)
    runs: dict[str, SweepRuns] = field(default_factory=dict)
    predictions: dict[str, TrialPredictions] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def report_sweeps(store: Path, rows: pd.DataFrame, memberships: list[SweepMembership]) -> ReportSweeps:
    """Every sweep of the report's rows: its runs, predictions and configurations."""
    out = ReportSweeps()
    for sweep in store_sweeps(rows, memberships):
        try:
            runs = sweep_runs(rows, memberships, sweep, "best")
        except KdgridError as error:
            out.problems.append(f"sweep {sweep}: {error}")
            continue
        predictions = load_predictions(store, runs.runs["row_id"])
        out.runs[sweep] = runs
        out.predictions.update(predictions)
        try:
            out.configurations.append(sweep_configurations(runs, predictions))
        except KdgridError as error:  # its table cannot be laid out: the tables page says why too
            out.problems.append(f"sweep {sweep}: {error}")
    return out


def report_configurations(
    store: Path, rows: pd.DataFrame, memberships: list[SweepMembership]
) -> tuple[list[dict[str, Any]], list[str]]:
    """Every sweep of the report's rows (`sweep_configurations`), and why a sweep could not be read."""
    found = report_sweeps(store, rows, memberships)
    return found.configurations, found.problems
