"""A paper table (`analysis.tables.TableView`) as HTML, laid out as `kdgrid tables` prints it.

Numbers use `analysis.render`'s conventions (4 decimals, ``mean±std`` over seeds, facts with 4 significant digits,
``-`` for missing, the best value of each block in bold, ``ours / published (difference)`` once compared). Where a
cell carries an interval and a significance test, they are shown under its number: ``[low, high]``, a mark for a
significant difference from the block's reference (▲ better, ▼ worse, its p-value in the tooltip) and ⚠ for a
degenerate student (chance-level: its number is not evidence of anything).
"""

from __future__ import annotations

import math
from typing import Any

from analysis.render import agreement_text, cell_parts
from analysis.tables import Block, Cell, Column, TableView
from kdgrid.report.html import esc

# The uncertainty fields a `Cell` may carry (intervals, paired tests, degenerate students). Older analysis code
# has none of them; `uncertainty_of` is the one place that reads them.
UNCERTAINTY_FIELDS: tuple[str, ...] = (
    "ci_low",
    "ci_high",
    "p_vs_reference",
    "significant",
    "direction",
    "degenerate",
)


def uncertainty_of(cell: Cell) -> dict[str, Any]:
    """The uncertainty fields ``cell`` has and holds a value for (missing fields and NaNs left out)."""
    found = {}
    for name in UNCERTAINTY_FIELDS:
        # getattr: the fields exist only with the analysis code that computes intervals; a cell without them
        # renders as before.
        value = getattr(cell, name, None)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        found[name] = value
    return found


def _direction_mark(direction: Any) -> str:
    """▲ for a difference in the better direction, ▼ for the worse one, ● when the direction is not said."""
    if isinstance(direction, (int, float)) and not isinstance(direction, bool):
        return "▲" if direction > 0 else "▼" if direction < 0 else "●"
    text = str(direction).lower()
    if any(word in text for word in ("better", "higher", "up", "+", "greater")):
        return "▲"
    if any(word in text for word in ("worse", "lower", "down", "-", "less")):
        return "▼"
    return "●"


def uncertainty_html(cell: Cell, column: Column) -> str:
    """The interval, significance and degenerate marks of one cell (empty when it has none)."""
    found = uncertainty_of(cell)
    if not found or column.fact:
        return ""
    parts = []
    if "ci_low" in found and "ci_high" in found:
        parts.append(f'<span class="ci">[{float(found["ci_low"]):.4f}, {float(found["ci_high"]):.4f}]</span>')
    if found.get("significant"):
        p = found.get("p_vs_reference")
        title = f"significant vs the reference (p = {float(p):.3g})" if p is not None else "significant"
        mark = _direction_mark(found.get("direction", ""))
        parts.append(f'<span class="sig" title="{esc(title)}">{mark}</span>')
    elif "p_vs_reference" in found:
        parts.append(f'<span class="ns" title="p = {float(found["p_vs_reference"]):.3g}">n.s.</span>')
    degenerate = found.get("degenerate")
    if degenerate:
        why = degenerate if isinstance(degenerate, str) else "degenerate: at the majority-class baseline"
        parts.append(f'<span class="degenerate" title="{esc(why)}">⚠</span>')
    return f'<div class="unc">{" ".join(parts)}</div>' if parts else ""


def _cell_html(cell: Cell, column: Column, compared: bool) -> str:
    ours, suffix = cell_parts(cell, column, compared)
    text = f"<b>{esc(ours)}</b>" if cell.bold else esc(ours)
    if suffix:
        text += f'<span class="paper">{esc(suffix)}</span>'
    classes = ["num"] + (["missing"] if cell.missing else []) + (["fact"] if column.fact else [])
    return f'<td class="{" ".join(classes)}">{text}{uncertainty_html(cell, column)}</td>'


def _header_rows(block: Block) -> str:
    groups = [c.group for c in block.columns]
    if not any(groups):
        return "<tr><th></th>" + "".join(f"<th>{esc(c.label)}</th>" for c in block.columns) + "</tr>"
    spans: list[tuple[str, int]] = []
    for group in groups:
        if spans and spans[-1][0] == group:
            spans[-1] = (group, spans[-1][1] + 1)
        else:
            spans.append((group, 1))
    top = "<tr><th></th>" + "".join(f'<th colspan="{n}">{esc(g)}</th>' for g, n in spans) + "</tr>"
    return top + "<tr><th></th>" + "".join(f"<th>{esc(c.label)}</th>" for c in block.columns) + "</tr>"


def block_html(block: Block, compared: bool) -> str:
    rows = "".join(
        f"<tr><th>{esc(row)}</th>"
        + "".join(_cell_html(block.cell(row, column), column, compared) for column in block.columns)
        + "</tr>"
        for row in block.rows
    )
    title = f"<h3>{esc(block.title)}</h3>" if block.title else ""
    agreement = agreement_text(block.agreement)
    foot = f'<p class="agreement">{esc(agreement)}</p>' if agreement else ""
    return (
        f'<section class="block">{title}<table class="paper-table"><thead>{_header_rows(block)}</thead>'
        f"<tbody>{rows}</tbody></table>{foot}</section>"
    )


def table_html(view: TableView, anchor: str) -> str:
    """One table: its title, its blocks (side by side where the paper sets them so), its notes."""
    blocks = "".join(block_html(block, view.compared) for block in view.blocks)
    layout = "blocks side" if view.side_by_side else "blocks"
    notes = "".join(f"<li>{esc(note)}</li>" for note in view.notes)
    return (
        f'<section class="table" id="{esc(anchor)}"><h2>{esc(view.title)}</h2>'
        f'<div class="{layout}">{blocks}</div>{f"<ul class=notes>{notes}</ul>" if notes else ""}</section>'
    )
