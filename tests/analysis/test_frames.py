"""The tidy frames (`kdgrid.analysis.frames`): plain columns that pandas pivots without unpacking anything, cells
with the very intervals and tests `kdgrid tables --sweep` prints, curves read from whatever a row's curve holds,
and the docs' example run as written."""

from __future__ import annotations

import csv
import io
import math
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from kdgrid.analysis.frames import cell_frame, curve_frame, epoch_points, step_points, trial_frame
from kdgrid.store import read_store
from tests.analysis.frames_testing import SWEEP, VALUES, make_store
from tests.analysis.tables_testing import run_kdgrid

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_store(tmp_path_factory.mktemp("frames"))


def test_the_trial_frame_pivots_with_pandas_where_the_raw_rows_do_not(store: Path) -> None:
    raw = read_store(store)
    raw = raw[raw["status"] == "done"]
    with pytest.raises((KeyError, TypeError, ValueError)):  # knowledge is a numpy array per row there
        raw.pivot_table(index="knowledge", columns="strategy", values="best/validation/accuracy")
    trials = trial_frame(store, sweep=SWEEP)
    assert len(trials) == 13 and trials["trial_id"].is_unique
    assert set(trials["knowledge"]) == {"hidden_mse", "cos+hidden_mse", "gram"}  # sorted, joined by +
    assert trials["soft_t2"].eq(True).sum() == 12  # an option is a column of its own
    failed = trials[trials["state"] == "failed"]
    assert len(failed) == 1 and math.isnan(failed["score"].iloc[0])
    done = trials[trials["state"] == "done"]
    assert set(done["metric"]) == {"accuracy"} and set(done["dev_set"]) == {"validation"}
    means = done.pivot_table(index="knowledge", columns="strategy", values="score", aggfunc="mean")
    for (knowledge, strategy), values in VALUES.items():
        label = "+".join(sorted(knowledge))
        assert means.loc[label, strategy] == pytest.approx(np.mean(values))
    counts = done.groupby(["knowledge", "strategy"]).size()
    assert counts.eq(3).all() and len(counts) == 4


def test_the_cell_frame_is_the_tables_own_cells_with_their_intervals_and_tests(store: Path, capsys) -> None:
    cells = cell_frame(store, SWEEP, rows="knowledge", cols="strategy")
    assert len(cells) == 4 and set(cells["uncertainty"]) == {"seed-level"}
    reference = cells[cells["reference"]]
    assert len(reference) == 1 and reference[["knowledge", "strategy", "mark"]].values.tolist() == [
        ["hidden_mse", "Last-1", "ref"]
    ]  # by default the block's first cell
    # a seed-level interval by hand: mean ± t(2) s/√3
    lad = cells[(cells["knowledge"] == "hidden_mse") & (cells["strategy"] == "LAD")].iloc[0]
    values = np.array(VALUES[(("hidden_mse",), "LAD")])
    half = scipy_stats.t.ppf(0.975, 2) * values.std(ddof=1) / math.sqrt(3)
    assert (lad["ci_low"], lad["ci_high"]) == pytest.approx((values.mean() - half, values.mean() + half))
    assert lad["n_seeds"] == 3 and len(lad["trial_ids"].split("+")) == 3
    # ... and the paired t-test over seeds against Last-1 (same seeds)
    base = np.array(VALUES[(("hidden_mse",), "Last-1")])
    assert lad["p_raw"] == pytest.approx(scipy_stats.ttest_rel(values, base).pvalue, rel=1e-9)
    # the same numbers the command line prints in its CSV
    code, out, _ = run_kdgrid(capsys, "tables", "--sweep", SWEEP, "--store", str(store), "--rows", "knowledge",
                              "--cols", "strategy", "--format", "csv")  # fmt: skip
    assert code == 0
    printed = [r for r in csv.DictReader(io.StringIO(out)) if r["value"] and "mean over" not in r["block"]]
    assert len(printed) == 4
    for line in printed:
        mine = cells[
            (cells["knowledge"] == line["knowledge"]) & (cells["strategy"] == line["strategy"])
        ].iloc[0]
        assert float(line["value"]) == pytest.approx(mine["value"])
        assert float(line["ci_low"]) == pytest.approx(mine["ci_low"])
        assert float(line["ci_high"]) == pytest.approx(mine["ci_high"])
        assert (line["p_raw"] == "") == math.isnan(mine["p_raw"])
    # the frame pivots as it is
    pivot = cells.pivot_table(index="knowledge", columns="strategy", values="ci_low")
    assert pivot.shape == (2, 2)


def test_the_curve_frame_holds_every_epoch_point(store: Path) -> None:
    curves = curve_frame(store, sweep=SWEEP)
    assert len(curves) == 12 * 4 and set(curves["source"]) == {"epoch"}
    scores = curves[curves["series"] == "score"]
    assert set(scores["term"]) == {"accuracy"} and set(scores["dev_set"]) == {"validation"}
    trials = trial_frame(store, sweep=SWEEP)
    last = scores[scores["epoch"] == 2].merge(trials[["trial_id", "score"]], on="trial_id")
    assert np.allclose(last["value"], last["score"])
    soft = curves[(curves["series"] == "loss") & (curves["term"] == "soft")]
    assert soft.pivot_table(index="epoch", values="value").loc[1, "value"] == pytest.approx(0.9)


def test_curve_readers_keep_the_numbers_and_skip_what_they_do_not_know() -> None:
    entries = [
        {"epoch": 1, "scores": {"validation": {"accuracy": 0.5, "note": "x"}}, "loss_terms": {"soft": 1.0},
         "lr": 0.001, "grad": {"norm": 2.0, "bad": None}, "matrix": [[1, 2]], "new_key": "text"},
        "not an entry",
        {"epoch": 2, "scores": None, "loss_terms": {"soft": float("nan")}},
    ]  # fmt: skip
    assert sorted(epoch_points(entries)) == sorted([
        (1, "score", "validation", "accuracy", 0.5), (1, "loss", "", "soft", 1.0), (1, "lr", "", "lr", 0.001),
        (1, "grad", "", "norm", 2.0),
    ])  # fmt: skip
    assert epoch_points("garbage") == [] and epoch_points(None) == []
    record = {"format": 1, "every": 5, "steps": [5, 10], "terms": {"soft": [0.9, 0.8], "short": [1.0]},
              "total": [1.2, 1.1], "cosine": [None, 0.3], "mapping": {"steps": [5], "values": [[[1.0]]]}}  # fmt: skip
    assert sorted(step_points(record)) == sorted([
        (5, "terms", "soft", 0.9), (10, "terms", "soft", 0.8), (5, "total", "total", 1.2),
        (10, "total", "total", 1.1), (10, "cosine", "cosine", 0.3),
    ])  # fmt: skip
    assert step_points({"no": "steps"}) == [] and step_points([1, 2]) == []


def test_the_docs_example_runs_as_written(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "python.md").read_text()
    [code] = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    make_store(tmp_path)
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        names: dict = {}
        exec(compile(code, "docs/python.md", "exec"), names)
    finally:
        os.chdir(here)
    assert isinstance(names["means"], pd.DataFrame) and names["means"].shape == (2, 2)
    assert names["seeds"].loc["hidden_mse", "LAD"] == 3
    assert list(names["by_epoch"].index) == [1, 2]
    assert len(names["cells"]) == 4 and set(names["better"]["mark"]) <= {"▲"}
