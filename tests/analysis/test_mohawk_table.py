"""`kdgrid tables --sweep mohawk` on a small fake store of the bundled MOHAWK sweep's own trials (the sweep is not
run): one row per study in the file's order although the chained studies start each seed from another trial's
student (their init_from differs with the seed, as a teacher assistant's does)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from kdgrid.analysis.sweep_tables import sweep_table
from kdgrid.grid import load_sweep
from kdgrid.predictions import DevSetPredictions
from kdgrid.result import TrialResult
from kdgrid.store.membership import record_membership
from kdgrid.store.write import write_result

SWEEPS = Path(__file__).resolve().parents[2] / "sweeps"
N = 100
GOLD = np.arange(N) % 2


def test_one_row_per_study_with_every_seed_in_its_cell(tmp_path: Path) -> None:
    sweep = load_sweep(SWEEPS / "mohawk.yaml")
    studies = sweep.study_of()
    store = tmp_path / "store"
    for planned in sweep.trials:
        trial = planned.trial
        student = np.where((np.arange(N) + trial.seed) % 10 < 8, GOLD, 1 - GOLD)
        accuracy = float((student == GOLD).mean())
        result = TrialResult(trial=trial, status="done", scores={"validation": {"accuracy": accuracy}},
                             last_scores={"validation": {"accuracy": accuracy}}, best_epoch=1)  # fmt: skip
        outcome = {"validation": DevSetPredictions(GOLD, student, GOLD, "f" * 64)}
        write_result(store, dataclasses.replace(result, predictions=outcome), sweep="mohawk",
                     study=studies[trial.trial_id])  # fmt: skip
    record_membership(store, "mohawk", studies, studies=tuple(sweep.studies))
    built = sweep_table(store, "mohawk", resamples=50, test_resamples=50)
    assert (built.layout.rows, built.layout.cols, built.layout.blocks) == (("study",), (), ())
    (main,) = built.view.blocks[: built.main_blocks]
    assert main.rows == list(sweep.studies)
    assert all(main.cell(study, main.columns[0]).n_seeds == 3 for study in sweep.studies)
    # the reference: the first study that is soft labels only, MOHAWK's whole chain (stages 1 and 2 have none)
    assert [s for s in sweep.studies if main.cell(s, main.columns[0]).is_reference] == ["stage3_after12"]
    other = sweep_table(store, "mohawk", reference="study=ssm_scratch", resamples=50, test_resamples=50)
    (main,) = other.view.blocks[: other.main_blocks]
    assert [s for s in sweep.studies if main.cell(s, main.columns[0]).is_reference] == ["ssm_scratch"]
