"""The paper's tables laid out from tidy numbers (the store's, via `kdgrid.analysis.tidy`, or the paper's own).

A table is a `TableView`: blocks (one per task, per task and student, ...), each a grid of rows x columns of
`Cell`s. One `TableSpec` per table says where a tidy row goes (block, row, column), the paper's order of
blocks, rows and columns, and over what the best value is bolded. The same spec lays out our numbers and the
published ones, so `kdgrid.analysis.compare` can put them side by side cell by cell.

Layouts (as in section 4 and Appendix A.3 of the paper):
    1: tasks x initialization scheme, columns grouped by student; best per task and student in bold.
    2: width-depth shapes x tasks with #params, FLOPs and latency; two blocks (fixed params / fixed FLOPs);
       best per task and block.
    3: tasks x (teachers' own scores | student x teacher); best per task within each column group.
    4: hard-label weight x temperature, one block per task; best per block.
    5, 6, 8: knowledge (6: knowledge pair) x matching strategy, one block per task and student; best per block.
    7: systems (teacher, previous SOTA, ours) x tasks, with #params and the average; best per task. The
       average is the paper's: the mean of SST-2, STS-B, QQP, MRPC, RTE and QNLI, MNLI left out (that mean
       reproduces all three printed averages; the mean of all eight numbers does not; kdgrid/analysis/paper/NOTES.md).
    demo: knowledge x strategy for each student and task of the demo study, with the soft-label-only and
       hard-label-only baselines as a block beside it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from kdgrid.analysis.schema import CONFIG_COLUMNS
from kdgrid.analysis.tidy import knowledge_label, normalise, table_name
from kdgrid.core.matching import STRATEGIES, get_strategy
from kdgrid.errors import ConfigError
from kdgrid.paper import (
    APPENDIX_DEV_SETS,
    DOUBLE_MATCH_PAIRS,
    PAPER_INITS,
    PAPER_KNOWLEDGE,
    PAPER_STRATEGIES,
    PAPER_STUDENTS,
    TABLE1_DEV_SETS,
    TABLE1_STUDENTS,
    TABLE2_DEV_SETS,
    TABLE7_AVERAGED,
    TABLE7_DEV_SETS,
    TABLES,
    DevSet,
    reported_metric,
)
from kdgrid.trial_labels import HARD_ONLY, SOFT_ONLY

BoldScope = Literal["block", "row", "column", "none"]


# --- the view ---------------------------------------------------------------------------------------------------


@dataclass
class Cell:
    """One number of a table: our value (mean over seeds), its std and seed count; the published value and the
    difference once compared. NaN means missing: shown as ``-``, never as zero.

    Uncertainty (filled by `kdgrid.analysis.cell_stats.attach_uncertainty`; docs/uncertainty.md has the conventions):
    ``ci_low``/``ci_high`` the 95% interval of the value (NaN when none), ``p_vs_reference`` the adjusted p of
    the paired test against the reference cell (NaN when none), ``significant`` whether that p is at most 0.05, ``direction`` the sign of (value - reference value) (+1 better, -1 worse, 0 equal or no
    reference), ``is_reference`` whether this cell is the reference of its condition. ``degenerate``: the
    reasons to distrust a number (majority class, constant predictions, ...) of any of its seeds. ``row_ids`` and
    ``seeds``: the store rows averaged here, in seed order; ``trial_ids`` their trials (in the same order, each
    once). ``teacher_agreement``: mean student-teacher agreement.
    ``paper_inside``: whether the published value lies in our interval (None unless compared with an interval).
    """

    value: float = math.nan
    std: float = math.nan
    n_seeds: int = 0
    paper: float = math.nan
    bold: bool = False
    ci_low: float = math.nan
    ci_high: float = math.nan
    p_vs_reference: float = math.nan
    significant: bool = False
    direction: int = 0
    is_reference: bool = False
    degenerate: tuple[str, ...] = ()
    row_ids: tuple[str, ...] = ()
    seeds: tuple[float, ...] = ()
    trial_ids: tuple[str, ...] = ()
    teacher_agreement: float = math.nan
    paper_inside: bool | None = None
    config: dict[str, Any] = field(default_factory=dict, repr=False)  # the tidy row's config columns
    selected_over: tuple[str, ...] = ()  # config fields this cell picked its best configuration over
    paper_low: float = (
        math.nan
    )  # where one more run of this cell would fall (>= 2 seeds), for --compare paper
    paper_high: float = math.nan
    test_method: str = ""  # which test gave p_vs_reference (`kdgrid.analysis.stats.TEST_METHODS`)
    p_raw: float = math.nan  # a sweep's table: the test's p before the correction (p_vs_reference is after)
    uncertainty: str = ""  # a sweep's table: `kdgrid.analysis.seed_level.SEED_LEVEL` or `RUN_TO_RUN`, "" untested
    pending: tuple[str, ...] = ()  # a report's sweep table: trials listed for this cell with no row yet (`PENDING_MARK`)

    @property
    def has_interval(self) -> bool:
        return not (math.isnan(self.ci_low) or math.isnan(self.ci_high))

    @property
    def missing(self) -> bool:
        return math.isnan(self.value)

    @property
    def diff(self) -> float:
        """Ours minus published (NaN unless both exist)."""
        return self.value - self.paper


@dataclass(frozen=True)
class Column:
    """A column: its label, the group it sits under (a student in Table 1, ``""`` for none), and whether it is a
    fact about the row (params, FLOPs, latency: never bolded, not part of the agreement summary)."""

    label: str
    group: str = ""
    fact: bool = False


@dataclass
class Agreement:
    """How far a block's reproduced numbers are from the published ones, over the cells where both exist."""

    n: int
    mean_abs_diff: float
    spearman: float
    with_interval: int = 0  # cells with both numbers and our interval
    inside: int = 0  # of those, cells whose published value lies inside our interval

    @property
    def share_inside(self) -> float:
        """The share of the cells with an interval whose published value lies inside it (NaN when none)."""
        return self.inside / self.with_interval if self.with_interval else math.nan


PENDING_MARK = "…"
"""What a cell whose trials are all pending shows (after its number where some are done): a report's sweep table
and its heat maps (`kdgrid.analysis.sweep_pending`)."""


@dataclass
class Block:
    title: str
    rows: list[str]
    columns: list[Column]
    cells: dict[tuple[str, Column], Cell] = field(default_factory=dict)
    agreement: Agreement | None = None

    def cell(self, row: str, column: Column) -> Cell:
        """The cell at (row, column); a missing cell if nothing was placed there."""
        return self.cells.get((row, column), Cell())

    def column(self, label: str, group: str = "") -> Column:
        for column in self.columns:
            if column.label == label and column.group == group:
                return column
        raise KeyError(f"block {self.title!r} has no column {label!r} (group {group!r})")


@dataclass
class TableView:
    """A table ready to render: its name (``"5"``), title, blocks, notes for the reader. ``axes``: the config
    fields a CSV export gives a column each (empty: `kdgrid.analysis.render.CSV_AXES`, the paper tables')."""

    name: str
    title: str
    blocks: list[Block]
    notes: list[str] = field(default_factory=list)
    side_by_side: bool = False
    compared: bool = False
    axes: tuple[str, ...] = ()
    correction: str = ""  # a sweep's table: its correction; the CSV then has raw and adjusted p in named columns

    def block(self, title: str) -> Block:
        for block in self.blocks:
            if block.title == title:
                return block
        raise KeyError(f"table {self.name} has no block {title!r}; blocks: {[b.title for b in self.blocks]}")

    def titles(self) -> list[str]:
        return [block.title for block in self.blocks]


# --- labels -----------------------------------------------------------------------------------------------------

TASK_LABELS = {
    "cola": "CoLA",
    "mrpc": "MRPC",
    "stsb": "STS-B",
    "rte": "RTE",
    "qqp": "QQP",
    "sst2": "SST-2",
    "qnli": "QNLI",
}
DEV_SUFFIX = {"validation_matched": "-m", "validation_mismatched": "-mm"}
INIT_LABELS = {
    "random": "Random",
    "preload": "Pre-load",
    "general_distillation": "General Distillation",
    "pretrain": "Pre-train",
}
TABLE2_BLOCKS = {"fixed_params": "#para ≈ 6.2M", "fixed_flops": "flops = 2G"}
# The paper's shapes of each Table 2 block; a store's row has no block label, its shape says which block.
TABLE2_SHAPES = {
    "fixed_params": ("w128-l12", "w144-l8", "w160-l4", "w168-l3", "w176-l2"),
    "fixed_flops": ("w132-l8", "w142-l7", "w154-l6", "w170-l5"),
}
OTHER_SHAPES = "other shapes"
PARAMS = Column("#para (M)", fact=True)
FLOPS = Column("flops (G)", fact=True)
LATENCY = Column("latency (ms)", fact=True)
AVERAGE = "average"


def task_label(task: str, dev_set: str = "validation") -> str:
    """``("mnli", "validation_matched")`` -> ``MNLI-m``; ``("sst2", "validation")`` -> ``SST-2``; unknown tasks
    keep their name (plus the dev set where it is not ``validation``)."""
    if task == "mnli":
        return "MNLI" + DEV_SUFFIX.get(dev_set, f" ({dev_set})")
    label = TASK_LABELS.get(task, task)
    return label if dev_set in ("validation", "") else f"{label} ({dev_set})"


def teacher_label(teacher: str) -> str:
    """A teacher's size class for the tables: any Hub name with ``large`` -> ``bert-large``, with ``base`` ->
    ``bert-base``; anything else (``minilm-l6``, a path's last part) as is."""
    lowered = teacher.lower()
    if "large" in lowered:
        return "bert-large"
    if "base" in lowered:
        return "bert-base"
    return teacher.rstrip("/").rsplit("/", 1)[-1]


def shape_label(student: str) -> str:
    """``w128-l12-h2-f512`` -> ``w128-l12`` (the width and depth Table 2 is about); other names unchanged."""
    match = re.fullmatch(r"(w\d+-l\d+)(?:-h\d+)?(?:-f\d+)?", student)
    return match.group(1) if match else student


def task_labels(dev_sets: Iterable[DevSet]) -> tuple[str, ...]:
    """The labels of dev sets in their order: ``[("mnli", "validation_matched")]`` -> ``("MNLI-m",)``."""
    return tuple(task_label(task, dev_set) for task, dev_set in dev_sets)


# The paper's orders (`kdgrid.paper`) as the tables label them.
APPENDIX_TASK_ORDER = task_labels(APPENDIX_DEV_SETS)
TABLE1_TASK_ORDER = task_labels(TABLE1_DEV_SETS)
TABLE2_TASK_ORDER = task_labels(TABLE2_DEV_SETS)
TABLE7_TASK_ORDER = task_labels(TABLE7_DEV_SETS)
TABLE7_AVERAGED_LABELS = task_labels(TABLE7_AVERAGED)


def number_label(value: float) -> str:
    """``0.1`` -> ``0.1``, ``1.0`` -> ``1``: a hyper-parameter value as a row or column label."""
    return "" if math.isnan(value) else format(value, "g")


def knowledge_row(knowledge: str) -> str:
    """A knowledge label as the paper prints it in Tables 5, 6, 8: pairs joined by a comma."""
    return knowledge.replace("+", ",")


# --- specs ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Place:
    """Where one tidy row goes: block title, row label, column."""

    block: str
    row: str
    column: Column


@dataclass(frozen=True)
class TableSpec:
    """How a table is laid out from tidy rows of its study.

    Attributes:
        name: ``"1"`` .. ``"8"``, ``"demo"``; tidy rows with this ``table`` are its rows.
        title: the caption.
        sweep: the sweep file(s) producing its trials (a glob under ``sweeps/``).
        place: where a tidy row goes; ``None`` leaves it out.
        bold: the scope over which the best value is bolded (``row`` means within a row's column group).
        block_order, row_order, column_order: the paper's order; anything else follows, sorted.
        facts: fact columns (params, FLOPs, latency) filled per (block, row) from the rows placed there.
        average: the score columns averaged into an ``average`` column (Table 7), where every one is present.
    """

    name: str
    title: str
    sweep: str
    place: Callable[[Any], Place | None]
    bold: BoldScope = "block"
    block_order: tuple[str, ...] = ()
    row_order: tuple[str, ...] = ()
    column_order: tuple[Column, ...] = ()
    facts: tuple[tuple[Column, str], ...] = ()
    average: tuple[str, ...] = ()
    side_by_side: bool = False


def _reported(row: Any) -> bool:
    return row.metric == reported_metric(row.task)


def _place_table1(row: Any) -> Place | None:
    if row.role != "student" or not _reported(row):
        return None
    init = INIT_LABELS.get(row.init, row.init)
    return Place("", task_label(row.task, row.dev_set), Column(init, group=row.student))


def _place_table2(row: Any) -> Place | None:
    if row.role != "student" or not _reported(row):
        return None
    shape = shape_label(row.student)
    block = row.block or next((b for b, shapes in TABLE2_SHAPES.items() if shape in shapes), OTHER_SHAPES)
    return Place(TABLE2_BLOCKS.get(block, block), shape, Column(task_label(row.task, row.dev_set)))


def _place_table3(row: Any) -> Place | None:
    if not _reported(row):
        return None
    group = "teacher" if row.role == "teacher" else row.student
    if row.role not in ("teacher", "student"):
        return None
    return Place("", task_label(row.task, row.dev_set), Column(teacher_label(row.teacher), group=group))


def _place_table4(row: Any) -> Place | None:
    if row.role != "student" or not _reported(row):
        return None
    return Place(
        task_label(row.task, row.dev_set), number_label(row.alpha), Column(number_label(row.temperature))
    )


EXTRA_STRATEGIES = "strategies beyond the paper"
"""Title suffix of a match table's extra block: under each (task, student) block of Tables 5, 6 and 8, the cells
whose strategy is not one of the paper's five (`kdgrid.paper.PAPER_STRATEGIES`): the negative controls
(``Reverse``, ``Random``; their columns say "(control)") and the other registered strategies (PKD-skip, MiniLM,
...). The paper's blocks hold only the paper's columns, so a control never reads as one of its strategies."""

CONTROL_SUFFIX = " (control)"


def strategy_column(strategy: str) -> Column:
    """The column of a strategy in a match table: its name, plus " (control)" for a negative control."""
    known = strategy in STRATEGIES and get_strategy(strategy).control
    return Column(strategy + CONTROL_SUFFIX if known else strategy)


def _place_match(row: Any) -> Place | None:
    if row.role != "student" or not _reported(row) or not row.knowledge:
        return None
    block = f"{task_label(row.task, row.dev_set)} · {row.student}"
    if row.strategy in PAPER_STRATEGIES:
        return Place(block, knowledge_row(row.knowledge), Column(row.strategy))
    return Place(f"{block} · {EXTRA_STRATEGIES}", knowledge_row(row.knowledge), strategy_column(row.strategy))


def _system_label(row: Any) -> str:
    if row.role == "teacher":
        return f"{teacher_label(row.teacher)} (teacher)"
    if row.role == "baseline":
        return f"{row.student} (previous SOTA)"
    return f"ours ({row.student})"


def _place_table7(row: Any) -> Place | None:
    if row.metric == AVERAGE:  # the paper's own printed average
        return Place("", _system_label(row), Column(AVERAGE))
    if not _reported(row):
        return None
    return Place("", _system_label(row), Column(task_label(row.task, row.dev_set)))


DEMO_BASELINES = "baselines"


def _place_demo(row: Any) -> Place | None:
    if row.role != "student" or not _reported(row):
        return None
    title = f"{task_label(row.task, row.dev_set)} · {row.student}"
    if not row.knowledge or row.knowledge in ("soft_label", "hard_label"):
        hard_only = row.knowledge == "hard_label" or (
            not math.isnan(row.soft_weight) and row.soft_weight == 0
        )
        return Place(f"{title} · {DEMO_BASELINES}", HARD_ONLY if hard_only else SOFT_ONLY, Column("score"))
    return Place(title, knowledge_row(row.knowledge), Column(row.strategy))


def _match_blocks(students: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"{task} · {student}" for task in APPENDIX_TASK_ORDER for student in students)


_STRATEGY_COLUMNS = tuple(Column(s) for s in PAPER_STRATEGIES)
TABLE6_ROW_ORDER = tuple(knowledge_row(knowledge_label(pair)) for pair in DOUBLE_MATCH_PAIRS)
"""Table 6's rows in the paper's order (`kdgrid.paper.DOUBLE_MATCH_PAIRS`), labelled as the tidy rows are."""

SPECS: dict[str, TableSpec] = {
    spec.name: spec
    for spec in (
        TableSpec(
            "1",
            "Table 1: initialization schemes (tasks x scheme, per student)",
            "table1_*.yaml",
            _place_table1,
            bold="row",
            row_order=TABLE1_TASK_ORDER,
            column_order=tuple(Column(INIT_LABELS[i], group=s) for s in TABLE1_STUDENTS for i in PAPER_INITS),
        ),
        TableSpec(
            "2",
            "Table 2: width vs depth at fixed size and fixed FLOPs",
            "table2_*.yaml",
            _place_table2,
            bold="column",
            block_order=tuple(TABLE2_BLOCKS.values()),
            row_order=tuple(s for shapes in TABLE2_SHAPES.values() for s in shapes),
            column_order=(PARAMS, FLOPS, LATENCY, *(Column(t) for t in TABLE2_TASK_ORDER)),
            facts=((PARAMS, "params_m"), (FLOPS, "flops_g"), (LATENCY, "latency_ms")),
        ),
        TableSpec(
            "3",
            "Table 3: teacher size x student size (teachers' own scores on the left)",
            "table3_*.yaml",
            _place_table3,
            bold="row",
            row_order=APPENDIX_TASK_ORDER,
            column_order=tuple(
                Column(t, group=g) for g in ("teacher", *PAPER_STUDENTS) for t in ("bert-base", "bert-large")
            ),
        ),
        TableSpec(
            "4",
            "Table 4: temperature (columns) x hard-label weight (rows), bert-mini",
            "table4_*.yaml",
            _place_table4,
            bold="block",
            block_order=APPENDIX_TASK_ORDER,
            row_order=("0.1", "0.2", "0.5", "1", "2", "5"),
            column_order=tuple(Column(t) for t in ("1", "2", "4", "8")),
        ),
        TableSpec(
            "5",
            "Table 5: single-match, knowledge x matching strategy (beta = 1)",
            "table5_*.yaml",
            _place_match,
            block_order=_match_blocks(PAPER_STUDENTS),
            row_order=PAPER_KNOWLEDGE,
            column_order=_STRATEGY_COLUMNS,
        ),
        TableSpec(
            "6",
            "Table 6: double-match, knowledge pair x matching strategy",
            "table6_*.yaml",
            _place_match,
            block_order=_match_blocks(PAPER_STUDENTS),
            row_order=TABLE6_ROW_ORDER,
            column_order=_STRATEGY_COLUMNS,
        ),
        TableSpec(
            "7",
            "Table 7: best practice for bert-mini vs baselines",
            "table7_*.yaml",
            _place_table7,
            bold="column",
            row_order=("bert-base (teacher)", "electra-small (previous SOTA)", "ours (bert-mini)"),
            column_order=(PARAMS, *(Column(t) for t in TABLE7_TASK_ORDER), Column(AVERAGE)),
            facts=((PARAMS, "params_m"),),
            average=TABLE7_AVERAGED_LABELS,
        ),
        TableSpec(
            "8",
            "Table 8: weighted single-match (knowledge weight calibrated to ~1/10 of the soft loss)",
            "table8_*.yaml",
            _place_match,
            block_order=_match_blocks(PAPER_STUDENTS),
            row_order=PAPER_KNOWLEDGE,
            column_order=_STRATEGY_COLUMNS,
        ),
        TableSpec(
            "demo",
            "Demo: knowledge x matching strategy, bert-tiny on polarity (MiniLM teacher)",
            "demo.yaml",
            _place_demo,
            row_order=(*PAPER_KNOWLEDGE, SOFT_ONLY, HARD_ONLY),
            column_order=_STRATEGY_COLUMNS,
            side_by_side=True,
        ),
    )
}
TABLE_CHOICES: tuple[str, ...] = TABLES  # the paper's (`PAPER_TABLES`) and the demo's


def get_spec(name: str) -> TableSpec:
    """The spec of table ``name`` (``1``-``8``, ``table5``, ``demo``); ConfigError naming the choices."""
    key = str(name).strip().lower().removeprefix("table").strip()
    if key not in SPECS:
        raise ConfigError(f"unknown table {name!r}; allowed: {', '.join(TABLE_CHOICES)}, all")
    return SPECS[key]


# --- building ---------------------------------------------------------------------------------------------------


def ordered(found: Iterable[Any], order: Iterable[Any], key: Callable[[Any], Any] = str) -> list[Any]:
    """``order``'s members that were found, in that order, then the rest sorted."""
    found = list(dict.fromkeys(found))
    known = [item for item in order if item in found]
    rest = sorted((item for item in found if item not in known), key=key)
    return known + rest


def _column_key(column: Column) -> tuple[str, str]:
    return (column.group, column.label)


def build_view(spec: TableSpec, tidy: pd.DataFrame) -> TableView:
    """Lay out the rows of ``tidy`` whose ``table`` is ``spec.name`` (aggregated over seeds, as
    `kdgrid.analysis.tidy.store_to_tidy` returns them, or the paper's rows).

    Where several configurations land in one cell (e.g. a study run at two temperatures), the best mean is shown
    and a note says so: a table cell is one number, as in the paper."""
    if tidy.empty:
        rows = normalise(tidy)
    else:
        # Select first, normalise only this table's rows (a store's tidy frame holds every table).
        names = {value: table_name(value) for value in tidy["table"].unique()}
        rows = normalise(tidy[tidy["table"].map(names) == spec.name])
    notes: list[str] = []
    cells: dict[tuple[str, str, Column], Cell] = {}
    facts: dict[tuple[str, str], dict[Column, float]] = {}
    collisions = 0
    for row in rows.itertuples(index=False):
        place = spec.place(row)
        if place is None or math.isnan(row.value):
            continue
        key = (place.block, place.row, place.column)
        std = getattr(row, "std", math.nan)
        n_seeds = getattr(row, "n_seeds", 1)
        cell = Cell(
            value=row.value,
            std=std,
            n_seeds=int(n_seeds) if not pd.isna(n_seeds) else 1,
            degenerate=tuple(getattr(row, "degenerate", ()) or ()),
            row_ids=tuple(r for r in (getattr(row, "row_ids", ()) or ()) if r),
            seeds=tuple(getattr(row, "seeds", ()) or ()),
            trial_ids=tuple(t for t in (getattr(row, "trial_ids", ()) or ()) if t),
            teacher_agreement=float(getattr(row, "teacher_agreement", math.nan)),
            config={column: getattr(row, column) for column in CONFIG_COLUMNS},
        )
        if key in cells:
            collisions += 1
            previous = cells[key]
            over = {c for c in CONFIG_COLUMNS if _differs(previous.config.get(c), cell.config.get(c))}
            over |= set(previous.selected_over)
            winner = previous if previous.value >= cell.value else cell
            winner.selected_over = tuple(sorted(over))
            if winner is previous:
                continue
        cells[key] = cell
        for column, attribute in spec.facts:
            value = getattr(row, attribute, math.nan)
            if not pd.isna(value):
                facts.setdefault((place.block, place.row), {}).setdefault(column, float(value))
    if collisions:
        notes.append(
            f"{collisions} cell(s) had more than one configuration in the store; each shows the best mean "
            "(fields: "
            + ", ".join(sorted({f for c in cells.values() for f in c.selected_over}))
            + "; keep one with --where FIELD=VALUE)."
        )
    for (block, row_label), values in facts.items():
        for column, value in values.items():
            cells[(block, row_label, column)] = Cell(value=value, n_seeds=1)
    view = _assemble(spec, cells)
    view.notes.extend(notes)
    if spec.average:
        _fill_average(view, spec.average)
        view.notes.append(f"average: the mean of {', '.join(spec.average)} (as the paper's printed averages)")
    mark_best(view, spec.bold)
    return view


def _differs(a: Any, b: Any) -> bool:
    """Two config values differ (NaN equals NaN: a field neither configuration sets)."""
    missing_a, missing_b = (v is None or (isinstance(v, float) and math.isnan(v)) for v in (a, b))
    if missing_a or missing_b:
        return missing_a != missing_b
    return str(a) != str(b)


def _assemble(spec: TableSpec, cells: dict[tuple[str, str, Column], Cell]) -> TableView:
    block_titles = ordered((k[0] for k in cells), spec.block_order)
    blocks = []
    for title in block_titles:
        members = {(r, c): cell for (b, r, c), cell in cells.items() if b == title}
        row_labels = ordered((r for r, _ in members), spec.row_order)
        found_columns = [c for _, c in members]
        columns = ordered(found_columns, spec.column_order, key=_column_key)
        # Keep the paper's full column set, so every block of a table lines up (missing cells show "-").
        if spec.column_order and not title.endswith((DEMO_BASELINES, EXTRA_STRATEGIES)):
            columns = ordered([*spec.column_order, *found_columns], spec.column_order, key=_column_key)
        blocks.append(Block(title, row_labels, columns, members))
    return TableView(spec.name, spec.title, blocks, side_by_side=spec.side_by_side)


def _fill_average(view: TableView, labels: tuple[str, ...]) -> None:
    """The mean of each row's columns ``labels``, only where none is missing; a published average already placed
    there (the paper's own) is kept."""
    for block in view.blocks:
        average = next((c for c in block.columns if c.label == AVERAGE), None)
        if average is None:
            continue
        averaged = [c for c in block.columns if c.label in labels and not c.fact]
        for row in block.rows:
            if not block.cell(row, average).missing:
                continue
            values = [block.cell(row, c).value for c in averaged]
            if len(values) == len(labels) and not any(math.isnan(v) for v in values):
                block.cells[(row, average)] = Cell(value=sum(values) / len(values), n_seeds=1)


def mark_best(view: TableView, scope: BoldScope) -> None:
    """Bold the highest value of each scope (every metric here is higher-is-better); ties are all bold."""
    if scope == "none":
        return
    for block in view.blocks:
        groups: dict[Any, list[Cell]] = {}
        for (row, column), cell in block.cells.items():
            if column.fact or cell.missing or column.label == AVERAGE:
                continue
            key = {"block": (), "row": (row, column.group), "column": (column,)}[scope]
            groups.setdefault(key, []).append(cell)
        for members in groups.values():
            best = max(c.value for c in members)
            for cell in members:
                cell.bold = cell.value == best


def tables_in(tidy: pd.DataFrame) -> list[str]:
    """The tables (of `TABLE_CHOICES`) that ``tidy`` holds rows of, in order."""
    present = {table_name(value) for value in tidy["table"].unique()} if not tidy.empty else set()
    return [name for name in TABLE_CHOICES if name in present]
