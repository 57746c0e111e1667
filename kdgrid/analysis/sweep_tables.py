"""Tables for any sweep: the trials of one sweep laid out by its own varying trial fields (its axes), with
intervals, tests against a reference, a correction per family and marks, marginal summaries per axis, and
pairwise comparisons on request; every number's uncertainty from one procedure (`kdgrid.analysis.sweep_stats`:
seed level where seeds exist, run to run with one seed).

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
    cells: the metric the task reports (`kdgrid.paper.reported_metric`; a regression task the paper does not
        name: Pearson and Spearman, one block each, `table_metrics`) on each dev set, mean over seeds, the best
        epoch's (``kind="best"``) or the last one's.
    reference: per block (its task, dev set, metric, student, teacher and block fields), the cell named by
        ``--reference``; an axis the reference does not name stays part of the condition, so
        ``--reference strategy=Last-1`` is the Last-1 cell within each knowledge (one family per slice). By
        default the soft-labels-only cell where the sweep has one, else the block's first cell.
    marginal: each value of an axis, the mean over the block's cells having it (averaged over the other axes),
        per seed where those cells ran the same seeds, with its interval from the same procedure as a cell's; a
        warning where two values' difference flips sign beyond noise across the other axes' slices.
    pairs: every two values of an axis compared by their marginal means (the same procedure), corrected per
        block (``--family table``: over the whole table); ``difference`` is the first minus the second.
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

import pandas as pd

from kdgrid.analysis import stats
from kdgrid.analysis.cell_stats import ALPHA, CONDITION_FIELDS, Reference, check_choices
from kdgrid.analysis.method_summary import SeedStrata, Strata
from kdgrid.analysis.seed_level import average, seed_scores
from kdgrid.analysis.store_predictions import load_predictions
from kdgrid.analysis.sweep_stats import (
    Difference,
    PairTest,
    attach_sweep_statistics,
    correct_pairs,
    crossover_warning,
    marginal_cell,
    pair_cell,
    pairs_of,
    slices_of,
)
from kdgrid.analysis.sweep_stats import level_note as _level_note
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
PAIR_RAW_COLUMN = Column("p (raw)", fact=True)

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

    def study_rows(self, columns: Sequence[str] = ()) -> tuple[str, ...] | None:
        """The rows of the layout by study, where the studies are the design's cells: several studies, each one
        value of every axis (but the ``columns`` axes, laid across) except at most one study, which may be a small
        grid of its own (an evaluation over k and beta beside the methods it is compared with). The study, then
        that grid's axes; None otherwise."""
        if len(self.studies) < 2:
            return None
        varying = {
            study: kept
            for study, axes in self._varying_within().items()
            if (kept := [axis for axis in axes if axis not in columns])
        }
        if len(varying) > 1:
            return None
        return ("study", *(axis for axes in varying.values() for axis in axes))


REGRESSION_METRICS: tuple[str, ...] = ("pearson", "spearman")
"""What a regression task's table shows where its rows have no metric the paper names for it (STS-B's Pearson
is; a synthetic or local regression task's rows carry Pearson and Spearman)."""


def table_metrics(tidy: pd.DataFrame) -> dict[str, tuple[str, ...]]:
    """Task -> the metrics its cells show: the one the paper reports (`reported_metric`) where its rows have it,
    else the regression correlations they have (`REGRESSION_METRICS`), else every metric they have."""
    out = {}
    for task, rows in tidy.groupby("task", sort=False):
        found = set(rows["metric"])
        if reported_metric(str(task)) in found:
            out[str(task)] = (reported_metric(str(task)),)
        else:
            out[str(task)] = tuple(m for m in REGRESSION_METRICS if m in found) or tuple(sorted(found))
    return out


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
    shown = table_metrics(tidy)
    tidy = tidy[[metric in shown[task] for metric, task in zip(tidy["metric"], tidy["task"], strict=True)]]
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
        study_of = {
            **dict(zip(done["trial_id"].astype(str), done["study"].astype(str), strict=True)),
            **study_of,
        }
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
    runs: SweepRuns | None = None  # the runs it was built from (the seed-curve figures draw their rows)


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
    # the axes the reference does not name are part of the condition: a reference within each of their slices
    return Reference(
        tuple(fields), explicit=True, condition_fields=(*CONDITION_FIELDS, *layout.blocks, *layout.axes)
    )


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
    family: str = "condition",
    correction: str = "holm",
    kind: str = "best",
    labels: Mapping[str, TrialPredictions] | None = None,
) -> SweepTable:
    """The table of a sweep: cells (mean over seeds) with intervals, tests against the reference and marks,
    then per block the marginal summary of each axis (where the layout has two or more) and, with ``pairs``,
    the pairwise comparisons of each axis's values; every number's uncertainty from one procedure
    (`kdgrid.analysis.sweep_stats`). ``predictions``: row id -> its per-example predictions of the epoch the
    values are (``kind``; none for the last epoch: the store keeps the best one's), for the one-seed numbers;
    ``labels``: per-example predictions read for their dev labels only (the majority-class check of a last-epoch
    table). With ``kind="last"`` the rows' own degenerate reasons, found on the best epoch's predictions, say so.

    Raises:
        ConfigError: a bad ``reference`` (see `parse_sweep_reference`), or one matching several cells of a block;
            an unknown ``family`` or ``correction``.
    """
    check_choices(family, correction, "auto")
    frame = runs.runs
    values = {
        axis: list(runs.studies) if axis == "study" else _value_order(axis, frame[axis])
        for axis in (*layout.axes, *layout.blocks)
    }
    parsed = parse_sweep_reference(reference, layout, values)
    several_dev_sets = frame[["task", "dev_set"]].drop_duplicates().shape[0] > frame["task"].nunique()
    several_metrics = frame[["task", "metric"]].drop_duplicates().shape[0] > frame["task"].nunique()
    cells: dict[tuple[str, str, Column], Cell] = {}
    block_order: list[tuple[Any, ...]] = []
    group_keys = [*layout.blocks, "task", "dev_set", "metric", *layout.rows, *layout.cols]
    for key, members in frame.groupby(group_keys, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        config = dict(zip(group_keys, key, strict=True))
        block_key = tuple(config[a] for a in (*layout.blocks, "task", "dev_set", "metric"))
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
            degenerate=tuple(
                sorted(
                    {
                        (r if kind == "best" else f"best epoch: {r}")
                        for rs in members["degenerate"]
                        for r in rs
                    }
                )
            ),
            row_ids=tuple(members["row_id"]),
            seeds=tuple(float(s) for s in members["seed"]),
            trial_ids=tuple(dict.fromkeys(members["trial_id"])),
            teacher_agreement=float(members["teacher_agreement"].astype(float).mean()),
            config=cell_config,
        )
        row = _label(layout.rows, [config[a] for a in layout.rows])
        column = Column(_label(layout.cols, [config[a] for a in layout.cols]) or first["metric"])
        cells[(_block_title(layout, block_key, several_dev_sets, several_metrics), row, column)] = cell
    block_order.sort(
        key=lambda k: tuple(_sort_position(values, a, v) for a, v in zip(layout.blocks, k, strict=False))
    )
    blocks = []
    row_labels = [
        _label(layout.rows, combo) for combo in itertools.product(*(values[a] for a in layout.rows))
    ]
    col_labels = [_label(layout.cols, [v]) for a in layout.cols for v in values[a]]
    for block_key in block_order:
        title = _block_title(layout, block_key, several_dev_sets, several_metrics)
        members = {(r, c): cell for (b, r, c), cell in cells.items() if b == title}
        present_rows = [r for r in row_labels if any(k[0] == r for k in members)]
        columns = [Column(c) for c in col_labels] or list(dict.fromkeys(c for _, c in members))
        columns = [c for c in columns if any(k[1] == c for k in members)]
        blocks.append(Block(title, present_rows, columns, members))
    axes = dict.fromkeys(("task", "dev_set", *layout.blocks, *layout.axes, "metric"))
    view = TableView(runs.sweep, _title(runs, layout), blocks, axes=tuple(axes), correction=correction)
    mark_best(view, "block")
    slices: tuple[str, ...] = ()
    if parsed is not None:
        parsed, slices = _per_slice(view, layout, parsed)
    if parsed is None:
        parsed = _default_reference(view, layout, values)
        if layout.rows[:1] == ("study",) and not parsed.explicit and layout.blocks == ():
            parsed = _soft_labels_study(view, values["study"], parsed)
    main_blocks = list(view.blocks)
    if not intervals:
        return SweepTable(view, layout, parsed, values, [], main_blocks=len(main_blocks), runs=runs)
    scores = {
        (str(r), str(d), str(m)): float(v)
        for r, d, m, v in zip(frame["row_id"], frame["dev_set"], frame["metric"], frame["value"], strict=True)
    }
    found, numbers = attach_sweep_statistics(
        runs.sweep,
        main_blocks,
        parsed,
        scores,
        predictions,
        family=family,
        correction=correction,
        resamples=resamples,
        test_resamples=test_resamples,
        seed=seed,
        labels=labels,
    )
    warnings: list[str] = []
    pair_tests: list[PairTest] = []
    marginals = False
    for block in main_blocks:
        # marginals along the axes with two or more values in the block: an axis of one value there (the task of
        # a `--cols task` table, whose blocks part the tasks; a field asked for part-way through a sweep) would
        # only repeat the cells
        marginal_axes = [axis for axis in layout.axes if len(set(_axis_values(block, axis))) > 1]
        if len(marginal_axes) > 1:
            marginals = True
            for axis in marginal_axes:
                view.blocks.append(_marginal_block(block, layout, axis, values[axis], numbers))
                warnings.extend(_crossovers(block, layout, axis, values[axis], numbers))
        if pairs:
            for axis in layout.axes:
                pair_block = _pair_block(block, axis, values[axis], numbers, family, pair_tests, correction)
                if pair_block.rows:
                    view.blocks.append(pair_block)
    pair_families = correct_pairs(pair_tests, correction)
    for block in view.blocks[len(main_blocks) :]:
        for (row, column), cell in list(block.cells.items()):
            if column == PAIR_COLUMN and not math.isnan(cell.p_raw):
                block.cells[(row, PAIR_RAW_COLUMN)] = Cell(value=cell.p_raw, n_seeds=1)
                block.cells[(row, _pair_p_column(correction))] = Cell(value=cell.p_vs_reference, n_seeds=1)
    levels = set(found.levels) | {
        c.uncertainty for b in view.blocks for c in b.cells.values() if c.uncertainty
    }
    if levels:
        view.notes.append(_level_note(levels))
    if kind == "last":
        view.notes.append(
            "--kind last: every value, interval and test is the last epoch's (seed level); one-seed numbers get "
            "none, the store keeps per-example predictions of the best epoch only"
        )
    if slices:
        view.notes.append(
            f"reference {parsed.label}: one per value of {', '.join(slices)} (each such slice its own reference "
            "and its own family)"
        )
    view.notes.extend(found.notes)
    if marginals:
        view.notes.append(
            "mean: each value of an axis averaged over the block's cells with it (the other axes), per seed where "
            "they ran the same seeds; its interval from the same procedure as the cells'"
        )
    if pair_tests:
        view.notes.append(
            "difference: the first value's mean minus the second's; ▲/▼ a difference beyond noise by the same "
            f"procedure (raw p in 'p (raw)'), {_CORRECTION_NAMES[correction]}-adjusted p <= {ALPHA} over the "
            f"{len(pair_tests)} pairs ({_pair_family_words(family, pair_families)})"
        )
    view.notes.extend(warnings)
    return SweepTable(view, layout, parsed, values, found.differences, main_blocks=len(main_blocks), runs=runs)


_CORRECTION_NAMES = {"holm": "Holm", "fdr": "Benjamini-Hochberg"}


def _pair_family_words(family: str, families: int) -> str:
    return f"one family per block, {families} of them" if family == "condition" else "one family: the table"


def _pair_p_column(correction: str) -> Column:
    return Column(f"p ({'Holm' if correction == 'holm' else 'BH'})", fact=True)


def _axis_values(block: Block, axis: str) -> list[str]:
    """The values of ``axis`` among the block's cells with a number."""
    return [c.config.get(axis) for c in block.cells.values() if not c.missing]


def _members(block: Block, axis: str, value: str) -> list[Cell]:
    return [c for c in block.cells.values() if not c.missing and c.config.get(axis) == value]


def _marginal_block(
    block: Block, layout: SweepLayout, axis: str, values: Sequence[str], numbers: Any
) -> Block:
    others = ", ".join(a for a in layout.axes if a != axis)
    out = Block(f"{block.title} — {axis}, mean over {others}", [], [MARGINAL_COLUMN])
    for value in values:
        members = _members(block, axis, value)
        if not members:
            continue
        out.rows.append(_shown(value))
        out.cells[(_shown(value), MARGINAL_COLUMN)] = marginal_cell(numbers, members)
    mark_best(TableView("", "", [out]), "block")
    return out


def _crossovers(
    block: Block, layout: SweepLayout, axis: str, values: Sequence[str], numbers: Any
) -> list[str]:
    """A warning for each two values of ``axis`` whose difference flips sign beyond noise across the slices of
    the other axes (`kdgrid.analysis.sweep_stats.crossover_warning`)."""
    others = [a for a in layout.axes if a != axis]
    out = []
    for a, b in pairs_of(values):
        slices_a = slices_of(_members(block, axis, a), others, _shown)
        slices_b = slices_of(_members(block, axis, b), others, _shown)
        slices = {label: (slices_a[label], slices_b.get(label, [])) for label in slices_a}
        warning = crossover_warning(numbers, block.title, axis, a, b, slices, _shown)
        if warning:
            out.append(warning)
    return out


def _pair_block(
    block: Block,
    axis: str,
    values: Sequence[str],
    numbers: Any,
    family: str,
    tests: list[PairTest],
    correction: str,
) -> Block:
    """Every two values of ``axis`` compared by their marginal means (appends to ``tests`` for the correction)."""
    present = [v for v in values if _members(block, axis, v)]
    out = Block(
        f"{block.title} — {axis}, pairwise", [], [PAIR_COLUMN, PAIR_RAW_COLUMN, _pair_p_column(correction)]
    )
    for a, b in pairs_of(present):
        cell, estimate = pair_cell(numbers, _members(block, axis, a), _members(block, axis, b))
        row = f"{_shown(a)} vs {_shown(b)}"
        out.rows.append(row)
        out.cells[(row, PAIR_COLUMN)] = cell
        if estimate is not None:
            tests.append(PairTest(cell, estimate, block.title if family == "condition" else ()))
    return out


_RUN_COLUMNS = ("trial_id", "row_id", "value", "seed", "degenerate", "teacher_agreement")
_NOT_AXES = ("dev_set", "metric", "study")  # columns of the runs beside the trial's fields, never asked as one


def _title(runs: SweepRuns, layout: SweepLayout) -> str:
    metrics = sorted(set(runs.runs["metric"]))
    by = " x ".join(x for x in [" · ".join(layout.rows), " · ".join(layout.cols)] if x)
    return f"sweep {runs.sweep}: {', '.join(metrics)}" + (f" by {by}" if by else "")


def _sort_position(values: Mapping[str, Sequence[str]], axis: str, value: str) -> int:
    return list(values[axis]).index(value) if value in values[axis] else len(values[axis])


def _block_title(
    layout: SweepLayout, block_key: tuple[Any, ...], several_dev_sets: bool, several_metrics: bool = False
) -> str:
    *fields, task, dev_set, metric = block_key
    parts = [
        f"{axis}={_shown(value)}" for axis, value in zip(layout.blocks, fields, strict=True) if axis != "task"
    ]
    place = f"{task} {dev_set}" if several_dev_sets else str(task)
    return " · ".join([place + (f" {metric}" if several_metrics else ""), *parts])


def _per_slice(
    view: TableView, layout: SweepLayout, reference: Reference
) -> tuple[Reference, tuple[str, ...]]:
    """``reference`` (parsed per slice: the axes it leaves out are part of the condition) as it applies to
    ``view``: per slice where it matches several cells of a block (``--reference strategy=Last-1`` in a knowledge
    x strategy table: one Last-1 per knowledge), else one per block, as before slices (a study-layout reference
    such as ``study=soft`` that has no value of the grid's axes). Returns the reference and the axes it is per."""
    per_block = dataclasses.replace(reference, condition_fields=(*CONDITION_FIELDS, *layout.blocks))
    matches = [sum(reference.matches(c.config) for c in block.cells.values()) for block in view.blocks]
    if max(matches, default=0) <= 1:
        return per_block, ()
    named = {name for name, _ in reference.fields}
    return reference, tuple(a for a in layout.axes if a not in named)


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
    family: str = "condition",
    correction: str = "holm",
) -> SweepTable:
    """`build_sweep_table` of sweep ``sweep`` in the store at ``store_dir`` (``where``: keep only trials with
    these field values, as `kdgrid.analysis.tables_report.filter_rows`); what `kdgrid tables --sweep` prints.
    ``kind="last"``: the last epoch's values, with seed-level statistics only (the stored predictions are the best
    epoch's, never put beside another epoch's values).

    Raises:
        KdgridError: no store, no trial of that sweep (naming the sweeps the store has), ``intervals="on"`` and
            no cell that can get an interval; ConfigError: a bad axis, reference, family or correction.
    """
    check_choices(family, correction, "auto")
    store_dir = Path(store_dir)
    if not store_dir.exists():
        raise KdgridError(f"no results store at {store_dir} (run a sweep first, or pass --store DIR)")
    store_df = filter_rows(read_store(store_dir), where)
    if store_df.empty:
        raise KdgridError(f"the store {store_dir} has no rows" + (" matching --where" if where else ""))
    runs = sweep_runs(store_df, read_memberships(store_dir, skip_bad=True), sweep, kind)
    asked = {*_axis_list(rows), *_axis_list(cols)}
    # a field asked for that the done trials share (a sweep part-way through: one task done so far) is laid out
    # as an axis of one value, where naming it is no mistake
    axes = [*runs.axes, *sorted((asked & set(runs.runs.columns)) - {*runs.axes, *_RUN_COLUMNS, *_NOT_AXES})]
    study_rows = runs.study_rows(_axis_list(cols))
    if runs.studies and ("study" in asked or (not asked and study_rows is not None)):
        layout = choose_layout([*axes, "study"], rows or "study", cols or "")
        if layout.rows == ("study",) and study_rows is not None:
            # every other axis but the columns' is fixed by the study, or varies inside its one grid: rows, no
            # blocks (the methods by task: --rows study --cols task)
            layout = SweepLayout(study_rows, layout.cols, ())
    else:
        layout = choose_layout(axes, rows, cols)
    # the stored predictions are the best epoch's: a last-epoch table never reads them
    loaded = load_predictions(store_dir, runs.runs["row_id"]) if intervals != "off" else {}
    predictions = loaded if kind == "best" else {}
    several_seeds = _any_cell_seeded(runs)
    if intervals == "on" and not predictions and not several_seeds:
        why = (
            "--kind last: the store keeps per-example predictions of the best epoch only"
            if kind == "last"
            else "its rows carry no per-example predictions"
        )
        raise KdgridError(
            f"no cell of sweep {sweep!r} can get an interval: every cell ran one seed and {why}; run two or more "
            "seeds (seed-level intervals need no predictions), or drop --intervals on"
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
        family=family,
        correction=correction,
        kind=kind,
        labels=loaded,
    )


def _any_cell_seeded(runs: SweepRuns) -> bool:
    """Whether some configuration of the sweep ran two or more seeds (its trials differ in their seed only)."""
    frame = runs.runs
    fields = [c for c in frame.columns if c not in _RUN_COLUMNS]
    return bool(len(frame)) and bool((frame.groupby(fields, dropna=False).size() > 1).any())


HARD_ONLY_LABEL = "(hard labels only)"
"""The summary's name for the hard-labels-only baseline (no knowledge, soft-label weight 0), kept apart from the
soft-labels-only runs that share its empty value of an axis."""


def method_strata(runs: SweepRuns, axis: str) -> tuple[dict[str, Strata], dict[str, SeedStrata]]:
    """Each value of ``axis`` -> its runs per stratum (``"<task> · <dev set> · <metric>"``), and -> its per-seed
    scores per stratum (the mean per seed over the stratum's other settings; only where they all ran the same
    seeds): the inputs of `kdgrid.analysis.method_summary.summarise_methods`. Values in the axis's order; the
    empty value (shown ``(none)``) holds no hard-labels-only baseline, which is a method of its own
    (`HARD_ONLY_LABEL`): two baselines are never pooled.

    Raises:
        ConfigError: ``axis`` is not an axis of the sweep (naming its axes).
    """
    if axis not in runs.axes:
        allowed = ", ".join(runs.axes) or "none"
        raise ConfigError(f"--summary {axis!r} is not an axis of sweep {runs.sweep!r}; its axes: {allowed}")
    frame = runs.runs.copy()
    method = frame[axis].astype(str)
    if axis != "soft_weight" and "soft_weight" in frame.columns:
        no_knowledge = frame["knowledge"] == "" if "knowledge" in frame.columns else True
        hard_only = no_knowledge & (frame["soft_weight"] == "0") & (method == "")
        method = method.where(~hard_only, HARD_ONLY_LABEL)
    frame["_method"] = method
    others = [a for a in runs.axes if a != axis]
    found: dict[str, Strata] = {}
    seeds: dict[str, SeedStrata] = {}
    order = _value_order(axis, [v for v in method.unique() if v != HARD_ONLY_LABEL])
    order += [HARD_ONLY_LABEL] if (method == HARD_ONLY_LABEL).any() else []
    for value in order:
        mine = frame[frame["_method"] == value]
        found[value], seeds[value] = {}, {}
        for (task, dev_set, metric), group in mine.groupby(["task", "dev_set", "metric"], sort=True):
            stratum = f"{task} · {dev_set} · {metric}"
            found[value][stratum] = group["value"].to_numpy(dtype=float)
            settings = [
                seed_scores(list(g["seed"]), list(g["value"]))
                for _, g in (group.groupby(others, sort=True, dropna=False) if others else [((), group)])
            ]
            averaged = average(settings)
            if averaged is not None:
                seeds[value][stratum] = averaged
    return found, seeds
