"""Uncertainty end to end on real stores: rows written with per-example predictions (row schema version 2) and
read back by the store's own reader, through `kdgrid tables` and `kdgrid demo`'s table."""

from __future__ import annotations

import csv
import dataclasses
import io
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rich.console import Console

import kdgrid.bundled_sweeps as bundled_sweeps
from kdgrid.analysis.tables_report import demo_table
from kdgrid.predictions import DevSetPredictions
from kdgrid.store import layout
from tests.analysis.tables_testing import result, run_kdgrid, write

N = 300
GOLD = np.arange(N) % 2
FINGERPRINT = "a" * 64


@pytest.fixture(autouse=True)
def sweeps_dir(tmp_path, monkeypatch):
    folder = tmp_path / "sweeps"
    folder.mkdir()
    monkeypatch.setattr(bundled_sweeps, "BUNDLED_SWEEPS_DIR", folder)
    return folder


def correct_on(share: float) -> np.ndarray:
    return np.where(np.arange(N) < round(share * N), GOLD, 1 - GOLD)


def with_predictions(student: np.ndarray, **fields):
    """A done demo row whose score is the student's accuracy and whose predictions are stored beside it."""
    accuracy = float((student == GOLD).mean())
    teacher = correct_on(0.9)
    outcome = {"validation": DevSetPredictions(GOLD, student, teacher, FINGERPRINT)}
    return dataclasses.replace(result(accuracy, task="sst2", **fields), predictions=outcome)


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "store"
    write(
        path,
        "demo",
        with_predictions(correct_on(0.8), soft_weight=1.0),
        with_predictions(correct_on(0.8), knowledge=("cos",), strategy="First"),
        with_predictions(1 - correct_on(0.8), knowledge=("pkd",), strategy="First"),
        with_predictions(np.zeros(N, dtype=np.int64), knowledge=("mmd",), strategy="First"),
    )
    return path


def test_demo_csv_from_a_store_with_predictions_carries_intervals_and_tests(store, capsys):
    code, out, err = run_kdgrid(
        capsys, "tables", "demo", "--store", str(store), "--format", "csv", "--intervals", "on"
    )
    assert code == 0, err
    rows = {(r["row"], r["column"]): r for r in csv.DictReader(io.StringIO(out))}
    soft, same, flip = rows[("soft labels only", "score")], rows[("cos", "First")], rows[("pkd", "First")]
    assert soft["is_reference"] == "1" and float(soft["ci_low"]) < 0.8 < float(soft["ci_high"])
    assert same["p_vs_reference"] == "1.0" and same["significant"] == "0"
    assert flip["significant"] == "1" and flip["direction"] == "-1" and float(flip["ci_high"]) < 0.3
    constant = rows[("mmd", "First")]
    assert "constant predictions" in constant["degenerate"] and constant["significant"] == "1"


def test_the_terminal_table_marks_worse_and_degenerate_cells(store, capsys):
    code, out, err = run_kdgrid(capsys, "tables", "demo", "--store", str(store))
    assert code == 0, err
    # the flipped student (0.2) is below the majority class too: degenerate as well as worse
    assert "0.2000 ▼†" in out and "0.5000 ▼†" in out and "0.8000 ref" in out and "0.8000 †" not in out
    assert "†: degenerate run(s) in 2 cell(s)" in out and "95% bootstrap interval" in out


def test_the_demo_table_prints_intervals(store):
    console = Console(record=True, width=250, file=io.StringIO(), color_system=None)
    console.print(demo_table(store))
    text = console.export_text()
    assert "[0.7" in text and "▼" in text and "(0 better, 2 worse)" in text


def test_a_reference_of_the_table_can_be_chosen(store, capsys):
    code, out, err = run_kdgrid(
        capsys,
        "tables",
        "demo",
        "--store",
        str(store),
        "--format",
        "csv",
        "--reference",
        "knowledge=pkd,strategy=First",
    )
    assert code == 0, err
    rows = {(r["row"], r["column"]): r for r in csv.DictReader(io.StringIO(out))}
    assert rows[("pkd", "First")]["is_reference"] == "1"
    assert rows[("cos", "First")]["direction"] == "1" and rows[("cos", "First")]["significant"] == "1"


def test_the_agreement_view_reads_the_rows_agreement(store, capsys):
    code, out, err = run_kdgrid(
        capsys, "tables", "demo", "--store", str(store), "--values", "agreement", "--format", "csv"
    )
    assert code == 0, err
    rows = {(r["row"], r["column"]): r for r in csv.DictReader(io.StringIO(out))}
    # the student right on the first 80% agrees with the teacher (right on the first 90%) on 90% of examples
    assert float(rows[("cos", "First")]["value"]) == pytest.approx(0.9)
    assert float(rows[("pkd", "First")]["value"]) == pytest.approx(0.1)


def test_a_store_whose_rows_have_no_predictions_refuses_intervals_on(tmp_path, capsys):
    path = tmp_path / "plain"
    write(path, "demo", result(0.8, task="sst2", soft_weight=1.0))
    code, _, err = run_kdgrid(capsys, "tables", "demo", "--store", str(path), "--intervals", "on")
    assert code == 2 and "no per-example predictions" in err and "Traceback" not in err
    code, out, err = run_kdgrid(capsys, "tables", "demo", "--store", str(path), "--format", "csv")
    assert code == 0 and ",0.8," in out  # auto: the plain number, no interval


def test_a_store_of_version_1_rows_refuses_intervals_and_still_prints_its_numbers(tmp_path, capsys):
    """A row file of schema version 1 (no predictions column), as an older kdgrid wrote it, counted in the demo."""
    v1_row = (
        Path(__file__).parents[1]
        / "store"
        / "data"
        / "2d9d1948a3608f1a.done.019cf10330f24b8ea077353e001cf40b.parquet"
    )
    table = pq.read_table(v1_row)
    assert "predictions" not in table.schema.names and table.column("schema_version")[0].as_py() == 1
    table = table.set_column(table.schema.get_field_index("study"), "study", pa.array(["demo"]))
    store = tmp_path / "v1"
    layout.rows_dir(store).mkdir(parents=True)
    pq.write_table(table, layout.rows_dir(store) / v1_row.name)
    code, _, err = run_kdgrid(capsys, "tables", "demo", "--store", str(store), "--intervals", "on")
    assert code == 2 and "row schema version 1" in err and "Traceback" not in err
    code, out, err = run_kdgrid(capsys, "tables", "demo", "--store", str(store), "--format", "csv")
    assert code == 0, err
    (line,) = [r for r in csv.DictReader(io.StringIO(out)) if r["value"]]
    assert line["value"] == "0.6913" and line["ci_low"] == "" and line["p_vs_reference"] == ""


def test_the_table_names_its_tests_family_and_correction(store, capsys):
    code, out, err = run_kdgrid(capsys, "tables", "demo", "--store", str(store), "--format", "markdown")
    assert code == 0, err
    assert (
        "exact McNemar test" in out
        and "one family per condition" in out
        and "Holm (family-wise error)" in out
    )
    assert "run-to-run comparison" in out
    code, out, err = run_kdgrid(
        capsys, "tables", "demo", "--store", str(store), "--format", "markdown",
        "--family", "table", "--correction", "fdr",
    )  # fmt: skip
    assert code == 0, err
    assert "one family: the whole table" in out and "Benjamini-Hochberg (false discovery rate)" in out


def test_kind_last_prints_the_last_epochs_values_without_another_epochs_interval(store, capsys):
    code, out, err = run_kdgrid(
        capsys, "tables", "demo", "--store", str(store), "--format", "csv", "--kind", "last"
    )
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows and all(r["ci_low"] == "" and r["significant"] in ("", "0") for r in rows)
    code, out, err = run_kdgrid(capsys, "tables", "demo", "--store", str(store), "--kind", "last")
    assert "best epoch only" in out
