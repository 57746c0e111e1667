"""`kdgrid tables --sweep methods` on a small fake store of the bundled methods sweep's own trials (the sweep is
not run): one row per study in the file's order, soft labels only as every cell's reference, intervals and marks;
the assistant cells (another student, another teacher) carry intervals without a test. A sweep whose studies do
not fix every axis keeps its usual layout unless ``--rows study`` asks."""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from pathlib import Path

import numpy as np
import pytest

from kdgrid.analysis.sweep_tables import sweep_table
from kdgrid.grid import load_sweep
from kdgrid.predictions import DevSetPredictions
from kdgrid.result import TrialResult
from kdgrid.store.membership import record_membership
from kdgrid.store.write import write_result
from tests.analysis.tables_testing import run_kdgrid

SWEEPS = Path(__file__).resolve().parents[2] / "sweeps"
N = 200
GOLD = np.arange(N) % 2
FINGERPRINT = "f" * 64
# Right on this share of the dev examples (the seed shifts which ones); every other study: 0.7.
SHARES = {"soft_labels": 0.7, "lad": 0.85, "dot": 0.55}


def predictions(share: float, seed: int) -> np.ndarray:
    right = (np.arange(N) - 3 * seed) % N < round(share * N)
    return np.where(right, GOLD, 1 - GOLD)


def write_methods_store(
    path: Path, *, finished_in_reverse: bool = False, name: str = "methods", tasks: tuple[str, ...] = ()
) -> Path:
    """The bundled sweep ``name``'s trials as done rows (predictions by `SHARES`) and its membership, the rows
    written in the file's order or, as jobs may finish them, in reverse; only those of ``tasks`` where given (a
    sweep part-way through)."""
    sweep = load_sweep(SWEEPS / f"{name}.yaml")
    studies = sweep.study_of()
    planned_trials = list(reversed(sweep.trials)) if finished_in_reverse else sweep.trials
    for planned in planned_trials:
        if tasks and planned.trial.task not in tasks:
            continue
        trial, study = planned.trial, studies[planned.trial.trial_id]
        student = predictions(SHARES.get(study, 0.7), trial.seed)
        accuracy = float((student == GOLD).mean())
        result = TrialResult(
            trial=trial, status="done", scores={"validation": {"accuracy": accuracy}},
            last_scores={"validation": {"accuracy": accuracy}}, best_epoch=1,
        )  # fmt: skip
        outcome = {"validation": DevSetPredictions(GOLD, student, predictions(0.9, 0), FINGERPRINT)}
        write_result(path, dataclasses.replace(result, predictions=outcome), sweep=name, study=study)
    record_membership(path, name, studies, studies=tuple(sweep.studies))
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_methods_store(tmp_path_factory.mktemp("methods") / "store")


def test_the_file_order_and_reference_hold_whatever_order_the_trials_finished_in(tmp_path: Path) -> None:
    """Jobs finish in their own order (the held-out LKD job first, say): the rows still follow the sweep file,
    and the reference is its first soft-labels-only study, not the first one to finish."""
    built = sweep_table(write_methods_store(tmp_path / "store", finished_in_reverse=True), "methods",
                        resamples=100, test_resamples=100)  # fmt: skip
    main = built.view.blocks[0]
    assert main.rows == list(load_sweep(SWEEPS / "methods.yaml").studies)
    assert main.cell("soft_labels", main.columns[0]).is_reference
    assert not main.cell("via_assistant", main.columns[0]).is_reference


def test_one_row_per_study_against_soft_labels_with_intervals_and_marks(store: Path) -> None:
    built = sweep_table(store, "methods", resamples=200, test_resamples=500)
    assert (built.layout.rows, built.layout.cols, built.layout.blocks) == (("study",), (), ())
    order = list(load_sweep(SWEEPS / "methods.yaml").studies)  # the file's order (the paper-recipe cells last)
    main = built.view.blocks[0]
    assert main.rows == order and order[0] == "soft_labels" and len(order) == 27
    column = main.columns[0]
    reference, lad, dot = (main.cell(s, column) for s in ("soft_labels", "lad", "dot"))
    assert reference.is_reference and reference.n_seeds == 5 and reference.value == pytest.approx(0.7)
    assert lad.value == pytest.approx(0.85) and lad.significant and lad.direction == 1 and lad.has_interval
    assert dot.value == pytest.approx(0.55) and dot.significant and dot.direction == -1
    same = main.cell("projector_mlp", column)
    assert same.has_interval and not same.significant  # the same predictions as the reference
    for study in (
        "assistant",
        "via_assistant",
    ):  # another student / teacher: an interval, no reference to test
        cell = main.cell(study, column)
        assert (
            cell.n_seeds == 5
            and cell.has_interval
            and math.isnan(cell.p_vs_reference)
            and not cell.test_method
        )


def test_the_cli_lays_it_out_by_study(store: Path, capsys) -> None:
    code, out, err = run_kdgrid(
        capsys, "tables", "--sweep", "methods", "--store", str(store), "--format", "csv",
        "--resamples", "200", "--test-resamples", "500",
    )  # fmt: skip
    assert code == 0, err
    rows = {r["row"]: r for r in csv.DictReader(io.StringIO(out)) if r["column"] == "accuracy"}
    assert rows["lad"]["significant"] == "1" and float(rows["lad"]["ci_low"]) <= 0.85 <= float(
        rows["lad"]["ci_high"]
    )
    assert rows["ctkd"]["significant"] == "0" and set(rows) >= {"curriculum", "lkd", "mask_teacher"}


def test_studies_that_do_not_fix_every_axis_keep_the_usual_layout_unless_asked(tmp_path: Path) -> None:
    path, made = tmp_path / "store", {}
    for study, knowledge in (("plain", ()), ("hidden", ("hidden_mse",))):
        for lr in (1e-3, 1e-2):
            trial = load_sweep(SWEEPS / "methods.yaml").trials[0].trial
            trial = dataclasses.replace(
                trial, knowledge=knowledge, strategy="Last-1" if knowledge else None, lr=lr
            )
            student = predictions(0.7, 0)
            result = TrialResult(
                trial=trial, status="done", scores={"validation": {"accuracy": 0.7}}, best_epoch=1
            )
            outcome = {"validation": DevSetPredictions(GOLD, student, student, FINGERPRINT)}
            write_result(path, dataclasses.replace(result, predictions=outcome), sweep="mixed", study=study)
            made[trial.trial_id] = study
    record_membership(path, "mixed", made)
    usual = sweep_table(path, "mixed", resamples=50, test_resamples=50)
    assert "study" not in (*usual.layout.rows, *usual.layout.cols, *usual.layout.blocks)
    asked = sweep_table(path, "mixed", rows="study", resamples=50, test_resamples=50)
    assert asked.layout.rows == ("study",) and "lr" in asked.layout.blocks  # lr varies within a study: blocks
    assert {row for block in asked.view.blocks[: asked.main_blocks] for row in block.rows} == {
        "plain",
        "hidden",
    }


def test_one_study_with_a_grid_of_its_own_gets_rows_by_study_and_that_grid(tmp_path: Path) -> None:
    """Methods beside one small grid (an evaluation over k and beta, say): one row per study and per value of
    the grid's axes, no blocks, every cell tested against the soft-labels-only study."""
    path, made = tmp_path / "store", {}
    base = load_sweep(SWEEPS / "methods.yaml").trials[0].trial
    shares = {("plain", 1e-3): 0.7, ("hidden", 1e-3): 0.7, ("hidden", 1e-2): 0.9}
    for (study, lr), share in shares.items():
        knowledge = ("hidden_mse",) if study == "hidden" else ()
        for seed in range(3):
            trial = dataclasses.replace(
                base, knowledge=knowledge, strategy="Last-1" if knowledge else None, lr=lr, seed=seed
            )
            student = predictions(share, seed)
            accuracy = float((student == GOLD).mean())
            result = TrialResult(trial=trial, status="done", scores={"validation": {"accuracy": accuracy}},
                                 best_epoch=1)  # fmt: skip
            outcome = {"validation": DevSetPredictions(GOLD, student, student, FINGERPRINT)}
            write_result(path, dataclasses.replace(result, predictions=outcome), sweep="grid", study=study)
            made[trial.trial_id] = study
    record_membership(path, "grid", made, studies=("plain", "hidden"))
    built = sweep_table(path, "grid", resamples=100, test_resamples=200)
    assert (built.layout.rows, built.layout.cols, built.layout.blocks) == (("study", "lr"), (), ())
    main = built.view.blocks[0]
    assert main.rows == ["plain · 0.001", "hidden · 0.001", "hidden · 0.01"]
    column = main.columns[0]
    assert main.cell("plain · 0.001", column).is_reference
    better = main.cell("hidden · 0.01", column)
    assert better.value == pytest.approx(0.9) and better.significant and better.direction == 1
    assert not main.cell("hidden · 0.001", column).significant


@pytest.mark.parametrize("tasks", [(), ("polarity",)], ids=["both tasks", "part-way: polarity only"])
def test_methods_by_task_get_one_row_per_study_and_a_column_per_task(tmp_path: Path, tasks: tuple) -> None:
    """The second testbed's layout, `--rows study --cols task`: the studies fix every axis but the task, so the
    rows are the studies and the task the column, no blocks of other axes (a table's blocks still part its tasks,
    each its own dev set and its own family of tests against its soft-labels reference). Part-way through (one
    task done), the same layout with the one task."""
    path = write_methods_store(tmp_path / "store", name="methods_copied", tasks=tasks)
    built = sweep_table(path, "methods_copied", rows="study", cols="task", resamples=100, test_resamples=200)
    assert (built.layout.rows, built.layout.cols, built.layout.blocks) == (("study",), ("task",), ())
    main = built.view.blocks[: built.main_blocks]
    assert len(built.view.blocks) == built.main_blocks  # no marginal: the rows are studies, not a grid
    expected = list(tasks) or ["polarity", "uncertainty"]
    assert [[column.label for column in block.columns] for block in main] == [[task] for task in expected]
    for block in main:
        assert block.rows == list(load_sweep(SWEEPS / "methods_copied.yaml").studies)
        (column,) = block.columns
        assert block.cell("soft_labels", column).is_reference
        assert block.cell("lad", column).significant and block.cell("lad", column).direction > 0  # 0.85 vs 0.7
        assert math.isclose(block.cell("dot", column).value, 0.55)
