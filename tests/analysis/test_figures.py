"""`kdgrid.analysis.figures`: every figure is written as a real PNG and PDF, drawn from the table's own numbers."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pytest

from kdgrid.analysis.figures import block_matrix, draw_heatmap, paper_scatter, slug, write_figures
from kdgrid.analysis.tables import build_view, get_spec
from kdgrid.analysis.tidy import aggregate_seeds
from tests.analysis.tables_testing import tidy_rows


def small_tidy():
    rows = []
    for student in ("bert-tiny", "bert-mini"):
        for k_index, knowledge in enumerate(("cos", "mmd")):
            for s_index, strategy in enumerate(("First", "Last-1")):
                if (student, knowledge, strategy) == ("bert-mini", "mmd", "First"):
                    continue  # a missing cell: blank, never 0
                rows.append(
                    {
                        "table": "5",
                        "task": "rte",
                        "student": student,
                        "knowledge": knowledge,
                        "strategy": strategy,
                        "value": 0.6 + 0.01 * k_index + 0.02 * s_index,
                    }
                )
    for temperature in (1.0, 2.0):
        for alpha in (0.1, 0.5):
            rows.append(
                {
                    "table": "4",
                    "task": "mrpc",
                    "temperature": temperature,
                    "alpha": alpha,
                    "value": 0.70 + temperature / 100 - alpha / 100,
                }
            )
    for shape, block, params, flops, value in (
        ("w128-l12", "fixed_params", 6.36, 2.83, 0.69),
        ("w176-l2", "fixed_params", 6.24, 0.86, 0.71),
        ("w132-l8", "fixed_flops", 5.8, 2.0, 0.73),
        ("w170-l5", "fixed_flops", 7.05, 2.0, 0.74),
    ):
        rows.append(
            {
                "table": "2",
                "task": "cola",
                "student": shape,
                "block": block,
                "params_m": params,
                "flops_g": flops,
                "value": value,
            }
        )
    return tidy_rows(rows)


def test_every_figure_is_written_as_png_and_pdf(tmp_path):
    written = write_figures(small_tidy(), tmp_path)
    names = sorted(p.name for p in written)
    stems = {
        "table5_rte_knowledge_x_strategy",
        "table4_temperature_x_hard_label_weight",
        "table2_score_vs_size",
        "reproduced_vs_published",
    }
    assert names == sorted(f"{stem}.{suffix}" for stem in stems for suffix in ("png", "pdf"))
    for path in written:
        head = path.read_bytes()[:8]
        assert head.startswith(b"\x89PNG") if path.suffix == ".png" else head.startswith(b"%PDF")
        assert path.stat().st_size > 5_000


def test_png_is_sized_for_a_paper(tmp_path):
    import matplotlib.image as mpimg

    write_figures(small_tidy(), tmp_path)
    height, width = mpimg.imread(tmp_path / "table5_rte_knowledge_x_strategy.png").shape[:2]
    # 6.75 in at 200 dpi, give or take the tight bounding box
    assert 1100 < width < 1500 and height < width


def test_heat_map_matrix_keeps_missing_cells_missing():
    view = build_view(get_spec("5"), small_tidy())
    mini = view.block("RTE · bert-mini")
    matrix, rows, columns = block_matrix(mini)
    assert rows == ["mmd", "cos"]  # the paper's order of knowledge types
    assert columns == ["First", "Last", "Dilatation", "First-1", "Last-1"]
    assert math.isnan(matrix[rows.index("mmd"), 0])
    assert matrix[rows.index("cos"), 4] == pytest.approx(0.62)
    assert np.isnan(matrix[:, 1]).all()  # no Last trials at all


def test_without_published_numbers_there_is_no_scatter(tmp_path):
    tidy = small_tidy()
    demo_only = tidy.assign(table="demo", task="polarity")
    written = write_figures(demo_only[demo_only["knowledge"] != ""], tmp_path)
    assert [p.name for p in written if "reproduced" in p.name] == []
    assert any("tabledemo_polarity" in p.name for p in written)


def test_slug():
    assert slug("MNLI-m · bert-tiny") == "mnli-m_bert-tiny"


def test_a_degenerate_cell_is_marked_in_the_heat_map_and_the_scatter(tmp_path):
    rows = [
        {
            "table": "5",
            "task": "rte",
            "student": "bert-tiny",
            "knowledge": "cos",
            "strategy": "First",
            "value": 0.5,
        },
        {
            "table": "5",
            "task": "rte",
            "student": "bert-tiny",
            "knowledge": "mmd",
            "strategy": "First",
            "value": 0.6,
        },
    ]
    tidy = aggregate_seeds(tidy_rows(rows).assign(degenerate=[("at or below the majority class",), ()]))
    view = build_view(get_spec("5"), tidy)
    figure, axis = plt.subplots()
    draw_heatmap(axis, view.blocks[0], "t")
    texts = [t.get_text() for t in axis.texts]
    plt.close(figure)
    assert "0.500†" in texts and "0.600" in texts
    view.blocks[0].cell("cos", view.blocks[0].column("First")).paper = 0.55
    assert paper_scatter([view], tmp_path)  # draws the degenerate point's cross without error
