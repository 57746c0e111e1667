"""The figures: matplotlib (Agg backend), each written as PNG (200 dpi) and PDF, sized for a two-column paper
(6.75 in wide, 7-8 pt text).

    heat maps of knowledge x strategy: one figure per table (5, 6, 8, demo) and dev set, one panel per student
        (one above the other, each the page's width);
    temperature x hard-label weight: one figure for Table 4, one panel per dev set, two a row;
    score against parameters and against FLOPs: one figure for Table 2 (width-depth), one line per dev set;
    reproduced against published: one scatter of every cell with both numbers, one colour per table, y = x.

Figures are drawn from the same `TableView`s as the tables, so a figure shows exactly the table's numbers
(missing cells blank, never 0); `write_store_figures` and the report lay them out with their intervals and tests.
The heat maps are drawn by `kdgrid.analysis.heat_map` (as any sweep's are): a diverging scale centred on the
block's reference where the table holds one (the demo's soft-labels-only baseline), else the values on a
sequential scale; a labelled colour bar, axis titles, the table's marks and intervals where its cells carry them.
A cell with a degenerate run (`kdgrid.analysis.tidy`'s ``degenerate``) is hatched and carries the tables' mark
``†`` in a heat map (with the reasons under the figure) and a red cross in the scatter.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: figures are files (before pyplot is imported anywhere)

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from kdgrid.analysis.cell_stats import DEFAULT_REFERENCE_LABEL
from kdgrid.analysis.compare import compare_with_paper
from kdgrid.analysis.heat_map import HeatMap, block_reference, draw_heat_map
from kdgrid.analysis.render import DEGENERATE_MARK
from kdgrid.analysis.tables import Block, Cell, TableView, build_view, get_spec, tables_in
from kdgrid.analysis.tables_report import UncertaintyOptions, build_report, load_tidy
from kdgrid.errors import KdgridError

PAGE_WIDTH_IN = 6.75
STYLE = {
    "font.size": 7,
    "axes.titlesize": 8,
    "axes.labelsize": 7,
    "xtick.labelsize": 6,
    "ytick.labelsize": 6,
    "legend.fontsize": 6,
    "pdf.fonttype": 42,  # embed TrueType: text stays text in the PDF
}
HEATMAP_TABLES = ("5", "6", "8", "demo")
PANEL_FONT_PT = 7.0  # a heat-map cell's number (its interval 1.5 pt smaller): legible in print at full width


def slug(text: str) -> str:
    """A file-name-safe version of a label: ``"MNLI-m · bert-tiny"`` -> ``mnli-m_bert-tiny``."""
    return re.sub(r"[^a-z0-9.\-]+", "_", text.lower()).strip("_")


def save(figure: Figure, out_dir: Path, stem: str) -> list[Path]:
    """Write ``figure`` as ``stem.png`` and ``stem.pdf`` under ``out_dir``; close it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for suffix in ("png", "pdf"):
        path = out_dir / f"{stem}.{suffix}"
        figure.savefig(path, dpi=200, bbox_inches="tight")
        paths.append(path)
    plt.close(figure)
    return paths


def block_matrix(block: Block) -> tuple[np.ndarray, list[str], list[str]]:
    """The block's score cells as a rows x columns array (NaN where missing); fact columns left out."""
    columns = [c for c in block.columns if not c.fact]
    matrix = np.array([[block.cell(r, c).value for c in columns] for r in block.rows], dtype=float)
    return matrix.reshape(len(block.rows), len(columns)), list(block.rows), [c.label for c in columns]


def block_metric(block: Block) -> str:
    """The metric(s) of the block's score cells, as the colour bar names them (``accuracy``, ``mcc``)."""
    metrics = {str(c.config["metric"]) for c in block.cells.values() if c.config.get("metric")}
    return ", ".join(sorted(metrics)) or "score"


def draw_heatmap(
    axis,
    block: Block,
    title: str,
    *,
    cells: Iterable[Cell] = (),
    row_title: str = "",
    column_title: str = "",
) -> HeatMap:
    """One block of a paper table as a heat map (`kdgrid.analysis.heat_map.draw_heat_map`, the sweep tables'
    drawing): centred on the block's reference where the view holds one (``cells``: the view's cells; the
    soft-labels-only cell of the block's condition, e.g. the demo's baselines), else the values on a sequential
    scale; the table's marks and intervals where its cells carry them."""
    reference = block_reference(block, cells)
    return draw_heat_map(
        axis,
        block,
        metric=block_metric(block),
        row_title=row_title,
        column_title=column_title,
        title=title,
        reference=reference,
        reference_label=DEFAULT_REFERENCE_LABEL if reference is not None else "",
        font_pt=PANEL_FONT_PT,
    )


def view_cells(view: TableView) -> list[Cell]:
    """Every cell of ``view`` (where a block's reference is looked for)."""
    return [cell for block in view.blocks for cell in block.cells.values()]


def caption_lines(drawn: list[HeatMap], blocks: list[Block]) -> list[str]:
    """The lines under a figure: what the drawn heat maps' marks and hatching mean (once), then what ``†`` means
    when any cell of ``blocks`` is degenerate."""
    lines = []
    notes = list(dict.fromkeys(note for heat_map in drawn for note in heat_map.notes))
    if notes:
        lines.append("; ".join(notes))
    reasons = sorted({r for b in blocks for c in b.cells.values() if not c.missing for r in c.degenerate})
    if reasons:
        lines.append(f"{DEGENERATE_MARK} degenerate run: {'; '.join(reasons)}")
    return lines


def captions(figure: Figure, drawn: list[HeatMap], blocks: list[Block]) -> None:
    """`caption_lines` under the figure as one text block, one line under the other (never drawn on top of each
    other); the figure is saved with a tight bounding box, so the block below the axes is kept."""
    lines = caption_lines(drawn, blocks)
    if lines:
        figure.text(0.0, -0.005, "\n".join(lines), fontsize=PANEL_FONT_PT - 1, va="top", linespacing=1.4)


def _split_title(title: str) -> tuple[str, str]:
    """``"MRPC · bert-small"`` -> (``MRPC``, ``bert-small``); the demo's baselines keep their suffix."""
    task, _, rest = title.partition(" · ")
    return task, rest


ROW_TITLES = {"6": "knowledge pair"}  # the match tables' rows; the others: "knowledge"


def heatmap_figures(view: TableView, out_dir: Path) -> list[Path]:
    """Knowledge x strategy heat maps of a match table: one figure per dev set, one panel per student, one above
    the other (each panel the page's width, so its numbers and intervals stay legible)."""
    by_task: dict[str, list[Block]] = {}
    for block in view.blocks:
        if block.title.endswith("baselines"):
            continue
        by_task.setdefault(_split_title(block.title)[0], []).append(block)
    cells = view_cells(view)
    written = []
    with plt.rc_context(STYLE):
        for task, blocks in by_task.items():
            heights = [max(2.0, 0.3 * len(b.rows) + 0.9) for b in blocks]  # room for the colour bar's label
            figure, axes = plt.subplots(
                len(blocks),
                1,
                figsize=(PAGE_WIDTH_IN, sum(heights)),
                squeeze=False,
                gridspec_kw={"height_ratios": heights},
            )
            drawn = [
                draw_heatmap(
                    axis,
                    block,
                    _split_title(block.title)[1] or block.title,
                    cells=cells,
                    row_title=ROW_TITLES.get(view.name, "knowledge"),
                    column_title="matching strategy",
                )
                for axis, block in zip(axes[:, 0], blocks, strict=True)
            ]
            figure.suptitle(f"{view.title.split(':')[0]}: {task}", fontsize=8)
            figure.tight_layout()
            captions(figure, drawn, blocks)
            written += save(figure, out_dir, f"table{view.name}_{slug(task)}_knowledge_x_strategy")
    return written


def temperature_figure(view: TableView, out_dir: Path) -> list[Path]:
    """Table 4: temperature (x) x hard-label weight (y) heat maps, one panel per dev set, two panels a row."""
    blocks = view.blocks
    ncols = min(2, len(blocks))
    nrows = math.ceil(len(blocks) / ncols)
    cells = view_cells(view)
    with plt.rc_context(STYLE):
        height = max(2.0, 0.3 * max(len(b.rows) for b in blocks) + 1.0)
        figure, axes = plt.subplots(
            nrows, ncols, figsize=(PAGE_WIDTH_IN, height * nrows + 0.3), squeeze=False
        )
        drawn = [
            draw_heatmap(
                axis,
                block,
                block.title,
                cells=cells,
                row_title="hard-label weight",
                column_title="temperature",
            )
            for axis, block in zip(axes.flat, blocks, strict=False)
        ]
        for axis in list(axes.flat)[len(blocks) :]:
            axis.axis("off")
        figure.tight_layout()
        captions(figure, drawn, blocks)
        return save(figure, out_dir, "table4_temperature_x_hard_label_weight")


def _varying(frame: pd.DataFrame) -> tuple[str, str]:
    """The size measure that varies in a block (a fixed-parameter block varies FLOPs and vice versa): the one
    with the larger relative spread; (column, axis label)."""
    spreads = {}
    for column in ("params_m", "flops_g"):
        values = frame[column].dropna()
        spreads[column] = values.std() / values.mean() if len(values) > 1 and values.mean() else 0.0
    column = max(spreads, key=lambda c: spreads[c])
    return column, {"params_m": "parameters (M)", "flops_g": "FLOPs (G)"}[column]


def size_figure(view: TableView, out_dir: Path) -> list[Path]:
    """Table 2: one panel per block (fixed parameters, fixed FLOPs); each dev set's score against the size measure
    that varies in that block (FLOPs at fixed parameters, parameters at fixed FLOPs); points labelled by depth."""
    points = []
    for block in view.blocks:
        facts = {c.label: c for c in block.columns if c.fact}
        for row in block.rows:
            params = block.cell(row, facts["#para (M)"]).value if "#para (M)" in facts else math.nan
            flops = block.cell(row, facts["flops (G)"]).value if "flops (G)" in facts else math.nan
            for column in block.columns:
                value = block.cell(row, column).value
                if not column.fact and not math.isnan(value):
                    points.append((block.title, row, column.label, params, flops, value))
    frame = pd.DataFrame(points, columns=["block", "shape", "task", "params_m", "flops_g", "value"])
    if frame.empty or frame[["params_m", "flops_g"]].isna().all().all():
        return []
    blocks = list(frame["block"].unique())
    tasks = list(frame["task"].unique())
    colours = dict(zip(tasks, plt.get_cmap("tab10").colors, strict=False))
    with plt.rc_context(STYLE):
        figure, axes = plt.subplots(1, len(blocks), figsize=(PAGE_WIDTH_IN, 2.6), sharey=True, squeeze=False)
        for axis, block in zip(axes[0], blocks, strict=True):
            members = frame[frame["block"] == block]
            x, label = _varying(members)
            for task, group in members.groupby("task", sort=False):
                group = group.dropna(subset=[x]).sort_values(x)
                axis.plot(
                    group[x],
                    group["value"],
                    marker="o",
                    markersize=3,
                    linewidth=0.8,
                    color=colours[task],
                    label=task,
                )
            shapes = members.dropna(subset=[x]).groupby("shape")[x].first()
            for shape, position in shapes.items():
                axis.annotate(
                    shape,
                    (position, axis.get_ylim()[0]),
                    fontsize=5,
                    rotation=90,
                    ha="center",
                    va="bottom",
                    color="grey",
                )
            axis.set_xlabel(label)
            axis.set_title(block)
            axis.grid(alpha=0.3)
        axes[0][0].set_ylabel("score")
        handles, labels = axes[0][0].get_legend_handles_labels()
        figure.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
        figure.tight_layout()
        return save(figure, out_dir, "table2_score_vs_size")


def paper_scatter(views: list[TableView], out_dir: Path) -> list[Path]:
    """Every cell with a reproduced and a published score, reproduced (y) against published (x), one colour per
    table, with the y = x line. ``views`` must be compared views (`kdgrid.analysis.compare.attach_paper`)."""
    points = [
        (view.name, cell.paper, cell.value, bool(cell.degenerate))
        for view in views
        for block in view.blocks
        for (_, column), cell in block.cells.items()
        if not column.fact and not math.isnan(cell.value) and not math.isnan(cell.paper)
    ]
    if not points:
        return []
    frame = pd.DataFrame(points, columns=["table", "paper", "ours", "degenerate"])
    with plt.rc_context(STYLE):
        figure, axis = plt.subplots(figsize=(3.25, 3.25))
        for table, group in frame.groupby("table", sort=False):
            axis.scatter(group["paper"], group["ours"], s=6, alpha=0.7, label=f"Table {table} ({len(group)})")
        degenerate = frame[frame["degenerate"]]
        if not degenerate.empty:
            axis.scatter(
                degenerate["paper"],
                degenerate["ours"],
                s=14,
                marker="x",
                color="red",
                linewidth=0.6,
                label=f"degenerate run ({len(degenerate)})",
            )
        low = min(frame["paper"].min(), frame["ours"].min())
        high = max(frame["paper"].max(), frame["ours"].max())
        axis.plot([low, high], [low, high], color="black", linewidth=0.8, label="y = x")
        axis.set_xlabel("published")
        axis.set_ylabel("reproduced")
        axis.set_aspect("equal", adjustable="datalim")
        axis.grid(alpha=0.3)
        axis.legend(frameon=False)
        figure.tight_layout()
        return save(figure, out_dir, "reproduced_vs_published")


FIGURES: dict[str, Callable[[TableView, Path], list[Path]]] = {
    "2": size_figure,
    "4": temperature_figure,
    **{name: heatmap_figures for name in HEATMAP_TABLES},
}


def with_cells_of(view: TableView, laid_out: TableView) -> TableView:
    """``view``'s blocks, rows and columns (the store's cells only) with the cells of ``laid_out`` where it has
    them at the same place: their intervals and marks, without the rows and blocks a comparison with the paper
    adds (published numbers with nothing of ours beside them draw as empty panels)."""
    blocks = []
    for block in view.blocks:
        source = next((b for b in laid_out.blocks if b.title == block.title), None)
        cells = (
            dict(block.cells)
            if source is None
            else {key: source.cells.get(key, c) for key, c in block.cells.items()}
        )
        blocks.append(dataclasses.replace(block, cells=cells))
    return dataclasses.replace(view, blocks=blocks)


def write_figures(
    tidy: pd.DataFrame,
    out_dir: Path,
    *,
    paper: pd.DataFrame | None = None,
    views: Iterable[TableView] = (),
) -> list[Path]:
    """Every figure the tidy numbers allow, under ``out_dir``; returns the files written (PNG and PDF).

    ``paper``: the published numbers to scatter against (default: `kdgrid.analysis.paper_numbers`). ``views``:
    tables already laid out with their intervals and tests (`kdgrid.analysis.tables_report.build_report`, compared
    with the paper or not): their cells are drawn in the plain layout of the same table (`with_cells_of`), so the
    heat maps carry their marks and intervals."""
    out_dir = Path(out_dir)
    written: list[Path] = []
    compared = []
    laid_out = {view.name: view for view in views}
    for name in tables_in(tidy):
        view = build_view(get_spec(name), tidy)
        if name in FIGURES:
            written += FIGURES[name](
                with_cells_of(view, laid_out[name]) if name in laid_out else view, out_dir
            )
        if name != "demo":
            compared.append(
                compare_with_paper(view, None if paper is None else paper[paper["table"] == name])
            )
    written += paper_scatter(compared, out_dir)
    return written


def write_store_figures(store_dir: Path, out_dir: Path, *, kind: str = "best") -> list[Path]:
    """Every figure of the store at ``store_dir`` (what `kdgrid figures` and the demo write), from the tables as
    `kdgrid tables` lays them out (intervals and tests where the rows carry predictions)."""
    tidy = load_tidy(Path(store_dir), kind)
    try:
        views = build_report(tidy, "all", Path(store_dir), uncertainty=UncertaintyOptions(kind=kind)).views
    except KdgridError:  # no paper table at all: the figures say so (none written)
        views = []
    return write_figures(tidy, Path(out_dir), views=views)
