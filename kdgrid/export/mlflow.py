"""`kdgrid export mlflow`: the store's trials as MLflow runs, one run per trial, written with MLflow's client.

What a run holds (params, final metrics, per-epoch curves, tags) is `kdgrid.export.run_content`'s; this module
only talks to the tracking server. The store is only read (`kdgrid.store.read.read_store`), never written.

Idempotent: every run carries its trial's id and the id of the store row it shows (`TRIAL_TAG`, `ROW_TAG`). An
export first lists the experiment's active runs, then, per trial:

- a finished run (``FINISHED`` or ``FAILED``) of the same row: left as it is (exporting twice creates nothing);
- none: a run is created;
- runs of another row (the trial was trained again, or failed and then done), or a run left ``RUNNING`` by an
  interrupted export: they are deleted (MLflow's soft delete: ``mlflow gc`` purges them, the UI can restore
  them) and a run of the current row is created. So each trial has one active run, showing its current row.

A run is written as create (with its tags), one `log_batch` of its params and metrics (MLflow's client splits
it to the server's limits), then `set_terminated`: a run interrupted half-way stays ``RUNNING`` and the next
export replaces it.

MLflow is an optional dependency (the ``mlflow`` extra): it is imported only here, inside the functions, so
that the rest of kdgrid (and `kdgrid --help`) never needs it. Its HTTP client retries a failing request for
minutes by default; an export bounds that (`BOUNDED_HTTP`) unless the user set those variables, so an
unreachable server is reported in seconds.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd
from rich.console import Console
from rich.progress import Progress

from kdgrid.errors import ConfigError, KdgridError
from kdgrid.export.run_content import (
    READ_COLUMNS,
    ROW_TAG,
    RUN_FAILED,
    RUN_FINISHED,
    TRIAL_TAG,
    RunContent,
    RunInterval,
    exported_rows,
    run_content,
)
from kdgrid.export.run_intervals import run_intervals
from kdgrid.store.read import read_store
from kdgrid.store.schema import COLUMNS
from kdgrid.store.step_curves import read_step_curves

DEFAULT_EXPERIMENT = "kdgrid"
BATCH_LIMIT = 1000  # MLflow's limit of metrics and params in one log_batch request
INSTALL_HINT = "pip install 'kdgrid[mlflow]' (from a checkout: pip install -e '.[mlflow]')"

# MLflow's HTTP settings for the length of an export, where the user has not set them: one retry after 1 s, 15 s
# per request (MLflow's defaults, 7 retries with exponential backoff and 120 s, take minutes to give up).
BOUNDED_HTTP = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "15",
}
SEARCH_PAGE = 1000  # runs per page when listing the experiment's runs
_DONE_STATUSES = frozenset({RUN_FINISHED, RUN_FAILED})


@dataclass(frozen=True)
class ExportReport:
    """What an export did: trials whose run was ``created`` (none before), ``replaced`` (a run of another row
    or an unfinished run deleted, a new one created) or ``unchanged``."""

    tracking_uri: str
    experiment: str
    experiment_id: str
    created: int
    replaced: int
    unchanged: int

    def summary(self) -> str:
        total = self.created + self.replaced + self.unchanged
        return (
            f"exported {total} trial(s) to MLflow experiment {self.experiment!r} (id {self.experiment_id}) at "
            f"{self.tracking_uri}: {self.created} run(s) created, {self.replaced} replaced (a newer row), "
            f"{self.unchanged} unchanged"
        )


def import_mlflow() -> ModuleType:
    """The ``mlflow`` package, or a `KdgridError` saying how to install it."""
    try:
        import mlflow  # the optional extra: imported only when exporting
    except ImportError as error:
        raise KdgridError(
            f"kdgrid export mlflow needs MLflow, which is not installed ({error}); install kdgrid's `mlflow` "
            f"extra: {INSTALL_HINT}"
        ) from error
    return mlflow


def export_to_mlflow(
    store: Path | str,
    tracking_uri: str,
    *,
    experiment: str = DEFAULT_EXPERIMENT,
    sweeps: Iterable[str] = (),
    progress: bool = True,
) -> ExportReport:
    """Export the trials of ``store`` (those with a row of one of ``sweeps``; all when empty) to ``experiment``
    (created when missing) at ``tracking_uri``: one run per trial, its latest done row, else its latest failed
    row (see the module docstring for what is left, created and replaced). ``progress``: a progress bar on
    stderr, one step per trial.

    Raises `KdgridError`: MLflow not installed, no such store, no rows (of ``sweeps``), rows of a newer schema
    (`kdgrid.store.read.StoreSchemaError`), a tracking URI that cannot be reached, a deleted experiment."""
    import_mlflow()
    from mlflow.exceptions import MlflowException

    rows = rows_to_export(Path(store), sweeps)
    with bounded_http():
        client = connect(tracking_uri)
        try:
            experiment_id = experiment_for(client, experiment)
            existing = active_runs(client, experiment_id)
        except MlflowException as error:
            raise KdgridError(
                f"--tracking-uri {tracking_uri}: cannot open experiment {experiment!r} or list its runs "
                f"({_first_line(error)})"
            ) from error
        counts = {"created": 0, "replaced": 0, "unchanged": 0}
        records = rows.to_dict("records")
        done = [
            (str(r["row_id"]), str(json.loads(r["trial_json"])["task"]))
            for r in records
            if r["status"] == "done"
        ]
        intervals = run_intervals(Path(store), done)
        curves = read_step_curves(Path(store), [str(r["row_id"]) for r in records])  # one read, the rows asked
        with Progress(console=Console(stderr=True), disable=not progress, transient=True) as bar:
            task = bar.add_task("exporting to MLflow", total=len(records))
            for done, row in enumerate(records):
                try:
                    outcome = _export_trial(
                        client,
                        experiment_id,
                        row,
                        existing.get(row["trial_id"], []),
                        intervals.get(row["row_id"]),
                        curves.get(str(row["row_id"])),
                    )
                except MlflowException as error:
                    raise KdgridError(
                        f"--tracking-uri {tracking_uri}: the export stopped after {done} of {len(records)} "
                        f"trial(s) at trial {row['trial_id']} ({_first_line(error)}); run it again to finish "
                        "(trials already exported are left as they are)"
                    ) from error
                counts[outcome] += 1
                bar.advance(task)
    return ExportReport(tracking_uri, experiment, experiment_id, **counts)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def rows_to_export(store: Path, sweeps: Iterable[str] = ()) -> pd.DataFrame:
    """The row of each trial to export (`kdgrid.export.run_content.exported_rows`), read from ``store``; refused
    when the store is missing or has no rows (of ``sweeps``)."""
    if not store.is_dir():
        what = "a file, not a store directory" if store.exists() else "no such store directory"
        raise ConfigError(f"--store {store}: {what}")
    columns = [name for name in READ_COLUMNS if name in COLUMNS]
    frame = read_store(store, columns, flatten_scores=False)
    if frame.empty:
        raise ConfigError(f"--store {store}: the store has no rows; nothing to export")
    wanted = sorted(set(sweeps))
    rows = exported_rows(frame, wanted)
    if rows.empty:
        present = ", ".join(sorted(str(s) for s in frame["sweep"].dropna().unique()))
        raise ConfigError(
            f"--store {store}: no rows of sweep(s) {', '.join(wanted)}; its sweeps are: {present}"
        )
    return rows


@contextmanager
def bounded_http() -> Iterator[None]:
    """`BOUNDED_HTTP` in the environment while the block runs, for the variables the user has not set."""
    added = {name: value for name, value in BOUNDED_HTTP.items() if name not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def connect(tracking_uri: str) -> Any:
    """An `mlflow.MlflowClient` of ``tracking_uri`` that has answered one request, or a `KdgridError`."""
    from mlflow import MlflowClient

    try:
        client = MlflowClient(tracking_uri=tracking_uri)
        client.search_experiments(max_results=1)
    # Any error: each backend (REST, SQL, plugins) raises its own kinds, and each means "not usable".
    except Exception as error:
        raise KdgridError(
            f"--tracking-uri {tracking_uri}: cannot reach the MLflow tracking server or store "
            f"({_first_line(error)})"
        ) from error
    return client


def experiment_for(client: Any, name: str) -> str:
    """The id of the active experiment ``name``, created when there is none; a deleted one is refused."""
    found = client.get_experiment_by_name(name)
    if found is None:
        return str(client.create_experiment(name))
    if found.lifecycle_stage != "active":
        raise ConfigError(
            f"--experiment {name}: the experiment is deleted in this tracking server; restore it "
            "(`mlflow experiments restore`) or export to another name"
        )
    return str(found.experiment_id)


def active_runs(client: Any, experiment_id: str) -> dict[str, list[Any]]:
    """The experiment's active runs that carry a trial id, by trial id."""
    runs: dict[str, list[Any]] = {}
    token = None
    while True:
        page = client.search_runs([experiment_id], max_results=SEARCH_PAGE, page_token=token)
        for run in page:
            trial_id = run.data.tags.get(TRIAL_TAG)
            if trial_id is not None:
                runs.setdefault(trial_id, []).append(run)
        token = page.token
        if not token:
            return runs


def _export_trial(
    client: Any,
    experiment_id: str,
    row: dict[str, Any],
    runs: list[Any],
    intervals: list[RunInterval] | None = None,
    step_curves: dict[str, Any] | None = None,
) -> str:
    """Bring one trial's runs in line with its ``row``; returns ``created``, ``replaced`` or ``unchanged``."""
    keep = next(
        (r for r in runs if r.data.tags.get(ROW_TAG) == row["row_id"] and r.info.status in _DONE_STATUSES),
        None,
    )
    for run in runs:
        if run is not keep:
            client.delete_run(run.info.run_id)
    if keep is not None:
        return "unchanged"
    write_run(client, experiment_id, run_content(row, intervals, step_curves))
    return "replaced" if runs else "created"


def write_run(client: Any, experiment_id: str, content: RunContent) -> str:
    """Create one run holding ``content``; returns its id."""
    from mlflow.entities import Metric, Param

    run = client.create_run(
        experiment_id, start_time=content.start_ms, tags=content.tags, run_name=content.name
    )
    run_id = run.info.run_id
    timestamp = content.end_ms or content.start_ms or 0
    metrics = [Metric(p.key, p.value, timestamp, p.step) for p in content.metrics]
    params = [Param(name, value) for name, value in content.params.items()]
    # MLflow takes at most `BATCH_LIMIT` entities per log_batch (step curves give a run thousands of points)
    first = max(0, BATCH_LIMIT - len(params))
    client.log_batch(run_id, metrics=metrics[:first], params=params)
    for start in range(first, len(metrics), BATCH_LIMIT):
        client.log_batch(run_id, metrics=metrics[start : start + BATCH_LIMIT])
    # MLflow prints a "View run ... at ..." line per run it ends on an HTTP server: 30,000 lines for the paper's
    # grid. The export prints its one summary line instead.
    with contextlib.redirect_stdout(io.StringIO()):
        client.set_terminated(run_id, status=content.status, end_time=content.end_ms)
    return str(run_id)
