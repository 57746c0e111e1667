"""Figures of any sweep's table (`kdgrid figures --sweep NAME --out DIR`), drawn as researchers read them: a
forest plot per block of each cell's difference from its reference with the 95% interval of that difference,
sorted; and a heat map per block of its rows x columns, coloured by that difference.

Conventions: the difference is the cell's mean minus its reference's (the metric's units), its 95% interval from
the same procedure as the table's test (`kdgrid.analysis.seed_level`: over seeds, or run to run with one seed; the
axis label says which), so an interval excludes 0 exactly when the raw test is below 0.05; green/red:
better/worse than the reference beyond noise after the table's correction, grey: not; a hollow
marker and ``†`` in the label: a degenerate run among the cell's seeds. Files are PNG (200 dpi) and PDF, written
to the folder asked for (never into the store).

Heat maps: the row axes down, the column axis across, drawn by `kdgrid.analysis.heat_map` (the paper's tables'
heat maps are drawn by the same function): colour = the cell minus its block's reference cell on a diverging
scale centred there, labelled in the colour bar; the table's marks, intervals, hatched degenerate cells.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: figures are files

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from kdgrid.analysis.heat_map import block_reference, draw_heat_map
from kdgrid.analysis.render import DEGENERATE_MARK
from kdgrid.analysis.sweep_tables import Difference, SweepTable
from kdgrid.analysis.tables import Block

BETTER, WORSE, SAME = "#1a9850", "#d73027", "#7f7f7f"


def figure_slug(text: str) -> str:
    """A file-name part of ``text`` (a sweep's or a block's name): ``lad_vs_last1`` -> ``lad-vs-last1``."""
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "block"


def forest_plots(table: SweepTable, out_dir: Path) -> list[Path]:
    """One forest plot per block that has tested cells, as PNG and PDF in ``out_dir``; returns the files."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    metric = _metric(table)
    blocks: dict[str, list[Difference]] = {}
    for difference in table.differences:
        blocks.setdefault(difference.block, []).append(difference)
    written = []
    for index, (block, differences) in enumerate(blocks.items()):
        ordered = sorted(differences, key=lambda d: d.difference)
        figure, axes = plt.subplots(figsize=(6.5, 0.9 + 0.32 * len(ordered)))
        for y, d in enumerate(ordered):
            colour = SAME if not d.significant else (BETTER if d.direction > 0 else WORSE)
            axes.errorbar(
                d.difference,
                y,
                xerr=[[d.difference - d.low], [d.high - d.difference]],
                fmt="o",
                color=colour,
                markerfacecolor="white" if d.degenerate else colour,
                capsize=3,
            )
        axes.axvline(0.0, color="black", linewidth=0.8)
        axes.set_yticks(range(len(ordered)))
        axes.set_yticklabels([d.label + (f" {DEGENERATE_MARK}" if d.degenerate else "") for d in ordered])
        levels = sorted({d.level for d in ordered})
        axes.set_xlabel(
            f"{metric}: difference from the reference ({table.reference.label})\n"
            f"95% interval: {', '.join(levels)}; colour: corrected test"
        )
        axes.set_title(f"{table.view.name}: {block}", loc="left", fontsize=10)
        axes.grid(axis="x", alpha=0.3)
        figure.tight_layout()
        stem = out_dir / f"{figure_slug(table.view.name)}_forest_{index + 1}_{figure_slug(block)}"
        for suffix in (".png", ".pdf"):
            figure.savefig(stem.with_suffix(suffix), dpi=200)
            written.append(stem.with_suffix(suffix))
        plt.close(figure)
    return written


def _metric(table: SweepTable) -> str:
    return ", ".join(
        sorted({str(c.config.get("metric")) for b in table.view.blocks for c in b.cells.values() if c.config})
    )


def heat_maps(table: SweepTable, out_dir: Path) -> list[Path]:
    """One heat map per block of the table's rows x columns (a layout with a column axis), as PNG and PDF in
    ``out_dir``; returns the files."""
    if not table.layout.cols:
        return []
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    metric = _metric(table)
    written = []
    for index, block in enumerate(table.view.blocks[: table.main_blocks]):
        if not block.rows or not block.columns:
            continue
        figure = heat_map_figure(table, block, metric)
        stem = out_dir / f"{figure_slug(table.view.name)}_heatmap_{index + 1}_{figure_slug(block.title)}"
        for suffix in (".png", ".pdf"):
            figure.savefig(stem.with_suffix(suffix), dpi=200, bbox_inches="tight")
            written.append(stem.with_suffix(suffix))
        plt.close(figure)
    return written


def heat_map_figure(table: SweepTable, block: Block, metric: str) -> Figure:
    """The heat map of one of ``table``'s blocks (`kdgrid.analysis.heat_map.draw_heat_map`, centred on the
    block's reference cell); the caller saves and closes it."""
    rows, columns = len(block.rows), len(block.columns)
    figure, axes = plt.subplots(figsize=(2.2 + 1.25 * columns, 1.3 + 0.6 * rows))
    drawn = draw_heat_map(
        axes,
        block,
        metric=metric,
        row_title=" · ".join(table.layout.rows),
        column_title=" · ".join(table.layout.cols),
        title=f"{table.view.name}: {block.title}",
        reference=block_reference(block),
        reference_label=table.reference.label,
    )
    axes.title.set_fontsize(10)
    levels = sorted({c.uncertainty for c in block.cells.values() if c.uncertainty})
    notes = [*drawn.notes, *([f"95% intervals and marks: {', '.join(levels)}"] if levels else [])]
    figure.text(0.01, -0.02, "; ".join(notes), fontsize=7, va="top", ha="left")
    figure.tight_layout()
    return figure


def sweep_figures(table: SweepTable, out_dir: Path) -> list[Path]:
    """Every figure of a sweep's table: its forest plots, then its heat maps."""
    return [*forest_plots(table, out_dir), *heat_maps(table, out_dir)]
