"""A paper table (`kdgrid.analysis.tables.TableView`) as HTML, laid out as `kdgrid tables` prints it.

Numbers use `kdgrid.analysis.render`'s conventions (4 decimals, ``mean±std`` over seeds, facts with 4 significant digits,
``-`` for missing (``…`` where a sweep's trials of the cell are pending), the best value of each block in bold, ``ours / published (difference)`` once compared). Where a
cell carries an interval and a significance test, they are shown under its number: ``[low, high]``, a mark for a
significant difference from the block's reference (▲ better, ▼ worse, its p-value in the tooltip) and † for a
degenerate student (chance-level: its number is not evidence of anything).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from kdgrid.analysis.render import agreement_text, cell_parts, legend
from kdgrid.analysis.stats import TEST_METHODS
from kdgrid.analysis.tables import PENDING_MARK, Block, Cell, Column, TableView
from kdgrid.report.html import esc
from kdgrid.report.trial_page import trial_page_name

# row id -> trial id of the rows a report shows: how a table cell finds the trial pages of the runs it averages.
TrialOfRow = Mapping[str, str]


def uncertainty_html(cell: Cell, column: Column) -> str:
    """The cell's 95% interval under its number, with the paired test's p-value and any degenerate run's reasons
    in its tooltip (the marks themselves come from `kdgrid.analysis.render.marks_text`, as in every other format);
    empty when the cell has no interval."""
    if cell.missing or column.fact or math.isnan(cell.ci_low) or math.isnan(cell.ci_high):
        return ""
    notes = []
    if not math.isnan(cell.p_vs_reference):
        verdict = "significant" if cell.significant else "not significant"
        test = TEST_METHODS.get(cell.test_method, "paired test")
        notes.append(f"vs the reference: p = {cell.p_vs_reference:.3g} (adjusted; {test}), {verdict}")
    if cell.degenerate:
        notes.append("degenerate: " + "; ".join(cell.degenerate))
    title = f' title="{esc(" | ".join(notes))}"' if notes else ""
    return f'<div class="unc"><span class="ci"{title}>[{cell.ci_low:.4f}, {cell.ci_high:.4f}]</span></div>'


def _trial_links(cell: Cell, trial_of_row: TrialOfRow) -> list[str]:
    """The trial pages of the runs a cell averages, in seed order (relative to the report's root)."""
    pages = [trial_page_name(trial_of_row[row]) for row in cell.row_ids if row in trial_of_row]
    return [name for name in pages if name]


def pending_html(cell: Cell) -> str:
    """`PENDING_MARK` for a cell whose sweep lists trials with no row yet (its tooltip says how many), after the
    cell's number where some of its runs are done; empty for a cell with none pending."""
    if not cell.pending:
        return ""
    done = f"{cell.n_seeds} done, " if not cell.missing else "no run done yet, "
    title = f"{done}{len(cell.pending)} trial(s) pending: listed by the sweep, no row yet"
    return f'<span class="pending" title="{esc(title)}">{PENDING_MARK}</span>'


def _cell_html(cell: Cell, column: Column, compared: bool, trial_of_row: TrialOfRow) -> str:
    if cell.missing and cell.pending:
        return f'<td class="num pending">{pending_html(cell)}</td>'
    ours, suffix = cell_parts(cell, column, compared)
    text = f"<b>{esc(ours)}</b>" if cell.bold else esc(ours)
    text += pending_html(cell)
    links = [] if cell.missing or column.fact else _trial_links(cell, trial_of_row)
    if len(links) == 1:
        text = f'<a href="{esc(links[0])}" title="this run\'s trial page">{text}</a>'
    elif links:
        seeds = " ".join(f'<a href="{esc(link)}">{n}</a>' for n, link in enumerate(links, start=1))
        text += f'<div class="runs" title="the trial page of each seed">runs {seeds}</div>'
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


def block_html(block: Block, compared: bool, trial_of_row: TrialOfRow | None = None) -> str:
    """One block; with ``trial_of_row``, each number links to the trial page(s) of the run(s) it averages."""
    links = trial_of_row or {}
    rows = "".join(
        f"<tr><th>{esc(row)}</th>"
        + "".join(_cell_html(block.cell(row, column), column, compared, links) for column in block.columns)
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


def table_html(view: TableView, anchor: str, trial_of_row: TrialOfRow | None = None) -> str:
    """One table: its title, its blocks (side by side where the paper sets them so), its notes; numbers link to
    their trial pages where ``trial_of_row`` knows their rows."""
    blocks = "".join(block_html(block, view.compared, trial_of_row) for block in view.blocks)
    layout = "blocks side" if view.side_by_side else "blocks"
    notes = "".join(f"<li>{esc(note)}</li>" for note in [*view.notes, *legend(view)])
    return (
        f'<section class="table" id="{esc(anchor)}"><h2>{esc(view.title)}</h2>'
        f'<div class="{layout}">{blocks}</div>{f"<ul class=notes>{notes}</ul>" if notes else ""}</section>'
    )
