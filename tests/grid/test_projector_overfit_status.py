"""Projector overfitting as `kdgrid status` and the report show it: the trials whose row records the verdict are
counted and named, with the verdict, and their report page carries a warning; the others are not named."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kdgrid.cli import app
from kdgrid.grid import load_sweep
from kdgrid.grid.state import projector_overfit_trials, sweep_state
from kdgrid.report.build import ReportWriter
from kdgrid.report.html import esc
from kdgrid.result import TrialResult
from kdgrid.store import write_result
from kdgrid.trial import Trial

VERDICT = "the projected alignment loss fell to 2.0% of its first epoch's (1 -> 0.02)"


def sweep_and_store(tmp_path: Path) -> tuple[Path, Path, list[Trial]]:
    sweep_path = tmp_path / "s.yaml"
    sweep_path.write_text(
        json.dumps(
            {
                "fixed": {"teacher": "bert-base", "student": "bert-tiny"},
                "axes": {"task": ["rte", "mrpc", "sst2"], "seed": [1]},
            }
        )
    )
    trials = [p.trial for p in load_sweep(sweep_path).trials]
    store = tmp_path / "store"
    scores = {"validation": {"accuracy": 0.7}}
    for trial, extra in zip(trials[:2], ({"projector_overfit": VERDICT}, {}), strict=True):
        write_result(
            store,
            TrialResult(trial=trial, status="done", scores=scores, best_epoch=1, extra=extra),
            sweep="s",
            study="main",
        )
    return sweep_path, store, trials


def test_status_counts_and_names_the_flagged_trials(tmp_path: Path) -> None:
    sweep_path, store, (flagged, healthy, _pending) = sweep_and_store(tmp_path)
    assert projector_overfit_trials(sweep_state(load_sweep(sweep_path), store), store) == {
        flagged.trial_id: VERDICT
    }
    runner = CliRunner()
    result = runner.invoke(app, ["status", str(sweep_path), "--store", str(store)])
    assert result.exit_code == 0, result.output
    assert "projector overfitting: 1 of 2 done trials" in result.output
    assert f"projector overfitting {flagged.trial_id} [main]: {VERDICT}" in result.output
    assert healthy.trial_id not in result.output
    result = runner.invoke(app, ["status", str(sweep_path), "--store", str(store), "--json"])
    listed = json.loads(result.output)["projector_overfit_trials"]
    assert listed == [{"trial_id": flagged.trial_id, "study": "main", "verdict": VERDICT}]


def test_the_report_page_of_a_flagged_trial_warns(tmp_path: Path) -> None:
    _, store, (flagged, healthy, _) = sweep_and_store(tmp_path)
    out = tmp_path / "report"
    ReportWriter(store, out, figures=False).update()
    assert (
        f"<b>Projector overfitting</b>: {esc(VERDICT)}."
        in (out / "trials" / f"{flagged.trial_id}.html").read_text()
    )
    assert "Projector overfitting" not in (out / "trials" / f"{healthy.trial_id}.html").read_text()
