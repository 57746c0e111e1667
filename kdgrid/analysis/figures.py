"""The figures: matplotlib (Agg backend), each written as PNG (200 dpi) and PDF, sized for a two-column paper
(6.75 in wide, 7-8 pt text).

    heat maps of knowledge x strategy: one figure per table (5, 6, 8, demo) and dev set, one panel per student;
    temperature x hard-label weight: one figure for Table 4, one panel per dev set;
    score against parameters and against FLOPs: one figure for Table 2 (width-depth), one line per dev set;
    reproduced against published: one scatter of every cell with both numbers, one colour per table, y = x.

Figures are drawn from the same `TableView`s as the tables, so a figure shows exactly the table's numbers
(missing cells blank, never 0). A cell with a degenerate run (`kdgrid.analysis.tidy`'s ``degenerate``) carries the
tables' mark ``†`` in a heat map (with the reasons under the figure) and a red cross in the scatter.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: figures are files (before pyplot is imported anywhere)

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from kdgrid.analysis.compare import compare_with_paper
from kdgrid.analysis.render import DEGENERATE_MARK
from kdgrid.analysis.tables import Block, TableView, build_view, get_spec, tables_in
from kdgrid.analysis.tables_report import load_tidy

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


def draw_heatmap(axis, block: Block, title: str, *, annotate: bool = True) -> None:
    """One block as a heat map: colour = score (per-panel scale), the value written in each cell, missing
    cells blank and marked ``-``."""
    matrix, rows, columns = block_matrix(block)
    score_columns = [c for c in block.columns if not c.fact]
    degenerate = np.array([[bool(block.cell(r, c).degenerate) for c in score_columns] for r in block.rows])
    masked = np.ma.masked_invalid(matrix)
    cmap = plt.get_cmap("viridis").with_extremes(bad="#eeeeee")
    image = axis.imshow(masked, cmap=cmap, aspect="auto")
    axis.set_xticks(range(len(columns)), columns, rotation=45, ha="right")
    axis.set_yticks(range(len(rows)), rows)
    axis.set_title(title)
    if annotate and matrix.size <= 400:
        finite = matrix[np.isfinite(matrix)]
        middle = (finite.min() + finite.max()) / 2 if finite.size else 0.0
        for i in range(matrix.shape[0]):
            for j in range(matrix.shape[1]):
                value = matrix[i, j]
                text = "-" if math.isnan(value) else f"{value:.3f}"
                if degenerate.size and degenerate[i, j] and not math.isnan(value):
                    text += DEGENERATE_MARK
                colour = "black" if math.isnan(value) or value > middle else "white"
                axis.text(j, i, text, ha="center", va="center", fontsize=5, color=colour)
    axis.figure.colorbar(image, ax=axis, fraction=0.046, pad=0.02)


def degenerate_caption(figure: Figure, blocks: list[Block]) -> None:
    """Say under the figure what ``†`` means, when any cell of ``blocks`` is degenerate."""
    reasons = sorted({r for b in blocks for c in b.cells.values() if not c.missing for r in c.degenerate})
    if reasons:
        figure.text(
            0.0, -0.02, f"{DEGENERATE_MARK} degenerate run: {'; '.join(reasons)}", fontsize=5, va="top"
        )


def _split_title(title: str) -> tuple[str, str]:
    """``"MRPC · bert-small"`` -> (``MRPC``, ``bert-small``); the demo's baselines keep their suffix."""
    task, _, rest = title.partition(" · ")
    return task, rest


def heatmap_figures(view: TableView, out_dir: Path) -> list[Path]:
    """Knowledge x strategy heat maps of a match table: one figure per dev set, one panel per student."""
    by_task: dict[str, list[Block]] = {}
    for block in view.blocks:
        if block.title.endswith("baselines"):
            continue
        by_task.setdefault(_split_title(block.title)[0], []).append(block)
    written = []
    with plt.rc_context(STYLE):
        for task, blocks in by_task.items():
            height = max(2.2, 0.18 * max(len(b.rows) for b in blocks) + 1.2)
            figure, axes = plt.subplots(1, len(blocks), figsize=(PAGE_WIDTH_IN, height), squeeze=False)
            for axis, block in zip(axes[0], blocks, strict=True):
                draw_heatmap(axis, block, _split_title(block.title)[1] or block.title)
                if axis is not axes[0][0]:
                    axis.set_yticklabels([])
            figure.suptitle(f"{view.title.split(':')[0]}: {task}", fontsize=8)
            figure.tight_layout()
            degenerate_caption(figure, blocks)
            written += save(figure, out_dir, f"table{view.name}_{slug(task)}_knowledge_x_strategy")
    return written


def temperature_figure(view: TableView, out_dir: Path) -> list[Path]:
    """Table 4: temperature (x) x hard-label weight (y) heat maps, one panel per dev set."""
    blocks = view.blocks
    ncols = min(3, len(blocks))
    nrows = math.ceil(len(blocks) / ncols)
    with plt.rc_context(STYLE):
        figure, axes = plt.subplots(nrows, ncols, figsize=(PAGE_WIDTH_IN, 1.9 * nrows + 0.4), squeeze=False)
        for axis, block in zip(axes.flat, blocks, strict=False):
            draw_heatmap(axis, block, block.title)
            axis.set_xlabel("temperature")
            axis.set_ylabel("hard-label weight")
        for axis in list(axes.flat)[len(blocks) :]:
            axis.axis("off")
        figure.tight_layout()
        degenerate_caption(figure, blocks)
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


def write_figures(tidy: pd.DataFrame, out_dir: Path, *, paper: pd.DataFrame | None = None) -> list[Path]:
    """Every figure the tidy numbers allow, under ``out_dir``; returns the files written (PNG and PDF).

    ``paper``: the published numbers to scatter against (default: `kdgrid.analysis.paper_numbers`)."""
    out_dir = Path(out_dir)
    written: list[Path] = []
    compared = []
    for name in tables_in(tidy):
        view = build_view(get_spec(name), tidy)
        if name in FIGURES:
            written += FIGURES[name](view, out_dir)
        if name != "demo":
            compared.append(
                compare_with_paper(view, None if paper is None else paper[paper["table"] == name])
            )
    written += paper_scatter(compared, out_dir)
    return written


def write_store_figures(store_dir: Path, out_dir: Path, *, kind: str = "best") -> list[Path]:
    """Every figure of the store at ``store_dir`` (what `kdgrid figures` and the demo write)."""
    return write_figures(load_tidy(Path(store_dir), kind), Path(out_dir))
