"""What a report shows, gathered from a store's rows: each trial's state and deciding row, the pending trials the
recorded sweep memberships list, the per-(sweep, study) overview and the failures grouped by error type.

Conventions: a trial's state follows the store's one rule (`kdgrid.store.read.latest_state`: done wins over
failed); a trial is **pending** when a sweep that ran against the store listed it (`kdgrid.store.membership`) and
it has no row yet, **running** when pending with a live claim. Times: ``wall_time_s`` of every row (failed
attempts included) summed is the device time spent, in seconds (a row's time is its share of its job's).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from kdgrid.bundled_sweeps import bundled_sweep
from kdgrid.errors import KdgridError
from kdgrid.store.claims import live_claims
from kdgrid.store.membership import SweepMembership, read_memberships
from kdgrid.store.read import latest_state

SECONDS_PER_HOUR = 3600.0


class NoRowsError(KdgridError):
    """There is no store yet, or it (or the sweeps asked for) holds no rows yet: `kdgrid report` refuses,
    ``--watch`` and ``run --report`` wait."""


@dataclass(frozen=True)
class StudyCounts:
    """The overview line of one (sweep, study)."""

    sweep: str
    study: str
    done: int
    failed: int
    pending: int
    running: int
    attempts: int
    device_hours: float  # sum of the rows' wall_time_s / 3600
    elapsed_hours: float  # first started_at to last ended_at of its rows (NaN without timestamps)


@dataclass(frozen=True)
class FailureGroup:
    """The failed trials (latest row failed, no done row) sharing one error type."""

    error_type: str
    trial_ids: list[str]
    sweeps: list[str]


@dataclass
class ReportData:
    """Everything the pages are drawn from.

    Attributes:
        store: the store read.
        rows: every row of the selected sweeps (one per attempt), the store's columns.
        trials: one row per trial: its deciding row (latest done, else latest failed) with ``state``,
            ``attempts``, ``failures`` added; indexed by ``trial_id``.
        pending: (sweep, study) -> the trial ids listed but without a row, in listing order.
        running: the pending trials with a live claim.
        memberships: the recorded memberships of the selected sweeps.
    """

    store: Path
    rows: pd.DataFrame
    trials: pd.DataFrame
    pending: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    running: set[str] = field(default_factory=set)
    memberships: list[SweepMembership] = field(default_factory=list)
    _records: dict[str, dict[str, Any]] | None = field(default=None, repr=False)
    _attempts: dict[str, list[dict[str, Any]]] | None = field(default=None, repr=False)

    def record(self, trial_id: str) -> dict[str, Any]:
        """The trial's deciding row as a plain dict (``trial_id``, ``state``, ``attempts`` and every column)."""
        if (
            self._records is None
        ):  # plain dicts, built once: 30,000 pages read them, pandas indexing per page is slow
            self._records = {str(r["trial_id"]): r for r in self.trials.reset_index().to_dict("records")}
        return self._records[trial_id]

    def attempts(self, trial_id: str) -> list[dict[str, Any]]:
        """Every row of ``trial_id`` as a plain dict, oldest first (by ``written_at``)."""
        if self._attempts is None:
            grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for row in self.rows.to_dict("records"):
                grouped[str(row["trial_id"])].append(row)
            for rows in grouped.values():
                rows.sort(key=lambda r: r["written_at"] if isinstance(r["written_at"], str) else "")
            self._attempts = dict(grouped)
        return self._attempts.get(trial_id, [])


def _matches(sweep: str, wanted: list[str]) -> bool:
    """A row's sweep name against ``--sweep`` values: the name, a file name or a path of it."""
    return any(sweep == w or sweep == Path(w).stem or Path(sweep).stem == Path(w).stem for w in wanted)


def select_sweeps(rows: pd.DataFrame, memberships: list[SweepMembership], sweeps: list[str] | None):
    """The rows and memberships of ``sweeps`` (all when None).

    Raises:
        KdgridError: a sweep asked for that neither a row nor a membership names (the present ones listed).
    """
    if not sweeps:
        return rows, memberships
    present = sorted({*map(str, rows["sweep"].dropna()), *(m.sweep for m in memberships)})
    unknown = [w for w in sweeps if not any(_matches(s, [w]) for s in present)]
    if unknown:
        raise KdgridError(
            f"the store holds no rows of sweep(s) {', '.join(unknown)}; its sweeps: {', '.join(present) or 'none'}"
        )
    keep = rows["sweep"].map(lambda s: isinstance(s, str) and _matches(s, sweeps)).astype(bool)
    return rows[keep], [m for m in memberships if _matches(m.sweep, sweeps)]


def deciding_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per trial: the row `latest_state` says decides its state, with ``state``, ``attempts`` and
    ``failures``; indexed by ``trial_id``."""
    states = latest_state(rows)
    if states.empty:
        return rows.iloc[0:0].assign(state=[], attempts=[], failures=[]).set_index("trial_id")
    chosen = rows.set_index("row_id").loc[states["row_id"].to_list()].reset_index()
    chosen = chosen.set_index("trial_id")
    return chosen.join(states[["state", "attempts", "failures"]])


def gather(store: Path, rows: pd.DataFrame, sweeps: list[str] | None = None) -> ReportData:
    """The report's data from ``rows`` (the store's, e.g. `kdgrid.report.rows.StoreRows.frame`).

    Raises:
        KdgridError: the store (or the sweeps asked for) holds no rows.
    """
    memberships = read_memberships(store, skip_bad=True)  # a bad file: warned and left out, as a bad row file
    rows, memberships = select_sweeps(rows, memberships, sweeps)
    if rows.empty:
        which = f" of sweep(s) {', '.join(sweeps)}" if sweeps else ""
        raise NoRowsError(
            f"the store {store} holds no rows{which} yet: run a sweep first (`kdgrid run SWEEP --store {store}`)"
        )
    trials = deciding_rows(rows)
    seen = set(trials.index)
    pending: dict[tuple[str, str], list[str]] = defaultdict(list)
    for membership in memberships:
        for trial_id, study in membership.trials.items():
            if trial_id not in seen and trial_id not in pending[(membership.sweep, study)]:
                pending[(membership.sweep, study)].append(trial_id)
    waiting = {t for ids in pending.values() for t in ids}
    running = set(live_claims(store, waiting)) if waiting else set()
    return ReportData(Path(store), rows, trials, dict(pending), running, memberships)


def _hours_between(started: pd.Series, ended: pd.Series) -> float:
    start = pd.to_datetime(started, errors="coerce", utc=True).min()
    end = pd.to_datetime(ended, errors="coerce", utc=True).max()
    if pd.isna(start) or pd.isna(end):
        return math.nan
    return max((end - start).total_seconds(), 0.0) / SECONDS_PER_HOUR


def study_counts(data: ReportData) -> list[StudyCounts]:
    """One line per (sweep, study) of the rows or the memberships, sorted by sweep then study. A line counts the
    trials its sweep lists (its membership) and those whose rows it wrote, each in the state its deciding row
    gives, whichever sweep wrote that row: as `kdgrid status` counts a sweep. Two sweeps sharing trials both count
    them (`unique_counts` counts each trial once). Rows and device time: the attempts the line's sweep made."""
    rows = data.rows.assign(sweep=data.rows["sweep"].fillna(""), study=data.rows["study"].fillna(""))
    members: dict[tuple[str, str], set[str]] = defaultdict(set)
    for sweep, study, trial_id in zip(rows["sweep"], rows["study"], rows["trial_id"], strict=True):
        members[(str(sweep), str(study))].add(str(trial_id))
    for membership in data.memberships:
        for trial_id, study in membership.trials.items():
            members[(membership.sweep, study)].add(trial_id)
    keys = sorted({*members, *data.pending})
    states = data.trials["state"]
    lines = []
    for sweep, study in keys:
        ids = [t for t in members.get((sweep, study), set()) if t in states.index]
        mine = states.loc[ids]
        attempts = rows[(rows["sweep"] == sweep) & (rows["study"] == study)]
        pending = data.pending.get((sweep, study), [])
        seconds = pd.to_numeric(attempts["wall_time_s"], errors="coerce").fillna(0.0).sum()
        lines.append(
            StudyCounts(
                sweep=sweep,
                study=study,
                done=int((mine == "done").sum()),
                failed=int((mine == "failed").sum()),
                pending=len(pending),
                running=sum(t in data.running for t in pending),
                attempts=len(attempts),
                device_hours=float(seconds) / SECONDS_PER_HOUR,
                elapsed_hours=_hours_between(attempts["started_at"], attempts["ended_at"]),
            )
        )
    return lines


def unique_counts(data: ReportData) -> tuple[int, int, int, int]:
    """(done, failed, pending, running) over the store's trials, each trial counted once however many sweeps
    list it."""
    states = data.trials["state"]
    waiting = {t for ids in data.pending.values() for t in ids}
    return (
        int((states == "done").sum()),
        int((states == "failed").sum()),
        len(waiting),
        len(waiting & data.running),
    )


def failure_groups(data: ReportData) -> list[FailureGroup]:
    """The failed trials grouped by their latest error type, the largest group first."""
    failed = data.trials[data.trials["state"] == "failed"]
    groups = []
    for error_type, members in failed.groupby(failed["error_type"].fillna("unknown"), sort=False):
        sweeps = sorted({str(s) for s in members["sweep"].dropna()})
        groups.append(FailureGroup(str(error_type), list(map(str, members.index)), sweeps))
    return sorted(groups, key=lambda g: (-len(g.trial_ids), g.error_type))


def resume_command(sweep: str, store: Path) -> str:
    """The command that retries a sweep's failed trials: by name for a sweep shipped with kdgrid, else its file."""
    target = sweep if bundled_sweep(sweep) is not None else f"{sweep}.yaml"
    return f"kdgrid resume {target} --store {store}"


def parse_json(text: Any, default: Any) -> Any:
    """A JSON text column's value, ``default`` when null or not JSON (a row is never trusted to be well formed)."""
    if not isinstance(text, str) or not text:
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default
