"""Render a `TableView` for the terminal (rich), Markdown, LaTeX (booktabs) or CSV.

Conventions shared by every format: scores with 4 decimals (``0.8137``), ``mean±std`` where a cell averages
several seeds, facts (params in M, FLOPs in G, latency in ms) with 4 significant digits, missing cells as ``-``
(never 0), the best value of each block in bold. A compared view puts the published value and the difference
beside ours (``0.8137 / 0.8134 (+0.0003)``) and ends each block with its agreement (mean |difference|,
Spearman's rank correlation). CSV is long: one line per cell, every number in its own column (rounded to 10
decimals: float noise such as ``0.6809750000000001`` never reaches a file), one column per axis of the table
(task, student, knowledge, ...: the cell's own settings) and the cell's trial ids.

Uncertainty (`kdgrid.analysis.cell_stats`): a cell with an interval shows it as ``[low, high]`` (under the number in
the terminal); ``▲``/``▼`` mark cells significantly better/worse than their condition's reference (marked
``ref``), ``†`` a cell with a degenerate run; compared, ``∈``/``∉`` say whether the published value lies in
our interval. A legend under the table explains the marks it uses.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable

from rich.columns import Columns
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from kdgrid.analysis.tables import Agreement, Block, Cell, Column, TableView
from kdgrid.errors import ConfigError

FORMATS: tuple[str, ...] = ("terminal", "markdown", "latex", "csv")
MISSING = "-"


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise ConfigError(f"unknown --format {fmt!r}; allowed: {', '.join(FORMATS)}")
    return fmt


def number_text(value: float, column: Column, std: float = math.nan, n_seeds: int = 1) -> str:
    """One number as printed: ``-`` when missing, facts with 4 significant digits, scores with 4 decimals and
    ``±std`` when it is a mean of several seeds."""
    if math.isnan(value):
        return MISSING
    if column.fact:
        return f"{value:.4g}"
    text = f"{value:.4f}"
    if n_seeds > 1 and not math.isnan(std):
        text += f"±{std:.4f}"
    return text


BETTER_MARK = "▲"  # significantly better than the reference (adjusted paired test; docs/uncertainty.md)
WORSE_MARK = "▼"  # significantly worse
REFERENCE_MARK = "ref"  # the reference cell of its condition
DEGENERATE_MARK = "†"  # a degenerate run among the cell's seeds (majority class, constant predictions, ...)
INSIDE_MARK = "∈"  # compared: the published value lies inside our interval
OUTSIDE_MARK = "∉"


def marks_text(cell: Cell) -> str:
    """The marks printed after a number: ``▲``/``▼`` (significantly better/worse than the reference), ``ref``,
    ``†`` (degenerate); ``""`` for none."""
    marks = ""
    if cell.is_reference:
        marks += f" {REFERENCE_MARK}"
    elif cell.significant and cell.direction:
        marks += f" {BETTER_MARK if cell.direction > 0 else WORSE_MARK}"
    if cell.degenerate:
        marks += DEGENERATE_MARK if marks else f" {DEGENERATE_MARK}"
    return marks


def interval_text(cell: Cell) -> str:
    """``[0.6900, 0.7300]``: the cell's 95% interval, or ``""`` when it has none."""
    return f"[{cell.ci_low:.4f}, {cell.ci_high:.4f}]" if cell.has_interval else ""


def cell_parts(cell: Cell, column: Column, compared: bool) -> tuple[str, str]:
    """(our number with its marks, the comparison suffix) of a cell; the suffix is empty unless compared."""
    ours = number_text(cell.value, column, cell.std, cell.n_seeds)
    if not cell.missing and not column.fact:
        ours += marks_text(cell)
    if not compared:
        return ours, ""
    paper = number_text(cell.paper, column)
    if math.isnan(cell.diff):
        return ours, f" / {paper}"
    # round first so that a difference of -1e-17 prints as +0.0000, not -0.0000
    diff = f"{(round(cell.diff, 6) or 0.0):+.4g}" if column.fact else f"{(round(cell.diff, 4) or 0.0):+.4f}"
    inside = ""
    if cell.paper_inside is not None:
        inside = f" {INSIDE_MARK if cell.paper_inside else OUTSIDE_MARK}"
    return ours, f" / {paper} ({diff}){inside}"


def legend(view: TableView) -> list[str]:
    """Lines explaining the marks that ``view`` uses, and each degenerate cell's reasons."""
    cells = [(b, r, c, b.cell(r, c)) for b in view.blocks for r in b.rows for c in b.columns]
    lines = []
    degenerate = [(b, r, c, cell) for b, r, c, cell in cells if cell.degenerate and not cell.missing]
    if degenerate:
        reasons = sorted({reason for *_, cell in degenerate for reason in cell.degenerate})
        lines.append(
            f"{DEGENERATE_MARK}: degenerate run(s) in {len(degenerate)} cell(s): {'; '.join(reasons)}"
        )
    if any(cell.paper_inside is not None for *_, cell in cells):
        lines.append(
            f"{INSIDE_MARK}/{OUTSIDE_MARK}: the published value lies inside/outside our 95% interval (where one "
            "more run of the cell would fall, from its seeds)"
        )
    methods = {cell.test_method for *_, cell in cells if cell.test_method}
    if methods - {"t"}:
        lines.append(
            "better/worse marks with one seed a side: a run-to-run comparison on the same dev examples; it "
            "leaves training-seed variance out, so it does not show that the methods differ"
        )
    if "t" in methods:
        lines.append(
            "better/worse marks with two or more seeds a side: a method-level t-test over the seeds' scores on "
            "this dev set"
        )
    return lines


def agreement_text(agreement: Agreement | None) -> str:
    if agreement is None:
        return ""
    if agreement.n == 0:
        return "agreement with the paper: no cell has both numbers"
    rho = MISSING if math.isnan(agreement.spearman) else f"{agreement.spearman:.3f}"
    text = (
        f"agreement with the paper over {agreement.n} cells: mean |difference| {agreement.mean_abs_diff:.4f}, "
        f"Spearman rank correlation {rho}"
    )
    if agreement.with_interval:
        text += (
            f"; published value inside our 95% interval in {agreement.inside} of {agreement.with_interval} "
            f"({agreement.share_inside:.0%})"
        )
    return text


def _header(column: Column) -> str:
    return f"{column.group} · {column.label}" if column.group else column.label


def _has_groups(block: Block) -> bool:
    return any(c.group for c in block.columns)


def _row_header(view: TableView) -> str:
    return {"2": "shape", "4": "hard-label weight \\ T", "7": "system"}.get(view.name, "")


# --- Markdown ---------------------------------------------------------------------------------------------------


def to_markdown(view: TableView) -> str:
    lines = [f"## {view.title}", ""]
    for block in view.blocks:
        if block.title:
            lines += [f"### {block.title}", ""]
        header = [_row_header(view), *(_header(c) for c in block.columns)]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("| " + " | ".join(["---"] + ["---:"] * len(block.columns)) + " |")
        for row in block.rows:
            texts = [row]
            for column in block.columns:
                cell = block.cell(row, column)
                ours, suffix = cell_parts(cell, column, view.compared)
                interval = interval_text(cell)
                texts.append(
                    (f"**{ours}**" if cell.bold else ours) + (f" {interval}" if interval else "") + suffix
                )
            lines.append("| " + " | ".join(texts) + " |")
        lines.append("")
        if block.agreement is not None:
            lines += [f"*{agreement_text(block.agreement)}*", ""]
    lines += [f"> {note}" for note in [*view.notes, *legend(view)]]
    return "\n".join(lines).rstrip() + "\n"


# --- LaTeX ------------------------------------------------------------------------------------------------------

_LATEX_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "±": r"$\pm$",
    "≈": r"$\approx$",
    "·": r"$\cdot$",
    "|": r"$|$",
    "▲": r"$\blacktriangle$",
    "▼": r"$\blacktriangledown$",
    "†": r"$^\dagger$",
    "∈": r"$\in$",
    "∉": r"$\notin$",
}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in text)


LATEX_PACKAGES: tuple[tuple[str, str], ...] = (
    ("booktabs", "the rules: \\toprule, \\midrule, \\cmidrule, \\bottomrule"),
    ("amssymb", "the marks: \\blacktriangle, \\blacktriangledown"),
)


def to_latex(view: TableView) -> str:
    """One ``tabular`` (booktabs) per block inside one ``table`` float, after a comment naming the packages it
    needs (`LATEX_PACKAGES`: booktabs, amssymb)."""
    out = [f"% needs \\usepackage{{{name}}} ({why})" for name, why in LATEX_PACKAGES]
    out += ["\\begin{table}[t]", "\\centering", "\\small", f"\\caption{{{latex_escape(view.title)}}}"]
    for block in view.blocks:
        spec = "l" + "r" * len(block.columns)
        out.append(f"\\begin{{tabular}}{{{spec}}}")
        out.append("\\toprule")
        if block.title:
            out.append(
                f"\\multicolumn{{{len(block.columns) + 1}}}{{l}}{{\\textbf{{{latex_escape(block.title)}}}}} \\\\"
            )
            out.append("\\midrule")
        if _has_groups(block):
            spans: list[tuple[str, int]] = []
            for column in block.columns:
                if spans and spans[-1][0] == column.group:
                    spans[-1] = (column.group, spans[-1][1] + 1)
                else:
                    spans.append((column.group, 1))
            cells, rules, start = [""], [], 2
            for group, width in spans:
                cells.append(f"\\multicolumn{{{width}}}{{c}}{{{latex_escape(group)}}}")
                if group:
                    rules.append(f"\\cmidrule(lr){{{start}-{start + width - 1}}}")
                start += width
            out.append(" & ".join(cells) + " \\\\")
            out.extend(rules)
        labels = [latex_escape(_row_header(view)), *(latex_escape(c.label) for c in block.columns)]
        out.append(" & ".join(labels) + " \\\\")
        out.append("\\midrule")
        for row in block.rows:
            texts = [latex_escape(row)]
            for column in block.columns:
                cell = block.cell(row, column)
                ours, suffix = cell_parts(cell, column, view.compared)
                ours = latex_escape(ours)
                text = f"\\textbf{{{ours}}}" if cell.bold else ours
                if cell.has_interval:
                    text += f" {{\\scriptsize {latex_escape(interval_text(cell))}}}"
                if suffix:
                    text += f" {{\\scriptsize {latex_escape(suffix.strip())}}}"
                texts.append(text)
            out.append(" & ".join(texts) + " \\\\")
        if block.agreement is not None:
            out.append("\\midrule")
            out.append(
                f"\\multicolumn{{{len(block.columns) + 1}}}{{l}}{{\\scriptsize "
                f"{latex_escape(agreement_text(block.agreement))}}} \\\\"
            )
        out.append("\\bottomrule")
        out.append("\\end{tabular}")
        out.append("")
    for note in [*view.notes, *legend(view)]:
        out.append(f"% {note}")
    out.append("\\end{table}")
    return "\n".join(out) + "\n"


# --- CSV --------------------------------------------------------------------------------------------------------

CSV_COLUMNS = (
    "table",
    "block",
    "row",
    "column_group",
    "column",
    "value",
    "std",
    "n_seeds",
    "bold",
    "ci_low",
    "ci_high",
    "p_vs_reference",
    "significant",
    "direction",
    "is_reference",
    "degenerate",
)
# The axes of a paper table (`kdgrid.analysis.tidy.CONFIG_COLUMNS` but the table, role and block, which are
# columns already or say nothing): one CSV column each, the cell's own value. A sweep's table names its own
# (`TableView.axes`).
CSV_AXES: tuple[str, ...] = (
    "task",
    "dev_set",
    "student",
    "teacher",
    "init",
    "knowledge",
    "strategy",
    "temperature",
    "alpha",
    "beta",
    "soft_weight",
    "metric",
)
CSV_TRIAL_COLUMN = "trial_ids"  # the cell's trials, ";"-separated
CSV_COMPARE_COLUMNS = ("paper_inside", "paper", "diff")
CSV_P_COLUMNS = ("p_raw", "p_adjusted", "correction", "uncertainty")
"""A sweep's table (`TableView.correction` set) also gives each test's p before and after the correction, in
scientific notation (a p of 2.6e-19 is not 0.0), the correction, and the level of the cell's uncertainty
(`kdgrid.analysis.seed_level`: seed-level or run-to-run)."""


def _csv_number(value: float) -> str:
    """A number rounded to 10 decimals (``0.6809750000000001`` -> ``0.680975``), ``""`` when missing."""
    return "" if math.isnan(value) else repr(round(float(value), 10) + 0.0)


def _csv_p(value: float) -> str:
    """A p-value in scientific notation with 6 significant digits (``2.6e-19`` -> ``2.60000e-19``), ``""``
    when missing."""
    return "" if math.isnan(value) else f"{value:.5e}"


def _csv_axis(value: object) -> str:
    """A cell's axis value: numbers as `_csv_number`, nothing (None, NaN) as ``""``, text as it is."""
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _csv_number(float(value))
    return str(value)


def csv_axes(view: TableView) -> tuple[str, ...]:
    """The axis columns of ``view``'s CSV: its own (`TableView.axes`) or the paper tables' (`CSV_AXES`)."""
    return view.axes or CSV_AXES


def to_csv(view: TableView) -> str:
    """One line per cell of the layout (missing ones with an empty ``value``), in display order."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    axes = csv_axes(view)
    header = [
        *CSV_COLUMNS,
        *axes,
        CSV_TRIAL_COLUMN,
        *(CSV_COMPARE_COLUMNS if view.compared else ()),
        *(CSV_P_COLUMNS if view.correction else ()),
    ]
    writer.writerow(header)
    for block in view.blocks:
        for row in block.rows:
            for column in block.columns:
                cell = block.cell(row, column)
                line = [
                    view.name,
                    block.title,
                    row,
                    column.group,
                    column.label,
                    _csv_number(cell.value),
                    _csv_number(cell.std),
                    cell.n_seeds if not cell.missing else "",
                    int(cell.bold),
                    _csv_number(cell.ci_low),
                    _csv_number(cell.ci_high),
                    (_csv_p if view.correction else _csv_number)(cell.p_vs_reference),
                    int(cell.significant),
                    cell.direction,
                    int(cell.is_reference),
                    ";".join(cell.degenerate),
                    *(_csv_axis(cell.config.get(axis)) for axis in axes),
                    ";".join(cell.trial_ids),
                ]
                if view.compared:
                    inside = "" if cell.paper_inside is None else int(cell.paper_inside)
                    line += [inside, _csv_number(cell.paper), _csv_number(cell.diff)]
                if view.correction:
                    tested = not math.isnan(cell.p_raw)
                    line += [
                        _csv_p(cell.p_raw),
                        _csv_p(cell.p_vs_reference),
                        view.correction if tested else "",
                        cell.uncertainty,
                    ]
                writer.writerow(line)
    return buffer.getvalue()


# --- terminal (rich) --------------------------------------------------------------------------------------------


def to_rich(view: TableView) -> RenderableType:
    """A rich renderable: one table per block (side by side where the view asks, as the demo's baselines)."""
    parts = []
    for block in view.blocks:
        table = Table(title=block.title or None, title_justify="left")
        table.add_column(_row_header(view), style="cyan", no_wrap=True)
        for column in block.columns:
            table.add_column(_header(column).replace(" · ", "\n"), justify="right", overflow="fold")
        for row in block.rows:
            texts = [Text(row)]
            for column in block.columns:
                cell = block.cell(row, column)
                ours, suffix = cell_parts(cell, column, view.compared)
                text = Text(ours, style="bold green" if cell.bold else ("dim" if cell.missing else ""))
                if cell.has_interval:
                    text.append("\n" + interval_text(cell), style="dim")
                if suffix:
                    # The published number and the difference under ours: narrow columns, nothing cut off.
                    text.append("\n" + suffix.removeprefix(" / "), style="dim")
                texts.append(text)
            table.add_row(*texts)
        if block.agreement is not None:
            table.caption = agreement_text(block.agreement)
            table.caption_justify = "left"
        parts.append(table)
    body = Columns(parts, equal=False, expand=False) if view.side_by_side else Group(*parts)
    header = Text(view.title, style="bold")
    notes = [Text(note, style="italic") for note in [*view.notes, *legend(view)]]
    return Group(header, body, *notes)


def to_terminal_text(view: TableView, width: int = 200) -> str:
    """The terminal rendering as plain text (for ``--out`` with ``--format terminal``)."""
    console = Console(record=True, width=width, file=io.StringIO(), color_system=None)
    console.print(to_rich(view))
    return console.export_text()


RENDERERS: dict[str, Callable[[TableView], str]] = {
    "terminal": to_terminal_text,
    "markdown": to_markdown,
    "latex": to_latex,
    "csv": to_csv,
}


def render(view: TableView, fmt: str) -> str:
    """``view`` as text in ``fmt`` (terminal, markdown, latex, csv)."""
    return RENDERERS[check_format(fmt)](view)
