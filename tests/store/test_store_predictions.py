"""Per-example predictions in rows (schema version 2): written, read back on request only, kept by compaction;
rows of version 1 (a real file of the old schema) still read, and simply have none."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from kdgrid.predictions import DevSetPredictions, TrialPredictions
from kdgrid.result import TrialResult
from kdgrid.store import compact, failure_result, layout, read_cache, read_store, write_result
from kdgrid.store.predictions import read_predictions
from kdgrid.store.read import StoreSchemaError
from kdgrid.store.schema import LARGE_COLUMNS, PREDICTIONS_COLUMN, SCHEMA_VERSION
from kdgrid.trial import Trial

# A row written by kdgrid's schema version 1 (before predictions): a done CoLA student at the majority class.
V1_ROW = Path(__file__).parent / "data" / "2d9d1948a3608f1a.done.019cf10330f24b8ea077353e001cf40b.parquet"


def mnli_predictions(seed: int, teacher: bool = True) -> TrialPredictions:
    rng = np.random.default_rng(seed)
    answer = {}
    for name, n in (("validation_matched", 40), ("validation_mismatched", 30)):
        gold = rng.integers(0, 3, n)
        student = np.where(rng.random(n) < 0.8, gold, (gold + 1) % 3)
        answer[name] = DevSetPredictions(gold, student, gold.copy() if teacher else None, f"{name}-{n}")
    return answer


def done(seed: int, predictions: TrialPredictions | None = None) -> TrialResult:
    predictions = mnli_predictions(seed) if predictions is None else predictions
    trial = Trial(task="mnli", teacher="bert-base", student="bert-tiny", seed=seed)
    scores = {
        name: {"accuracy": float(np.mean(dev.student == dev.gold))} for name, dev in predictions.items()
    }
    return TrialResult(trial=trial, status="done", scores=scores, best_epoch=1, predictions=predictions)


def assert_same(got: TrialPredictions, expected: TrialPredictions) -> None:
    assert list(got) == list(expected)
    for name, dev in expected.items():
        assert got[name].fingerprint == dev.fingerprint
        assert np.array_equal(got[name].gold, dev.gold) and np.array_equal(got[name].student, dev.student)
        assert (got[name].teacher is None) == (dev.teacher is None)
        if dev.teacher is not None:
            assert np.array_equal(got[name].teacher, dev.teacher)


def row_id_of(path: Path) -> str:
    parts = layout.RowFileName.parse(path.name)
    assert parts is not None
    return parts.row_id


def test_predictions_round_trip_through_a_store_and_are_not_read_by_default(tmp_path: Path) -> None:
    results = [done(1), done(2, mnli_predictions(2, teacher=False))]
    paths = [write_result(tmp_path, r, sweep="s", study="t") for r in results]
    frame = read_store(tmp_path)
    assert PREDICTIONS_COLUMN not in frame.columns  # the default read leaves the large column out
    assert set(frame["schema_version"]) == {SCHEMA_VERSION}
    got = read_predictions(tmp_path, [row_id_of(p) for p in paths])
    for path, result in zip(paths, results, strict=True):
        assert_same(got[row_id_of(path)], result.predictions)
    by_row = frame.set_index("row_id")
    first, second = (by_row.loc[row_id_of(p)] for p in paths)
    agreement = json.loads(first["teacher_agreement_json"])
    assert agreement == {
        name: float(np.mean(dev.student == dev.teacher)) for name, dev in results[0].predictions.items()
    }
    assert json.loads(second["teacher_agreement_json"]) == {
        "validation_matched": None,
        "validation_mismatched": None,
    }  # no teacher predictions: no agreement
    assert json.loads(first["prediction_fingerprints_json"]) == {
        "validation_matched": "validation_matched-40",
        "validation_mismatched": "validation_mismatched-30",
    }
    assert json.loads(first["degenerate_json"]) == []


def test_only_the_asked_rows_files_are_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kdgrid.store import read as read_module

    paths = [write_result(tmp_path, done(seed), sweep="s", study="t") for seed in range(6)]
    opened: list[str] = []
    real = read_module._decode

    def decode(files: list[Path], schema: object) -> object:
        opened.extend(f.name for f in files)
        return real(files, schema)  # type: ignore[arg-type]

    monkeypatch.setattr(read_module, "_decode", decode)
    got = read_predictions(tmp_path, [row_id_of(paths[4]), "no-such-row"])
    assert list(got) == [row_id_of(paths[4])] and opened == [paths[4].name]


def test_failed_rows_and_unknown_ids_are_absent(tmp_path: Path) -> None:
    failed = failure_result(done(3).trial, RuntimeError("boom"))
    path = write_result(tmp_path, failed, sweep="s", study="t")
    assert read_predictions(tmp_path, [row_id_of(path), "unknown"]) == {}
    assert read_predictions(tmp_path / "missing", ["x"]) == {}
    row = read_store(tmp_path).iloc[0]
    assert pd.isna(row["degenerate_json"]) and pd.isna(row["teacher_agreement_json"])


def test_a_version_1_file_still_reads_and_has_no_predictions(tmp_path: Path) -> None:
    assert (
        pq.read_schema(V1_ROW).field("schema_version")
        and PREDICTIONS_COLUMN not in pq.read_schema(V1_ROW).names
    )
    layout.rows_dir(tmp_path).mkdir(parents=True)
    shutil.copy(V1_ROW, layout.rows_dir(tmp_path) / V1_ROW.name)
    new = write_result(tmp_path, done(4), sweep="s", study="t")
    frame = read_store(tmp_path).set_index("row_id")
    old = frame.loc[row_id_of(V1_ROW)]
    assert old["schema_version"] == 1 and old["status"] == "done" and old["task"] == "cola"
    assert old["best/validation/accuracy"] == 0.6913
    for column in ("teacher_agreement_json", "degenerate_json", "prediction_fingerprints_json"):
        assert pd.isna(old[column])
    got = read_predictions(tmp_path, [row_id_of(V1_ROW), row_id_of(new)])
    assert list(got) == [row_id_of(new)]
    # compacted together, the version 1 row keeps its nulls and the new row its predictions
    compact(tmp_path)
    assert layout.visible_names(layout.rows_dir(tmp_path)) == []
    got = read_predictions(tmp_path, [row_id_of(V1_ROW), row_id_of(new)])
    assert list(got) == [row_id_of(new)]
    assert_same(got[row_id_of(new)], done(4).predictions)
    assert read_store(tmp_path).set_index("row_id").loc[row_id_of(V1_ROW), "schema_version"] == 1


@pytest.mark.parametrize("warm_cache", [False, True])
def test_compaction_keeps_every_rows_predictions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, warm_cache: bool
) -> None:
    monkeypatch.setattr(read_cache, "MIN_FILES_TO_CACHE", 4)
    results = [done(seed) for seed in range(8)] + [done(8, {})]  # the last: a done row without predictions
    paths = [write_result(tmp_path, r, sweep="s", study="t") for r in results]
    before = read_store(tmp_path)
    if warm_cache:  # the cache holds every row but no predictions: compaction decodes those files
        assert any(layout.read_cache_dir(tmp_path).iterdir())
    else:
        shutil.rmtree(layout.read_cache_dir(tmp_path), ignore_errors=True)
    report = compact(tmp_path)
    assert report.rows == 9 and layout.visible_names(layout.rows_dir(tmp_path)) == []
    got = read_predictions(tmp_path, [row_id_of(p) for p in paths])
    assert len(got) == 8 and row_id_of(paths[8]) not in got
    for path, result in zip(paths[:8], results[:8], strict=True):
        assert_same(got[row_id_of(path)], result.predictions)
    after = read_store(tmp_path)
    key = ["row_id"]
    assert (
        after.sort_values(key).reset_index(drop=True).equals(before.sort_values(key).reset_index(drop=True))
    )


def test_a_stored_value_that_does_not_decode_is_refused_naming_the_row(tmp_path: Path) -> None:
    path = write_result(tmp_path, done(5), sweep="s", study="t")
    table = pq.read_table(path)
    broken = table.set_column(
        table.schema.get_field_index(PREDICTIONS_COLUMN), PREDICTIONS_COLUMN, [[b"garbage"]]
    )
    pq.write_table(broken, path)
    with pytest.raises(StoreSchemaError, match=rf"row {row_id_of(path)} .*unreadable predictions"):
        read_predictions(tmp_path, [row_id_of(path)])


def test_every_large_column_has_a_small_column_null_exactly_when_it_is(tmp_path: Path) -> None:
    paths = [write_result(tmp_path, r, sweep="s", study="t") for r in (done(6), done(7, {}))]
    table = pq.read_table(paths[0]).append_column("_", [[0]]).slice(0, 0)  # schema only
    for large, small in LARGE_COLUMNS.items():
        assert large in table.schema.names and small in table.schema.names
        for path in paths:
            row = pq.read_table(path, columns=[large, small])
            assert row.column(large).is_null().to_pylist() == row.column(small).is_null().to_pylist()
