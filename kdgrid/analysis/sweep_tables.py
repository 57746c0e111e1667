"""Tables for any sweep: the trials of one sweep laid out by its own varying trial fields (its axes), with the
same intervals, paired tests against a reference, Holm-Bonferroni and marks as the paper's tables
(`kdgrid.analysis.cell_stats`), marginal summaries per axis, and pairwise comparisons on request.

`kdgrid tables --sweep NAME [--rows AXIS[,AXIS]] [--cols AXIS] [--reference AXIS=VALUE,...] [--pairs]`.

Conventions:
    trials of a sweep: those its recorded memberships list (`kdgrid.store.membership`), and those whose rows name
        it (a store written before memberships were recorded); a trial's latest done row counts.
    fields: a trial's canonical JSON, options flattened in by name, its seeds (`tidy.SEED_FIELDS`,
        `tidy.SEED_OPTIONS`) left out; each value as a label (`field_label`: knowledge ``a+b`` sorted, numbers in
        shortest form ``0.001``, nothing ``""``, shown ``(none)``).
    axes: the fields whose value differs between the sweep's trials, in `Trial`'s field order, then options.
        Rows default to the first axis, columns to the second; the axes on neither are laid out as blocks
        (one per combination), so that a cell only ever averages seeds.
    studies: a sweep of several studies, each fixing every axis (one cell per study, as sweeps/methods.yaml:
        one method per study) but at most one study that is a small grid of its own (reaugkd_offline.yaml's
        evaluation over k and beta), is laid out by study by default: one row per study in the file's order (and
        per value of that grid's axes), its reference the first study that is soft labels only. ``--rows study``
        asks for that layout of any sweep of several studies.
    cells: the metric the task reports (`kdgrid.paper.reported_metric`) on each dev set, mean over seeds, the
        best epoch's (``kind="best"``) or the last one's.
    reference: per block (its task, dev set, student, teacher and block fields), the cell named by
        ``--reference``; by default the soft-labels-only cell where the sweep has one, else the block's first
        cell (the first value of each row and column axis).
    marginal: each value of an axis, the mean over the block's cells having it (averaged over the other axes),
        with a 95% percentile interval from the same example resamples as the cells' intervals (the mean over
        those cells of their seed-mean replicate scores); drawn only where every such cell has predictions.
    pairs: every two values of an axis compared by their marginal means on the same resamples (a paired
        bootstrap test, `kdgrid.analysis.stats.paired_test_from_replicates`), Holm-adjusted over all pairs of the
        table; ``difference`` is the first minus the second.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kdgrid.analysis import stats
from kdgrid.analysis.cell_stats import (
    ALPHA,
    CONDITION_FIELDS,
    Reference,
    attach_uncertainty,
    register_cells,
)
from kdgrid.analysis.replicate_bank import ReplicateBank
from kdgrid.analysis.store_predictions import load_predictions
from kdgrid.analysis.tables import Block, Cell, Column, TableView, mark_best, ordered
from kdgrid.analysis.tables_report import filter_rows
from kdgrid.analysis.tidy import SEED_FIELDS, SEED_OPTIONS, knowledge_label, store_to_tidy
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.paper import PAPER_KNOWLEDGE, PAPER_STRATEGIES, reported_metric
from kdgrid.predictions import TrialPredictions
from kdgrid.store import read_store, scores_long
from kdgrid.store.membership import SweepMembership, read_memberships
from kdgrid.store.read import latest_done_rows
from kdgrid.trial import Trial, assistant_id

NONE_LABEL = "(none)"
"""How an empty value (no knowledge, no strategy) is shown in a row or column label."""

MARGINAL_COLUMN = Column("mean")
PAIR_COLUMN = Column("difference")
PAIR_P_COLUMN = Column("p (Holm)", fact=True)

# Trial fields in the order axes are offered (`Trial`'s own order); options follow, sorted by name.
_FIELD_ORDER: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Trial) if f.name != "options")
# Known orders of some axes' values (the paper's); other values sort as numbers where all are, else as text.
_VALUE_ORDERS: dict[str, tuple[str, ...]] = {"knowledge": PAPER_KNOWLEDGE, "strategy": PAPER_STRATEGIES}


# --- the trials of a sweep and their fields ---------------------------------------------------------------------


def field_label(name: str, value: Any) -> str:
    """One trial field's value as a label: ``""`` for nothing, knowledge sorted and joined by ``+``, numbers in
    shortest form (``1e-3`` -> ``"0.001"``, ``1.0`` -> ``"1"``), booleans ``true``/``false``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return format(float(value), "g")
    if isinstance(value, (list, tuple)):
        return knowledge_label(list(value)) if name == "knowledge" else "+".join(str(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def trial_fields(trial_json: str) -> dict[str, str]:
    """A trial's fields as labels (`field_label`), options flattened in by name, seeds left out."""
    config = json.loads(trial_json)
    options = config.pop("options", None) or {}
    out = {
        name: field_label(name, value)
        for name, value in config.items()
        if name not in SEED_FIELDS and name != "v"
    }
    for name, value in options.items() if isinstance(options, dict) else options:
        if name not in SEED_OPTIONS:
            out[name] = field_label(name, value)
    return out


def store_sweeps(store_df: pd.DataFrame, memberships: Iterable[SweepMembership]) -> list[str]:
    """The names of the sweeps the store has trials of (memberships recorded, or rows written), sorted."""
    names = {m.sweep for m in memberships}
    if "sweep" in store_df.columns:
        names |= {str(s) for s in store_df["sweep"].dropna().unique() if str(s)}
    return sorted(names)


def sweep_trial_ids(store_df: pd.DataFrame, memberships: Iterable[SweepMembership], sweep: str) -> set[str]:
    """The trial ids of sweep ``sweep``: those its memberships list and those whose rows it wrote.

    Raises:
        KdgridError: the store has no trial of that sweep (the message names the sweeps it has).
    """
    memberships = list(memberships)
    ids = {trial_id for m in memberships if m.sweep == sweep for trial_id in m.trials}
    if "sweep" in store_df.columns:
        ids |= set(store_df.loc[store_df["sweep"].astype(str) == sweep, "trial_id"].astype(str))
    if not ids:
        known = store_sweeps(store_df, memberships)
        raise KdgridError(
            f"the store has no trials of sweep {sweep!r}; its sweeps: {', '.join(known) or 'none'}"
        )
    return ids


@dataclass
class SweepRuns:
    """One number per (trial seed, dev set) of a sweep, with the trial's fields: the input of a sweep table.

    ``runs`` columns: ``trial_id, row_id, dev_set, metric, value, seed, degenerate, teacher_agreement`` and one
    column per trial field (labels). ``axes``: the fields that vary between the sweep's trials, in order."""

    sweep: str
    runs: pd.DataFrame
    axes: list[str]
    studies: list[str] = dataclasses.field(default_factory=list)  # in the sweep's order, where it has several

    def _varying_within(self) -> dict[str, list[str]]:
        """Study -> the axes that vary between its trials (a teacher assistant's student, or the student a trial
        starts from, which differ with the seed, count as one value)."""
        varying: dict[str, list[str]] = {}
        for study, members in self.runs.groupby("study", sort=False):
            for axis in self.axes:
                found = set(members[axis])
                per_seed = axis in ("teacher", "init_from") and all(assistant_id(v) for v in found)
                if len(found) > 1 and not per_seed:
                    varying.setdefault(str(study), []).append(axis)
        return varying

    def study_rows(self) -> tuple[str, ...] | None:
        """The rows of the layout by study, where the studies are the design's cells: several studies, each one
        value of every axis except at most one study, which may be a small grid of its own (an evaluation over k
        and beta beside the methods it is compared with). The study, then that grid's axes; None otherwise."""
        if len(self.studies) < 2:
            return None
        varying = self._varying_within()
        if len(varying) > 1:
            return None
        return ("study", *(axis for axes in varying.values() for axis in axes))


def sweep_runs(
    store_df: pd.DataFrame, memberships: Iterable[SweepMembership], sweep: str, kind: str
) -> SweepRuns:
    """The done trials of ``sweep`` in ``store_df`` (`kdgrid.store.read_store`'s rows), one number per seed and
    dev set: the metric its task reports (`reported_metric`), degenerate reasons of that dev set, and its fields.

    Raises:
        KdgridError: no trial of that sweep, or none of them done.
    """
    ids = sweep_trial_ids(store_df, memberships, sweep)
    rows = store_df[store_df["trial_id"].astype(str).isin(ids)]
    done = latest_done_rows(rows)
    if done.empty:
        raise KdgridError(f"sweep {sweep!r} has no done trial in the store yet")
    tidy = store_to_tidy(done, scores_long(done), kind, per_seed=True)
    tidy = tidy[tidy["role"] == "student"].drop_duplicates(["row_id", "dev_set", "metric"])
    tidy = tidy[
        [metric == reported_metric(task) for metric, task in zip(tidy["metric"], tidy["task"], strict=True)]
    ]
    by_row = {
        str(r): (str(t), trial_fields(j))
        for r, t, j in zip(done["row_id"], done["trial_id"], done["trial_json"], strict=True)
    }
    fields = [by_row[str(r)][1] for r in tidy["row_id"]]
    runs = pd.DataFrame(
        {
            "trial_id": [by_row[str(r)][0] for r in tidy["row_id"]],
            "row_id": [str(r) for r in tidy["row_id"]],
            "dev_set": list(tidy["dev_set"]),
            "metric": list(tidy["metric"]),
            "value": list(tidy["value"]),
            "seed": list(tidy["seed"]),
            "degenerate": list(tidy["degenerate"]),
            "teacher_agreement": list(tidy["teacher_agreement"]),
        }
    )
    names = list(dict.fromkeys(name for f in fields for name in f))
    for name in names:
        runs[name] = [f.get(name, "") for f in fields]
    varying = [name for name in names if runs[name].nunique() > 1] if len(runs) else []
    order = {name: i for i, name in enumerate(_FIELD_ORDER)}
    axes = sorted(varying, key=lambda n: (order.get(n, len(order)), n))
    mine = [m for m in memberships if m.sweep == sweep]
    study_of = {t: s for m in mine for t, s in m.trials.items()}
    if "study" in done.columns:
        study_of = {**dict(zip(done["trial_id"].astype(str), done["study"].astype(str), strict=True)), **study_of}
    present = {study_of[t] for t in set(runs["trial_id"]) if t in study_of}
    # The file's order where a membership recorded it, then any other study in the order found.
    recorded = [s for m in mine for s in m.studies]
    studies = [s for s in dict.fromkeys([*recorded, *(study_of[t] for t in study_of)]) if s in present]
    if len(studies) < 2:
        return SweepRuns(sweep, runs, axes)
    runs["study"] = [study_of.get(t, "") for t in runs["trial_id"]]
    return SweepRuns(sweep, runs, axes, studies)


# --- the layout -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepLayout:
    """Which axes go down the rows (one or more), across the columns (none or one) and into blocks."""

    rows: tuple[str, ...]
    cols: tuple[str, ...]
    blocks: tuple[str, ...]

    @property
    def axes(self) -> tuple[str, ...]:
        return (*self.rows, *self.cols)


def _axis_list(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def choose_layout(axes: Sequence[str], rows: str | None = None, cols: str | None = None) -> SweepLayout:
    """Rows and columns as asked (``"knowledge"``, ``"lr,epochs"``), else from the sweep's ``axes`` (rows the
    first, columns the second); the remaining axes become blocks.

    Raises:
        ConfigError: an axis that is not one of the sweep's, named twice, or more than one column axis.
    """
    asked_rows, asked_cols = _axis_list(rows), _axis_list(cols)
    allowed = ", ".join(axes) or "none (every trial of the sweep has the same settings but its seed)"
    for option, names in (("--rows", asked_rows), ("--cols", asked_cols)):
        for name in names:
            if name not in axes:
                raise ConfigError(
                    f"{option} {name!r} is not an axis of this sweep; its axes (the fields that vary between its "
                    f"trials): {allowed}"
                )
    if len(asked_cols) > 1:
        raise ConfigError(f"--cols takes one axis, got {', '.join(asked_cols)}")
    repeated = sorted({n for n in [*asked_rows, *asked_cols] if [*asked_rows, *asked_cols].count(n) > 1})
    if repeated:
        raise ConfigError(f"axis {', '.join(repeated)} is named twice in --rows/--cols")
    free = [a for a in axes if a not in asked_rows and a not in asked_cols]
    if not asked_rows:
        asked_rows = free[:1]
        free = free[1:]
    if not asked_cols and cols is None:
        asked_cols = free[:1]
        free = free[1:]
    return SweepLayout(tuple(asked_rows), tuple(asked_cols), tuple(free))


def _value_order(axis: str, values: Iterable[str]) -> list[str]:
    found = list(dict.fromkeys(values))
    numbers = [v for v in found if v]
    try:
        [float(v) for v in numbers]
    except ValueError:
        return ordered(found, ("", *_VALUE_ORDERS.get(axis, ())))
    return sorted(found, key=lambda v: (v != "", float(v) if v else 0.0))


def _shown(value: str) -> str:
    return value or NONE_LABEL


def _label(axes: Sequence[str], values: Sequence[str]) -> str:
    return " · ".join(_shown(v) for v in values) if axes else ""


# --- the table --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Difference:
    """One cell's difference from its reference (the cell minus the reference, seed means), with the 95%
    percentile interval of that difference over the same example resamples (paired), for the forest plot."""

    block: str
    label: str
    difference: float
    low: float
    high: float
    significant: bool
    direction: int
    degenerate: bool


@dataclass
class SweepTable:
    """A sweep's table (the view to render) and what built it: its layout, reference, the axes' value orders,
    each tested cell's difference from its reference (`Difference`), and how many of the view's blocks are the
    table's own (rows x columns; the marginal and pairwise blocks follow them)."""

    view: TableView
    layout: SweepLayout
    reference: Reference
    values: dict[str, list[str]]
    differences: list[Difference] = dataclasses.field(default_factory=list)
    main_blocks: int = 0  # the view's first blocks laid out by rows x columns (marginals and pairs follow)


def parse_sweep_reference(
    text: str | None, layout: SweepLayout, values: Mapping[str, Sequence[str]]
) -> Reference | None:
    """``--reference AXIS=VALUE[,AXIS=VALUE]`` against the sweep's axes and their values (``(none)`` or an empty
    value names an empty one); None when not given.

    Raises:
        ConfigError: a part without ``=``, an axis that is not one of the table's, or a value the axis never takes.
    """
    if text is None or not text.strip():
        return None
    axes = (*layout.axes, *layout.blocks)
    fields = []
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or name not in axes:
            raise ConfigError(
                f"--reference takes AXIS=VALUE[,AXIS=VALUE...] with axes among {', '.join(axes) or 'none'}; "
                f"got {part.strip()!r}"
            )
        value = "" if value == NONE_LABEL else value
        if value not in values[name]:
            raise ConfigError(
                f"--reference {name}={value or NONE_LABEL}: {name} takes the values "
                f"{', '.join(_shown(v) for v in values[name])}"
            )
        fields.append((name, value))
    return Reference(tuple(fields), explicit=True, condition_fields=(*CONDITION_FIELDS, *layout.blocks))


def build_sweep_table(
    runs: SweepRuns,
    layout: SweepLayout,
    predictions: Mapping[str, TrialPredictions],
    *,
    reference: str | None = None,
    resamples: int = stats.DEFAULT_RESAMPLES,
    test_resamples: int = stats.DEFAULT_TEST_RESAMPLES,
    seed: int = 0,
    intervals: bool = True,
    pairs: bool = False,
) -> SweepTable:
    """The table of a sweep: cells (mean over seeds) with intervals, tests against the reference and marks,
    then per block the marginal summary of each axis (where the layout has two or more) and, with ``pairs``,
    the pairwise comparisons of each axis's values. ``predictions``: row id -> its per-example predictions (rows
    without any get no interval and no test).

    Raises:
        ConfigError: a bad ``reference`` (see `parse_sweep_reference`), or one matching several cells of a block.
    """
    frame = runs.runs
    values = {
        axis: list(runs.studies) if axis == "study" else _value_order(axis, frame[axis])
        for axis in (*layout.axes, *layout.blocks)
    }
    parsed = parse_sweep_reference(reference, layout, values)
    several_dev_sets = frame[["task", "dev_set"]].drop_duplicates().shape[0] > frame["task"].nunique()
    cells: dict[tuple[str, str, Column], Cell] = {}
    block_order: list[tuple[Any, ...]] = []
    group_keys = [*layout.blocks, "task", "dev_set", *layout.rows, *layout.cols]
    for key, members in frame.groupby(group_keys, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        config = dict(zip(group_keys, key, strict=True))
        block_key = tuple(config[a] for a in (*layout.blocks, "task", "dev_set"))
        if block_key not in block_order:
            block_order.append(block_key)
        members = members.sort_values("seed", kind="stable")
        first = members.iloc[0]
        cell_config = {name: first[name] for name in frame.columns if name not in _RUN_COLUMNS}
        cell_config |= {"dev_set": first["dev_set"], "metric": first["metric"], "role": "student"}
        scores = members["value"].astype(float)
        cell = Cell(
            value=float(scores.mean()),
            std=float(scores.std(ddof=1)) if len(scores) > 1 else math.nan,
            n_seeds=len(scores),
            degenerate=tuple(sorted({r for reasons in members["degenerate"] for r in reasons})),
            row_ids=tuple(members["row_id"]),
            seeds=tuple(float(s) for s in members["seed"]),
            trial_ids=tuple(dict.fromkeys(members["trial_id"])),
            teacher_agreement=float(members["teacher_agreement"].astype(float).mean()),
            config=cell_config,
        )
        row = _label(layout.rows, [config[a] for a in layout.rows])
        column = Column(_label(layout.cols, [config[a] for a in layout.cols]) or first["metric"])
        cells[(_block_title(layout, block_key, several_dev_sets), row, column)] = cell
    block_order.sort(
        key=lambda k: tuple(_sort_position(values, a, v) for a, v in zip(layout.blocks, k, strict=False))
    )
    blocks = []
    row_labels = [
        _label(layout.rows, combo) for combo in itertools.product(*(values[a] for a in layout.rows))
    ]
    col_labels = [_label(layout.cols, [v]) for a in layout.cols for v in values[a]]
    for block_key in block_order:
        title = _block_title(layout, block_key, several_dev_sets)
        members = {(r, c): cell for (b, r, c), cell in cells.items() if b == title}
        present_rows = [r for r in row_labels if any(k[0] == r for k in members)]
        columns = [Column(c) for c in col_labels] or list(dict.fromkeys(c for _, c in members))
        columns = [c for c in columns if any(k[1] == c for k in members)]
        blocks.append(Block(title, present_rows, columns, members))
    axes = dict.fromkeys(("task", "dev_set", *layout.blocks, *layout.axes, "metric"))
    view = TableView(runs.sweep, _title(runs, layout), blocks, axes=tuple(axes))
    mark_best(view, "block")
    if parsed is None:
        parsed = _default_reference(view, layout, values)
        if layout.rows[:1] == ("study",) and not parsed.explicit and layout.blocks == ():
            parsed = _soft_labels_study(view, values["study"], parsed)
    if intervals:
        bank = ReplicateBank(test_resamples, seed)
        summary = attach_uncertainty(
            view,
            predictions,
            reference=parsed,
            resamples=resamples,
            test_resamples=test_resamples,
            seed=seed,
            test_bank=bank,
        )
        view.notes.extend(summary.notes)
    main_blocks = list(view.blocks)
    interval_bank = ReplicateBank(resamples, seed)
    test_bank = ReplicateBank(test_resamples, seed)
    pair_tests: list[tuple[Cell, float]] = []
    for block in main_blocks:
        scored = [cell for cell in block.cells.values() if not cell.missing]
        register_cells(interval_bank, scored, predictions)
        if len(layout.axes) > 1:
            for axis in layout.axes:
                view.blocks.append(
                    _marginal_block(block, layout, axis, values[axis], predictions, interval_bank)
                )
        if pairs:
            register_cells(test_bank, scored, predictions)
            for axis in layout.axes:
                pair_block = _pair_block(
                    block, layout, axis, values[axis], predictions, test_bank, seed, pair_tests
                )
                if pair_block.rows:
                    view.blocks.append(pair_block)
    differences = _differences(main_blocks, parsed, predictions, interval_bank) if intervals else []
    adjusted = stats.holm_bonferroni([p for _, p in pair_tests])
    for (cell, _), p in zip(pair_tests, adjusted, strict=True):
        cell.p_vs_reference = p
        cell.significant = p <= ALPHA
    for block in view.blocks[len(main_blocks) :]:
        for (row, column), cell in list(block.cells.items()):
            if column == PAIR_COLUMN and not math.isnan(cell.p_vs_reference):
                block.cells[(row, PAIR_P_COLUMN)] = Cell(value=cell.p_vs_reference, n_seeds=1)
    if len(layout.axes) > 1:
        view.notes.append(
            "mean: each value of an axis averaged over the block's cells with it (the other axes), 95% interval "
            f"from the same {resamples} example resamples as the cells'"
        )
    if pair_tests:
        view.notes.append(
            "difference: the first value's mean minus the second's; ▲/▼ a difference beyond noise by a paired "
            f"bootstrap test ({test_resamples} resamples), Holm-adjusted p <= {ALPHA} over the {len(pair_tests)} pairs"
        )
    return SweepTable(view, layout, parsed, values, differences, main_blocks=len(main_blocks))


def _differences(
    blocks: Sequence[Block],
    reference: Reference,
    predictions: Mapping[str, TrialPredictions],
    bank: ReplicateBank,
) -> list[Difference]:
    """Each tested cell minus its condition's reference cell, with the paired percentile interval."""
    references = {
        reference.condition(cell.config): cell
        for block in blocks
        for cell in block.cells.values()
        if cell.is_reference
    }
    out = []
    for block in blocks:
        for (row, column), cell in block.cells.items():
            ref = references.get(reference.condition(cell.config))
            if ref is None or cell is ref or cell.missing:
                continue
            mine, theirs = _cell_replicates(cell, predictions, bank), _cell_replicates(ref, predictions, bank)
            if mine is None or theirs is None or mine[0] != theirs[0]:
                continue
            difference = cell.value - ref.value
            interval = stats.interval_from_replicates(
                mine[1] - theirs[1], difference, stats.DEFAULT_CONFIDENCE
            )
            label = " · ".join(x for x in (row, column.label if len(block.columns) > 1 else "") if x)
            out.append(
                Difference(
                    block.title,
                    label,
                    difference,
                    interval.low,
                    interval.high,
                    cell.significant,
                    cell.direction,
                    bool(cell.degenerate),
                )
            )
    return out


_RUN_COLUMNS = ("trial_id", "row_id", "value", "seed", "degenerate", "teacher_agreement")


def _title(runs: SweepRuns, layout: SweepLayout) -> str:
    metrics = sorted(set(runs.runs["metric"]))
    by = " x ".join(x for x in [" · ".join(layout.rows), " · ".join(layout.cols)] if x)
    return f"sweep {runs.sweep}: {', '.join(metrics)}" + (f" by {by}" if by else "")


def _sort_position(values: Mapping[str, Sequence[str]], axis: str, value: str) -> int:
    return list(values[axis]).index(value) if value in values[axis] else len(values[axis])


def _block_title(layout: SweepLayout, block_key: tuple[Any, ...], several_dev_sets: bool) -> str:
    *fields, task, dev_set = block_key
    parts = [
        f"{axis}={_shown(value)}" for axis, value in zip(layout.blocks, fields, strict=True) if axis != "task"
    ]
    place = f"{task} {dev_set}" if several_dev_sets else str(task)
    return " · ".join([place, *parts])


def _default_reference(
    view: TableView, layout: SweepLayout, values: Mapping[str, Sequence[str]]
) -> Reference:
    """Soft labels only where that is one cell of a block (and not every cell), else the first cell of each
    block (the first value of each axis)."""
    conditions = (*CONDITION_FIELDS, *layout.blocks)
    default = Reference(condition_fields=conditions)
    cells = [cell for block in view.blocks for cell in block.cells.values()]
    matches = [sum(default.matches(c.config) for c in block.cells.values()) for block in view.blocks]
    if any(matches) and max(matches) == 1 and sum(matches) < len(cells):
        return default
    present = {
        axis: [v for v in values[axis] if any(c.config.get(axis) == v for c in cells)] for axis in layout.axes
    }
    fields = tuple((axis, present[axis][0]) for axis in layout.axes if present[axis])
    return Reference(fields, explicit=False, condition_fields=conditions)


def _soft_labels_study(view: TableView, studies: Sequence[str], fallback: Reference) -> Reference:
    """In a table laid out by study: the first study (in the sweep's order) that is soft labels only, as the
    reference of every cell of its condition; ``fallback`` where no study is."""
    soft = Reference(condition_fields=fallback.condition_fields)
    cells = [cell for block in view.blocks for cell in block.cells.values()]
    for study in studies:
        if any(c.config.get("study") == study and soft.matches(c.config) for c in cells):
            return Reference((("study", study),), explicit=False, condition_fields=fallback.condition_fields)
    return fallback


def _cell_replicates(
    cell: Cell, predictions: Mapping[str, TrialPredictions], bank: ReplicateBank
) -> tuple[str, np.ndarray] | None:
    """(dev-set fingerprint, ``[R]`` replicate scores of the cell's seed mean) from ``bank``; None without
    predictions for every seed."""
    dev_set = cell.config.get("dev_set") or "validation"
    outcomes = [predictions.get(row_id, {}).get(dev_set) for row_id in cell.row_ids]
    if not outcomes or any(o is None for o in outcomes):
        return None
    fingerprint = outcomes[0].fingerprint  # type: ignore[union-attr]
    keys = tuple((row_id, dev_set) for row_id in cell.row_ids)
    replicates, _, _ = bank.replicates(cell.config["metric"], fingerprint, keys)
    return fingerprint, replicates.mean(axis=1)


def _marginal(
    block: Block, axis: str, value: str, predictions: Mapping[str, TrialPredictions], bank: ReplicateBank
) -> tuple[Cell, np.ndarray | None]:
    """The mean of the block's cells whose ``axis`` is ``value``, and its ``[R]`` replicates (None unless every
    such cell has predictions on one dev set)."""
    members = [c for c in block.cells.values() if not c.missing and c.config.get(axis) == value]
    if not members:
        return Cell(), None
    mean = float(np.mean([c.value for c in members]))
    found = [_cell_replicates(c, predictions, bank) for c in members]
    if any(f is None for f in found) or len({f[0] for f in found if f}) != 1:
        return Cell(value=mean, n_seeds=1, degenerate=_union(members)), None
    replicates = np.mean([f[1] for f in found if f], axis=0)
    return Cell(value=mean, n_seeds=1, degenerate=_union(members)), replicates


def _union(cells: Iterable[Cell]) -> tuple[str, ...]:
    return tuple(sorted({r for c in cells for r in c.degenerate}))


def _marginal_block(
    block: Block,
    layout: SweepLayout,
    axis: str,
    values: Sequence[str],
    predictions: Mapping[str, TrialPredictions],
    bank: ReplicateBank,
) -> Block:
    others = ", ".join(a for a in layout.axes if a != axis)
    out = Block(f"{block.title} — {axis}, mean over {others}", [], [MARGINAL_COLUMN])
    for value in values:
        cell, replicates = _marginal(block, axis, value, predictions, bank)
        if cell.missing:
            continue
        if replicates is not None:
            interval = stats.interval_from_replicates(replicates, cell.value, stats.DEFAULT_CONFIDENCE)
            cell.ci_low, cell.ci_high = interval.low, interval.high
        out.rows.append(_shown(value))
        out.cells[(_shown(value), MARGINAL_COLUMN)] = cell
    mark_best(TableView("", "", [out]), "block")
    return out


def _pair_block(
    block: Block,
    layout: SweepLayout,
    axis: str,
    values: Sequence[str],
    predictions: Mapping[str, TrialPredictions],
    bank: ReplicateBank,
    seed: int,
    tests: list[tuple[Cell, float]],
) -> Block:
    """Every two values of ``axis`` compared by their marginal means (appends to ``tests`` for Holm)."""
    means = {v: _marginal(block, axis, v, predictions, bank) for v in values}
    present = [v for v in values if not means[v][0].missing and means[v][1] is not None]
    out = Block(f"{block.title} — {axis}, pairwise", [], [PAIR_COLUMN, PAIR_P_COLUMN])
    for a, b in itertools.combinations(present, 2):
        (cell_a, rep_a), (cell_b, rep_b) = means[a], means[b]
        test = stats.paired_test_from_replicates(
            rep_a[:, None],  # type: ignore[index]
            rep_b[:, None],  # type: ignore[index]
            np.array([cell_a.value]),
            np.array([cell_b.value]),
            np.random.default_rng(seed),
        )
        row = f"{_shown(a)} vs {_shown(b)}"
        cell = Cell(value=test.difference, n_seeds=1, direction=int(np.sign(round(test.difference, 12))))
        out.rows.append(row)
        out.cells[(row, PAIR_COLUMN)] = cell
        tests.append((cell, test.p_value))
    return out


def sweep_table(
    store_dir: Path,
    sweep: str,
    *,
    kind: str = "best",
    where: Iterable[str] = (),
    rows: str | None = None,
    cols: str | None = None,
    reference: str | None = None,
    resamples: int = stats.DEFAULT_RESAMPLES,
    test_resamples: int = stats.DEFAULT_TEST_RESAMPLES,
    intervals: str = "auto",
    pairs: bool = False,
) -> SweepTable:
    """`build_sweep_table` of sweep ``sweep`` in the store at ``store_dir`` (``where``: keep only trials with
    these field values, as `kdgrid.analysis.tables_report.filter_rows`); what `kdgrid tables --sweep` prints.

    Raises:
        KdgridError: no store, no trial of that sweep (naming the sweeps the store has), ``intervals="on"`` and
            no predictions; ConfigError: a bad axis or reference (naming the allowed ones).
    """
    store_dir = Path(store_dir)
    if not store_dir.exists():
        raise KdgridError(f"no results store at {store_dir} (run a sweep first, or pass --store DIR)")
    store_df = filter_rows(read_store(store_dir), where)
    if store_df.empty:
        raise KdgridError(f"the store {store_dir} has no rows" + (" matching --where" if where else ""))
    runs = sweep_runs(store_df, read_memberships(store_dir, skip_bad=True), sweep, kind)
    asked = {*_axis_list(rows), *_axis_list(cols)}
    study_rows = runs.study_rows()
    if runs.studies and ("study" in asked or (not asked and study_rows is not None)):
        layout = choose_layout([*runs.axes, "study"], rows or "study", cols or "")
        if layout.rows == ("study",) and not layout.cols and study_rows is not None:
            # every other axis is fixed by the study, or varies inside its one grid: rows, no blocks
            layout = SweepLayout(study_rows, (), ())
    else:
        layout = choose_layout(runs.axes, rows, cols)
    predictions = load_predictions(store_dir, runs.runs["row_id"]) if intervals != "off" else {}
    if intervals == "on" and not predictions:
        raise KdgridError(
            f"the rows of sweep {sweep!r} carry no per-example predictions (row schema version 1), so no "
            "interval can be computed; rerun its trials with this kdgrid, or drop --intervals on"
        )
    return build_sweep_table(
        runs,
        layout,
        predictions,
        reference=reference,
        resamples=resamples,
        test_resamples=test_resamples,
        intervals=intervals != "off",
        pairs=pairs,
    )


def method_strata(runs: SweepRuns, axis: str) -> dict[str, dict[str, np.ndarray]]:
    """Each value of ``axis`` -> its runs per stratum (``"<task> · <dev set>"``): the input of
    `kdgrid.analysis.method_summary.summarise_methods`. Values in the axis's order.

    Raises:
        ConfigError: ``axis`` is not an axis of the sweep (naming its axes).
    """
    if axis not in runs.axes:
        allowed = ", ".join(runs.axes) or "none"
        raise ConfigError(f"--summary {axis!r} is not an axis of sweep {runs.sweep!r}; its axes: {allowed}")
    frame = runs.runs
    found: dict[str, dict[str, np.ndarray]] = {}
    for value in _value_order(axis, frame[axis].unique()):
        mine = frame[frame[axis] == value]
        found[value] = {
            f"{task} · {dev_set}": group["value"].to_numpy(dtype=float)
            for (task, dev_set), group in mine.groupby(["task", "dev_set"], sort=True)
        }
    return found
