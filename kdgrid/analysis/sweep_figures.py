"""Figures of any sweep's table (`kdgrid figures --sweep NAME --out DIR`), drawn as researchers read them: a
forest plot per block of each cell's difference from its reference with the 95% interval of that difference,
sorted; and a heat map per block of its rows x columns, coloured by that difference.

Conventions: the difference is the cell's mean minus its reference's (the metric's units), its interval the
percentile interval over the same paired example resamples as the table's (`kdgrid.analysis.sweep_tables`);
green/red: better/worse than the reference beyond noise (the table's Holm-adjusted test), grey: not; a hollow
marker and ``†`` in the label: a degenerate run among the cell's seeds. Files are PNG (200 dpi) and PDF, written
to the folder asked for (never into the store).

Heat maps: the row axes down, the column axis across, each titled; colour = the cell minus its block's reference
cell on a diverging scale centred on 0 (the reference) and symmetric, so equal colours are equal distances from
it, labelled in the colour bar (a block without a reference cell: the value itself, on a sequential scale); each
cell shows its mean over seeds with the table's marks (``▲``/``▼`` beyond noise, ``ref`` and a black frame on the
reference) and its 95% interval under it; a cell with a degenerate run is hatched and marked ``†``; a missing
cell is grey and shows ``-``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: figures are files

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import Normalize, TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from kdgrid.analysis.render import BETTER_MARK, DEGENERATE_MARK, REFERENCE_MARK, WORSE_MARK
from kdgrid.analysis.sweep_tables import Difference, SweepTable
from kdgrid.analysis.tables import Block, Cell

BETTER, WORSE, SAME = "#1a9850", "#d73027", "#7f7f7f"


def _slug(text: str) -> str:
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
        axes.set_xlabel(f"{metric}: difference from the reference\n({table.reference.label})")
        axes.set_title(f"{table.view.name}: {block}", loc="left", fontsize=10)
        axes.grid(axis="x", alpha=0.3)
        figure.tight_layout()
        stem = out_dir / f"{_slug(table.view.name)}_forest_{index + 1}_{_slug(block)}"
        for suffix in (".png", ".pdf"):
            figure.savefig(stem.with_suffix(suffix), dpi=200)
            written.append(stem.with_suffix(suffix))
        plt.close(figure)
    return written


HEAT_FONT_PT = 8  # a cell's number; its interval one size smaller (legible at the PNG's 200 dpi and in print)
MISSING_COLOUR = "#dddddd"


def _metric(table: SweepTable) -> str:
    return ", ".join(
        sorted({str(c.config.get("metric")) for b in table.view.blocks for c in b.cells.values() if c.config})
    )


def cell_text(cell: Cell) -> str:
    """What a heat-map cell shows: its mean with the table's marks, and its 95% interval on a second line."""
    if cell.missing:
        return "-"
    marks = f" {REFERENCE_MARK}" if cell.is_reference else ""
    if cell.significant and cell.direction:
        marks += f" {BETTER_MARK if cell.direction > 0 else WORSE_MARK}"
    if cell.degenerate:
        marks += f" {DEGENERATE_MARK}"
    text = f"{cell.value:.3f}{marks}"
    if not (math.isnan(cell.ci_low) or math.isnan(cell.ci_high)):
        text += f"\n[{cell.ci_low:.3f}, {cell.ci_high:.3f}]"
    return text


def heat_values(block: Block) -> tuple[np.ndarray, float | None]:
    """The block's cells as rows x columns: each cell minus the block's reference cell (NaN where missing), and
    the reference's value; the values themselves and None when the block has no reference cell."""
    reference = next((c for c in block.cells.values() if c.is_reference and not c.missing), None)
    centre = 0.0 if reference is None else reference.value
    matrix = np.array(
        [[block.cell(row, column).value - centre for column in block.columns] for row in block.rows],
        dtype=float,
    ).reshape(len(block.rows), len(block.columns))
    return matrix, None if reference is None else reference.value


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
        stem = out_dir / f"{_slug(table.view.name)}_heatmap_{index + 1}_{_slug(block.title)}"
        for suffix in (".png", ".pdf"):
            figure.savefig(stem.with_suffix(suffix), dpi=200, bbox_inches="tight")
            written.append(stem.with_suffix(suffix))
        plt.close(figure)
    return written


def heat_map_figure(table: SweepTable, block: Block, metric: str) -> Figure:
    """The heat map of one of ``table``'s blocks (the conventions in the module's docstring); the caller saves and
    closes it."""
    matrix, reference = heat_values(block)
    rows, columns = len(block.rows), len(block.columns)
    figure, axes = plt.subplots(figsize=(2.2 + 1.25 * columns, 1.3 + 0.6 * rows))
    finite = matrix[np.isfinite(matrix)]
    if reference is not None:
        reach = float(np.abs(finite).max()) if finite.size else 0.0
        reach = reach or 1e-3  # every cell equals the reference: still a scale around it
        norm: Normalize = TwoSlopeNorm(vcenter=0.0, vmin=-reach, vmax=reach)
        cmap = plt.get_cmap("RdBu")  # red below the reference, blue above
        label = f"{metric}: difference from the reference\n({table.reference.label}: {reference:.3f})"
    else:
        low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        norm = Normalize(vmin=low, vmax=high if high > low else low + 1e-3)
        cmap = plt.get_cmap("viridis")
        label = metric
    image = axes.imshow(np.ma.masked_invalid(matrix), cmap=cmap.with_extremes(bad=MISSING_COLOUR), norm=norm,
                        aspect="auto")  # fmt: skip
    axes.set_xticks(range(columns), [c.label for c in block.columns], rotation=30 if columns > 4 else 0,
                    ha="right" if columns > 4 else "center")  # fmt: skip
    axes.set_yticks(range(rows), block.rows)
    axes.set_xlabel(" · ".join(table.layout.cols))
    axes.set_ylabel(" · ".join(table.layout.rows))
    axes.set_title(f"{table.view.name}: {block.title}", loc="left", fontsize=10)
    colour_bar = figure.colorbar(image, ax=axes, fraction=0.05, pad=0.03)
    colour_bar.set_label(label, fontsize=8)
    for i, row in enumerate(block.rows):
        for j, column in enumerate(block.columns):
            cell = block.cell(row, column)
            shade = norm(matrix[i, j]) if np.isfinite(matrix[i, j]) else 0.5
            dark = cmap(float(shade))
            luminance = 0.299 * dark[0] + 0.587 * dark[1] + 0.114 * dark[2]
            number, _, interval = cell_text(cell).partition("\n")
            colour = "white" if luminance < 0.5 else "black"
            axes.text(j, i - (0.12 if interval else 0.0), number, ha="center", va="center",
                      fontsize=HEAT_FONT_PT, color=colour)  # fmt: skip
            if interval:
                axes.text(
                    j, i + 0.2, interval, ha="center", va="center", fontsize=HEAT_FONT_PT - 1.5, color=colour
                )
            if cell.degenerate and not cell.missing:
                axes.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///", edgecolor="#555555",
                                         linewidth=0))  # fmt: skip
            if cell.is_reference:
                axes.add_patch(Rectangle((j - 0.48, i - 0.48), 0.96, 0.96, fill=False, edgecolor="black",
                                         linewidth=2))  # fmt: skip
    notes = [f"{BETTER_MARK}/{WORSE_MARK}: beyond noise against the reference (the table's adjusted test)"]
    if any(c.degenerate for c in block.cells.values() if not c.missing):
        notes.append(f"hatched, {DEGENERATE_MARK}: a degenerate run among the cell's seeds")
    figure.text(0.01, -0.02, "; ".join(notes), fontsize=7, va="top", ha="left")
    figure.tight_layout()
    return figure


def sweep_figures(table: SweepTable, out_dir: Path) -> list[Path]:
    """Every figure of a sweep's table: its forest plots, then its heat maps."""
    return [*forest_plots(table, out_dir), *heat_maps(table, out_dir)]
