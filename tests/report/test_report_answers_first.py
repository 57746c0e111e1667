"""The report answers first: findings on the overview, degenerate trials flagged on every page that lists them,
trial pages titled by their settings, table numbers linked to their trials, numbers printed alike, figure
headings in words, loss curves on a log axis."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from kdgrid.analysis.render import DEGENERATE_MARK
from kdgrid.analysis.tables import HARD_ONLY, SOFT_ONLY, Block, Cell, Column, TableView
from kdgrid.predictions import DevSetPredictions
from kdgrid.report.build import ReportWriter
from kdgrid.report.findings import table_findings
from kdgrid.report.labels import knowledge_text, real_text, score_text, trial_title
from kdgrid.report.pages import figure_title
from kdgrid.report.svg import line_chart
from kdgrid.report.table_html import table_html
from kdgrid.store import write_result
from kdgrid.store.membership import record_membership
from tests.report.store_testing import STUDY, SWEEP, demo_trial, done_result, make_store


def constant_predictions(n: int = 40) -> dict[str, DevSetPredictions]:
    """A student that predicts class 0 for every example of a balanced dev set: degenerate."""
    gold = np.array([0, 1] * (n // 2), dtype=np.int64)
    return {"validation": DevSetPredictions(gold, np.zeros(n, dtype=np.int64), gold.copy(), "fixed")}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("answers")
    store, out = root / "store", root / "report"
    ids = make_store(store)
    stuck = demo_trial(["gram"], "First")
    result = done_result(stuck, 0.5, 100.0)
    result = type(result)(**{**result.__dict__, "predictions": constant_predictions()})
    write_result(store, result, sweep=SWEEP, study=STUDY)
    soft_only = demo_trial([], "First", soft_weight=1.0, beta="auto")
    write_result(store, done_result(soft_only, 0.7, 100.0), sweep=SWEEP, study=STUDY)
    ids["degenerate"], ids["soft_only"] = stuck.trial_id, soft_only.trial_id
    record_membership(store, SWEEP, {trial_id: STUDY for trial_id in ids.values()})
    ReportWriter(store, out, figures=False).update()
    return out, ids


def test_a_degenerate_trial_is_flagged_on_its_page_the_list_the_failures_and_the_overview(report) -> None:
    out, ids = report
    page = (out / "trials" / f"{ids['degenerate']}.html").read_text()
    assert "Degenerate student" in page and f"{DEGENERATE_MARK} degenerate" in page
    assert "constant" in page  # the recorded reason, in words
    healthy = (out / "trials" / f"{ids['done_last']}.html").read_text()
    assert "Degenerate student" not in healthy
    blob = json.loads(
        re.search(r'id="trial-data">(.*?)</script>', (out / "trials.html").read_text()).group(1)
    )
    flags = {row[0]: dict(zip(blob["columns"], row, strict=True))["flag"] for row in blob["rows"]}
    assert flags[ids["degenerate"]] == "degenerate"
    assert [t for t, flag in flags.items() if flag] == [ids["degenerate"]]
    failures = (out / "failures.html").read_text()
    assert "Degenerate students · 1 trial(s)" in failures and f"trials/{ids['degenerate']}.html" in failures
    overview = (out / "index.html").read_text()
    card = re.search(
        r'<div class="big degenerate">(\d+)</div><div class="label">done but degenerate', overview
    )
    assert card and card.group(1) == "1"


def test_trial_pages_are_titled_by_their_settings_and_print_settings_as_tables(report) -> None:
    out, ids = report
    page = (out / "trials" / f"{ids['done_last']}.html").read_text()
    assert "<h1>polarity · bert-tiny · cos · Last · seed 0</h1>" in page
    assert "<td>cos@2-3</td><td>0.0123</td>" in page  # the weights as a table, 4 significant digits
    baseline = (out / "trials" / f"{ids['soft_only']}.html").read_text()
    assert f"<h1>polarity · bert-tiny · {SOFT_ONLY} · seed 0</h1>" in baseline
    assert "<dt>beta</dt><dd>auto</dd>" in baseline  # not "-"
    blob = json.loads(
        re.search(r'id="trial-data">(.*?)</script>', (out / "trials.html").read_text()).group(1)
    )
    knowledge = {row[0]: dict(zip(blob["columns"], row, strict=True))["knowledge"] for row in blob["rows"]}
    assert knowledge[ids["soft_only"]] == SOFT_ONLY
    assert blob["digits"]["score"] == 4  # every score printed with 4 decimals


def test_the_overview_is_quiet_about_zero_failures() -> None:
    from kdgrid.report.pages import _card

    assert "state-failed" not in _card("0", "trials failed", "")


def test_labels_and_numbers() -> None:
    assert knowledge_text([], 0.0) == HARD_ONLY and knowledge_text([], 1.0) == SOFT_ONLY
    assert knowledge_text(["hard_label"], None) == HARD_ONLY
    assert knowledge_text(["hidden_mse", "pkd"], 1.0) == "hidden_mse + pkd"
    assert knowledge_text("gram+mmd", 1.0) == "gram + mmd"
    assert score_text(0.71) == "0.7100" and score_text(None) == "-" and score_text(math.nan) == "-"
    assert (
        real_text(0.012345678901234567) == "0.01235" and real_text(3) == "3" and real_text("auto") == "auto"
    )
    title = trial_title({"task": "mrpc", "student": "bert-mini", "knowledge": ["cos"], "strategy": "Last-1",
                         "init": "random", "seed": 2, "soft_weight": 1.0})  # fmt: skip
    assert title == "mrpc · bert-mini · cos · Last-1 · init random · seed 2"


def test_figure_headings_in_words() -> None:
    assert figure_title("table5_mrpc_knowledge_x_strategy") == "Table 5: mrpc, knowledge × strategy"
    assert figure_title("tabledemo_polarity_knowledge_x_strategy") == (
        "The demo table: polarity, knowledge × strategy"
    )
    assert "·" not in figure_title("table2_score_vs_size")


def test_a_log_axis_ticks_each_power_of_ten_and_falls_back_when_a_value_is_not_positive() -> None:
    chart = line_chart([("soft", [(1, 0.01), (2, 1.0), (3, 100.0)])], title="t", log_y=True)
    ticks = re.findall(r'class="tick">([^<]+)</text>', chart)
    for tick in ("0.01", "0.1", "1", "10", "100"):
        assert tick in ticks
    assert "epoch 3: 100" in chart  # the tooltip gives the value, not its log
    linear = line_chart([("cos", [(1, -1.0), (2, 1.0)])], title="t", log_y=True)
    assert "linear: a value is not positive" in linear


def _view() -> TableView:
    strategy = Column("Last")
    block = Block("polarity · bert-tiny", ["cos", "gram", "mmd"], [strategy])
    block.cells[("cos", strategy)] = Cell(value=0.8, ci_low=0.78, ci_high=0.82, p_vs_reference=0.001,
                                          significant=True, direction=1, row_ids=("r1",))  # fmt: skip
    block.cells[("gram", strategy)] = Cell(value=0.6, ci_low=0.58, ci_high=0.62, p_vs_reference=0.01,
                                           significant=True, direction=-1, row_ids=("r2", "r3"))  # fmt: skip
    block.cells[("mmd", strategy)] = Cell(value=0.5, ci_low=0.48, ci_high=0.52, p_vs_reference=0.3,
                                          direction=-1, degenerate=("validation: constant predictions",))  # fmt: skip
    return TableView("demo", "The demo table", [block])


def test_findings_list_better_worse_and_degenerate_cells() -> None:
    found = table_findings([_view()])
    assert [f.row for f in found.better] == ["cos"] and [f.row for f in found.worse] == ["gram"]
    assert [f.row for f in found.degenerate] == ["mmd"] and found.tested == 3
    assert found.better[0].where == "The demo table · polarity · bert-tiny · cos / Last"


def test_table_numbers_link_to_their_trial_pages() -> None:
    html = table_html(_view(), "t", {"r1": "a" * 16, "r2": "b" * 16, "r3": "c" * 16})
    assert f'href="trials/{"a" * 16}.html"' in html  # one run: the number is the link
    assert f'runs <a href="trials/{"b" * 16}.html">1</a> <a href="trials/{"c" * 16}.html">2</a>' in html
    assert "href" not in table_html(_view(), "t")  # without the rows' trials, no links
