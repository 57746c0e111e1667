"""Store rows: what a row holds, atomic writes, concurrent writers, reading back, tidy scores, latest state."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kdgrid.atomic_files import TMP_PREFIX
from kdgrid.result import TrialResult
from kdgrid.store import (
    COLUMNS,
    SCHEMA_VERSION,
    done_trial_ids,
    failure_result,
    latest_state,
    read_store,
    scores_long,
    trial_states,
    write_result,
)
from kdgrid.store import read as read_module
from kdgrid.store.write import StoreWriteError
from kdgrid.trial import Trial

MNLI = Trial(
    task="mnli", teacher="bert-base", student="bert-mini", knowledge=("attention_ce_mean", "gram"),
    strategy="Last-1", beta="auto", temperature=2.0, alpha=0.2, options={"pkd_scale": "mean"},
)  # fmt: skip
OTHER = Trial(task="rte", teacher="bert-base", student="bert-tiny")


def done_result(trial: Trial = MNLI, accuracy: float = 0.8) -> TrialResult:
    return TrialResult(
        trial=trial,
        status="done",
        scores={
            "validation_matched": {"accuracy": accuracy},
            "validation_mismatched": {"accuracy": accuracy - 0.01},
        },
        last_scores={
            "validation_matched": {"accuracy": accuracy - 0.02},
            "validation_mismatched": {"accuracy": 0.7},
        },
        best_epoch=2,
        curve=[
            {"epoch": 1, "scores": {"validation_matched": {"accuracy": 0.5}}, "loss_terms": {"soft": 1.5}}
        ],
        loss_terms={"soft": 0.4, "hard": 0.6, "gram@4-12": 0.01},
        weights={"soft": 1.0, "hard": 0.2, "gram@4-12": 3.5},
        layer_pairs=[(4, 12)],
        student_params=11_000_000,
        student_flops=2_000_000_000,
        wall_time_s=12.5,
        device="cpu",
        started_at="2026-01-01T00:00:00+00:00",
        ended_at="2026-01-01T00:00:12+00:00",
    )


def test_a_done_row_holds_every_field(tmp_path: Path) -> None:
    path = write_result(tmp_path, done_result(), sweep="table6", study="main")
    assert path.parent == tmp_path / "rows" and path.name.startswith(f"{MNLI.trial_id}.done.")
    frame = read_store(tmp_path)
    assert len(frame) == 1
    row = frame.iloc[0]
    assert set(COLUMNS) <= set(frame.columns)
    assert row["schema_version"] == SCHEMA_VERSION
    assert (row["trial_id"], row["sweep"], row["study"], row["status"]) == (
        MNLI.trial_id,
        "table6",
        "main",
        "done",
    )
    # every Trial field is its own column
    for name in Trial.field_names():
        if name not in ("beta", "options", "knowledge"):
            expected = getattr(MNLI, name)
            assert pd.isna(row[name]) if expected is None else row[name] == expected, name
    assert list(row["knowledge"]) == ["attention_ce_mean", "gram"]
    assert row["beta_auto"] and pd.isna(row["beta"])
    assert json.loads(row["options_json"]) == {"pkd_scale": "mean"}
    # the canonical JSON round-trips to the same trial and id
    config = json.loads(row["trial_json"])
    config.pop("v")
    assert Trial.from_dict(config) == MNLI
    # derived and outcome columns
    assert (row["student_layers"], row["student_width"], row["student_heads"], row["student_ffn"]) == (
        4,
        256,
        4,
        1024,
    )
    assert json.loads(row["layer_pairs_json"]) == [[4, 12]]
    assert row["best_epoch"] == 2 and row["wall_time_s"] == 12.5 and row["student_params"] == 11_000_000
    assert json.loads(row["loss_terms_json"])["gram@4-12"] == 0.01
    assert json.loads(row["curve_json"])[0]["epoch"] == 1
    assert row["best/validation_matched/accuracy"] == 0.8
    assert row["last/validation_mismatched/accuracy"] == 0.7
    assert row["host"] and json.loads(row["package_versions_json"])["pyarrow"]
    assert row["written_at"] and row["pid"] == os.getpid()


def test_a_failed_row_carries_the_error(tmp_path: Path) -> None:
    try:
        raise RuntimeError("teacher weights missing")
    except RuntimeError as error:
        write_result(tmp_path, failure_result(MNLI, error), sweep="s", study="t")
    row = read_store(tmp_path).iloc[0]
    assert row["status"] == "failed" and row["error_type"] == "RuntimeError"
    assert row["error_message"] == "teacher weights missing" and "raise RuntimeError" in row["traceback"]


def test_a_crash_while_writing_leaves_no_row_and_no_temporary_file(tmp_path: Path, monkeypatch) -> None:
    def crash(src: str, dst: str) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(StoreWriteError, match=f"cannot write a row to the store {tmp_path} \\(disk gone\\)"):
        write_result(tmp_path, done_result(), sweep="s", study="t")
    monkeypatch.undo()
    assert read_store(tmp_path).empty
    assert list((tmp_path / "rows").iterdir()) == []


def test_a_half_written_temporary_file_is_invisible(tmp_path: Path) -> None:
    write_result(tmp_path, done_result(), sweep="s", study="t")
    (tmp_path / "rows" / f"{TMP_PREFIX}abc-{MNLI.trial_id}.done.x.parquet").write_bytes(b"PAR1 half")
    assert len(read_store(tmp_path)) == 1


def _write_many(store: str, worker: int, count: int) -> None:
    for i in range(count):
        trial = Trial(task="rte", teacher="bert-base", student="bert-tiny", seed=worker * 1000 + i)
        write_result(store, done_result(trial), sweep="s", study=f"w{worker}")


def test_concurrent_writers_never_collide(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write_many, args=(str(tmp_path), w, 40)) for w in range(4)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(60)
        assert p.exitcode == 0
    frame = read_store(tmp_path)
    assert len(frame) == 160 and frame["trial_id"].nunique() == 160 and frame["row_id"].nunique() == 160
    assert frame.groupby("study").size().to_dict() == {f"w{w}": 40 for w in range(4)}


def test_name_columns_are_read_without_decoding_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_result(tmp_path, done_result(), sweep="s", study="t")
    broken = write_result(tmp_path, done_result(OTHER), sweep="s", study="t")
    broken.write_bytes(b"not parquet at all")

    real = read_module._decode

    def no_decoding(paths: list[Path], schema: pa.Schema, row_filter: object = None) -> pa.Table:
        assert paths == [], f"decoded {paths}"
        return real(paths, schema, row_filter)  # type: ignore[arg-type]

    monkeypatch.setattr(read_module, "_decode", no_decoding)
    frame = read_store(tmp_path, ["trial_id", "status"], flatten_scores=False)
    # names give the columns; only the footers are checked, so the file that is not Parquet is not counted
    assert frame[["trial_id", "status"]].values.tolist() == [[MNLI.trial_id, "done"]]


def test_scores_long_is_tidy_and_uses_the_latest_done_row(tmp_path: Path) -> None:
    write_result(tmp_path, done_result(accuracy=0.6), sweep="s", study="t")
    write_result(
        tmp_path, done_result(accuracy=0.9), sweep="s", study="t"
    )  # a second done row: the later wins
    write_result(tmp_path, failure_result(MNLI, error_type="X", message="m"), sweep="s", study="t")
    tidy = scores_long(read_store(tmp_path))
    assert list(tidy.columns) == ["trial_id", "dev_set", "metric", "value", "kind"]
    assert len(tidy) == 4
    best = tidy[(tidy["kind"] == "best")].set_index("dev_set")["value"].to_dict()
    assert best == pytest.approx({"validation_matched": 0.9, "validation_mismatched": 0.89})


def test_latest_state_done_wins_and_attempts_count(tmp_path: Path) -> None:
    other = Trial(task="rte", teacher="bert-base", student="bert-tiny")
    write_result(tmp_path, failure_result(MNLI, error_type="OOM", message="first"), sweep="s", study="t")
    write_result(tmp_path, done_result(), sweep="s", study="t")
    write_result(tmp_path, failure_result(other, error_type="OOM", message="first"), sweep="s", study="t")
    write_result(
        tmp_path, failure_result(other, error_type="ValueError", message="second\nline"), sweep="s", study="t"
    )
    state = latest_state(read_store(tmp_path))
    assert state.loc[MNLI.trial_id, "state"] == "done" and state.loc[MNLI.trial_id, "attempts"] == 2
    assert state.loc[MNLI.trial_id, "failures"] == 1 and pd.isna(state.loc[MNLI.trial_id, "error_type"])
    assert state.loc[other.trial_id, "state"] == "failed" and state.loc[other.trial_id, "failures"] == 2
    assert state.loc[other.trial_id, "error_type"] == "ValueError"


def test_an_empty_or_missing_store_reads_as_an_empty_frame(tmp_path: Path) -> None:
    frame = read_store(tmp_path / "nowhere")
    assert frame.empty and set(COLUMNS) <= set(frame.columns)
    assert latest_state(frame).empty and scores_long(frame).empty


def test_files_of_an_older_schema_read_with_nulls(tmp_path: Path) -> None:
    path = write_result(tmp_path, done_result(), sweep="s", study="t")
    table = pq.read_table(path).drop_columns(["device", "pid"])  # as if written before these columns existed
    pq.write_table(table, path)
    row = read_store(tmp_path).iloc[0]
    assert row["trial_id"] == MNLI.trial_id and pd.isna(row["device"])


def test_done_wins_over_failed_whatever_the_order_of_the_rows() -> None:
    rows = [("a", "failed"), ("a", "done"), ("a", "failed"), ("b", "failed"), ("c", "done")]
    assert trial_states(rows) == {"a": "done", "b": "failed", "c": "done"}
    assert trial_states([]) == {}


def test_done_trial_ids_applies_the_one_rule_to_the_store(tmp_path: Path) -> None:
    other = Trial(task="rte", teacher="bert-base", student="bert-tiny")
    assert done_trial_ids(tmp_path / "missing") == set()
    write_result(tmp_path, done_result(), sweep="s", study="t")
    write_result(tmp_path, failure_result(MNLI, error_type="OOM", message="after"), sweep="s", study="t")
    write_result(tmp_path, failure_result(other, error_type="OOM", message="only"), sweep="s", study="t")
    assert done_trial_ids(tmp_path) == {MNLI.trial_id}  # a later failed row does not undo a done one
    assert set(latest_state(read_store(tmp_path))["state"].items()) == {
        (MNLI.trial_id, "done"),
        (other.trial_id, "failed"),
    }
