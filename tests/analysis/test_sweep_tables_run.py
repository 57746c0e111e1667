"""A sweep written from scratch (its own name, two axes of its own, 3 seeds) runs offline through the CLI and gets
its table: intervals, the reference and marks, marginal summaries and pairwise comparisons (`kdgrid tables
--sweep`). Real training: an offline synthetic task, a random tiny teacher, tiny students, one short epoch."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest

from kdgrid.core.teacher.options import NOT_MEANT_TO_BE_ACCURATE
from kdgrid.store import read_store
from tests.analysis.tables_testing import run_kdgrid

pytestmark = pytest.mark.slow  # real training (about 40 s on 2 busy cores)

TASK = "synthetic-single-binary-n64-d48"
SWEEP = "lr_by_temperature"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, teacher: str) -> Path:
    from kdgrid import cli

    root = tmp_path_factory.mktemp("own-sweep")
    sweep = root / "my-own-study.yaml"
    sweep.write_text(json.dumps({
        "name": SWEEP,
        "fixed": {"task": TASK, "teacher": teacher, "student": "w32-l2-h2-f64", "init": "random",
                  "batch_size": 16, "max_length": 24, "epochs": 1, "knowledge": ["hidden_mse"], "strategy": "Last",
                  "options": NOT_MEANT_TO_BE_ACCURATE},
        "axes": {"lr": [1e-4, 3e-3], "temperature": [1, 4]},
        "seeds": 3,
    }))  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["run", str(sweep), "--store", str(root / "store"), "--set", "local_progress=false"])
    assert exit_info.value.code in (0, None)
    return root / "store"


def test_the_sweep_ran_its_twelve_trials(store: Path) -> None:
    rows = read_store(store)
    assert len(rows) == 12 and set(rows["status"]) == {"done"} and set(rows["sweep"]) == {SWEEP}


def test_its_table_has_intervals_marks_and_marginal_summaries(store: Path, capsys) -> None:
    code, out, err = run_kdgrid(
        capsys, "tables", "--sweep", SWEEP, "--store", str(store), "--format", "csv", "--pairs",
        "--resamples", "300", "--test-resamples", "300",
    )  # fmt: skip
    assert code == 0, err
    lines = list(csv.DictReader(io.StringIO(out)))
    cells = [r for r in lines if r["lr"]]  # the table's own cells carry their axes
    # axes in Trial's field order: temperature down the rows, lr across
    assert len(cells) == 4 and {(r["row"], r["column"]) for r in cells} == {
        (t, lr) for t in ("1", "4") for lr in ("0.0001", "0.003")
    }
    for cell in cells:
        assert cell["n_seeds"] == "3" and len(cell["trial_ids"].split(";")) == 3
        assert float(cell["ci_low"]) <= float(cell["value"]) <= float(cell["ci_high"])
    # no soft-labels-only cell here: the reference is the first cell; the others are tested against it
    (reference,) = [r for r in cells if r["is_reference"] == "1"]
    assert (reference["row"], reference["column"]) == ("1", "0.0001")
    assert all(0 < float(r["p_vs_reference"]) <= 1 for r in cells if r is not reference)
    marginal = [r for r in lines if r["column"] == "mean"]
    assert {r["block"].split(" — ")[1] for r in marginal} == {
        "lr, mean over temperature",
        "temperature, mean over lr",
    }
    for row in marginal:
        assert float(row["ci_low"]) <= float(row["value"]) <= float(row["ci_high"])
    by_lr = {
        r["row"]: float(r["value"]) for r in marginal if r["block"].endswith("lr, mean over temperature")
    }
    for lr, mean in by_lr.items():
        assert mean == pytest.approx(sum(float(c["value"]) for c in cells if c["column"] == lr) / 2, abs=1e-9)
    pairs = [r for r in lines if r["column"] == "difference"]
    assert {r["row"] for r in pairs} == {"0.0001 vs 0.003", "1 vs 4"}
    assert all(not math.isnan(float(r["p_vs_reference"])) for r in pairs)


def test_its_terminal_table_shows_the_reference_and_a_wrong_axis_is_refused(store: Path, capsys) -> None:
    code, out, err = run_kdgrid(
        capsys, "tables", "--sweep", SWEEP, "--store", str(store), "--rows", "lr", "--cols", "temperature",
        "--test-resamples", "300",
    )  # fmt: skip
    assert code == 0, err
    assert "sweep lr_by_temperature: accuracy by lr x temperature" in out
    words = " ".join(out.split())  # rich wraps a long block title to its table's width
    assert "ref" in out and "lr, mean over temperature" in words and "temperature, mean over lr" in words
    assert "±" in out  # three seeds a cell
    code, _, err = run_kdgrid(
        capsys, "tables", "--sweep", SWEEP, "--store", str(store), "--rows", "knowlege"
    )  # not a field of its trials (a field they all share would be laid out as one value)
    assert code == 2 and "its axes (the fields that vary between its trials): temperature, lr" in " ".join(
        err.split()
    )


def test_its_forest_plot_is_written_where_asked_not_into_the_store(
    store: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "figures"
    code, printed, err = run_kdgrid(
        capsys, "figures", "--sweep", SWEEP, "--store", str(store), "--out", str(out)
    )
    assert code == 0, err
    pngs = sorted(out.glob("*.png"))
    # the forest plot, the heat map and, the cells having several seeds, their seeds overlaid (PNG and PDF each)
    assert [p.name.split("_")[1] for p in pngs] == ["forest", "heatmap", "seedcurves"] and "6 file(s)" in printed
    assert all(p.stat().st_size > 1000 for p in pngs)
    assert not any(path.suffix in (".png", ".pdf") for path in store.rglob("*"))
