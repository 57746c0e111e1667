"""Heat maps of any sweep's table (`kdgrid figures --sweep NAME`): colour = the cell minus its block's reference on a
diverging scale centred there, marks and intervals written in, degenerate cells hatched, axes and colour bar
titled. The store is `test_sweep_tables`' (knowledge x lr, 2 seeds, hand-set accuracies)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import TwoSlopeNorm

from kdgrid.analysis.heat_map import cell_text, heat_values
from kdgrid.analysis.sweep_figures import heat_map_figure, heat_maps
from kdgrid.analysis.sweep_tables import sweep_table
from kdgrid.analysis.tables import Cell
from tests.analysis.test_sweep_tables import SWEEP, store  # noqa: F401  (the fixture)


def test_the_heat_values_are_differences_from_the_blocks_reference(store: Path) -> None:  # noqa: F811
    built = sweep_table(store, SWEEP, resamples=200, test_resamples=300)
    main = built.view.blocks[0]
    matrix, reference = heat_values(main)
    # rows hidden_mse, cos; columns lr 0.001, 0.01; the reference hidden_mse at 0.001 (0.8)
    assert reference == pytest.approx(0.8)
    assert matrix == pytest.approx(np.array([[0.0, 0.0], [0.6 - 0.8, 0.7 - 0.8]]))
    assert built.main_blocks == 1 and len(built.view.blocks) == 3  # then the two marginal blocks


def test_a_cell_shows_its_value_marks_and_interval() -> None:
    assert cell_text(Cell()) == "-"
    worse = Cell(value=0.6, n_seeds=2, ci_low=0.53, ci_high=0.668, significant=True, direction=-1)
    assert cell_text(worse) == "0.600 ▼\n[0.530, 0.668]"
    assert cell_text(Cell(value=0.8, n_seeds=1, is_reference=True, degenerate=("constant",))) == "0.800 ref †"
    assert cell_text(Cell(value=0.7, n_seeds=1, direction=1)) == "0.700"  # not beyond noise: no mark


def test_the_figure_is_centred_on_the_reference_and_titled(store: Path) -> None:  # noqa: F811
    built = sweep_table(store, SWEEP, resamples=200, test_resamples=300)
    main = built.view.blocks[0]
    main.cell("cos", main.columns[1]).degenerate = ("constant predictions",)
    figure = heat_map_figure(built, main, "accuracy")
    try:
        axes, colour_bar = figure.axes
        assert (axes.get_xlabel(), axes.get_ylabel()) == ("lr", "knowledge")
        assert colour_bar.get_ylabel() == (
            "accuracy: difference from the reference\n(knowledge=hidden_mse, lr=0.001: 0.800)"
        )
        norm = axes.images[0].norm
        assert isinstance(norm, TwoSlopeNorm) and norm.vcenter == 0.0
        assert (norm.vmin, norm.vmax) == pytest.approx((-0.2, 0.2))  # symmetric: the farthest cell, both ways
        texts = [t.get_text() for t in axes.texts]
        assert "0.800 ref" in texts and "0.600 ▼" in texts and "0.700 ▼ †" in texts
        assert sum(t.startswith("[") for t in texts) == 4  # every cell's interval
        hatched = [p for p in axes.patches if p.get_hatch()]
        assert [(p.get_x(), p.get_y()) for p in hatched] == [(0.5, 0.5)]  # cos (row 1) at lr 0.01 (column 1)
        framed = [p for p in axes.patches if not p.get_hatch()]
        assert [(round(p.get_x(), 2), round(p.get_y(), 2)) for p in framed] == [
            (-0.48, -0.48)
        ]  # the reference
    finally:
        plt.close(figure)


def test_a_layout_without_a_column_axis_draws_no_heat_map(store: Path, tmp_path: Path) -> None:  # noqa: F811
    built = sweep_table(store, SWEEP, rows="knowledge,lr", resamples=100, test_resamples=100)
    assert built.layout.cols == () and heat_maps(built, tmp_path) == []


def test_the_report_draws_a_users_sweep_figures(store: Path, tmp_path: Path) -> None:  # noqa: F811
    from kdgrid.report.build import ReportWriter
    from kdgrid.report.pages import figure_title

    assert figure_title("my-study_heatmap_1_sst2") == "Sweep my-study: heat map, sst2"
    assert figure_title("my-study_forest_2_mrpc-lr-0.01") == "Sweep my-study: forest plot, mrpc lr 0.01"
    out = tmp_path / "report"
    update = ReportWriter(store, out).update()
    names = sorted(p.name for p in (out / "figures").iterdir())
    assert (
        names
        == [
            "my-study_forest_1_sst2.pdf",
            "my-study_forest_1_sst2.png",
            "my-study_heatmap_1_sst2.pdf",
            "my-study_heatmap_1_sst2.png",
            "my-study_seedcurves_1_cells-1-to-4.pdf",  # each cell's seeds overlaid (analysis.seed_curves)
            "my-study_seedcurves_1_cells-1-to-4.png",
        ]
        and update.figures == 6
    )
    page = (out / "figures.html").read_text()
    # the heading names the sweep as written (my_study), not its file-name slug
    assert "Sweep my_study: heat map, sst2" in page and 'src="figures/my-study_heatmap_1_sst2.png"' in page
    assert "<h2>Sweep my_study: the seeds of each cell, cells 1 to 4</h2>" in page
    assert not any(p.suffix == ".png" for p in store.rglob("*"))
