"""What a trial's MLflow run holds, from its store row (no MLflow needed): names, values, which row is exported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kdgrid.errors import KdgridError
from kdgrid.export.run_content import (
    GIT_COMMIT_TAG,
    NOTE_TAG,
    READ_COLUMNS,
    ROW_TAG,
    RUN_FAILED,
    RUN_FINISHED,
    TEACHER_AGREEMENT_COLUMN,
    TRIAL_TAG,
    MetricPoint,
    exported_rows,
    mlflow_name,
    param_value,
    run_content,
)
from kdgrid.store import read_store, write_result
from kdgrid.store.schema import COLUMNS
from tests.export.store_testing import BASELINE, BROKEN, DISTILLED, done_result, write_tiny_store


def store_rows(store: Path):
    return read_store(store, [c for c in READ_COLUMNS if c in COLUMNS], flatten_scores=False)


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_store(tmp_path_factory.mktemp("store"))


def test_each_trial_exports_its_deciding_row(tiny_store: Path) -> None:
    frame = store_rows(tiny_store)
    rows = exported_rows(frame)
    assert list(rows["trial_id"]) == sorted([DISTILLED.trial_id, BASELINE.trial_id, BROKEN.trial_id])
    status = dict(zip(rows["trial_id"], rows["status"], strict=True))
    # the distilled trial failed, then was done: done wins; the broken one only failed
    assert status == {DISTILLED.trial_id: "done", BASELINE.trial_id: "done", BROKEN.trial_id: "failed"}


def test_a_sweep_selects_trials_and_the_row_stays_the_trials_latest(tmp_path: Path) -> None:
    write_tiny_store(tmp_path)
    write_result(tmp_path, done_result(BASELINE, 0.7), sweep="table6", study="again")  # a later re-run
    frame = store_rows(tmp_path)
    only = exported_rows(frame, ["baselines"])
    assert sorted(only["trial_id"]) == sorted([BASELINE.trial_id, BROKEN.trial_id])
    everything = exported_rows(frame)
    latest = everything.set_index("trial_id").loc[BASELINE.trial_id, "row_id"]
    # the baseline's run is its latest row whichever sweeps are exported (the re-run is of another sweep)
    assert only.set_index("trial_id").loc[BASELINE.trial_id, "row_id"] == latest
    assert json.loads(only.set_index("trial_id").loc[BASELINE.trial_id, "scores_json"])["validation"] == {
        "accuracy": 0.7,
        "f1": pytest.approx(0.65),
    }
    assert exported_rows(frame, ["no-such-sweep"]).empty


def test_a_done_run_holds_params_metrics_curves_and_tags(tiny_store: Path) -> None:
    frame = store_rows(tiny_store)
    row = exported_rows(frame).set_index("trial_id", drop=False).loc[DISTILLED.trial_id].to_dict()
    content = run_content(row)
    assert content.status == RUN_FINISHED and content.row_id == row["row_id"]
    # named by its settings, the knowledge in words as the tables write it
    assert (
        content.name
        == f"mnli · bert-mini · attention_ce_mean + gram · Last-1 · seed 0 · {DISTILLED.trial_id[:8]}"
    )
    # params: every Trial field, each option, the derived shape
    expected = {k: param_value(v) for k, v in DISTILLED.to_dict().items() if k != "options"}
    expected["knowledge"] = "attention_ce_mean + gram"
    expected |= {"option.pkd_scale": "mean", "layer_pairs": "[[4, 12]]", "student_layers": "4"}
    expected |= {"student_width": "256", "student_heads": "4", "student_ffn": "1024"}
    expected |= {"student_params": "11000000", "student_flops": "2000000000"}
    assert content.params == expected
    assert content.params["knowledge"] == "attention_ce_mean + gram" and content.params["beta"] == "auto"
    assert content.params["init_from"] == "null" and content.params["lr"] == "0.0001"
    # final metrics at step 0, curves at each epoch; the loss term's '@' is not an MLflow name character
    finals = {p.key: p.value for p in content.metrics if p.step == 0}
    assert finals["best/validation_matched/accuracy"] == 0.8
    assert finals["last/validation_mismatched/f1"] == pytest.approx(0.74)
    assert finals["best_epoch"] == 2 and finals["wall_time_s"] == 12.5
    assert finals["weight/gram/4-12"] == 3.5 and finals["weight/hard"] == 0.2
    curve = sorted((p.key, p.step, p.value) for p in content.metrics if p.step > 0)
    assert ("loss/gram/4-12", 1, 0.02) in curve and ("loss/gram/4-12", 2, 0.01) in curve
    assert ("dev/validation_matched/accuracy", 2, pytest.approx(0.75)) in curve
    assert len(curve) == 2 * (3 + 2)  # two epochs of three loss terms and two dev sets
    assert content.tags[TRIAL_TAG] == DISTILLED.trial_id and content.tags[ROW_TAG] == row["row_id"]
    assert content.tags["kdgrid.sweep"] == "table6" and content.tags["kdgrid.study"] == "main"
    assert content.tags["kdgrid.device"] == "cpu" and content.tags[GIT_COMMIT_TAG] == row["git_commit"]
    # the run lasts its own wall time (12.5 s, its share of the job), not the job's start to end
    assert (content.start_ms, content.end_ms) == (1_767_225_600_000, 1_767_225_612_500)


def test_a_failed_run_carries_its_error(tiny_store: Path) -> None:
    row = exported_rows(store_rows(tiny_store)).set_index("trial_id", drop=False).loc[BROKEN.trial_id]
    content = run_content(row.to_dict())
    assert content.status == RUN_FAILED and content.metrics == []
    assert content.tags["kdgrid.error_type"] == "RuntimeError"
    assert content.tags["kdgrid.error_message"] == "teacher weights missing"
    assert "raise RuntimeError" in content.tags[NOTE_TAG]
    assert "kdgrid.device" not in content.tags  # null in the row: no tag rather than "None"


def test_teacher_agreement_is_a_metric_when_the_row_has_it(tiny_store: Path) -> None:
    row = exported_rows(store_rows(tiny_store)).set_index("trial_id", drop=False).loc[BASELINE.trial_id]
    with_agreement = {**row.to_dict(), TEACHER_AGREEMENT_COLUMN: '{"validation": 0.9, "other": NaN}'}
    points = run_content(with_agreement).metrics
    assert MetricPoint("teacher_agreement/validation", 0.9, 0) in points
    assert not [p for p in points if p.key == "teacher_agreement/other"]  # NaN: no teacher predictions


def test_names_mlflow_refuses_are_rewritten_and_collisions_refused(tiny_store: Path) -> None:
    assert mlflow_name("hidden_mse@1-6") == "hidden_mse/1-6"
    assert mlflow_name("odd+name(1)") == "odd_name_1_"
    row = exported_rows(store_rows(tiny_store)).set_index("trial_id", drop=False).loc[BASELINE.trial_id]
    weights = json.dumps({"gram@4-12": 1.0, "gram/4-12": 2.0})
    with pytest.raises(KdgridError, match="'weight/gram/4-12' and 'weight/gram@4-12' of one row"):
        run_content({**row.to_dict(), "weights_json": weights})
