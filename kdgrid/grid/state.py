"""A sweep against the store (docs/design.md, "Resume is planning against the store").

Each trial of a sweep is ``done`` (a done row exists, from any sweep: ids are global), ``running`` (no done row,
and a live claim: some process is training it now, `kdgrid.store.claims`), ``failed`` (only failed rows) or
``pending`` (no row at all): the store's one rule, `kdgrid.store.trial_states`, through `latest_state`, then the
claims. `run` runs the pending ones; `resume` also retries the failed ones that have fewer than ``max_attempts``
failed rows; neither runs a running one. The cost estimate uses the store's own wall times. `status` also names
the done trials that look degenerate (`degenerate_trials`: a collapsed student, one at the majority class).
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kdgrid import store as store_rows  # its readers (pandas, pyarrow) are imported when first called
from kdgrid.core.data import get_task
from kdgrid.core.methods.projectors.overfit import EXTRA_KEY as OVERFIT_KEY
from kdgrid.core.training.degenerate import degenerate_reasons
from kdgrid.diagnosis import Flag
from kdgrid.errors import KdgridError
from kdgrid.grid.expand import Sweep
from kdgrid.store import layout
from kdgrid.store.claims import Claim, live_claims
from kdgrid.store.step_curves import row_diagnosis
from kdgrid.trial import Trial
from kdgrid.trial_labels import HARD_ONLY, SOFT_ONLY, knowledge_text

if TYPE_CHECKING:
    import pandas as pd

STATE_COLUMNS = (
    "trial_id",
    "status",
    "row_id",
    "error_type",
    "error_message",
    "written_at",
    "wall_time_s",
    "student",
    "task",
)
ALWAYS_OPEN_BELOW = 2000  # a store with fewer per-trial files is read whole


@dataclass
class SweepState:
    """Where each trial of a sweep stands in the store."""

    done: list[Trial] = field(default_factory=list)
    failed: list[Trial] = field(default_factory=list)
    pending: list[Trial] = field(default_factory=list)
    running: list[Trial] = field(
        default_factory=list
    )  # no done row, a live claim (a failed one being retried too)
    claims: dict[str, Claim] = field(default_factory=dict)  # trial id -> live claim, for the running trials
    failures: dict[str, int] = field(default_factory=dict)  # trial id -> failed rows
    errors: dict[str, str] = field(default_factory=dict)  # trial id -> "ErrorType: message" (latest)
    timings: pd.DataFrame | None = None  # done rows with wall_time_s, student, task

    def to_retry(self, max_attempts: int) -> tuple[list[Trial], list[Trial]]:
        """(failed trials with fewer than ``max_attempts`` failed rows, failed trials that reached it)."""
        retry = [t for t in self.failed if self.failures.get(t.trial_id, 0) < max_attempts]
        given_up = [t for t in self.failed if self.failures.get(t.trial_id, 0) >= max_attempts]
        return retry, given_up


def _open_for_state(loose_count: int) -> Callable[[layout.RowFileName], bool]:
    def should_open(parts: layout.RowFileName) -> bool:
        # failed rows carry the error to show; done rows are read whole in small stores, else a 1/16 sample
        # (by row id) gives wall times for the estimate without opening 30,000 files.
        return parts.status == "failed" or loose_count < ALWAYS_OPEN_BELOW or parts.row_id.startswith("0")

    return should_open


def one_line(text: Any, limit: int = 200) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _holds_no_rows(store: Path) -> bool:
    """Whether ``store`` has nothing a read would list: it is missing, or a folder whose ``rows/`` and
    ``compacted/`` are missing or hold no visible entry (no row file, and no stray for a read to report). Such a
    store is not read at all, so that ``plan`` and ``status`` of a new store do not import pandas; a
    store that is a file, or whose ``rows/`` is a file, is read (the read refuses or reports it)."""
    if not store.exists():
        return True
    if not store.is_dir():
        return False
    folders = (layout.rows_dir(store), layout.compacted_dir(store))
    return all(not folder.exists() or (folder.is_dir() and not layout.listed_entries(folder)) for folder in folders)


def sweep_state(sweep: Sweep, store_dir: Path | str) -> SweepState:
    """Classify the sweep's trials by the store's rows."""
    if _holds_no_rows(Path(store_dir)):  # nothing to read: every trial pending (or running), and no timings
        state = SweepState(pending=[planned.trial for planned in sweep.trials])
        _move_running(state, Path(store_dir))
        return state
    loose = len(layout.visible_files(layout.rows_dir(Path(store_dir))))
    frame = store_rows.read_store(
        store_dir, STATE_COLUMNS, flatten_scores=False, open_row_file=_open_for_state(loose)
    )
    ids = {p.trial.trial_id for p in sweep.trials}
    mine = frame[frame["trial_id"].isin(ids)]
    states = store_rows.latest_state(mine)
    state = SweepState()
    for planned in sweep.trials:
        trial = planned.trial
        tid = trial.trial_id
        if tid not in states.index:
            state.pending.append(trial)
            continue
        row = states.loc[tid]
        state.failures[tid] = int(row["failures"])
        if row["state"] == "done":
            state.done.append(trial)
        else:
            state.failed.append(trial)
            error_type = row["error_type"] if isinstance(row["error_type"], str) else "Error"
            state.errors[tid] = f"{error_type}: {one_line(row['error_message'])}"
    _move_running(state, Path(store_dir))
    # one timing per trial: a trial trained twice (a stalled holder's row, two merged stores) counts by the row
    # every command counts it by, its latest done row
    latest = store_rows.latest_done_rows(frame)
    state.timings = latest[latest["wall_time_s"].notna()][["student", "task", "wall_time_s"]]
    return state


DEGENERATE_COLUMNS = ("trial_id", "status", "row_id", "written_at", "task", "scores_json", "degenerate_json")
OVERFIT_COLUMNS = ("trial_id", "status", "row_id", "written_at", "extra_json")
SHOWN_DEGENERATE = 10  # `kdgrid status` names this many degenerate trials, then counts the rest


def degenerate_trials(state: SweepState, store_dir: Path | str) -> dict[str, list[str]]:
    """``{trial id: reasons}`` for the done trials of ``state`` whose latest done row looks degenerate
    (`kdgrid.core.training.degenerate`), in the order of ``state.done``.

    A row of schema version 2 carries its reasons (``degenerate_json``); one of version 1 is judged from its
    scores alone (MCC <= 0), and a row whose task cannot be resolved here is not judged. Reads every column of
    the default schema, so the read fills the read cache: the next ``status`` during a sweep decodes only the
    rows written since.
    """
    done = {t.trial_id for t in state.done}
    if not done:
        return {}
    table = store_rows.read_table(store_dir)  # every default column: fills the read cache (see the docstring)
    frame = table.select(list(DEGENERATE_COLUMNS)).to_pandas()
    rows = store_rows.latest_done_rows(frame[frame["trial_id"].isin(done)]).set_index("trial_id")
    found: dict[str, list[str]] = {}
    for trial in state.done:
        if trial.trial_id not in rows.index:
            continue
        row = rows.loc[trial.trial_id]
        if isinstance(row["degenerate_json"], str):
            reasons = json.loads(row["degenerate_json"])
        else:
            reasons = _reasons_from_scores(row["task"], row["scores_json"])
        if reasons:
            found[trial.trial_id] = reasons
    return found


def projector_overfit_trials(state: SweepState, store_dir: Path | str) -> dict[str, str]:
    """``{trial id: verdict}`` for the done trials of ``state`` whose latest done row records projector
    overfitting (`kdgrid.core.methods.projectors.overfit`: the projected alignment loss fell near zero while the task
    metric stalled), in the order of ``state.done``."""
    done = {t.trial_id for t in state.done}
    if not done:
        return {}
    frame = store_rows.read_table(store_dir).select(list(OVERFIT_COLUMNS)).to_pandas()
    rows = store_rows.latest_done_rows(frame[frame["trial_id"].isin(done)]).set_index("trial_id")
    found: dict[str, str] = {}
    for trial in state.done:
        if trial.trial_id in rows.index and isinstance(rows.loc[trial.trial_id]["extra_json"], str):
            verdict = json.loads(rows.loc[trial.trial_id]["extra_json"]).get(OVERFIT_KEY)
            if isinstance(verdict, str):
                found[trial.trial_id] = verdict
    return found


DIAGNOSIS_COLUMNS = ("trial_id", "status", "row_id", "written_at", "task", "curve_json", "weights_json",
                     "extra_json", "diagnosis_json")  # fmt: skip


def diagnosed_trials(state: SweepState, store_dir: Path | str) -> dict[str, list[Flag]]:
    """``{trial id: flags}`` for the done trials of ``state`` whose latest done row the diagnosis flags
    (`kdgrid.diagnosis`: its stored ``diagnosis_json``, or for a row of schema version 2 or older the rules on its
    epoch curve, `kdgrid.store.step_curves.row_diagnosis`), in the order of ``state.done``."""
    done = {t.trial_id for t in state.done}
    if not done:
        return {}
    table = store_rows.read_table(store_dir)
    names = [name for name in DIAGNOSIS_COLUMNS if name in table.column_names]
    frame = table.select(names).to_pandas()
    rows = store_rows.latest_done_rows(frame[frame["trial_id"].isin(done)]).set_index("trial_id")
    found: dict[str, list[Flag]] = {}
    for trial in state.done:
        if trial.trial_id not in rows.index:
            continue
        row = rows.loc[trial.trial_id].to_dict()
        flags = row_diagnosis(row)
        if flags:
            found[trial.trial_id] = flags
    return found


def _reasons_from_scores(task: str, scores_json: Any) -> list[str]:
    """What a row without stored reasons (schema version 1) shows of degeneracy in its scores alone."""
    if not isinstance(scores_json, str):
        return []
    try:
        return degenerate_reasons(get_task(task), {}, json.loads(scores_json))
    except KdgridError:
        return []  # a task this machine cannot resolve (a spec file gone): not judged


def _move_running(state: SweepState, store: Path) -> None:
    """Move the pending and failed trials that hold a live claim to ``state.running``."""
    state.claims = live_claims(store, {t.trial_id for t in [*state.pending, *state.failed]})
    if not state.claims:
        return
    state.running = [t for t in [*state.pending, *state.failed] if t.trial_id in state.claims]
    state.pending = [t for t in state.pending if t.trial_id not in state.claims]
    state.failed = [t for t in state.failed if t.trial_id not in state.claims]


def trial_label(trial: Trial) -> str:
    """A trial in a few words, its seed left out (seeds of one cell share a label): ``knowledge / strategy /
    student``, the baselines by name (`kdgrid.trial_labels.knowledge_text`: ``soft labels only / bert-tiny``)."""
    knowledge = knowledge_text(trial.knowledge, trial.soft_weight)
    matched = knowledge not in (SOFT_ONLY, HARD_ONLY) and trial.strategy
    return " / ".join([knowledge, *([str(trial.strategy)] if matched else []), trial.student])


def running_trials(state: SweepState, study_of: dict[str, str]) -> list[dict[str, Any]]:
    """The running trials as `kdgrid status` shows them: id, study, label (`trial_label`) with its knowledge,
    strategy, student and task, holder (host, pid, executor job), seconds since the claim was made and since its
    last heartbeat, and how far its job got at that heartbeat (``progress``: step, steps, epoch, epochs; None
    before the first batch)."""
    shown = []
    for trial in state.running:
        claim = state.claims[trial.trial_id]
        age, beat = claim.age_s(), claim.heartbeat_age_s
        shown.append({"trial_id": trial.trial_id, "study": study_of.get(trial.trial_id),
                      "label": trial_label(trial), "knowledge": list(trial.knowledge),
                      "strategy": trial.strategy, "student": trial.student, "task": trial.task,
                      "host": claim.host, "pid": claim.pid, "job_id": claim.job_id,
                      "started_at": claim.started_at, "age_s": None if age is None else round(age, 1),
                      "heartbeat_age_s": None if beat is None else round(max(beat, 0.0), 1),
                      "progress": claim.progress})  # fmt: skip
    return shown


def running_jobs(running: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The running trials (`running_trials`) by the job holding them (host, pid, executor job), most trials
    first: the holder, its trials, the furthest progress any of them recorded, its age and last heartbeat."""
    by_holder: dict[tuple[str, int, str], list[dict[str, Any]]] = defaultdict(list)
    for item in running:
        by_holder[(item["host"], item["pid"], item["job_id"])].append(item)
    jobs = []
    for (host, pid, job_id), items in by_holder.items():
        progress = [item["progress"] for item in items if item["progress"]]
        ages = [item["age_s"] for item in items if item["age_s"] is not None]
        beats = [item["heartbeat_age_s"] for item in items if item["heartbeat_age_s"] is not None]
        jobs.append({"host": host, "pid": pid, "job_id": job_id, "trials": items,
                     "progress": max(progress, key=lambda p: p["step"]) if progress else None,
                     "age_s": max(ages) if ages else None,
                     "heartbeat_age_s": min(beats) if beats else None})  # fmt: skip
    return sorted(jobs, key=lambda job: (-len(job["trials"]), job["job_id"]))


@dataclass(frozen=True)
class CostEstimate:
    """Estimated seconds to run some trials, from the store's wall times of done trials."""

    seconds: float | None
    timed_rows: int
    basis: str

    def to_dict(self) -> dict[str, Any]:
        hours = None if self.seconds is None else round(self.seconds / 3600, 3)
        return {"seconds": self.seconds, "hours": hours, "timed_rows": self.timed_rows, "basis": self.basis}


def estimate_cost(trials: Iterable[Trial], timings: pd.DataFrame | None) -> CostEstimate:
    """Sum over ``trials`` of the median wall time of done rows of the same (student, task), else of the same
    student, else of all timed rows. None when the store has no timings."""
    trials = list(trials)
    if timings is None or timings.empty:
        return CostEstimate(None, 0, "no timed rows in the store yet")
    by_pair: dict[tuple[str, str], list[float]] = defaultdict(list)
    by_student: dict[str, list[float]] = defaultdict(list)
    every: list[float] = []
    for student, task, seconds in zip(
        timings["student"], timings["task"], timings["wall_time_s"], strict=True
    ):
        by_pair[(student, task)].append(float(seconds))
        by_student[student].append(float(seconds))
        every.append(float(seconds))
    medians: dict[Any, float] = {}
    total = 0.0
    exact = 0
    for trial in trials:
        for key, source in (((trial.student, trial.task), by_pair), (trial.student, by_student), ("*", None)):
            values = every if source is None else source.get(key)  # type: ignore[call-overload]
            if values:
                if key not in medians:
                    medians[key] = statistics.median(values)
                total += medians[key]
                exact += key != "*" and isinstance(key, tuple)
                break
    basis = f"median wall time of {len(every)} done rows ({exact} of {len(trials)} trials matched by student and task)"
    return CostEstimate(total, len(every), basis)
