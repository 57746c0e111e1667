"""HTML building blocks of the report: escaping, the page frame, the navigation, numbers as text.

Every text that comes from a row (trial errors and tracebacks, configuration values, sweep names) goes through
`esc` or `json_script`; nothing from the store is ever written into a page unescaped. Pages link to the shared
stylesheet and scripts under ``assets/`` by relative paths, so the folder opens from disk (``file://``) with no
server and no network.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

import pandas as pd

ASSETS_DIR = "assets"
STYLESHEET = f"{ASSETS_DIR}/report.css"

# (file, title) of the pages in the navigation bar, in its order.
NAVIGATION: tuple[tuple[str, str], ...] = (
    ("index.html", "Overview"),
    ("tables.html", "Tables"),
    ("figures.html", "Figures"),
    ("explore.html", "Explore"),
    ("pivot.html", "Pivot"),
    ("trials.html", "Trials"),
    ("failures.html", "Failures"),
)


def esc(value: Any) -> str:
    """``value`` as HTML text (``&``, ``<``, ``>`` and both quotes escaped); ``None`` as an empty string."""
    return "" if value is None else html.escape(str(value), quote=True)


def is_null(value: Any) -> bool:
    """A missing cell: None, pandas' NA, NaN."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def text_of(value: Any) -> str:
    """A cell as text: empty for a null (never ``nan`` or ``<NA>`` on a page)."""
    return "" if is_null(value) else str(value)


def json_script(element_id: str, value: Any) -> str:
    """``value`` as JSON inside ``<script type="application/json">``, safe against ``</script>`` and comments in
    the data (``<``, ``>``, ``&`` written as JSON escapes)."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="{esc(element_id)}">{text}</script>'


def number(value: Any, digits: int = 4) -> str:
    """A score or a time as printed: ``digits`` decimals, ``-`` when missing or not a number."""
    try:
        number_value = float(value)
    except (TypeError, ValueError):
        return "-"
    return "-" if math.isnan(number_value) else f"{number_value:.{digits}f}"


def page(title: str, body: str, *, depth: int = 0, current: str = "", refresh_s: int | None = None) -> str:
    """A whole HTML page: ``body`` under the navigation bar. ``depth``: folders below the report's root (trial
    pages live in ``trials/``); ``current``: the navigation file to mark; ``refresh_s``: reload every so many
    seconds (pages of a report kept up to date by ``--watch``)."""
    up = "../" * depth
    links = " ".join(
        f'<a href="{up}{target}"{" class=current" if target == current else ""}>{esc(label)}</a>'
        for target, label in NAVIGATION
    )
    refresh = f'<meta http-equiv="refresh" content="{int(refresh_s)}">' if refresh_s else ""
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{esc(title)} · kdgrid report</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">{refresh}'
        f'<link rel="stylesheet" href="{up}{STYLESHEET}"></head>\n'
        f'<body><nav><span class="brand">kdgrid</span> {links}</nav>\n<main>\n<h1>{esc(title)}</h1>\n'
        f"{body}\n</main></body></html>\n"
    )


def table(headers: list[str], rows: list[list[str]], *, cls: str = "") -> str:
    """A plain HTML table; ``headers`` are escaped here, the cells are HTML already (escape them first)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table class="{esc(cls)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def definition_list(items: list[tuple[str, str]]) -> str:
    """``<dl>`` of (term, HTML value) pairs; the terms are escaped here."""
    return "<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in items) + "</dl>"
