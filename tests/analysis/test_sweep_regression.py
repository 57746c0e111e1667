"""A sweep on a regression task the paper does not name (any but STS-B) gets its table, its figures and its report
page: Pearson and Spearman, one block each, with intervals, through the CLI."""

from __future__ import annotations

import csv
import dataclasses
import io
from pathlib import Path

import numpy as np
import pytest

from kdgrid.predictions import DevSetPredictions
from tests.analysis.tables_testing import result, run_kdgrid, write

TASK = "synthetic-single-regression-n96-d32"
SWEEP = "regression_lr"
GOLD = np.linspace(0.0, 5.0, 96)
SCORES = {  # (lr, seed) -> (pearson, spearman)
    (1e-3, 0): (0.50, 0.45),
    (1e-3, 1): (0.54, 0.47),
    (1e-2, 0): (0.70, 0.66),
    (1e-2, 1): (0.72, 0.70),
}


def trials(with_predictions: bool = True) -> list:
    made = []
    for (lr, seed), (pearson, spearman) in SCORES.items():
        scores = {"validation": {"pearson": pearson, "spearman": spearman}}
        item = result(scores, task=TASK, lr=lr, seed=seed)
        if with_predictions:
            noise = np.random.default_rng(seed).normal(0.0, 1.0, len(GOLD))
            outcome = {
                "validation": DevSetPredictions(GOLD, GOLD + 3 * noise * (1 - pearson), None, "r" * 64)
            }
            item = dataclasses.replace(item, predictions=outcome)
        made.append(item)
    return made


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    write(path, "main", *trials(), sweep=SWEEP)
    return path


def test_a_regression_sweep_gets_pearson_and_spearman_with_intervals(store: Path, capsys) -> None:
    code, out, err = run_kdgrid(capsys, "tables", "--sweep", SWEEP, "--store", str(store), "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    by = {(r["metric"], r["lr"]): r for r in rows}
    assert set(by) == {("pearson", "0.001"), ("pearson", "0.01"), ("spearman", "0.001"), ("spearman", "0.01")}
    pearson = by[("pearson", "0.01")]
    assert float(pearson["value"]) == pytest.approx(0.71) and pearson["n_seeds"] == "2"
    assert (
        float(pearson["ci_low"]) < 0.71 < float(pearson["ci_high"]) and pearson["uncertainty"] == "seed-level"
    )
    assert float(by[("spearman", "0.001")]["value"]) == pytest.approx(0.46)
    code, out, err = run_kdgrid(capsys, "tables", "--sweep", SWEEP, "--store", str(store))
    assert code == 0 and "pearson" in out and "spearman" in out, err


def test_its_figures_and_its_report_page(store: Path, tmp_path: Path, capsys) -> None:
    from kdgrid.report.build import ReportWriter

    code, out, err = run_kdgrid(
        capsys, "figures", "--sweep", SWEEP, "--store", str(store), "--out", str(tmp_path / "figs")
    )
    assert code == 0, err
    assert "file(s)" in out
    update = ReportWriter(store, tmp_path / "report", figures=False).update()
    assert update.tables == 1
    assert "spearman" in (tmp_path / "report" / "tables.html").read_text()


def test_without_predictions_and_one_seed_figures_say_why_without_blaming_the_schema(
    tmp_path: Path, capsys
) -> None:
    path = tmp_path / "store"
    write(path, "main", *[t for t in trials(with_predictions=False) if t.trial.seed == 0], sweep=SWEEP)
    code, _, err = run_kdgrid(capsys, "figures", "--sweep", SWEEP, "--store", str(path))
    text = " ".join(err.split())
    assert code == 2 and "every cell ran one seed" in text and "carry no per-example predictions" in text
    assert "schema" not in text
