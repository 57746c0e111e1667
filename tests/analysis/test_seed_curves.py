"""The seed-curve figure of a sweep: one column per cell, each seed one line in the loss and the dev-score panel,
read back from the figure object and from `kdgrid figures --sweep`'s files."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from kdgrid.analysis.seed_curves import LOSS_LABEL, cell_curves, seed_curve_figure, seed_curve_figures
from kdgrid.analysis.sweep_tables import sweep_table
from kdgrid.store import read_table
from kdgrid.store.step_curves import read_step_curves
from tests.analysis.tables_testing import result, run_kdgrid, write

WEIGHTS = {"soft": 0.5, "hidden_mse@1-2": 2.0}


def seeded(lr: float, seed: int) -> object:
    """A done sst2 trial of learning rate ``lr`` and seed ``seed``: two epochs whose terms and scores depend on
    both, so that each line of the figure can be traced to its row."""
    made = result(0.7 + seed / 100, task="sst2", lr=lr, seed=seed)
    curve = [{"epoch": epoch, "scores": {"validation": {"accuracy": 0.5 + epoch / 10 + seed / 100}},
              "loss_terms": {"soft": 1.0 / epoch + seed, "hidden_mse@1-2": 0.1 * epoch}}
             for epoch in (1, 2)]  # fmt: skip
    return dataclasses.replace(made, curve=curve, weights=WEIGHTS, extra={"steps_per_epoch": 5})


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    write(path, "main", *(seeded(lr, seed) for lr in (1e-3, 1e-2) for seed in range(3)), sweep="seeds")
    return path


def test_each_cell_holds_its_seeds_with_the_weighted_loss_and_the_dev_score(store: Path) -> None:
    runs = sweep_table(store, "seeds", resamples=50, test_resamples=50).runs
    assert runs is not None
    row_ids = list(runs.runs["row_id"])
    rows = {row["row_id"]: row for row in read_table(store, ["row_id", "task", "curve_json", "weights_json",
                                                             "extra_json"]).to_pylist()}  # fmt: skip
    cells = cell_curves(runs, rows, read_step_curves(store, row_ids))
    assert [cell.label for cell in cells] == ["lr=0.001", "lr=0.01"]
    assert all(cell.score == "validation accuracy" for cell in cells)
    for cell in cells:
        assert [seed.seed for seed in cell.seeds] == ["0", "1", "2"]
        for number, seed in enumerate(cell.seeds):
            # per-epoch means at each epoch's last step (5 steps an epoch); total = 0.5 x soft + 2 x hidden
            assert seed.steps == [5.0, 10.0]
            assert seed.loss == pytest.approx([0.5 * (1.0 + number) + 2 * 0.1, 0.5 * (0.5 + number) + 2 * 0.2])
            assert seed.epochs == [1.0, 2.0]
            assert seed.scores == pytest.approx([0.6 + number / 100, 0.7 + number / 100])


def test_the_figure_overlays_the_seeds_in_both_panels_with_titled_axes(store: Path) -> None:
    runs = sweep_table(store, "seeds", resamples=50, test_resamples=50).runs
    rows = {row["row_id"]: row for row in read_table(store, ["row_id", "task", "curve_json", "weights_json",
                                                             "extra_json"]).to_pylist()}  # fmt: skip
    cells = cell_curves(runs, rows, {})
    figure = seed_curve_figure(cells, "seeds: the seeds of each cell")
    try:
        grid = figure.axes
        assert len(grid) == 4  # 2 panels x 2 cells
        tops, bottoms = grid[:2], grid[2:]
        for top, bottom, cell in zip(tops, bottoms, cells, strict=True):
            assert top.get_title() == cell.label and top.get_xlabel() == "optimizer step"
            assert bottom.get_xlabel() == "epoch" and bottom.get_ylabel() == "dev validation accuracy"
            assert len(top.get_lines()) == len(bottom.get_lines()) == 3
            assert top.get_yscale() == "log"  # every loss positive
            styles = {(line.get_color(), line.get_linestyle()) for line in top.get_lines()}
            assert len(styles) == 3  # told apart even where they overlap
            assert list(bottom.get_lines()[2].get_ydata()) == pytest.approx(cell.seeds[2].scores)
        assert tops[0].get_ylabel() == LOSS_LABEL
        assert [t.get_text() for t in tops[0].get_legend().get_texts()] == ["seed 0", "seed 1", "seed 2"]
    finally:
        plt.close(figure)


def test_figures_sweep_writes_the_seed_curves_and_one_seed_per_cell_draws_none(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "figs"
    code, printed, err = run_kdgrid(capsys, "figures", "--store", str(store), "--sweep", "seeds", "--out", str(out))
    assert code == 0, err
    drawn = sorted(path.name for path in out.glob("seeds_seedcurves_*"))
    assert drawn == ["seeds_seedcurves_1_cells-1-to-2.pdf", "seeds_seedcurves_1_cells-1-to-2.png"]
    assert (out / drawn[1]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "seedcurves" in printed
    single = tmp_path / "single"
    write(single, "main", seeded(1e-3, 0), seeded(1e-2, 0), sweep="one")
    runs = sweep_table(single, "one", intervals="off").runs
    assert runs is not None and seed_curve_figures(runs, single, tmp_path / "none") == []
