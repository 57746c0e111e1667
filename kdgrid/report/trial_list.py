"""The trial list page: every trial of the report, sortable and filterable in the browser, fast at 30,000 rows.

The rows travel as one JSON blob in the page (columns once, then one array per trial: about 150 bytes a trial);
``assets/trials.js`` sorts and filters them in memory and puts only one page of rows (`PAGE_ROWS`) into the DOM,
so a filter keystroke over 30,000 trials re-renders 200 rows, not 30,000.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from kdgrid.paper import reported_metric
from kdgrid.report.gather import ReportData, parse_json
from kdgrid.report.html import ASSETS_DIR, json_script, page
from kdgrid.report.labels import DEGENERATE_WORD, SCORE_DIGITS, degenerate_reasons, knowledge_text
from kdgrid.report.trial_page import TRIAL_PAGE_PATTERN

TRIAL_LIST_SCRIPT = f"{ASSETS_DIR}/trials.js"
PAGE_ROWS = 200
# Decimals the list prints a numeric column with (every score alike: 0.7100, never 0.71 beside 0.717).
COLUMN_DIGITS = {"score": SCORE_DIGITS, "time": 1}
# (key, header) of the list's columns, in order; "id" links to the trial's page.
LIST_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "trial"),
    ("state", "state"),
    ("flag", "flag"),
    ("sweep", "sweep"),
    ("study", "study"),
    ("task", "task"),
    ("student", "student"),
    ("knowledge", "knowledge"),
    ("strategy", "strategy"),
    ("seed", "seed"),
    ("score", "score"),
    ("interval", "95% interval"),
    ("epoch", "best epoch"),
    ("time", "wall s"),
    ("attempts", "attempts"),
    ("error", "error"),
)


def primary_score(task: Any, scores_json: Any) -> float | None:
    """The score the paper reports for ``task`` on its first dev set (``None`` when the row has none)."""
    scores = parse_json(scores_json, {})
    if not isinstance(scores, dict) or not scores:
        return None
    first = next(iter(scores.values()))
    value = first.get(reported_metric(str(task))) if isinstance(first, dict) else None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return round(number, 4) if math.isfinite(number) else None


def _plain(value: Any) -> Any:
    """A cell as JSON: None for nulls and NaN, numbers as numbers, everything else as text."""
    if value is None or value is pd.NA or (isinstance(value, float) and not math.isfinite(value)):
        return None
    if isinstance(value, (int, float, str)):
        return value
    try:
        return value.item()  # numpy scalars
    except AttributeError:
        return str(value)


def interval_text(interval: tuple[float, float] | None) -> str | None:
    """A score's 95% interval as the list prints it, in the score's digits: ``[0.6911, 0.7489]``."""
    if interval is None:
        return None
    low, high = interval
    return f"[{low:.{SCORE_DIGITS}f}, {high:.{SCORE_DIGITS}f}]"


def list_records(
    data: ReportData, intervals: Mapping[str, tuple[float, float]] | None = None
) -> list[list[Any]]:
    """One array per trial (the values of `LIST_COLUMNS`), trials in id order; pending ones last.
    ``intervals``: trial id -> the 95% interval of its score (`kdgrid.report.trial_intervals`)."""
    intervals = intervals or {}
    records = []
    for trial_id in data.trials.index:
        row = data.record(str(trial_id))
        wall = _plain(row["wall_time_s"])
        records.append(
            [
                str(trial_id),
                row["state"],
                DEGENERATE_WORD if degenerate_reasons(row) else None,
                _plain(row["sweep"]),
                _plain(row["study"]),
                _plain(row["task"]),
                _plain(row["student"]),
                knowledge_text(row["knowledge"], row.get("soft_weight")),
                _plain(row["strategy"]),
                _plain(row["seed"]),
                primary_score(row["task"], row["scores_json"]) if row["state"] == "done" else None,
                interval_text(intervals.get(str(trial_id))) if row["state"] == "done" else None,
                _plain(row["best_epoch"]),
                round(wall, 1) if isinstance(wall, float) else wall,
                int(row["attempts"]),
                _plain(row["error_type"]) if row["state"] == "failed" else None,
            ]
        )
    for (sweep, study), ids in sorted(data.pending.items()):
        for trial_id in ids:
            state = "running" if trial_id in data.running else "pending"
            records.append([trial_id, state, None, sweep, study, *([None] * (len(LIST_COLUMNS) - 5))])
    return records


def trial_list_page(
    data: ReportData,
    *,
    refresh_s: int | None = None,
    intervals: Mapping[str, tuple[float, float]] | None = None,
) -> str:
    blob = {"columns": [key for key, _ in LIST_COLUMNS], "headers": [h for _, h in LIST_COLUMNS],
            "rows": list_records(data, intervals), "pageRows": PAGE_ROWS, "digits": COLUMN_DIGITS, "pagePattern": TRIAL_PAGE_PATTERN}  # fmt: skip
    body = (
        '<div class="controls"><input id="filter" type="search" size="50" '
        'placeholder="filter: words that must all appear, or column:value (state:failed task:sst2)">'
        ' <span id="count"></span> <button id="prev" type="button">◀</button>'
        ' <span id="pageinfo"></span> <button id="next" type="button">▶</button></div>'
        '<table id="trials" class="list"><thead></thead><tbody></tbody></table>'
        + json_script("trial-data", blob)
        + f'<script src="{TRIAL_LIST_SCRIPT}"></script>'
    )
    return page("Trials", body, current="trials.html", refresh_s=refresh_s)
