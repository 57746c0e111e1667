"""A trial page read back as a user reads it: the step curves drawn with axis titles and distinguishable lines,
the diagnosis with its evidence (the LAD / value_relation stall of tests/test_diagnosis.py), a learned mapping
shown instead of fixed layer pairs, and the overview's diagnosis finding and `kdgrid status` naming the trial."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from typer.testing import CliRunner

from kdgrid.cli import app
from kdgrid.core.training.step_curves import new_record, rounded
from kdgrid.report.build import ReportWriter
from kdgrid.report.svg import line_chart
from kdgrid.store import write_result
from tests.report.store_testing import demo_trial, done_result
from tests.test_diagnosis import LAD_GATE

LN2 = math.log(2)


def stalled_lad_result():
    # LAD's softmax gate (lad_form: softmax): the gate blocks read hidden states only
    trial = demo_trial(["value_relation"], "LAD", seed=7, options={"lad_form": "softmax"})
    result = done_result(trial, 0.5, 60.0)
    n = 30
    curves = new_record(2, 2 * n, 2)
    curves["steps"] = [2 * (i + 1) for i in range(n)]
    series = {"soft": [LN2] * n, "hard": [LN2 + 1e-4] * n, "value_relation@1-6": [3e-3] * n}
    weights = {"soft": 1.0, "hard": 0.1, "value_relation@1-6": 0.3}
    curves["terms"] = {k: [rounded(v) for v in vs] for k, vs in series.items()}
    curves["weighted"] = {k: [rounded(weights[k] * v) for v in vs] for k, vs in series.items()}
    curves["total"] = [rounded(sum(weights[k] * series[k][i] for k in series)) for i in range(n)]
    curves["lr"] = [1e-3 * (1 - i / n) for i in range(n)]
    curves["grad_norm"] = [0.5] * n
    curves["cosine"] = [None] * n
    curves["mapping"] = {"steps": [2, 60], "values": [{"weights": [[1 / 6] * 6] * 2}, {"weights": LAD_GATE}]}
    result.step_curves = curves
    result.weights = weights
    result.layer_pairs = [(1, 6), (2, 6)]
    result.extra["mapping"] = {"method": "LAD", "weights": LAD_GATE}
    result.extra["mapping_params"] = 12
    return result


def test_the_trial_page_draws_the_step_curves_and_names_the_stall(tmp_path: Path) -> None:
    store, out = tmp_path / "store", tmp_path / "report"
    result = stalled_lad_result()
    write_result(store, result, sweep="demo", study="demo")
    healthy = done_result(demo_trial(["cos"], "Last"), 0.8, 60.0)
    write_result(store, healthy, sweep="demo", study="demo")
    ReportWriter(store, out, figures=False).update()
    page = (out / "trials" / f"{result.trial.trial_id}.html").read_text()
    assert "stalled student" in page and "ln 2 = 0.6931" in page
    assert "collapsed mapping" in page and "1/6 = 0.167" in page
    assert "<h2>Step curves</h2>" in page and "a point every 2 optimizer steps" in page
    titles = re.findall(r'class="axis-title">([^<]+)</text>', page)
    for title in ("loss (unweighted) (log)", "weighted loss (log)", "learning rate", "gate weight", "step"):
        assert title in titles, title
    assert "uniform 1/6" in page and "S1: largest weight" in page
    # the learned mapping, not fixed pairs
    assert "S1←T6" not in page and "learned combination of every teacher layer" in page
    healthy_page = (out / "trials" / f"{healthy.trial.trial_id}.html").read_text()
    assert "no failure mode flagged" in healthy_page and "<h2>Step curves</h2>" not in healthy_page
    assert "S2←T3" in healthy_page
    overview = (out / "index.html").read_text()
    assert "Diagnosis of the curves: 1 of 2 done trials flagged" in overview
    assert f"trials/{result.trial.trial_id}.html" in overview


def test_status_names_the_flagged_trial(tmp_path: Path) -> None:
    store = tmp_path / "store"
    result = stalled_lad_result()
    write_result(store, result, sweep="s", study="main")
    sweep = tmp_path / "s.yaml"
    trial = result.trial
    sweep.write_text(json.dumps({"name": "s", "fixed": {
        "task": trial.task, "teacher": trial.teacher, "student": trial.student, "knowledge": list(trial.knowledge),
        "strategy": trial.strategy, "epochs": trial.epochs, "seed": trial.seed,
        "options": dict(trial.options)}}))  # fmt: skip
    output = CliRunner().invoke(app, ["status", str(sweep), "--store", str(store)]).output
    assert "diagnosis: 1 of 1 done trials flagged (stalled_student 1, collapsed_mapping 1" in output
    assert f"flagged {trial.trial_id} [main] stalled_student: over the last half, hard 0.6932" in output


def test_overlapping_lines_differ_in_dash_and_ticks_keep_four_digits() -> None:
    chart = line_chart([("a", [(1, 0.5125), (2, 0.6)]), ("b", [(1, 0.5125), (2, 0.6)])], title="t", y_label="loss")
    lines = re.findall(r"<polyline[^>]*>", chart)
    assert len(lines) == 2 and "stroke-dasharray" not in lines[0] and "stroke-dasharray" in lines[1]
    ticks = re.findall(r'class="tick">([^<]+)</text>', chart)
    assert "0.5125" in ticks  # not cut to 0.512
    log = line_chart([("soft", [(1, 0.001), (2, 0.5)])], title="t", log_y=True)
    log_ticks = re.findall(r'class="tick">([^<]+)</text>', log)
    assert "0.5" in log_ticks  # the top of the range is labelled, not only the decade 0.1 below it
    many = line_chart([("s", [(float(x), 1.0 + x) for x in range(2, 202, 2)])], title="t", x_label="step")
    x_ticks = [t for t in re.findall(r'class="tick">([^<]+)</text>', many)][5:]
    assert len(x_ticks) <= 7 and "<circle" not in many  # round ticks, no 100 markers


def test_a_sweep_figures_heading_names_the_sweep_as_written(tmp_path: Path) -> None:
    from kdgrid.analysis.sweep_figures import figure_slug
    from kdgrid.report.pages import figure_title, figures_page

    stem = f"{figure_slug('lad_vs_last1')}_heatmap_1_polarity-bert-tiny"
    assert stem.startswith("lad-vs-last1_")  # the file name's form
    assert figure_title(stem, ["demo", "lad_vs_last1"]) == "Sweep lad_vs_last1: heat map, polarity bert tiny"
    png = tmp_path / "figures" / f"{stem}.png"
    png.parent.mkdir()
    png.write_bytes(b"")
    page = figures_page([png], tmp_path, refresh_s=None, sweeps=["lad_vs_last1"])
    assert "<h2>Sweep lad_vs_last1: heat map, polarity bert tiny</h2>" in page
