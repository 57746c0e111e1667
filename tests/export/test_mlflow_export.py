"""`kdgrid export mlflow` against MLflow's local SQLite store: the runs hold the store's values, exporting twice
creates nothing new, a newer row replaces a trial's run, and each bad input is one message with exit status 2.

Needs the `mlflow` extra; skipped without it only outside CI (CI installs it and must run these)."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import socket
import time
from contextlib import redirect_stderr
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kdgrid.cli import main
from kdgrid.errors import KdgridError
from kdgrid.export.mlflow import export_to_mlflow
from kdgrid.export.run_content import READ_COLUMNS, ROW_TAG, TRIAL_TAG, run_content
from kdgrid.predictions import DevSetPredictions
from kdgrid.store import SCHEMA_VERSION, layout, read_store, write_result
from kdgrid.store.schema import COLUMNS
from kdgrid.trial import Trial
from kdgrid.trial_labels import knowledge_text
from tests.export.store_testing import BASELINE, BROKEN, DISTILLED, done_result, write_tiny_store

if importlib.util.find_spec("mlflow") is None and not os.environ.get("CI"):
    pytest.skip("MLflow is not installed: pip install -e '.[mlflow]'", allow_module_level=True)


@pytest.fixture(scope="module")
def tracking_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One SQLite tracking store for the module (creating its tables takes seconds); tests use their own
    experiments."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@pytest.fixture
def experiment(request: pytest.FixtureRequest) -> str:
    return request.node.name


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return write_tiny_store(tmp_path / "store")


def client_of(tracking_uri: str):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri)


def runs_of(tracking_uri: str, experiment: str, view: str = "ACTIVE_ONLY") -> list:
    from mlflow.entities import ViewType

    client = client_of(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    return list(client.search_runs([found.experiment_id], run_view_type=getattr(ViewType, view)))


def by_trial(runs: list) -> dict:
    return {run.data.tags[TRIAL_TAG]: run for run in runs}


def kdgrid(*args: object) -> tuple[int | str | None, str]:
    """Run ``kdgrid ARGS`` in this process: (exit status, stderr)."""
    err = io.StringIO()
    code: int | str | None = 0
    with redirect_stderr(err):
        try:
            main([str(a) for a in args])
        except SystemExit as exit_:
            code = exit_.code
    return code, err.getvalue()


def test_each_trial_is_one_run_holding_the_stores_values(
    store: Path, tracking_uri: str, experiment: str
) -> None:
    report = export_to_mlflow(store, tracking_uri, experiment=experiment, progress=False)
    assert (report.created, report.replaced, report.unchanged) == (3, 0, 0)
    runs = by_trial(runs_of(tracking_uri, experiment))
    assert set(runs) == {DISTILLED.trial_id, BASELINE.trial_id, BROKEN.trial_id}
    assert runs[BROKEN.trial_id].info.status == "FAILED"
    assert runs[BROKEN.trial_id].data.tags["kdgrid.error_message"] == "teacher weights missing"
    frame = read_store(store)
    client = client_of(tracking_uri)
    for trial in (DISTILLED, BASELINE):
        row = frame[(frame["trial_id"] == trial.trial_id) & (frame["status"] == "done")].iloc[0]
        run = runs[trial.trial_id]
        assert run.info.status == "FINISHED"
        assert run.data.tags[ROW_TAG] == row["row_id"] and run.data.tags["kdgrid.sweep"] == row["sweep"]
        assert (
            run.data.tags["kdgrid.study"] == row["study"] and run.data.tags["kdgrid.device"] == row["device"]
        )
        assert run.data.tags["mlflow.source.git.commit"] == row["git_commit"]
        # params: the trial's fields as the store holds them
        trial_fields = json.loads(row["trial_json"])
        assert run.data.params["task"] == trial_fields["task"] == trial.task
        assert run.data.params["knowledge"] == knowledge_text(
            trial_fields["knowledge"], trial_fields["soft_weight"]
        )
        assert float(run.data.params["lr"]) == row["lr"] and int(run.data.params["seed"]) == row["seed"]
        assert int(run.data.params["student_layers"]) == row["student_layers"]
        assert run.data.params == run_content(row[[c for c in READ_COLUMNS if c in COLUMNS]].to_dict()).params
        # final scores: every flattened score column of the row
        scores = [c for c in frame.columns if c.startswith(("best/", "last/")) and not _missing(row[c])]
        assert len(scores) == (8 if trial is DISTILLED else 4)
        for column in scores:
            assert run.data.metrics[column] == pytest.approx(row[column]), column
        assert run.data.metrics["best_epoch"] == row["best_epoch"]
        # curves: each loss term and dev metric per epoch, as curve_json holds them
        curves: dict[str, dict[int, float]] = {}
        for entry in json.loads(row["curve_json"]):
            for term, value in entry["loss_terms"].items():
                curves.setdefault("loss/" + term.replace("@", "/"), {})[entry["epoch"]] = value
            for dev_set, metrics in entry["scores"].items():
                for metric, value in metrics.items():
                    curves.setdefault(f"dev/{dev_set}/{metric}", {})[entry["epoch"]] = value
        assert len(curves) == (5 if trial is DISTILLED else 4)
        for key, points in curves.items():
            history = client.get_metric_history(run.info.run_id, key)
            assert {m.step: m.value for m in history} == points, key
        history = client.get_metric_history(run.info.run_id, "loss/gram/4-12")
        assert sorted((m.step, m.value) for m in history) == [(1, 0.02), (2, 0.01)]


def _missing(value: object) -> bool:
    return bool(pd.isna(value))


def test_exporting_twice_creates_nothing_new(store: Path, tracking_uri: str, experiment: str) -> None:
    export_to_mlflow(store, tracking_uri, experiment=experiment, progress=False)
    first = sorted(run.info.run_id for run in runs_of(tracking_uri, experiment, "ALL"))
    again = export_to_mlflow(store, tracking_uri, experiment=experiment, progress=False)
    assert (again.created, again.replaced, again.unchanged) == (0, 0, 3)
    assert sorted(run.info.run_id for run in runs_of(tracking_uri, experiment, "ALL")) == first


def test_a_newer_row_replaces_the_trials_run(store: Path, tracking_uri: str, experiment: str) -> None:
    export_to_mlflow(store, tracking_uri, experiment=experiment, progress=False)
    old = by_trial(runs_of(tracking_uri, experiment))[BASELINE.trial_id]
    write_result(store, done_result(BASELINE, 0.7), sweep="baselines", study="soft")  # trained again
    report = export_to_mlflow(store, tracking_uri, experiment=experiment, progress=False)
    assert (report.created, report.replaced, report.unchanged) == (0, 1, 2)
    runs = by_trial(runs_of(tracking_uri, experiment))
    assert len(runs_of(tracking_uri, experiment)) == 3  # still one active run per trial
    new = runs[BASELINE.trial_id]
    assert new.info.run_id != old.info.run_id and new.data.metrics["best/validation/accuracy"] == 0.7
    assert new.data.tags[ROW_TAG] != old.data.tags[ROW_TAG]
    assert [r.info.run_id for r in runs_of(tracking_uri, experiment, "DELETED_ONLY")] == [old.info.run_id]


def test_a_run_left_running_by_an_interrupted_export_is_replaced(
    store: Path, tracking_uri: str, experiment: str
) -> None:
    row = read_store(store).query("trial_id == @BASELINE.trial_id").iloc[0]
    client = client_of(tracking_uri)
    experiment_id = client.create_experiment(experiment)
    half = client.create_run(experiment_id, tags={TRIAL_TAG: BASELINE.trial_id, ROW_TAG: row["row_id"]})
    report = export_to_mlflow(store, tracking_uri, experiment=experiment, progress=False)
    assert (report.created, report.replaced, report.unchanged) == (2, 1, 0)
    assert half.info.run_id not in {r.info.run_id for r in runs_of(tracking_uri, experiment)}
    assert by_trial(runs_of(tracking_uri, experiment))[BASELINE.trial_id].info.status == "FINISHED"


def test_the_command_exports_and_says_what_it_did(
    store: Path, tracking_uri: str, experiment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = kdgrid(
        "export", "mlflow", "--store", store, "--tracking-uri", tracking_uri, "--experiment", experiment,
        "--sweep", "baselines",
    )  # fmt: skip
    assert code == 0
    assert "2 run(s) created, 0 replaced (a newer row), 0 unchanged" in capsys.readouterr().out
    assert set(by_trial(runs_of(tracking_uri, experiment))) == {BASELINE.trial_id, BROKEN.trial_id}


def refused(store: Path, tracking_uri: str, *extra: object) -> str:
    code, err = kdgrid("export", "mlflow", "--store", store, "--tracking-uri", tracking_uri, *extra)
    assert code == 2, err
    assert err.startswith("error: ") and "Traceback" not in err
    return err


def test_a_store_with_no_rows_is_refused(tmp_path: Path, tracking_uri: str) -> None:
    (tmp_path / "empty").mkdir()
    assert "the store has no rows; nothing to export" in refused(tmp_path / "empty", tracking_uri)
    assert "no such store directory" in refused(tmp_path / "missing", tracking_uri)
    assert not (tmp_path / "missing").exists()


def test_a_sweep_without_rows_is_refused_naming_the_stores_sweeps(store: Path, tracking_uri: str) -> None:
    err = refused(store, tracking_uri, "--sweep", "table9")
    assert "no rows of sweep(s) table9; its sweeps are: baselines, table6" in err


def test_rows_of_a_newer_schema_are_refused(store: Path, tracking_uri: str, experiment: str) -> None:
    path = sorted(layout.rows_dir(store).glob("*.parquet"))[0]
    table = pq.read_table(path)
    newer = table.set_column(0, "schema_version", pa.array([SCHEMA_VERSION + 1], pa.int16()))
    pq.write_table(newer, path)
    err = refused(store, tracking_uri, "--experiment", experiment)
    assert f"{path.name}: a row of store schema version {SCHEMA_VERSION + 1}, newer than this kdgrid's" in err
    assert client_of(tracking_uri).get_experiment_by_name(experiment) is None  # nothing exported


def test_an_unreachable_tracking_server_is_refused_in_seconds(store: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    uri = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    err = refused(store, uri)
    assert f"--tracking-uri {uri}: cannot reach the MLflow tracking server or store" in err
    assert time.monotonic() - started < 30  # MLflow's own defaults retry for minutes
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in os.environ  # the bound lasts only for the export


def test_a_deleted_experiment_is_refused(store: Path, tracking_uri: str, experiment: str) -> None:
    client = client_of(tracking_uri)
    client.delete_experiment(client.create_experiment(experiment))
    assert "the experiment is deleted" in refused(store, tracking_uri, "--experiment", experiment)


def test_an_export_that_fails_half_way_says_so_and_finishes_when_run_again(
    store: Path, tracking_uri: str, experiment: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.exceptions import MlflowException

    from kdgrid.export import mlflow as exporter

    written: list[str] = []
    real_write_run = exporter.write_run

    def fail_on_the_second(client, experiment_id, content):
        if written:
            raise MlflowException("the server went away")
        written.append(content.trial_id)
        return real_write_run(client, experiment_id, content)

    monkeypatch.setattr(exporter, "write_run", fail_on_the_second)
    with pytest.raises(
        KdgridError, match=r"the export stopped after 1 of 3 trial\(s\) at trial .*the server went away"
    ):
        export_to_mlflow(store, tracking_uri, experiment=experiment, progress=False)
    monkeypatch.setattr(exporter, "write_run", real_write_run)
    report = export_to_mlflow(store, tracking_uri, experiment=experiment, progress=False)
    assert (report.created, report.replaced, report.unchanged) == (2, 0, 1)
    assert len(runs_of(tracking_uri, experiment, "ALL")) == 3


def test_runs_carry_their_interval_and_degenerate_flag(
    tmp_path: Path, tracking_uri: str, experiment: str
) -> None:
    """Rows with per-example predictions: each run holds its score's 95% interval over the dev examples and a
    degenerate flag (a student that predicts one class is flagged, with its reasons as a tag)."""
    gold = np.array([0, 1] * 50, dtype=np.int64)
    good = gold.copy()
    good[:10] = 1 - good[:10]  # 90 of 100 right
    stuck = np.zeros_like(gold)  # one class for every example: 0.5, degenerate
    store = tmp_path / "store"
    trials = {}
    for name, student in (("good", good), ("stuck", stuck)):
        trial = Trial(task="rte", teacher="bert-base", student="bert-tiny", epochs=2, seed=len(trials))
        result = done_result(trial, float(np.mean(student == gold)))
        result.scores = {"validation": {"accuracy": float(np.mean(student == gold))}}
        result.predictions = {"validation": DevSetPredictions(gold, student, gold.copy(), "fixed")}
        write_result(store, result, sweep="mine", study="mine")
        trials[name] = trial
    export_to_mlflow(store, tracking_uri, experiment=experiment, progress=False)
    runs = by_trial(runs_of(tracking_uri, experiment))
    good_run, stuck_run = runs[trials["good"].trial_id], runs[trials["stuck"].trial_id]
    low, high = (
        good_run.data.metrics["ci_low/validation/accuracy"],
        good_run.data.metrics["ci_high/validation/accuracy"],
    )
    # the normal approximation of a 95% interval of 0.9 on 100 examples: 0.9 +- 1.96 * sqrt(0.9 * 0.1 / 100) = +-0.059
    assert low < 0.9 < high and 0.08 < high - low < 0.16
    assert good_run.data.metrics["degenerate"] == 0 and "kdgrid.degenerate" not in good_run.data.tags
    assert (
        stuck_run.data.metrics["degenerate"] == 1 and "constant" in stuck_run.data.tags["kdgrid.degenerate"]
    )
    assert good_run.info.run_name.startswith("rte · bert-tiny · soft labels only · seed 0")
