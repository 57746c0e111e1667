"""`kdgrid.analysis.compare`: published numbers beside ours, differences and per-block agreement."""

from __future__ import annotations

import csv
import io
import math

import pytest

from kdgrid.analysis.compare import agreement, attach_paper, compare_with_paper
from kdgrid.analysis.render import render
from kdgrid.analysis.tables import Column, build_view, get_spec
from kdgrid.errors import ConfigError
from tests.analysis.tables_testing import tidy_rows


def match_rows(values: dict[tuple[str, str], float], table: str = "5") -> list[dict]:
    return [
        {"table": table, "task": "rte", "student": "bert-tiny", "knowledge": k, "strategy": s, "value": v}
        for (k, s), v in values.items()
    ]


def test_agreement_by_hand():
    result = agreement([(0.8, 0.7), (0.6, 0.65), (0.9, 0.95)])
    assert result.n == 3
    assert result.mean_abs_diff == pytest.approx((0.1 + 0.05 + 0.05) / 3)
    assert result.spearman == pytest.approx(1.0)  # same order on both sides
    reversed_order = agreement([(0.1, 0.9), (0.2, 0.8), (0.3, 0.7)])
    assert reversed_order.spearman == pytest.approx(-1.0)
    # rank correlation with a tie: ours ranks (1, 2.5, 2.5, 4), paper (1, 2, 3, 4): rho = 0.9487 by hand
    tied = agreement([(0.1, 0.1), (0.2, 0.2), (0.2, 0.3), (0.4, 0.4)])
    assert tied.spearman == pytest.approx(0.9486833, abs=1e-6)


def test_agreement_is_undefined_where_it_must_be():
    assert agreement([]).n == 0 and math.isnan(agreement([]).mean_abs_diff)
    assert math.isnan(agreement([(0.5, 0.4), (0.6, 0.7)]).spearman)  # fewer than 3 pairs
    assert math.isnan(agreement([(0.5, 0.4), (0.5, 0.7), (0.5, 0.1)]).spearman)  # constant side


def test_published_value_and_difference_sit_beside_ours():
    ours = build_view(get_spec("5"), tidy_rows(match_rows({("cos", "First"): 0.62, ("cos", "Last-1"): 0.60})))
    paper = tidy_rows(match_rows({("cos", "First"): 0.60, ("cos", "Last-1"): 0.65, ("pkd", "First"): 0.58}))
    view = compare_with_paper(ours, paper)
    (block,) = view.blocks
    first = block.cell("cos", Column("First"))
    assert (first.value, first.paper, first.diff) == pytest.approx((0.62, 0.60, 0.02))
    # A published number we have not reproduced still shows, beside a missing one.
    assert block.rows == ["cos", "pkd"]
    pkd = block.cell("pkd", Column("First"))
    assert pkd.missing and pkd.paper == 0.58 and math.isnan(pkd.diff)
    assert block.agreement.n == 2
    assert block.agreement.mean_abs_diff == pytest.approx((0.02 + 0.05) / 2)
    assert "whole table: 2 cells" in view.notes[-1]


def test_rendered_comparison():
    ours = build_view(get_spec("5"), tidy_rows(match_rows({("cos", "First"): 0.62})))
    view = compare_with_paper(ours, tidy_rows(match_rows({("cos", "First"): 0.60, ("pkd", "Last"): 0.5})))
    text = render(view, "markdown")
    assert "**0.6200** / 0.6000 (+0.0200)" in text
    assert "| pkd | - / - | - / 0.5000 |" in text
    assert "agreement with the paper over 1 cells: mean |difference| 0.0200" in text
    rows = list(csv.DictReader(io.StringIO(render(view, "csv"))))
    cos = next(r for r in rows if r["row"] == "cos" and r["column"] == "First")
    assert (float(cos["value"]), float(cos["paper"]), float(cos["diff"])) == pytest.approx((0.62, 0.60, 0.02))
    pkd = next(r for r in rows if r["row"] == "pkd" and r["column"] == "Last")
    assert (pkd["value"], pkd["paper"], pkd["diff"]) == ("", "0.5", "")


def test_blocks_only_the_paper_has_are_added():
    ours = build_view(get_spec("5"), tidy_rows(match_rows({("cos", "First"): 0.62})))
    other = tidy_rows(
        [
            {
                "table": "5",
                "task": "mrpc",
                "student": "bert-mini",
                "knowledge": "cos",
                "strategy": "First",
                "value": 0.8,
            }
        ]
    )
    view = attach_paper(ours, build_view(get_spec("5"), other))
    assert [b.title for b in view.blocks] == ["RTE · bert-tiny", "MRPC · bert-mini"]
    assert view.blocks[1].agreement.n == 0


def test_compare_against_the_real_transcription():
    # Our Table 4 = the paper's, shifted by +0.01 on MRPC: every MRPC difference is +0.01, rho 1.
    from kdgrid.analysis.paper_numbers import paper_numbers

    paper = paper_numbers("4")
    shifted = paper.assign(value=paper["value"] + 0.01 * (paper["task"] == "mrpc"))
    view = compare_with_paper(build_view(get_spec("4"), shifted))
    mrpc = view.block("MRPC")
    assert mrpc.agreement.n == 24
    assert mrpc.agreement.mean_abs_diff == pytest.approx(0.01)
    assert mrpc.agreement.spearman == pytest.approx(1.0)
    assert view.block("RTE").agreement.mean_abs_diff == 0.0


def test_the_demo_has_no_published_counterpart():
    demo = build_view(
        get_spec("demo"),
        tidy_rows(
            [{"table": "demo", "task": "polarity", "knowledge": "cos", "strategy": "First", "value": 0.8}]
        ),
    )
    with pytest.raises(ConfigError, match="not in the paper"):
        compare_with_paper(demo)


def test_published_values_inside_our_intervals_are_counted_per_cell_and_block():
    ours = build_view(get_spec("5"), tidy_rows(match_rows({("cos", "First"): 0.62, ("cos", "Last-1"): 0.60})))
    paper = build_view(
        get_spec("5"), tidy_rows(match_rows({("cos", "First"): 0.64, ("cos", "Last-1"): 0.70}))
    )
    (block,) = ours.blocks
    for label, (low, high) in (("First", (0.58, 0.66)), ("Last-1", (0.55, 0.65))):
        cell = block.cell("cos", Column(label))
        # the interval a published run is judged against: where one more run would fall (two or more seeds)
        cell.ci_low, cell.ci_high = low, high
        cell.paper_low, cell.paper_high = low, high
    view = attach_paper(ours, paper)
    (compared,) = view.blocks
    assert compared.cell("cos", Column("First")).paper_inside is True  # 0.64 in [0.58, 0.66]
    assert compared.cell("cos", Column("Last-1")).paper_inside is False  # 0.70 not in [0.55, 0.65]
    assert (compared.agreement.with_interval, compared.agreement.inside) == (2, 1)
    assert "inside our 95% interval in 1 of 2 cells (50%)" in " ".join(view.notes)
    text = render(view, "markdown")
    assert "**0.6200** [0.5800, 0.6600] / 0.6400 (-0.0200) ∈" in text and "∉" in text
    rows = list(csv.DictReader(io.StringIO(render(view, "csv"))))
    assert {r["column"]: r["paper_inside"] for r in rows if r["value"]} == {"First": "1", "Last-1": "0"}
