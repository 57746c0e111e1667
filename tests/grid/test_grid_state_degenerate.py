"""Degenerate done trials in `kdgrid status`: counted and named, from the stored reasons of schema version 2 rows
and from the scores alone for version 1 rows; healthy and failed trials are not named."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from kdgrid.cli import app
from kdgrid.grid import load_sweep
from kdgrid.grid.state import degenerate_trials, sweep_state
from kdgrid.predictions import DevSetPredictions
from kdgrid.result import TrialResult
from kdgrid.store import failure_result, layout, write_result
from kdgrid.trial import Trial

GOLD = np.array([1, 1, 1, 0, 0, 1, 1, 0])
# A row of schema version 1 (tests/store/data): a done CoLA trial (bert-base -> bert-tiny, seed 7) with MCC 0.
V1_ROW = (
    Path(__file__).parents[1]
    / "store"
    / "data"
    / "2d9d1948a3608f1a.done.019cf10330f24b8ea077353e001cf40b.parquet"
)


def done(trial: Trial, student: list[int]) -> TrialResult:
    predictions = {"validation": DevSetPredictions(GOLD, np.array(student), None, "f")}
    accuracy = float(np.mean(np.array(student) == GOLD))
    return TrialResult(
        trial=trial, status="done", scores={"validation": {"accuracy": accuracy}}, predictions=predictions
    )


def sweep_and_store(tmp_path: Path) -> tuple[Path, Path, list[Trial]]:
    sweep_path = tmp_path / "s.yaml"
    sweep_path.write_text(
        json.dumps(
            {
                "fixed": {"teacher": "bert-base", "student": "bert-tiny"},
                "axes": {"task": ["rte", "mrpc", "qqp", "sst2", "cola"], "seed": [7]},
            }
        )
    )
    trials = [p.trial for p in load_sweep(sweep_path).trials]
    rte, mrpc, qqp, sst2, cola = trials
    assert cola.trial_id == V1_ROW.name.split(".")[0]  # the version 1 row is this sweep's CoLA trial
    store = tmp_path / "store"
    write_result(store, done(rte, [1] * 8), sweep="s", study="main")  # constant, at the majority
    write_result(store, done(mrpc, [1, 1, 1, 0, 0, 1, 0, 0]), sweep="s", study="main")  # healthy: 0.75
    write_result(store, done(qqp, [0, 1, 0, 0, 1, 1, 0, 1]), sweep="s", study="main")  # below the majority
    write_result(
        store, failure_result(sst2, error_type="OOM", message="out of memory"), sweep="s", study="main"
    )
    shutil.copy(V1_ROW, layout.rows_dir(store) / V1_ROW.name)
    return sweep_path, store, trials


def test_degenerate_trials_are_named_with_their_reasons(tmp_path: Path) -> None:
    sweep_path, store, (rte, _healthy, qqp, _failed, cola) = sweep_and_store(tmp_path)
    state = sweep_state(load_sweep(sweep_path), store)
    found = degenerate_trials(state, store)
    assert list(found) == [rte.trial_id, qqp.trial_id, cola.trial_id]
    assert found[rte.trial_id] == [
        "validation: constant predictions (every example 1)",
        "validation: accuracy 0.6250 <= the majority class's 0.6250",
    ]
    assert found[qqp.trial_id] == ["validation: accuracy 0.3750 <= the majority class's 0.6250"]
    assert found[cola.trial_id] == [
        "validation: MCC 0.0000 <= 0 (no better than chance)"
    ]  # version 1: scores


def test_status_counts_and_lists_the_degenerate_trials(tmp_path: Path) -> None:
    sweep_path, store, (rte, mrpc, qqp, _failed, cola) = sweep_and_store(tmp_path)
    runner = CliRunner()
    result = runner.invoke(app, ["status", str(sweep_path), "--store", str(store)])
    assert result.exit_code == 0, result.output
    assert "degenerate: 3 of 4 done trials" in result.output
    assert f"degenerate {rte.trial_id} [main]: validation: constant predictions" in result.output
    assert mrpc.trial_id not in result.output.split("degenerate:")[1]
    result = runner.invoke(app, ["status", str(sweep_path), "--store", str(store), "--json"])
    listed = json.loads(result.output)["degenerate_trials"]
    assert [item["trial_id"] for item in listed] == [rte.trial_id, qqp.trial_id, cola.trial_id]
    assert listed[1]["reasons"] == ["validation: accuracy 0.3750 <= the majority class's 0.6250"]
