"""What `kdgrid tables` exports keep: trial ids and one column per axis in CSV, numbers without float noise, the
packages LaTeX needs, a refusal for `--compare paper` without published numbers, the agreement column's name."""

from __future__ import annotations

import csv
import io

import pandas as pd
import pytest

import kdgrid.bundled_sweeps as bundled_sweeps
from kdgrid.analysis.render import CSV_AXES
from tests.analysis.tables_testing import result, run_kdgrid, write


@pytest.fixture(autouse=True)
def sweeps_dir(tmp_path, monkeypatch):
    folder = tmp_path / "sweeps"
    folder.mkdir()
    monkeypatch.setattr(bundled_sweeps, "BUNDLED_SWEEPS_DIR", folder)
    return folder


def test_csv_carries_trial_ids_one_column_per_axis_and_rounded_numbers(tmp_path, capsys):
    store = tmp_path / "store"
    seeds = [
        result(0.1, student="bert-mini", temperature=2.0, alpha=0.5, seed=0),
        result(0.2, student="bert-mini", temperature=2.0, alpha=0.5, seed=1),
    ]
    write(store, "table4", *seeds)
    assert repr(float(pd.Series([0.1, 0.2]).mean())) == "0.15000000000000002"  # the float noise a mean brings
    code, out, err = run_kdgrid(capsys, "tables", "4", "--store", str(store), "--format", "csv")
    assert code == 0, err
    header = out.splitlines()[0].split(",")
    assert header[-len(CSV_AXES) - 1 :] == [*CSV_AXES, "trial_ids"]
    (cell,) = [row for row in csv.DictReader(io.StringIO(out)) if row["value"]]
    assert cell["value"] == "0.15" and cell["std"] == "0.0707106781"  # rounded to 10 decimals
    assert cell["trial_ids"] == ";".join(r.trial.trial_id for r in seeds)  # in seed order
    assert (cell["task"], cell["student"], cell["teacher"]) == ("mrpc", "bert-mini", "bert-base")
    assert (cell["temperature"], cell["alpha"], cell["metric"]) == ("2.0", "0.5", "accuracy")
    assert cell["knowledge"] == "" and cell["dev_set"] == "validation"


def test_compare_paper_is_refused_for_a_table_without_published_numbers(tmp_path, capsys):
    store = tmp_path / "store"
    write(store, "demo", result(0.8, task="polarity", knowledge=("cos",), strategy="First"))
    code, _, err = run_kdgrid(capsys, "tables", "demo", "--store", str(store), "--compare", "paper")
    assert code == 2
    assert "--compare paper: table demo is not one of the paper's, it has no published numbers" in " ".join(
        err.split()
    )


def test_the_agreement_view_names_its_column_agreement(tmp_path, capsys):
    store = tmp_path / "store"
    write(store, "demo", result(0.8, task="polarity", soft_weight=1.0), result(0.6, task="polarity"))
    code, out, err = run_kdgrid(
        capsys, "tables", "demo", "--store", str(store), "--values", "agreement", "--format", "csv"
    )
    assert code == 0, err
    columns = {
        row["column"] for row in csv.DictReader(io.StringIO(out)) if row["block"].endswith("baselines")
    }
    assert columns == {"agreement"}
    code, out, _ = run_kdgrid(capsys, "tables", "demo", "--store", str(store), "--format", "csv")
    columns = {
        row["column"] for row in csv.DictReader(io.StringIO(out)) if row["block"].endswith("baselines")
    }
    assert columns == {"score"}
