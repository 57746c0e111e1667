"""The report's explore and pivot pages: every sweep's configurations (seeds aggregated, with the sweep tables'
intervals, tests and marks: `kdgrid.report.configurations`) as one JSON blob, drawn by scripts in ``assets/``
(`kdgrid.report.explore_assets`).

- ``explore.html``: parallel coordinates, one line per configuration across the sweep's axes (categorical,
  numeric or log, `kdgrid.report.configurations.axis_type`) and its mean score, with the mean's 95% interval
  drawn on the score axis; drag along an axis to brush (keep a range or some values; a click clears it), colour
  by an axis or by a reference's marks; the selection listed (best mean first) with links to its trials, opened
  together in the trial list, or downloaded as CSV. The view is in the address (a link shares it).
- ``pivot.html``: any axis down the rows, any other across the columns, the remaining axes as blocks or fixed to
  one value; each cell one configuration with its mean, interval and, against a chosen reference, the mark
  ``kdgrid tables --sweep NAME --rows .. --cols .. --reference ..`` prints (the page shows that command).
"""

from __future__ import annotations

from typing import Any

from kdgrid.report.html import ASSETS_DIR, esc, json_script, page

EXPLORE_SCRIPTS = (f"{ASSETS_DIR}/explore-common.js", f"{ASSETS_DIR}/explore.js")
PIVOT_SCRIPTS = (f"{ASSETS_DIR}/explore-common.js", f"{ASSETS_DIR}/pivot.js")
DATA_ID = "config-data"


def _blob(sweeps: list[dict[str, Any]], problems: list[str]) -> str:
    return json_script(DATA_ID, {"sweeps": sweeps, "problems": problems})


def _problems(problems: list[str]) -> str:
    return "".join(f'<p class="warning">{esc(problem)}</p>' for problem in problems)


def _scripts(names: tuple[str, ...]) -> str:
    return "".join(f'<script src="{name}"></script>' for name in names)


def explore_page(sweeps: list[dict[str, Any]], problems: list[str], *, refresh_s: int | None = None) -> str:
    body = (
        '<p class="muted">One line per configuration (its seeds aggregated), across the sweep\'s axes to its mean '
        "score; the vertical bar on the score axis is the mean's 95% interval (seed-level with two or more seeds, "
        "run-to-run with one). Drag along an axis to keep a range or some of its values; click an axis to clear "
        "its brush. The view is kept in the address.</p>"
        + _problems(problems)
        + '<div class="controls"><label>sweep <select id="sweep"></select></label>'
        '<label>colour <select id="color"></select></label>'
        '<label>reference <select id="reference"></select></label>'
        '<button id="clear" type="button">clear brushes</button> <span id="count"></span></div>'
        '<div id="legend"></div><p id="note" class="muted"></p>'
        '<canvas id="plot" width="1300" height="460"></canvas>'
        '<div class="controls"><a id="open"></a> · <button id="csv" type="button">download CSV</button>'
        ' <span id="more" class="muted"></span></div>'
        '<table id="selection" class="list"><thead></thead><tbody></tbody></table>'
        + _blob(sweeps, problems)
        + _scripts(EXPLORE_SCRIPTS)
    )
    return page("Explore", body, current="explore.html", refresh_s=refresh_s)


def pivot_page(sweeps: list[dict[str, Any]], problems: list[str], *, refresh_s: int | None = None) -> str:
    body = (
        '<p class="muted">Each cell is one configuration, its seeds aggregated: the mean with its 95% interval '
        "(the numbers of <code>kdgrid tables --sweep</code>); with a reference, ▲/▼ its test against the reference "
        "of its slice, corrected as the command below does. Axes on neither rows nor columns are blocks, or fixed "
        "to one value. A cell links to its trials.</p>"
        + _problems(problems)
        + '<div class="controls"><label>sweep <select id="sweep"></select></label>'
        '<label>rows <select id="rows"></select></label><label>columns <select id="cols"></select></label>'
        '<label>show <select id="measure"></select></label>'
        '<label>reference <select id="reference"></select></label> <span id="pivot-count"></span></div>'
        '<div class="controls" id="filters"></div><p id="note" class="muted"></p>'
        '<p class="muted">the same table: <code class="cmd" id="command"></code></p><p id="test-note" class="muted"></p>'
        '<div id="pivot" class="blocks"></div>' + _blob(sweeps, problems) + _scripts(PIVOT_SCRIPTS)
    )
    return page("Pivot", body, current="pivot.html", refresh_s=refresh_s)
