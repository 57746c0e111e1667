"""`kdgrid export tensorboard`: each trial's curves as TensorBoard event files, one run folder per trial.

What a trial's run holds (its deciding row, as the MLflow export: `kdgrid.export.run_content.exported_rows`):

- the step curves (step = the optimizer step; rows that recorded them, `kdgrid.store.step_curves.curve_series`):
  ``loss/<term>`` (unweighted), ``weighted/<term>``, ``total``, ``lr``, ``grad_norm``, ``cosine`` and a learned
  gate's ``mapping/S<i>/T<t>``;
- the dev metrics per epoch, ``dev/<dev_set>/<metric>``, at the epoch's last optimizer step (``epoch x steps
  per epoch``, the steps of the step curves' run over the trial's epochs; the epoch number for a row without step
  curves), so they line up with the step curves;
- a row without step curves (schema version 2 or older) gets its per-epoch loss terms as ``loss/<term>`` at the
  same steps.

Runs are folders ``<out>/<sweep>/<trial title>-<trial id's first 8 digits>`` (`tensorboard --logdir <out>` shows
the sweeps side by side). An export replaces a trial's event files: run it again after more trials finished.
Written with TensorBoard's own event-file writer (the ``tensorboard`` package, without TensorFlow; the
``tensorboard`` extra); torch-free.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kdgrid.errors import KdgridError
from kdgrid.store.step_curves import curve_series, read_step_curves
from kdgrid.trial_labels import trial_title

INSTALL_HINT = "pip install 'kdgrid[tensorboard]'"


@dataclass(frozen=True)
class TensorBoardReport:
    out: Path
    runs: int
    with_step_curves: int
    scalars: int

    def summary(self) -> str:
        return (
            f"wrote {self.runs:,} run(s) to {self.out} ({self.with_step_curves:,} with step curves, "
            f"{self.scalars:,} scalars): tensorboard --logdir {self.out}"
        )


def run_folder_name(row: Mapping[str, Any]) -> str:
    """A trial's run folder: its settings in words and its id's first 8 digits, filesystem-safe."""
    trial = json.loads(str(row["trial_json"]))
    title = re.sub(r"[^A-Za-z0-9._+-]+", "_", trial_title(trial)).strip("_")
    return f"{title}-{str(row['trial_id'])[:8]}"


def trial_scalars(row: Mapping[str, Any], record: Mapping[str, Any] | None) -> dict[str, list[tuple[int, float]]]:
    """Every scalar series of one trial's run (see the module): tag -> [(step, value)]."""
    series = curve_series(record or {})
    epochs = int(json.loads(str(row["trial_json"])).get("epochs") or 1)
    per_epoch = int(record.get("total_steps") or 0) // max(1, epochs) if record else 0
    per_epoch = per_epoch or 1  # no step curves: the epoch number is the step
    for entry in _parsed(row.get("curve_json"), []) or []:
        step = int(entry["epoch"]) * per_epoch
        for dev_set, metrics in (entry.get("scores") or {}).items():
            for metric, value in (metrics or {}).items():
                if isinstance(value, (int, float)):
                    series.setdefault(f"dev/{dev_set}/{metric}", []).append((step, float(value)))
        if not record:
            for term, value in (entry.get("loss_terms") or {}).items():
                series.setdefault(f"loss/{term}", []).append((step, float(value)))
    return series


def write_events(folder: Path, scalars: Mapping[str, Iterable[tuple[int, float]]], wall_time: float) -> int:
    """Write ``scalars`` as one event file in ``folder`` (previous event files there removed); returns how many
    scalars it holds."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    writer = EventFileWriter(str(folder))
    count = 0
    try:
        for tag, points in scalars.items():
            for step, value in points:
                summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
                writer.add_event(event_pb2.Event(wall_time=wall_time, step=int(step), summary=summary))
                count += 1
    finally:
        writer.close()
    return count


def export_to_tensorboard(store: Path | str, out: Path | str, *, sweeps: Iterable[str] = ()) -> TensorBoardReport:
    """Write one run folder per trial of ``store`` (those with a row of one of ``sweeps``; all when empty) under
    ``out``.

    Raises `KdgridError`: TensorBoard not installed, no such store, no rows (of ``sweeps``)."""
    try:
        import tensorboard  # noqa: F401
    except ImportError as error:
        raise KdgridError(f"kdgrid export tensorboard needs the tensorboard package: {INSTALL_HINT}") from error
    from kdgrid.export.mlflow import rows_to_export

    rows = rows_to_export(Path(store), sweeps).to_dict("records")
    records = read_step_curves(Path(store), [str(r["row_id"]) for r in rows])
    out = Path(out)
    scalars = with_curves = 0
    for row in rows:
        record = records.get(str(row["row_id"]))
        with_curves += record is not None
        folder = out / re.sub(r"[^A-Za-z0-9._+-]+", "_", str(row.get("sweep") or "sweep")) / run_folder_name(row)
        scalars += write_events(folder, trial_scalars(row, record), wall_time=_wall_time(row))
    return TensorBoardReport(out, len(rows), with_curves, scalars)


def _wall_time(row: Mapping[str, Any]) -> float:
    from datetime import datetime

    text = row.get("started_at")
    try:
        return datetime.fromisoformat(str(text)).timestamp()
    except ValueError:
        return 0.0


def _parsed(text: Any, default: Any) -> Any:
    if not isinstance(text, str):
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default
