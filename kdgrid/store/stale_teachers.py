"""Dependants whose teacher no longer exists: done trials that learnt from another trial's student (a teacher
assistant, `kdgrid.grid.stages`) whose weights are not the ones kept now.

A dependant's done row records which trial taught it and the SHA-256 of that trial's kept student when it
learnt (``extra["teacher_trial_id"]``, ``extra["teacher_weights_sha256"]``); the assistant's own latest done row
records the SHA-256 of the student it keeps now (``extra["student_weights_sha256"]``). When the assistant is
forgotten and trained again (or its student replaced otherwise), the two differ, or the assistant has no done row
at all: the dependant's numbers were produced by a teacher that is gone, and no table should present them as
the current assistant's pupil's. `stale_dependants` finds them by the rows alone (one read of two columns); `kdgrid
status`, `kdgrid store check`, `kdgrid tables` and the report name them, and ``kdgrid resume SWEEP
--stale-dependants`` trains them again (their rows forgotten first, kept in ``_forgotten/``), with the trials
that learnt from them in turn (`with_their_dependants`): their teachers will be new students too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from kdgrid.core.model.trained_teacher import TEACHER_SHA256, TEACHER_TRIAL, WEIGHTS_SHA256
from kdgrid.store.read import latest_done_rows, read_table

COLUMNS = ["trial_id", "status", "row_id", "written_at", "extra_json"]
SHOWN = 10  # commands name this many stale dependants, then count the rest


def _extra(text: object) -> dict:
    if not isinstance(text, str):
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def stale_dependants(rows: pd.DataFrame) -> dict[str, str]:
    """``{dependant trial id: why its teacher no longer exists}`` over ``rows`` (the store's rows, with at least
    `COLUMNS`), judged on each trial's latest done row; sorted by trial id."""
    if rows.empty:
        return {}
    latest = latest_done_rows(rows[[c for c in COLUMNS if c in rows.columns]])
    extras = {trial_id: _extra(text) for trial_id, text in zip(latest["trial_id"], latest["extra_json"], strict=True)}
    found: dict[str, str] = {}
    for trial_id in sorted(extras):
        extra = extras[trial_id]
        teacher, learnt_from = extra.get(TEACHER_TRIAL), extra.get(TEACHER_SHA256)
        if not isinstance(teacher, str) or not isinstance(learnt_from, str):
            continue  # not a dependant (or written before the hash was recorded: nothing to compare)
        if teacher not in extras:
            found[trial_id] = (
                f"its teacher, trial {teacher}'s student, is gone: {teacher} has no done row (forgotten or "
                "failed since)"
            )
            continue
        now = extras[teacher].get(WEIGHTS_SHA256)
        if now != learnt_from:
            kept = f"sha256 {now[:12]}" if isinstance(now, str) else "none"
            found[trial_id] = (
                f"its teacher, trial {teacher}'s student, was trained again: it learnt from weights sha256 "
                f"{learnt_from[:12]}, the student kept now is {kept}"
            )
    return found


def with_their_dependants(rows: pd.DataFrame, trial_ids: set[str]) -> set[str]:
    """``trial_ids`` and every done trial that learnt, directly or down a chain, from one of them (by the latest
    done rows of ``rows``): what must train again once they do, since their students will be new."""
    latest = latest_done_rows(rows[[c for c in COLUMNS if c in rows.columns]])
    pupils: dict[str, set[str]] = {}
    for trial_id, text in zip(latest["trial_id"], latest["extra_json"], strict=True):
        teacher = _extra(text).get(TEACHER_TRIAL)
        if isinstance(teacher, str):
            pupils.setdefault(teacher, set()).add(trial_id)
    found, frontier = set(trial_ids), list(trial_ids)
    while frontier:
        for pupil in pupils.get(frontier.pop(), ()):
            if pupil not in found:
                found.add(pupil)
                frontier.append(pupil)
    return found


def read_rows(store: Path | str) -> pd.DataFrame:
    """The rows' `COLUMNS` of ``store``."""
    return read_table(store, COLUMNS).to_pandas()


def read_stale_dependants(store: Path | str) -> dict[str, str]:
    """`stale_dependants` of every row of ``store`` (an empty dict for a store that does not exist)."""
    if not Path(store).exists():
        return {}
    return stale_dependants(read_rows(store))


def describe(stale: dict[str, str], *, limit: int = SHOWN) -> list[str]:
    """One line per stale dependant (the first ``limit``), then one counting the rest."""
    lines = [f"stale {trial_id}: {why}" for trial_id, why in list(stale.items())[:limit]]
    if len(stale) > limit:
        lines.append(f"... and {len(stale) - limit:,} more stale dependant(s)")
    return lines
