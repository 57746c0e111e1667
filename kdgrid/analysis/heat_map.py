"""One heat map of a table's block, drawn the same way for the paper's tables (`kdgrid.analysis.figures`) and for
any sweep's (`kdgrid.analysis.sweep_figures`).

Conventions: rows down, columns across, both axes titled. With a reference cell for the block (its condition's
reference, `kdgrid.analysis.cell_stats.Reference`: by default soft labels only, wherever the view placed it), the
colour is the cell minus the reference on a diverging scale centred on 0 and symmetric (equal colours are equal
distances from the reference), and the colour bar says so, naming the reference and its value; without one, the
colour is the value on a sequential scale, the colour bar naming the metric. Each cell shows its mean over seeds
with the table's marks where the table has them (``▲``/``▼`` beyond noise, ``ref`` and a black frame on the
reference cell) and its 95% interval under it where it has one; a cell with a degenerate run is hatched and marked
``†``; a missing cell is grey and shows ``-`` (``…`` where its trials are pending). Fact columns (parameters, FLOPs) are left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colorbar import Colorbar
from matplotlib.colors import Normalize, TwoSlopeNorm
from matplotlib.patches import Rectangle

from kdgrid.analysis.cell_stats import Reference
from kdgrid.analysis.render import BETTER_MARK, DEGENERATE_MARK, REFERENCE_MARK, WORSE_MARK
from kdgrid.analysis.tables import PENDING_MARK, Block, Cell, Column

HEAT_FONT_PT = 8.0  # a cell's number; its interval 1.5 pt smaller (legible at the PNG's 200 dpi and in print)
MISSING_COLOUR = "#dddddd"
MARKS_NOTE = f"{BETTER_MARK}/{WORSE_MARK}: beyond noise against the reference (the table's adjusted test)"
DEGENERATE_NOTE = f"hatched, {DEGENERATE_MARK}: a degenerate run among the cell's seeds"


def cell_text(cell: Cell) -> str:
    """What a heat-map cell shows: its mean with the table's marks, and its 95% interval on a second line."""
    if cell.missing:
        return PENDING_MARK if cell.pending else "-"
    marks = f" {REFERENCE_MARK}" if cell.is_reference else ""
    if cell.significant and cell.direction:
        marks += f" {BETTER_MARK if cell.direction > 0 else WORSE_MARK}"
    if cell.degenerate:
        marks += f" {DEGENERATE_MARK}"
    text = f"{cell.value:.3f}{marks}"
    if cell.has_interval:
        text += f"\n[{cell.ci_low:.3f}, {cell.ci_high:.3f}]"
    return text


def score_columns(block: Block) -> list[Column]:
    """The block's columns a heat map shows: its scores, not its facts."""
    return [column for column in block.columns if not column.fact]


def block_reference(
    block: Block, cells: Iterable[Cell] = (), reference: Reference | None = None
) -> Cell | None:
    """The reference cell the block's colours are centred on: the block's own reference cell (``is_reference``),
    else the one cell among ``cells`` (the whole view's) that ``reference`` (default: soft labels only) picks for
    the condition every scored cell of the block shares; None when there is none, or when the block spans
    several conditions or its condition has several candidates (nothing to centre on)."""
    own = [c for c in block.cells.values() if c.is_reference and not c.missing]
    if len(own) == 1:
        return own[0]
    reference = reference or Reference()
    scored = [c for (_, column), c in block.cells.items() if not column.fact and not c.missing and c.config]
    conditions = {reference.condition(c.config) for c in scored}
    if len(conditions) != 1:
        return None
    (condition,) = conditions
    candidates = [
        c
        for c in cells
        if not c.missing
        and c.config
        and reference.matches(c.config)
        and reference.condition(c.config) == condition
    ]
    return candidates[0] if len(candidates) == 1 else None


def centred_values(block: Block, reference: Cell | None) -> np.ndarray:
    """The block's score cells as rows x columns, each minus ``reference``'s value (NaN where missing); the values
    themselves when ``reference`` is None."""
    centre = 0.0 if reference is None else reference.value
    columns = score_columns(block)
    return np.array(
        [[block.cell(row, column).value - centre for column in columns] for row in block.rows], dtype=float
    ).reshape(len(block.rows), len(columns))


def heat_values(block: Block) -> tuple[np.ndarray, float | None]:
    """`centred_values` on the block's own reference cell (`block_reference`), and that cell's value (None, and
    the values themselves, when the block holds none)."""
    reference = block_reference(block)
    return centred_values(block, reference), None if reference is None else reference.value


@dataclass(frozen=True)
class HeatMap:
    """What `draw_heat_map` drew, for its caller and its tests: the colour matrix (rows x columns), the value it is
    centred on (None: the values themselves, sequential scale), the scale, the colour bar, and the notes the
    figure should carry under it (what the marks mean)."""

    matrix: np.ndarray
    centre: float | None
    norm: Normalize
    colour_bar: Colorbar
    notes: tuple[str, ...]


def draw_heat_map(
    axes: Axes,
    block: Block,
    *,
    metric: str,
    row_title: str,
    column_title: str,
    title: str,
    reference: Cell | None = None,
    reference_label: str = "",
    font_pt: float = HEAT_FONT_PT,
) -> HeatMap:
    """Draw ``block`` on ``axes`` by the module's conventions, centred on ``reference`` (its value; None: a
    sequential scale of the values). ``reference_label`` names the reference in the colour bar's label."""
    matrix = centred_values(block, reference)
    centre = None if reference is None else reference.value
    columns = score_columns(block)
    finite = matrix[np.isfinite(matrix)]
    if centre is not None:
        reach = float(np.abs(finite).max()) if finite.size else 0.0
        reach = reach or 1e-3  # every cell equals the reference: still a scale around it
        norm: Normalize = TwoSlopeNorm(vcenter=0.0, vmin=-reach, vmax=reach)
        cmap = plt.get_cmap("RdBu")  # red below the reference, blue above
        named = f"{reference_label}: " if reference_label else ""
        label = f"{metric}: difference from the reference\n({named}{centre:.3f})"
    else:
        low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        norm = Normalize(vmin=low, vmax=high if high > low else low + 1e-3)
        cmap = plt.get_cmap("viridis")
        label = metric
    image = axes.imshow(
        np.ma.masked_invalid(matrix), cmap=cmap.with_extremes(bad=MISSING_COLOUR), norm=norm, aspect="auto"
    )
    tilted = len(columns) > 4
    axes.set_xticks(
        range(len(columns)),
        [c.label for c in columns],
        rotation=30 if tilted else 0,
        ha="right" if tilted else "center",
    )
    axes.set_yticks(range(len(block.rows)), block.rows)
    axes.set_xlabel(column_title)
    axes.set_ylabel(row_title)
    axes.set_title(title, loc="left")
    colour_bar = axes.figure.colorbar(image, ax=axes, fraction=0.05, pad=0.03)
    colour_bar.set_label(label, fontsize=font_pt)
    colour_bar.ax.tick_params(labelsize=font_pt - 1)
    marked = False
    for i, row in enumerate(block.rows):
        for j, column in enumerate(columns):
            cell = block.cell(row, column)
            colour = "black"  # on the light grey of a missing cell, and on light colours
            if np.isfinite(matrix[i, j]):
                red, green, blue, _ = cmap(float(norm(matrix[i, j])))
                colour = "white" if 0.299 * red + 0.587 * green + 0.114 * blue < 0.5 else "black"
            number, _, interval = cell_text(cell).partition("\n")
            marked = marked or (cell.significant and bool(cell.direction))
            axes.text(j, i - (0.17 if interval else 0.0), number, ha="center", va="center", fontsize=font_pt,
                      color=colour)  # fmt: skip
            if interval:
                axes.text(
                    j, i + 0.22, interval, ha="center", va="center", fontsize=font_pt - 1.5, color=colour
                )
            if cell.degenerate and not cell.missing:
                axes.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///", edgecolor="#555555",
                                         linewidth=0))  # fmt: skip
            if cell.is_reference:
                axes.add_patch(Rectangle((j - 0.48, i - 0.48), 0.96, 0.96, fill=False, edgecolor="black",
                                         linewidth=2))  # fmt: skip
    notes = [MARKS_NOTE] if marked or centre is not None else []
    if any(c.degenerate for c in block.cells.values() if not c.missing):
        notes.append(DEGENERATE_NOTE)
    return HeatMap(matrix, centre, norm, colour_bar, tuple(notes))
