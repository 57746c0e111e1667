"""Pending cells in a report's sweep tables: a sweep file's trials listed in the store's membership with no row
yet are placed in their cells, read from the sweep file (the membership records ids only), shown as ``…`` with
a tooltip and counted under the table; a trial the table cannot place is counted as such."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np

from kdgrid.analysis.heat_map import cell_text
from kdgrid.analysis.sweep_pending import place_pending
from kdgrid.analysis.sweep_tables import build_sweep_table, choose_layout
from kdgrid.analysis.tables import PENDING_MARK
from kdgrid.grid.expand import load_sweep
from kdgrid.predictions import DevSetPredictions
from kdgrid.report.build import ReportWriter
from kdgrid.store.membership import record_membership
from tests.analysis.tables_testing import result, write
from tests.analysis.test_sweep_seed_level_simulation import sweep_runs

N = 200
GOLD = np.arange(N) % 2
SWEEP = """\
name: mine
fixed:
  task: sst2
  teacher: bert-base
  student: bert-tiny
axes:
  lr: [1.0e-3, 1.0e-2, 1.0e-1]
  batch_size: [16, 32]
seeds: 2
"""


def done(trial, share: float):
    student = np.where(np.arange(N) < round(share * N), GOLD, 1 - GOLD)
    outcome = {"validation": DevSetPredictions(GOLD, student, None, "d" * 64)}
    return dataclasses.replace(result(share, task="sst2"), trial=trial, predictions=outcome)


def test_the_report_marks_and_counts_pending_cells_read_from_the_sweep_file(tmp_path: Path) -> None:
    sweep_file = tmp_path / "mine.yaml"
    sweep_file.write_text(SWEEP)
    sweep = load_sweep(sweep_file)
    trials = [p.trial for p in sweep.trials]
    assert len(trials) == 12
    # lr 1e-3: all four runs done; lr 1e-2: batch 16 both seeds, batch 32 seed 0 only; lr 1e-1: nothing yet
    finished = [t for t in trials if t.lr == 1e-3 or (t.lr == 1e-2 and (t.batch_size == 16 or t.seed == 0))]
    store = tmp_path / "store"
    write(store, "main", *(done(t, 0.6 + 0.05 * i) for i, t in enumerate(finished)), sweep="mine")
    record_membership(store, "mine", sweep.study_of())
    out = tmp_path / "report"
    ReportWriter(store, out, sweeps=[str(sweep_file)], figures=False).update()
    tables = (out / "tables.html").read_text()
    # 5 pending: lr 1e-2 batch 32 seed 1 (a cell with one seed done) and lr 1e-1's 4 runs (2 cells, none done)
    assert (
        f"pending: 5 trial(s) of this sweep have no row yet; 5 of them sit in 3 cell(s) marked {PENDING_MARK} "
        "(2 with no done run yet" in tables
    )
    marks = re.findall(r'<span class="pending" title="([^"]+)">…</span>', tables)
    assert sorted(marks) == [
        "1 done, 1 trial(s) pending: listed by the sweep, no row yet",
        "no run done yet, 2 trial(s) pending: listed by the sweep, no row yet",
        "no run done yet, 2 trial(s) pending: listed by the sweep, no row yet",
    ]
    assert tables.count('<td class="num pending">') == 2  # the cells with no number: the mark alone
    assert "0.1" in re.sub(r"<[^>]+>", " ", tables)  # lr 0.1's row (or column) is laid out

    # without the sweep file (a name only, and no bundled sweep of it) the trials are counted, not placed
    plain = tmp_path / "plain"
    ReportWriter(store, plain, figures=False).update()
    text = (plain / "tables.html").read_text()
    assert "pending: 5 trial(s) of this sweep have no row yet; 0 of them sit in 0 cell(s)" in text
    assert "5 could not be placed" in text and '<span class="pending"' not in text


def test_a_pending_trial_with_a_value_the_table_does_not_lay_out_is_not_placed() -> None:
    runs = sweep_runs(np.random.default_rng(0), 2)
    runs.runs = runs.runs[~((runs.runs["knowledge"] == "mmd") & (runs.runs["strategy"] == "LAD"))]
    table = build_sweep_table(runs, choose_layout(runs.axes), {})
    main = table.view.blocks[0]
    before = {key: cell.value for key, cell in main.cells.items()}
    placed = place_pending(
        table,
        {
            "a": {"task": "sst2", "knowledge": "mmd", "strategy": "LAD"},  # the missing cell
            "b": {"task": "sst2", "knowledge": "cos", "strategy": "LAD"},  # a done cell, one more seed
            "c": {"task": "sst2", "knowledge": "cos", "strategy": "LAD", "lr": "0.01"},  # a field never varied
            "d": {"task": "mnli", "knowledge": "cos", "strategy": "LAD"},  # a task no block shows
            "e": None,  # not in the sweep file
        },
    )
    assert (placed.placed, placed.cells, placed.new_cells, placed.unplaced) == (2, 2, 1, ("c", "d", "e"))
    new = main.cell("mmd", main.column("LAD"))
    assert new.missing and new.pending == ("a",) and new.config["knowledge"] == "mmd"
    assert cell_text(new) == PENDING_MARK and cell_text(main.cell("mmd", main.column("First-1"))) != PENDING_MARK
    assert main.cell("cos", main.column("LAD")).pending == ("b",)
    assert all(main.cells[key].value == value for key, value in before.items())  # numbers untouched
    assert "3 could not be placed" in placed.note()
