"""The report's explore and pivot pages (`kdgrid.report.configurations`, `kdgrid.report.explore`): each
configuration's interval and its marks against every reference offered are the ones `kdgrid tables --sweep`
prints for any rows and columns; axes typed from their values; the pages carry their data and scripts, no
network."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest

from kdgrid.analysis.frames import cell_frame
from kdgrid.analysis.sweep_compare import compare_sweeps, parse_sources
from kdgrid.predictions import DevSetPredictions
from kdgrid.report import configurations
from kdgrid.report.build import ReportWriter
from kdgrid.report.configurations import axis_type, report_configurations
from kdgrid.store import read_store, write_result
from kdgrid.store.membership import read_memberships, record_membership
from tests.analysis.tables_testing import result, run_kdgrid
from tests.report.explore_testing import KNOWLEDGE, STRATEGIES, SWEEP, grid_store, value

MARKS = {"ref": "ref", "▲": "up", "▼": "down", "": ""}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return grid_store(tmp_path_factory.mktemp("explore"))


def configurations_of(store: Path) -> dict:
    found, problems = report_configurations(store, read_store(store), read_memberships(store))
    assert problems == []
    [sweep] = found
    return sweep


def by_settings(sweep: dict) -> dict[tuple[str, ...], int]:
    axes = [a["values"] for a in sweep["axes"]]
    return {
        tuple(axes[j][v] for j, v in enumerate(indexes)): i
        for i, indexes in enumerate(sweep["configs"]["axes"])
    }


def test_axes_are_typed_from_their_values() -> None:
    assert axis_type(["0.0001", "0.001", "0.01"]) == "log"
    assert axis_type(["1", "2", "4"]) == "numeric"
    assert axis_type(["", "0.5", "1"]) == "numeric"  # nothing set does not count
    assert axis_type(["-1", "100"]) == "numeric"  # not all positive: never log
    assert axis_type(["hidden_mse", "1"]) == "categorical"


def test_the_pages_intervals_and_marks_are_the_tables_for_any_layout(store: Path, capsys) -> None:
    sweep = configurations_of(store)
    assert [(a["name"], a["type"]) for a in sweep["axes"]] == [
        ("knowledge", "categorical"),
        ("strategy", "categorical"),
        ("lr", "log"),
    ]
    index = by_settings(sweep)
    assert len(index) == 18 and sweep["places"] == ["sst2 · validation · accuracy"]
    cells = cell_frame(store, SWEEP)
    for row in cells.to_dict("records"):
        i = index[(row["knowledge"], row["strategy"], row["lr"])]
        assert sweep["configs"]["low"][i] == pytest.approx(row["ci_low"], abs=1e-6)
        assert sweep["configs"]["n"][i] == 3 and sweep["configs"]["level"][i] == "seed-level"
        assert len(sweep["configs"]["trials"][i]) == 3
    references = {r["label"]: r for r in sweep["references"]}
    assert len(references) == 3 + 2 + 3  # every value of every axis (under the cap)
    for label, rows, cols in (("strategy=Last-1", "knowledge", "strategy"), ("lr=0.0001", "lr", "knowledge"),
                              ("knowledge=cos", "strategy", "lr")):  # fmt: skip
        code, out, err = run_kdgrid(capsys, "tables", "--sweep", SWEEP, "--store", str(store), "--rows", rows,
                                    "--cols", cols, "--reference", label, "--format", "csv")  # fmt: skip
        assert code == 0, err
        lines = [
            r for r in csv.DictReader(io.StringIO(out)) if r["value"] and " mean over " not in r["block"]
        ]
        assert len(lines) == 18
        marked = 0
        for line in lines:
            i = index[(line["knowledge"], line["strategy"], line["lr"])]
            mark = "ref" if line["is_reference"] == "1" else ("" if line["significant"] != "1" else
                                                               "▲" if line["direction"] == "1" else "▼")  # fmt: skip
            assert references[label]["mark"][i] == MARKS[mark], (label, line)
            if line["p_adjusted"]:
                assert references[label]["p"][i] == pytest.approx(
                    float(line["p_adjusted"]), rel=1e-4, abs=1e-6
                )
            marked += mark in ("▲", "▼")
        values = next(len(a["values"]) for a in sweep["axes"] if a["name"] == label.split("=")[0])
        assert references[label]["mark"].count("ref") == 18 // values  # one reference per slice
        if label == "strategy=Last-1":
            assert marked >= 3  # LAD beats Last-1 with hidden_mse at every lr


def test_a_big_sweep_says_why_it_has_no_references(store: Path, monkeypatch) -> None:
    monkeypatch.setattr(configurations, "MAX_REFERENCE_CONFIGURATIONS", 10)
    sweep = configurations_of(store)
    assert sweep["references"] == [] and "18 configurations" in sweep["reference_note"]
    monkeypatch.setattr(configurations, "MAX_REFERENCE_CONFIGURATIONS", 5000)
    monkeypatch.setattr(configurations, "MAX_REFERENCES", 4)
    sweep = configurations_of(store)
    second = sweep["axes"][0]["values"][1]  # the knowledge types in the paper's order
    assert [r["label"] for r in sweep["references"]] == [
        "knowledge=hidden_mse", "strategy=Last-1", "lr=0.0001", f"knowledge={second}"
    ]  # fmt: skip
    assert "the first 4 references" in sweep["reference_note"]


def test_the_report_writes_both_pages_with_their_data_and_local_scripts(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    ReportWriter(store, out, figures=False).update()
    for name, script in (("explore.html", "explore.js"), ("pivot.html", "pivot.js")):
        text = (out / name).read_text()
        blob = json.loads(re.search(r'id="config-data">(.*?)</script>', text).group(1))
        assert [s["name"] for s in blob["sweeps"]] == [SWEEP] and blob["problems"] == []
        for ref in re.findall(r'(?:src|href)="([^"#?]+)"', text):
            assert not ref.startswith("http") and (out / ref).is_file(), ref
        assert f'src="assets/{script}"' in text and 'src="assets/explore-common.js"' in text
    index = (out / "index.html").read_text()
    assert 'href="explore.html">Explore</a>' in index and 'href="pivot.html">Pivot</a>' in index
    assert "onlyIds" in (out / "assets" / "trials.js").read_text()


def test_the_tables_page_sets_a_rerun_beside_its_sweep_and_skips_a_sweep_of_the_same_trials(
    tmp_path: Path,
) -> None:
    store = grid_store(tmp_path)
    for seed in (3, 4, 5):  # a rerun of the lr=1e-3 cells on other seeds, 0.01 higher
        for k, knowledge in enumerate(KNOWLEDGE):
            for s, strategy in enumerate(STRATEGIES):
                made = result(value(k, s, 1, seed) + 0.01, task="sst2", knowledge=knowledge, strategy=strategy,
                              lr=1e-3, seed=seed)  # fmt: skip
                write_result(store, made, sweep="rerun", study="main")
    grid_ids = set(read_store(store).query("sweep == @SWEEP")["trial_id"])
    record_membership(store, "alias", {trial_id: "main" for trial_id in grid_ids})  # the very same trials
    out = tmp_path / "report"
    ReportWriter(store, out, figures=False).update()
    page = (out / "tables.html").read_text()
    assert 'id="table-compare-grid-vs-rerun"' in page and "sweep rerun beside sweep grid" in page
    assert "compare-alias-vs-grid" not in page  # the same trials: nothing to compare
    assert "compare-alias-vs-rerun" in page  # alias holds grid's trials: a rerun of them too
    expected = compare_sweeps(*parse_sources([SWEEP, "rerun"], store))
    [block] = expected.view.blocks
    assert (
        len(block.rows) == 6 and len(expected.only_first) == 12
    )  # the lr=1e-3 cells shared; the rest grid's own
    first = block.cells[(block.rows[0], block.columns[2])]
    assert f"{first.value:.4f}" in page and first.uncertainty == "seed-level"
    index = (out / "index.html").read_text()
    assert "compare-" not in index  # a comparison's marks are no findings against a reference


def test_one_seed_configurations_get_the_tables_run_to_run_intervals_and_tests(
    tmp_path: Path, capsys
) -> None:
    n = 200
    gold = np.arange(n) % 2
    store = tmp_path / "store"
    for k, knowledge in enumerate((("hidden_mse",), ("cos",))):
        for s, strategy in enumerate(("Last-1", "LAD")):
            for i, lr in enumerate((1e-3, 1e-2)):
                right = np.arange(n) < round((0.70 + 0.08 * (k == 0 and s == 1) + 0.01 * i) * n)
                student = np.where(right, gold, 1 - gold)
                made = result(float(right.mean()), task="sst2", knowledge=knowledge, strategy=strategy, lr=lr)
                made = dataclasses.replace(
                    made, predictions={"validation": DevSetPredictions(gold, student, gold, "d" * 64)}
                )
                write_result(store, made, sweep="one", study="main")
    sweep = configurations_of(store)
    assert set(sweep["configs"]["level"]) == {"run-to-run"} and len(sweep["references"]) == 2 + 2 + 2
    index = by_settings(sweep)
    references = {r["label"]: r for r in sweep["references"]}
    code, out, err = run_kdgrid(capsys, "tables", "--sweep", "one", "--store", str(store), "--rows", "knowledge",
                                "--cols", "strategy", "--reference", "strategy=Last-1", "--format", "csv")  # fmt: skip
    assert code == 0, err
    lines = [r for r in csv.DictReader(io.StringIO(out)) if r["value"] and " mean over " not in r["block"]]
    assert len(lines) == 8
    for line in lines:
        i = index[(line["knowledge"], line["strategy"], line["lr"])]
        assert sweep["configs"]["low"][i] == pytest.approx(float(line["ci_low"]), abs=1e-6)
        assert sweep["configs"]["high"][i] == pytest.approx(float(line["ci_high"]), abs=1e-6)
        if line["p_adjusted"]:
            assert references["strategy=Last-1"]["p"][i] == pytest.approx(float(line["p_adjusted"]), rel=1e-4)
    assert (
        references["strategy=Last-1"]["mark"].count("up") == 2
    )  # LAD with hidden_mse, 8 points up, both lrs
    configurations.MAX_RUN_TO_RUN_CONFIGURATIONS, saved = 4, configurations.MAX_RUN_TO_RUN_CONFIGURATIONS
    try:
        sweep = configurations_of(store)
    finally:
        configurations.MAX_RUN_TO_RUN_CONFIGURATIONS = saved
    assert sweep["references"] == [] and "8 one-seed configurations" in sweep["reference_note"]
    assert sweep["configs"]["low"][0] is not None  # the intervals stay
