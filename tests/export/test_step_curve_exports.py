"""The step curves in both exports, read back by the tools' own readers: TensorBoard's EventAccumulator opens
the event files `kdgrid export tensorboard` wrote, and MLflow's client reads ``step/...`` metrics at the optimizer
steps; a row without step curves still shows its per-epoch curve."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kdgrid.cli import app
from kdgrid.core.training.step_curves import new_record
from kdgrid.export.tensorboard import export_to_tensorboard
from kdgrid.store import write_result
from tests.export.store_testing import BASELINE, DISTILLED, done_result


def with_curves():
    result = done_result(DISTILLED, 0.8)
    record = new_record(5, 20, 3)
    record["steps"] = [5, 10, 15, 20]
    record["terms"] = {"soft": [1.0, 0.8, 0.6, 0.5], "gram@4-12": [0.04, 0.03, 0.02, 0.01]}
    record["weighted"] = {"soft": [1.0, 0.8, 0.6, 0.5], "gram@4-12": [0.14, 0.105, 0.07, 0.035]}
    record["total"] = [1.14, 0.905, 0.67, 0.535]
    record["lr"] = [1e-4, 8e-5, 5e-5, 2e-5]
    record["grad_norm"] = [2.0, 1.5, 1.0, 0.9]
    record["cosine"] = [0.25, None, -0.125, None]
    record["mapping"] = {"steps": [5, 20], "values": [{"weights": [[0.5, 0.5]]}, {"weights": [[0.25, 0.75]]}]}
    result.step_curves = record
    return result


def points(reader, tag: str) -> list[tuple[int, float]]:
    """(step, value) of a scalar tag, values to float32's precision (TensorBoard stores simple values so)."""
    return [(e.step, round(e.value, 6)) for e in reader.Scalars(tag)]


def test_tensorboard_event_files_open_in_tensorboards_reader(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    store, out = tmp_path / "store", tmp_path / "tb"
    write_result(store, with_curves(), sweep="s", study="a")
    write_result(store, done_result(BASELINE, 0.7), sweep="s", study="a")  # no step curves: per-epoch only
    report = export_to_tensorboard(store, out)
    assert (report.runs, report.with_step_curves) == (2, 1)
    runs = {p.name: p for p in (out / "s").iterdir()}
    assert len(runs) == 2
    distilled = next(p for name, p in runs.items() if name.endswith(DISTILLED.trial_id[:8]))
    reader = EventAccumulator(str(distilled))
    reader.Reload()
    tags = set(reader.Tags()["scalars"])
    assert {"loss/soft", "weighted/gram@4-12", "total", "lr", "grad_norm", "cosine", "mapping/S1/T2"} <= tags
    assert points(reader, "loss/soft") == [(5, 1.0), (10, 0.8), (15, 0.6), (20, 0.5)]  # float32 in the file
    assert points(reader, "cosine") == [(5, 0.25), (15, -0.125)]
    assert points(reader, "mapping/S1/T2") == [(5, 0.5), (20, 0.75)]
    # dev metrics at each epoch's last step (2 epochs of 10 steps)
    assert [e.step for e in reader.Scalars("dev/validation_matched/accuracy")] == [10, 20]
    baseline = next(p for name, p in runs.items() if name.endswith(BASELINE.trial_id[:8]))
    reader = EventAccumulator(str(baseline))
    reader.Reload()
    assert points(reader, "loss/soft") == [(1, 1.0), (2, 0.5)]  # its epoch curve
    # a second export replaces the event files instead of adding to them
    export_to_tensorboard(store, out)
    assert len(list(distilled.iterdir())) == 1


def test_the_command_writes_and_says_where(tmp_path: Path) -> None:
    store, out = tmp_path / "store", tmp_path / "tb"
    write_result(store, with_curves(), sweep="s", study="a")
    result = CliRunner().invoke(app, ["export", "tensorboard", "--store", str(store), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "wrote 1 run(s)" in result.output and f"tensorboard --logdir {out}" in result.output


@pytest.mark.skipif(
    importlib.util.find_spec("mlflow") is None and not os.environ.get("CI"), reason="MLflow is not installed"
)
def test_mlflow_runs_hold_the_step_curves_at_the_optimizer_steps(tmp_path: Path) -> None:
    from mlflow import MlflowClient

    from kdgrid.export.mlflow import export_to_mlflow
    from kdgrid.export.run_content import TRIAL_TAG

    store, uri = tmp_path / "store", f"sqlite:///{tmp_path / 'mlflow.db'}"
    write_result(store, with_curves(), sweep="s", study="a")
    export_to_mlflow(store, uri, experiment="steps", progress=False)
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("steps")
    (run,) = [r for r in client.search_runs([experiment.experiment_id]) if r.data.tags[TRIAL_TAG]]
    history = client.get_metric_history(run.info.run_id, "step/loss/gram/4-12")
    assert sorted((m.step, m.value) for m in history) == [(5, 0.04), (10, 0.03), (15, 0.02), (20, 0.01)]
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "step/grad_norm")) == [5, 10, 15, 20]
    # the per-epoch curve is kept as it was (step = epoch)
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "loss/gram/4-12")) == [1, 2]
