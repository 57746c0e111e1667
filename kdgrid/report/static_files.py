"""The report's stylesheet and its one script, written here (no CDN, no web font, no library): the report folder
opens from disk with no network.

``trials.js`` draws the trial list from the page's JSON blob (`kdgrid.report.trial_list`): sort by a column
header (click again to reverse; missing values last), filter by words that must all appear in a row or by
``column:value`` terms (``?q=`` in the address), only the trials ``?ids=A,B,...`` names (how the explore and
pivot pages open a selection), one page of rows at a time. The explore and pivot pages' scripts are in
`kdgrid.report.explore_assets`. Every value goes into the DOM as text (``textContent``),
never as HTML.
"""

from __future__ import annotations

from pathlib import Path

from kdgrid.report.explore_assets import ASSETS as EXPLORE_ASSETS
from kdgrid.report.explore_assets import EXPLORE_CSS
from kdgrid.report.html import ASSETS_DIR

CSS = """\
:root { --fg: #1b1f24; --muted: #5b636e; --line: #d8dde3; --bg: #ffffff; --band: #f4f6f8; --accent: #0b5cad;
  --ok: #1a7f37; --bad: #c0362c; --wait: #9a6700; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
  background: var(--bg); }
nav { position: sticky; top: 0; z-index: 2; background: #20262e; padding: 8px 16px; }
nav a { color: #d6dde5; margin-right: 14px; text-decoration: none; }
nav a.current, nav a:hover { color: #fff; text-decoration: underline; }
nav .brand { color: #fff; font-weight: 700; margin-right: 18px; }
main { padding: 12px 20px 40px; max-width: 1500px; }
h1 { font-size: 22px; margin: 8px 0 12px; } h2 { font-size: 18px; margin-top: 28px; } h3 { font-size: 15px; }
a { color: var(--accent); }
table { border-collapse: collapse; margin: 6px 0 14px; }
th, td { border-bottom: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
thead th { background: var(--band); position: sticky; top: 37px; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.missing { color: var(--muted); }
.paper { color: var(--muted); font-size: 12px; }
.unc { font-size: 11px; color: var(--muted); white-space: nowrap; }
.sig { color: var(--accent); font-weight: 700; } .degenerate { color: var(--bad); }
.blocks.side { display: flex; flex-wrap: wrap; gap: 24px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 8px 0 16px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px; min-width: 150px; background: var(--band); }
.card .big { font-size: 22px; font-weight: 700; } .card .label { color: var(--muted); font-size: 12px; }
.state-done { color: var(--ok); } .state-failed { color: var(--bad); }
.warning { border-left: 4px solid var(--bad); background: #fdf0ef; padding: 6px 10px; margin: 8px 0; }
.findings h3.better { color: var(--ok); } .findings h3.worse, .findings h3.degenerate { color: var(--bad); }
.runs { font-size: 11px; color: var(--muted); white-space: nowrap; }
table.settings td:last-child { font-variant-numeric: tabular-nums; }
.state-pending, .state-running, td.pending, span.pending { color: var(--wait); }
.bar { display: inline-flex; width: 160px; height: 10px; background: var(--line); border-radius: 3px; overflow: hidden;
  vertical-align: middle; }
.bar .done { background: var(--ok); } .bar .failed { background: var(--bad); } .bar .running { background: var(--wait); }
pre { background: var(--band); border: 1px solid var(--line); padding: 8px; overflow: auto; max-height: 480px;
  white-space: pre-wrap; word-break: break-word; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; }
dt { color: var(--muted); } dd { margin: 0; }
figure.chart { display: inline-block; margin: 6px 18px 12px 0; }
figure.chart figcaption { font-size: 12px; max-width: 420px; }
.key { margin-right: 10px; white-space: nowrap; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 4px; border-radius: 2px; }
svg .tick { font-size: 10px; fill: var(--muted); }
svg .axis-title { font-size: 11px; fill: currentColor; }
.swatch.line { width: 22px; height: 3px; vertical-align: middle; border-radius: 0; }
.figures img { max-width: 100%; border: 1px solid var(--line); margin: 6px 0 18px; }
.controls { margin: 6px 0; } .controls input { padding: 4px 6px; }
table.list th { cursor: pointer; user-select: none; }
table.list th.sorted-asc::after { content: " ▲"; } table.list th.sorted-desc::after { content: " ▼"; }
.muted, .generated { color: var(--muted); font-size: 12px; }
code.cmd { background: var(--band); padding: 2px 6px; border: 1px solid var(--line); border-radius: 4px; }
"""

TRIALS_JS = """\
"use strict";
(function () {
  const blob = JSON.parse(document.getElementById("trial-data").textContent);
  const columns = blob.columns, headers = blob.headers, pageRows = blob.pageRows;
  const digits = blob.digits || {};
  const pagePattern = new RegExp(blob.pagePattern);
  const numeric = columns.map((_, i) => blob.rows.some((r) => typeof r[i] === "number"));
  const table = document.getElementById("trials");
  const input = document.getElementById("filter");
  const count = document.getElementById("count");
  const info = document.getElementById("pageinfo");
  // One lower-case text per row, built once: filtering 30,000 rows is then one scan of strings.
  const haystack = blob.rows.map((r) => r.map((v) => (v === null ? "" : String(v).toLowerCase())));
  let shown = blob.rows.map((_, i) => i), sortColumn = -1, descending = false, page = 0;

  const headRow = document.createElement("tr");
  headers.forEach((text, i) => {
    const th = document.createElement("th");
    th.textContent = text;
    if (numeric[i]) th.className = "num";
    th.addEventListener("click", () => { sortBy(i); });
    headRow.appendChild(th);
  });
  table.tHead.appendChild(headRow);

  function compare(a, b) {
    const x = blob.rows[a][sortColumn], y = blob.rows[b][sortColumn];
    if (x === null && y === null) return a - b;
    if (x === null) return 1;
    if (y === null) return -1;
    const order = numeric[sortColumn] ? x - y : String(x).localeCompare(String(y));
    return (descending ? -order : order) || a - b;
  }

  function sortBy(i) {
    descending = sortColumn === i ? !descending : false;
    sortColumn = i;
    Array.from(headRow.children).forEach((th, j) => {
      th.classList.toggle("sorted-asc", j === i && !descending);
      th.classList.toggle("sorted-desc", j === i && descending);
    });
    shown.sort(compare);
    page = 0;
    render();
  }

  function applyFilter() {
    const terms = input.value.toLowerCase().split(/\\s+/).filter(Boolean).map((term) => {
      const colon = term.indexOf(":");
      const column = colon > 0 ? columns.indexOf(term.slice(0, colon)) : -1;
      return column >= 0 ? { column, text: term.slice(colon + 1) } : { column: -1, text: term };
    });
    const started = performance.now();
    shown = [];
    for (let i = 0; i < haystack.length; i++) {
      if (onlyIds && !onlyIds.has(blob.rows[i][0])) continue;
      const row = haystack[i];
      if (terms.every((t) => (t.column >= 0 ? row[t.column].includes(t.text) : row.some((v) => v.includes(t.text))))) {
        shown.push(i);
      }
    }
    if (sortColumn >= 0) shown.sort(compare);
    page = 0;
    render();
    table.dataset.filterMs = (performance.now() - started).toFixed(1);
  }

  function render() {
    const started = performance.now();
    const pages = Math.max(1, Math.ceil(shown.length / pageRows));
    page = Math.min(page, pages - 1);
    const body = document.createElement("tbody");
    for (const index of shown.slice(page * pageRows, (page + 1) * pageRows)) {
      const row = blob.rows[index];
      const tr = document.createElement("tr");
      row.forEach((value, i) => {
        const td = document.createElement("td");
        const fixed = digits[columns[i]];
        const text = value === null ? "" : typeof value === "number" && fixed !== undefined ? value.toFixed(fixed) : String(value);
        if (i === 0 && pagePattern.test(text) && (row[1] === "done" || row[1] === "failed")) {
          const a = document.createElement("a");
          a.href = "trials/" + text + ".html";
          a.textContent = text;
          td.appendChild(a);
        } else {
          td.textContent = text;
        }
        if (i === 1) td.className = "state-" + text;
        if (columns[i] === "flag" && text) td.className = "degenerate";
        if (numeric[i]) td.classList.add("num");
        tr.appendChild(td);
      });
      body.appendChild(tr);
    }
    table.replaceChild(body, table.tBodies[0]);
    count.textContent = shown.length + " of " + blob.rows.length + " trials";
    info.textContent = "page " + (page + 1) + " of " + pages;
    // For the benchmark: ms of the last draw, and since navigation began (data parsed, filtered, drawn).
    table.dataset.drawMs = (performance.now() - started).toFixed(1);
    table.dataset.readyMs = performance.now().toFixed(1);
  }

  // ?ids=A,B,...: only these trials (the explore and pivot pages open a selection so), then any filter typed.
  const only = new URLSearchParams(window.location.search).get("ids");
  const onlyIds = only ? new Set(only.split(",")) : null;

  let timer = null;
  input.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(applyFilter, 120); });
  document.getElementById("prev").addEventListener("click", () => { if (page > 0) { page--; render(); } });
  document.getElementById("next").addEventListener("click", () => { page++; render(); });
  const asked = new URLSearchParams(window.location.search).get("q");
  if (asked) input.value = asked;
  if (asked || onlyIds) { applyFilter(); } else { render(); }
})();
"""

ASSET_FILES: dict[str, str] = {"report.css": CSS + EXPLORE_CSS, "trials.js": TRIALS_JS, **EXPLORE_ASSETS}


def asset_paths(out: Path) -> dict[Path, str]:
    """Where each asset goes under the report folder ``out``, and its text."""
    return {Path(out) / ASSETS_DIR / name: text for name, text in ASSET_FILES.items()}
