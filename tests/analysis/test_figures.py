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
    assert "0.500 †" in texts and "0.600" in texts  # the marks as the sweep heat maps write them
    view.blocks[0].cell("cos", view.blocks[0].column("First")).paper = 0.55
    assert paper_scatter([view], tmp_path)  # draws the degenerate point's cross without error


def demo_view():
    """The demo table by hand: cos and mmd at First and Last for bert-tiny on polarity, soft labels only 0.61
    and hard labels only 0.55 in the baselines block beside it."""
    rows = [
        {"table": "demo", "task": "polarity", "student": "bert-tiny", "knowledge": k, "strategy": s, "value": v}
        for k, s, v in (("cos", "First", 0.60), ("cos", "Last", 0.70), ("mmd", "First", 0.58), ("mmd", "Last", 0.64))
    ]
    rows += [
        {"table": "demo", "task": "polarity", "student": "bert-tiny", "knowledge": "", "value": 0.61},
        {"table": "demo", "task": "polarity", "student": "bert-tiny", "knowledge": "", "soft_weight": 0.0,
         "value": 0.55},
    ]  # fmt: skip
    return build_view(get_spec("demo"), tidy_rows(rows))


def test_a_demo_heat_map_is_centred_on_soft_labels_only_from_the_baselines_block():
    from matplotlib.colors import TwoSlopeNorm

    from kdgrid.analysis.figures import view_cells

    view = demo_view()
    main = next(b for b in view.blocks if not b.title.endswith("baselines"))
    figure, axis = plt.subplots()
    try:
        drawn = draw_heatmap(
            axis, main, "bert-tiny", cells=view_cells(view), row_title="knowledge", column_title="strategy"
        )
        assert drawn.centre == pytest.approx(0.61)  # soft labels only, not hard labels only (0.55)
        rows, columns = main.rows, [c.label for c in main.columns]
        expected = np.full((len(rows), len(columns)), np.nan)
        for (k, s), v in {("cos", "First"): 0.60, ("cos", "Last"): 0.70, ("mmd", "First"): 0.58,
                          ("mmd", "Last"): 0.64}.items():  # fmt: skip
            expected[rows.index(k), columns.index(s)] = v - 0.61
        np.testing.assert_allclose(drawn.matrix, expected, atol=1e-12)
        assert isinstance(drawn.norm, TwoSlopeNorm) and drawn.norm.vcenter == 0.0
        assert (drawn.norm.vmin, drawn.norm.vmax) == pytest.approx((-0.09, 0.09))  # cos at Last, both ways
        assert drawn.colour_bar.ax.get_ylabel() == (
            "accuracy: difference from the reference\n(soft labels only: 0.610)"
        )
        assert (axis.get_xlabel(), axis.get_ylabel()) == ("strategy", "knowledge")
    finally:
        plt.close(figure)


def test_a_match_table_without_a_reference_is_drawn_on_a_sequential_scale_with_its_marks():
    from matplotlib.colors import TwoSlopeNorm

    from kdgrid.analysis.heat_map import MARKS_NOTE

    view = build_view(get_spec("5"), small_tidy())
    tiny = view.block("RTE · bert-tiny")
    marked = tiny.cell("cos", tiny.column("Last-1"))
    marked.ci_low, marked.ci_high, marked.significant, marked.direction = 0.6, 0.64, True, 1
    figure, axis = plt.subplots()
    try:
        drawn = draw_heatmap(axis, tiny, "bert-tiny", row_title="knowledge", column_title="matching strategy")
        matrix, _, _ = block_matrix(tiny)
        assert drawn.centre is None  # Table 5 holds no soft-labels-only cell: nothing to centre on
        np.testing.assert_array_equal(drawn.matrix, matrix)
        assert not isinstance(drawn.norm, TwoSlopeNorm)
        assert (drawn.norm.vmin, drawn.norm.vmax) == pytest.approx((0.60, 0.63))
        assert drawn.colour_bar.ax.get_ylabel() == "accuracy"
        texts = [t.get_text() for t in axis.texts]
        assert "0.620 ▲" in texts and "[0.600, 0.640]" in texts
        assert drawn.notes == (MARKS_NOTE,)
    finally:
        plt.close(figure)


def test_the_paper_figures_draw_the_laid_out_views_they_are_given(tmp_path, monkeypatch):
    """`write_figures(views=...)` draws the view it is given (with its marks), not a plain layout of the tidy."""
    import kdgrid.analysis.figures as figures

    tidy = small_tidy()
    view = build_view(get_spec("5"), tidy)
    tiny = view.block("RTE · bert-tiny")
    cell = tiny.cell("cos", tiny.column("First"))
    cell.significant, cell.direction = True, -1
    drawn: list = []
    original = figures.draw_heatmap
    monkeypatch.setattr(figures, "draw_heatmap", lambda *a, **k: drawn.append(original(*a, **k)) or drawn[-1])
    figures.write_figures(tidy, tmp_path, views=[view])
    texts = {t.get_text() for d in drawn for t in d.colour_bar.mappable.axes.texts}
    assert "0.600 ▼" in texts
    # compared with the paper, the view holds the paper's every task, student and knowledge type: the heat maps
    # keep the store's (two panels of two rows), with the compared view's cells
    from kdgrid.analysis.compare import compare_with_paper

    compared = compare_with_paper(view)
    assert len(compared.blocks) > len(view.blocks) and len(compared.block("RTE · bert-tiny").rows) > 2
    drawn.clear()
    figures.write_figures(tidy, tmp_path, views=[compared])
    shapes = [d.matrix.shape for d in drawn]  # Table 4's panel (2 x 4), then Table 5's two students
    assert shapes == [(2, 4), (2, 5), (2, 5)]
    assert "0.600 ▼" in {t.get_text() for d in drawn for t in d.colour_bar.mappable.axes.texts}


def test_text_stays_legible_on_its_cell():
    """Numbers are white on dark cells, black on light ones, and a missing cell's ``-`` is black on its grey."""
    view = build_view(get_spec("5"), small_tidy())
    tiny = view.block("RTE · bert-tiny")
    figure, axis = plt.subplots()
    try:
        draw_heatmap(axis, tiny, "bert-tiny")
        colours = {t.get_text(): t.get_color() for t in axis.texts}
        assert colours["-"] == "black"
        assert colours["0.600"] == "white"  # viridis at its low end: dark
        assert colours["0.630"] == "black"  # viridis at its high end: yellow
    finally:
        plt.close(figure)


def test_the_captions_under_a_heat_map_figure_never_overlap(tmp_path, monkeypatch):
    """The marks' note and the degenerate runs' reasons are two lines of one block under the figure, one below
    the other (they were two texts drawn at nearly the same height, on top of each other)."""
    import kdgrid.analysis.figures as figures

    view = demo_view()
    main = next(b for b in view.blocks if not b.title.endswith("baselines"))
    cell = main.cell("cos", main.column("First"))
    cell.significant, cell.direction, cell.degenerate = True, 1, ("at or below the majority class",)
    kept: list = []
    monkeypatch.setattr(figures, "save", lambda figure, out_dir, stem: kept.append(figure) or [])
    figures.heatmap_figures(view, tmp_path)
    (figure,) = kept
    try:
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        texts = [t for t in figure.texts if t.get_text()]
        (caption,) = [t for t in texts if t.get_text() != "Demo: polarity"]  # one block, beside the title
        lines = caption.get_text().split("\n")
        assert len(lines) == 2 and lines[1].startswith("† degenerate run: at or below the majority class")
        boxes = [t.get_window_extent(renderer) for t in texts]
        assert len(boxes) == 2
        for i, a in enumerate(boxes):
            for b in boxes[i + 1 :]:
                assert not a.overlaps(b)
    finally:
        plt.close(figure)
