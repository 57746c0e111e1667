"""A sweep's seeds overlaid, cell by cell (`kdgrid figures --sweep`, the report's figures page): does a cell's
mean hide one seed that never learned, or seeds that learned at different speeds?

A cell is the trials of a sweep that differ only in their seed (`kdgrid.analysis.sweep_tables.SweepRuns`: the
same values of every axis, and of the study where the sweep has several). Per cell, one column of two panels:

- top: the training loss against the optimizer step: the weighted total (what the optimiser minimised, the sum
  of each term times its weight), from the row's step curves where it recorded them, else from its per-epoch
  means placed at each epoch's last step (`kdgrid.store.step_curves.row_curves`); a log axis when every value
  is positive;
- bottom: the dev score of the cell's table metric against the epoch (the row's ``curve_json``), the metric the
  sweep's table reports for that dev set.

Each seed is one line, the same colour and dash in both panels, named ``seed N`` in the legend. Cells go
`CELLS_PER_FIGURE` to a figure, in the table's order (the runs' order); files ``<sweep>_seedcurves_<n>_<part>``
(``<part>``: ``cells-1-to-6``; PNG at 200 dpi and PDF), beside the sweep's forest plots and heat maps.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: figures are files

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from kdgrid.analysis.sweep_figures import figure_slug
from kdgrid.analysis.sweep_tables import SweepRuns
from kdgrid.store import read_table
from kdgrid.store.step_curves import read_step_curves, row_curves

CELLS_PER_FIGURE = 6
SEED_DASHES = ("-", "--", "-.", ":")  # with a colour per seed: lines that lie on each other stay told apart
ROW_COLUMNS = ("row_id", "task", "curve_json", "weights_json", "extra_json")
LOSS_LABEL = "training loss (weighted total)"


@dataclass(frozen=True)
class SeedCurve:
    """One seed of a cell: the loss at optimizer steps, the dev score at epochs."""

    seed: str
    steps: list[float]
    loss: list[float]
    epochs: list[float]
    scores: list[float]


@dataclass(frozen=True)
class CellCurves:
    """A cell's label (its axes' values), the score it plots (``<dev set> <metric>``) and its seeds."""

    label: str
    score: str
    seeds: list[SeedCurve]


def _numbers(xs: Sequence[Any], ys: Sequence[Any]) -> tuple[list[float], list[float]]:
    pairs = [(float(x), float(y)) for x, y in zip(xs, ys, strict=False)
             if isinstance(y, (int, float)) and math.isfinite(float(y))]  # fmt: skip
    return [x for x, _ in pairs], [y for _, y in pairs]


def _epoch_scores(curve_json: Any, dev_set: str, metric: str) -> tuple[list[float], list[float]]:
    try:
        curve = json.loads(curve_json) if isinstance(curve_json, str) else []
    except ValueError:
        curve = []
    entries = [entry for entry in curve if isinstance(entry, dict) and "epoch" in entry] if isinstance(curve, list) else []
    values = [((entry.get("scores") or {}).get(dev_set) or {}).get(metric) for entry in entries]
    return _numbers([entry["epoch"] for entry in entries], values)


def cell_curves(
    runs: SweepRuns, rows: Mapping[str, Mapping[str, Any]], recorded: Mapping[str, Mapping[str, Any]]
) -> list[CellCurves]:
    """The cells of ``runs`` with each seed's curves. ``rows``: row id -> the row's `ROW_COLUMNS`; ``recorded``:
    row id -> its step curves (`kdgrid.store.step_curves.read_step_curves`; a row absent there is drawn from
    its per-epoch curve). A row's first (dev set, metric) in ``runs`` is the score its cell plots."""
    axes = [*runs.axes, *(["study"] if runs.studies and "study" in runs.runs.columns else [])]
    frame = runs.runs.drop_duplicates("row_id")
    cells: dict[tuple[str, ...], CellCurves] = {}
    for record in frame.to_dict("records"):
        key = tuple(str(record[axis]) for axis in axes)
        label = " · ".join(f"{axis}={value}" for axis, value in zip(axes, key, strict=True)) or runs.sweep
        dev_set, metric = str(record["dev_set"]), str(record["metric"])
        cell = cells.setdefault(key, CellCurves(label, f"{dev_set} {metric}", []))
        row_id = str(record["row_id"])
        row = rows.get(row_id, {})
        curves = row_curves(row, recorded.get(row_id))
        steps, loss = _numbers(curves.get("steps") or [], curves.get("total") or [])
        epochs, scores = _epoch_scores(row.get("curve_json"), dev_set, metric)
        cell.seeds.append(SeedCurve(str(record["seed"]), steps, loss, epochs, scores))
    for cell in cells.values():
        cell.seeds.sort(key=lambda s: (len(s.seed), s.seed))
    return list(cells.values())


def seed_curve_figure(cells: Sequence[CellCurves], title: str) -> Figure:
    """One column per cell: the seeds' loss (top) and dev score (bottom) overlaid; the caller saves and closes."""
    figure, grid = plt.subplots(2, len(cells), figsize=(1.0 + 3.4 * len(cells), 6.2), squeeze=False)
    for column, cell in enumerate(cells):
        top, bottom = grid[0][column], grid[1][column]
        for index, seed in enumerate(cell.seeds):
            style = {"color": f"C{index % 10}", "linestyle": SEED_DASHES[index % len(SEED_DASHES)],
                     "linewidth": 1.4, "label": f"seed {seed.seed}"}  # fmt: skip
            top.plot(seed.steps, seed.loss, marker="." if len(seed.steps) <= 12 else None, **style)
            bottom.plot(seed.epochs, seed.scores, marker="o", markersize=3, **style)
        losses = [value for seed in cell.seeds for value in seed.loss]
        if losses and min(losses) > 0:
            top.set_yscale("log")
        top.set_title(cell.label, fontsize=9)
        top.set_xlabel("optimizer step")
        top.set_ylabel(LOSS_LABEL if column == 0 else "")
        bottom.set_xlabel("epoch")
        bottom.set_ylabel(f"dev {cell.score}")
        for axes in (top, bottom):
            axes.grid(alpha=0.3)
            axes.tick_params(labelsize=8)
        if not any(seed.steps for seed in cell.seeds):
            top.text(0.5, 0.5, "no loss recorded", transform=top.transAxes, ha="center", color="grey")
        if not any(seed.epochs for seed in cell.seeds):
            bottom.text(0.5, 0.5, "no epoch scored", transform=bottom.transAxes, ha="center", color="grey")
    grid[0][0].legend(fontsize=8, loc="best")
    figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    return figure


def seed_curve_figures(runs: SweepRuns, store_dir: Path, out_dir: Path) -> list[Path]:
    """The sweep's seed-curve figures as PNG and PDF in ``out_dir`` (`CELLS_PER_FIGURE` cells each; none when
    no cell ran two or more seeds: one line per panel shows no spread); returns the files."""
    row_ids = sorted(set(runs.runs["row_id"].astype(str)))
    if not row_ids:
        return []
    table = read_table(store_dir, ROW_COLUMNS, row_ids=row_ids)
    rows = {str(row["row_id"]): row for row in table.to_pylist()}
    cells = cell_curves(runs, rows, read_step_curves(store_dir, row_ids))
    if not any(len(cell.seeds) > 1 for cell in cells):
        return []
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    parts = [cells[i : i + CELLS_PER_FIGURE] for i in range(0, len(cells), CELLS_PER_FIGURE)]
    written = []
    for index, part in enumerate(parts, start=1):
        where = f" ({index} of {len(parts)})" if len(parts) > 1 else ""
        figure = seed_curve_figure(part, f"{runs.sweep}: the seeds of each cell{where}")
        first = CELLS_PER_FIGURE * (index - 1) + 1
        stem = out_dir / f"{figure_slug(runs.sweep)}_seedcurves_{index}_cells-{first}-to-{first + len(part) - 1}"
        for suffix in (".png", ".pdf"):  # laid out by tight_layout: a "tight" bounding box would draw it again
            figure.savefig(stem.with_suffix(suffix), dpi=200)
            written.append(stem.with_suffix(suffix))
        plt.close(figure)
    return written
