"""The paper's derived claims (Section 4.4), recomputed from whatever numbers a table is laid out from, as notes
printed under Tables 5, 6 and 8. The computations are `kdgrid.analysis.paper_conclusions`; this module only words them, with both
readings where the paper's text is ambiguous (see kdgrid/analysis/paper/NOTES.md, "The paper's derived claims")."""

from __future__ import annotations

import pandas as pd

from kdgrid.analysis import paper_conclusions as conclusions
from kdgrid.analysis.tidy import normalise
from kdgrid.errors import ConfigError

PAPER_SHARE = {"5": "25 of 27", "6": "22 of 27"}


def _share_note(rows: pd.DataFrame, table: str) -> str:
    loose = conclusions.strategy_share(rows, ties="any")
    strict = conclusions.strategy_share(rows, ties="all")
    by_mean = conclusions.strategy_share(rows, best_of="strategy_mean")
    return (
        f"best configuration at First-1 or Last-1 in {loose.count:g} of {loose.total} (student, dev set) conditions "
        f"({strict.count:g} counting ties strictly; {by_mean.count:g} when strategies are ranked by their mean over "
        f"the knowledge types). The paper: {PAPER_SHARE[table]}."
    )


def _variance_note(rows: pd.DataFrame) -> str:
    literal = conclusions.mean_strategy_variance(rows)
    cells = conclusions.mean_strategy_variance(rows, over="configurations")
    return (
        f"average variance across matching strategies: {literal:.6f} (per condition and knowledge type); "
        f"{cells:.6f} across all knowledge x strategy cells of a condition. The paper: about 0.00045 "
        "(its Table 5 gives that figure only by the second reading)."
    )


def _improvement_note(weighted: pd.DataFrame, plain: pd.DataFrame) -> str:
    cells = conclusions.improvement_share(weighted, plain)
    best = conclusions.improvement_share(weighted, plain, on=conclusions.CONDITION)
    return (
        f"calibrated weights vs beta = 1 (Table 5), cell by cell: {cells.better} better, {cells.equal} equal, "
        f"{cells.worse} worse ({cells.share_better:.0%} better); best per condition: {best.better} better, "
        f"{best.equal} equal, {best.worse} worse. The paper: improves over 80% of the student models."
    )


def claim_notes(table: str, tidy: pd.DataFrame) -> list[str]:
    """The derived claims that concern ``table`` ("5", "6", "8"), from the rows of ``tidy`` (a store's or the
    paper's); nothing for other tables, or where the rows are too few for a claim to be defined."""
    if table not in ("5", "6", "8") or tidy.empty:
        return []
    frame = normalise(tidy)
    rows = frame[frame["table"] == table]
    notes: list[str] = []
    attempts = []
    if table == "5":
        single = conclusions.single_match(rows)
        attempts = [lambda: _share_note(single, "5"), lambda: _variance_note(single)]
    elif table == "6":
        attempts = [lambda: _share_note(conclusions.double_match(rows), "6")]
    else:
        plain = conclusions.single_match(frame[frame["table"] == "5"])
        if not plain.empty:
            attempts = [lambda: _improvement_note(conclusions.single_match(rows), plain)]
    for attempt in attempts:
        try:
            notes.append(attempt())
        except (ConfigError, ValueError, ZeroDivisionError):
            continue  # too few rows for this claim: say nothing rather than something undefined
    return notes
