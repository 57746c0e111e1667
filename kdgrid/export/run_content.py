"""What one trial's run holds in a tracking server (MLflow): its parameters, metrics, per-epoch curves and tags,
read from the trial's store row. Pure data: nothing here imports a tracking client.

Which row a trial's run shows: the row that decides the trial's state (`kdgrid.store.read.latest_state`: its
latest done row, else its latest failed row), so a run is a done (``FINISHED``) or a failed (``FAILED``) trial.

Names (the same in every run, so runs compare column by column):

- the run's name: the trial's settings (`kdgrid.trial_labels.trial_title`) and the trial id's first 8 digits;
- params: every `Trial` field (``task``, ``student``, ``lr``, ...; ``knowledge`` in words as the tables write it,
  ``hidden_mse + pkd`` or a baseline's name; other lists as JSON, ``None`` as ``null``), each
  option as ``option.<name>``, and the student's derived shape (``student_layers``, ``student_width``,
  ``student_heads``, ``student_ffn``, ``student_params``, ``student_flops``) and ``layer_pairs`` (JSON);
- final metrics (step 0): ``best/<dev_set>/<metric>`` (at the best epoch), ``last/<dev_set>/<metric>`` (after the
  last epoch), ``best_epoch``, ``wall_time_s``, ``weight/<term>`` (each loss term's weight, auto weights as
  calibrated), ``teacher_agreement/<dev_set>`` when the row has it, and from its per-example predictions (rows
  that have them) ``ci_low/<dev_set>/<metric>`` and ``ci_high/<dev_set>/<metric>``, the 95% bootstrap interval
  over dev examples of the metric the paper reports (`RunUncertainty`), and ``degenerate`` (1: the row records
  reasons its number is not evidence, 0: none);
- curves (step = the 1-based epoch): ``dev/<dev_set>/<metric>`` and ``loss/<term>`` (each term's unweighted mean
  over that epoch; the last step is the row's ``loss_terms``);
- step curves (step = the optimizer step; rows that recorded them, `kdgrid.store.step_curves.curve_series`):
  ``step/loss/<term>`` (unweighted), ``step/weighted/<term>``, ``step/total``, ``step/lr``, ``step/grad_norm``,
  ``step/cosine`` and a learned gate's ``step/mapping/S<i>/T<t>``;
- the run's times: it starts at its job's start and lasts its own ``wall_time_s`` (its share of the job), not
  the whole job's time;
- tags: `TRIAL_TAG`, `ROW_TAG` (what makes an export idempotent), ``kdgrid.degenerate`` (the reasons, for a
  degenerate row), ``kdgrid.sweep``, ``kdgrid.study``,
  ``kdgrid.status``, ``kdgrid.device``, ``kdgrid.host``, ``kdgrid.version``, MLflow's own git commit tag and,
  for a failed trial, ``kdgrid.error_type``, ``kdgrid.error_message`` and the traceback as the run's note.

A loss term's name ``<knowledge>@<student layer>-<teacher layer>`` is written ``<knowledge>/<s>-<t>`` (MLflow
names allow letters, digits, ``_ - . / : `` and spaces; any other character becomes ``_``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from kdgrid.errors import KdgridError
from kdgrid.store.read import latest_state
from kdgrid.store.step_curves import curve_series
from kdgrid.trial_labels import knowledge_text, trial_title

TRIAL_TAG = "kdgrid.trial_id"
ROW_TAG = "kdgrid.row_id"  # the store row a run shows; another row of the trial replaces the run
GIT_COMMIT_TAG = "mlflow.source.git.commit"  # MLflow's own name: its UI shows it as the run's source version
NOTE_TAG = "mlflow.note.content"  # MLflow's run description (Markdown)

RUN_FINISHED = "FINISHED"
RUN_FAILED = "FAILED"

# MLflow's limits on one tag value (8,000 characters) with room to spare; longer texts keep their end.
MAX_TAG_CHARS = 5000

# The store columns an export reads (`read_store(columns=...)`); those this kdgrid's schema lacks are left out.
TEACHER_AGREEMENT_COLUMN = "teacher_agreement_json"  # {dev_set: agreement}, NaN: no teacher (schema 2 rows)
READ_COLUMNS: tuple[str, ...] = (
    "row_id", "trial_id", "sweep", "study", "status", "trial_json",
    "student_layers", "student_width", "student_heads", "student_ffn", "student_params", "student_flops",
    "layer_pairs_json", "scores_json", "last_scores_json", "best_epoch", "curve_json", "weights_json",
    TEACHER_AGREEMENT_COLUMN, "degenerate_json", "error_type", "error_message", "traceback", "wall_time_s",
    "device",
    "started_at", "ended_at", "written_at", "host", "git_commit", "kdgrid_version",
)  # fmt: skip
_DERIVED_PARAMS = (
    "student_layers", "student_width", "student_heads", "student_ffn", "student_params", "student_flops",
)  # fmt: skip

_NOT_IN_A_NAME = re.compile(r"[^/\w.\- :]")


@dataclass(frozen=True)
class MetricPoint:
    """One metric value: ``key`` at ``step`` (0 for a final metric, the 1-based epoch on a curve)."""

    key: str
    value: float
    step: int


@dataclass(frozen=True)
class RunInterval:
    """A run's score on one dev set with its 95% bootstrap interval over the dev examples."""

    dev_set: str
    metric: str
    low: float
    high: float


# row id -> the intervals of that row's runs (rows without predictions are absent).
RunUncertainty = Mapping[str, list[RunInterval]]


@dataclass
class RunContent:
    """Everything one trial's run holds. Times are milliseconds since the epoch (None: unknown)."""

    trial_id: str
    row_id: str
    name: str
    status: str  # RUN_FINISHED or RUN_FAILED
    params: dict[str, str] = field(default_factory=dict)
    metrics: list[MetricPoint] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)
    start_ms: int | None = None
    end_ms: int | None = None


def mlflow_name(name: str) -> str:
    """``name`` as an MLflow metric or param name: ``@`` becomes ``/``, other characters MLflow refuses ``_``."""
    return _NOT_IN_A_NAME.sub("_", name.replace("@", "/"))


def exported_rows(frame: pd.DataFrame, sweeps: Iterable[str] = ()) -> pd.DataFrame:
    """One row per trial to export: the row deciding each trial's state (`latest_state`), for the trials with a
    row of one of ``sweeps`` (every trial when empty), sorted by trial id. Rows of a trial from other sweeps
    still take part in choosing its row, so a trial's run is the same whichever sweeps are exported."""
    wanted = set(sweeps)
    chosen = (
        frame
        if not wanted
        else frame[frame["trial_id"].isin(frame.loc[frame["sweep"].isin(wanted), "trial_id"])]
    )
    deciding = set(latest_state(chosen)["row_id"])
    rows = chosen[chosen["row_id"].isin(deciding)]
    return rows.sort_values("trial_id", kind="stable").reset_index(drop=True)


def run_content(
    row: Mapping[str, Any],
    intervals: list[RunInterval] | None = None,
    step_curves: Mapping[str, Any] | None = None,
) -> RunContent:
    """The run of one store row (a `read_store` row with at least `READ_COLUMNS` that its schema has);
    ``intervals``: its scores' intervals (`RunUncertainty`), when its predictions were read; ``step_curves``:
    its step curves (`kdgrid.store.step_curves.read_step_curves`), when it recorded any."""
    status = RUN_FINISHED if row["status"] == "done" else RUN_FAILED
    trial = json.loads(row["trial_json"])
    trial.pop("v", None)
    start_ms = _milliseconds(_get(row, "started_at"))
    end_ms = _milliseconds(_get(row, "ended_at") or _get(row, "written_at"))
    wall = _get(row, "wall_time_s")
    if start_ms is not None and wall is not None and math.isfinite(float(wall)):
        end_ms = start_ms + round(float(wall) * 1000)  # its own share of the job, not the job's time
    content = RunContent(
        trial_id=str(row["trial_id"]),
        row_id=str(row["row_id"]),
        name=run_name(trial, str(row["trial_id"])),
        status=status,
        params=_params(row, trial),
        metrics=_metrics(row, intervals or [], step_curves),
        tags=_tags(row),
        start_ms=start_ms,
        end_ms=end_ms,
    )
    return content


def run_name(trial: Mapping[str, Any], trial_id: str) -> str:
    """The trial's settings in words (`kdgrid.trial_labels.trial_title`) and the trial id's first 8 digits."""
    return f"{trial_title(trial)} · {trial_id[:8]}"


def param_value(value: Any) -> str:
    """A param's text: strings as they are, everything else as JSON (``null``, ``0.0001``, ``["gram"]``)."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _params(row: Mapping[str, Any], trial: dict[str, Any]) -> dict[str, str]:
    options = trial.pop("options", {}) or {}
    named: dict[str, Any] = dict(trial)
    named["knowledge"] = knowledge_text(trial.get("knowledge"), trial.get("soft_weight"))
    named.update({f"option.{name}": value for name, value in options.items()})
    named.update({name: _get(row, name) for name in _DERIVED_PARAMS})
    named["layer_pairs"] = _json(row, "layer_pairs_json", [])
    renamed = _renamed(set(named), "param")
    return {renamed[name]: param_value(value) for name, value in named.items()}


def degenerate_reasons(row: Mapping[str, Any]) -> list[str] | None:
    """The reasons a done row records for distrusting its number (empty: healthy); None when the row has no
    record (failed rows, rows of schema version 1)."""
    if row["status"] != "done" or _get(row, "degenerate_json") is None:
        return None
    reasons = _json(row, "degenerate_json", [])
    return [str(reason) for reason in reasons] if isinstance(reasons, list) else None


def _metrics(
    row: Mapping[str, Any], intervals: list[RunInterval], step_curves: Mapping[str, Any] | None = None
) -> list[MetricPoint]:
    final: dict[str, float] = {}
    for kind, column in (("best", "scores_json"), ("last", "last_scores_json")):
        for dev_set, metrics in _json(row, column, {}).items():
            final.update({f"{kind}/{dev_set}/{metric}": value for metric, value in metrics.items()})
    for name in ("best_epoch", "wall_time_s"):
        if _get(row, name) is not None:
            final[name] = row[name]
    final.update({f"weight/{term}": weight for term, weight in _json(row, "weights_json", {}).items()})
    for dev_set, agreement in _json(row, TEACHER_AGREEMENT_COLUMN, {}).items():
        if agreement is not None and not math.isnan(agreement):  # NaN: the row has no teacher predictions
            final[f"teacher_agreement/{dev_set}"] = agreement
    for interval in intervals:
        final[f"ci_low/{interval.dev_set}/{interval.metric}"] = interval.low
        final[f"ci_high/{interval.dev_set}/{interval.metric}"] = interval.high
    reasons = degenerate_reasons(row)
    if reasons is not None:
        final["degenerate"] = float(bool(reasons))
    points = [MetricPoint(key, float(value), 0) for key, value in final.items() if value is not None]
    for entry in _json(row, "curve_json", []):
        epoch = int(entry["epoch"])
        for dev_set, metrics in (entry.get("scores") or {}).items():
            points += [MetricPoint(f"dev/{dev_set}/{m}", float(v), epoch) for m, v in metrics.items()]
        points += [
            MetricPoint(f"loss/{t}", float(v), epoch) for t, v in (entry.get("loss_terms") or {}).items()
        ]
    for name, series in curve_series(step_curves or {}).items():
        points += [MetricPoint(f"step/{name}", value, step) for step, value in series]
    renamed = _renamed({point.key for point in points}, "metric")
    return [MetricPoint(renamed[p.key], p.value, p.step) for p in points]


def _tags(row: Mapping[str, Any]) -> dict[str, str]:
    tags = {
        TRIAL_TAG: row["trial_id"],
        ROW_TAG: row["row_id"],
        "kdgrid.sweep": _get(row, "sweep"),
        "kdgrid.study": _get(row, "study"),
        "kdgrid.status": row["status"],
        "kdgrid.device": _get(row, "device"),
        "kdgrid.host": _get(row, "host"),
        "kdgrid.version": _get(row, "kdgrid_version"),
        GIT_COMMIT_TAG: _get(row, "git_commit"),
    }
    reasons = degenerate_reasons(row)
    if reasons:
        tags["kdgrid.degenerate"] = _tail("; ".join(reasons))
    if row["status"] != "done":
        tags["kdgrid.error_type"] = _get(row, "error_type")
        tags["kdgrid.error_message"] = _tail(_get(row, "error_message"))
        traceback = _get(row, "traceback")
        if traceback:
            tags[NOTE_TAG] = "```\n" + _tail(traceback, MAX_TAG_CHARS - 8) + "\n```"
    return {name: str(value) for name, value in tags.items() if value is not None}


def _renamed(keys: set[str], what: str) -> dict[str, str]:
    """``{key: its MLflow name}``; two keys that would become one name are refused (one would hide the other)."""
    renamed: dict[str, str] = {}
    taken: dict[str, str] = {}
    for key in sorted(keys):
        name = mlflow_name(key)
        if name in taken:
            raise KdgridError(
                f"the {what}s {taken[name]!r} and {key!r} of one row would both be {name!r} in MLflow"
            )
        taken[name] = key
        renamed[key] = name
    return renamed


def _get(row: Mapping[str, Any], name: str) -> Any:
    """``row[name]``, None where the row has no such column or a null (pandas NA/NaN) there."""
    value = row.get(name)
    if value is None:
        return None
    if isinstance(value, np.generic):
        value = value.item()  # numpy scalars (nullable pandas columns) as Python numbers, for JSON
    try:
        missing = pd.isna(value)
    except (TypeError, ValueError):
        return value
    return None if missing is True else value


def _json(row: Mapping[str, Any], column: str, empty: Any) -> Any:
    text = _get(row, column)
    return json.loads(text) if isinstance(text, str) and text else empty


def _milliseconds(iso: str | None) -> int | None:
    if not iso:
        return None
    return int(datetime.fromisoformat(iso).timestamp() * 1000)


def _tail(text: str | None, limit: int = MAX_TAG_CHARS) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return "..." + text[-(limit - 3) :]
