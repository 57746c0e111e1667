"""ReAugKD end to end through `kdgrid run`'s code (`run_sweep`, the local executor, the store): a trained student
and a k x beta evaluation sweep over it, every row done, the evaluation rows naming the one trained student."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kdgrid.store import read_store
from kdgrid.sweep_run import RunOptions, run_sweep

SWEEP = """
name: reaugkd_small
fixed:
  task: synthetic-single-binary-n64-d24
  teacher: {teacher}
  student: w32-l2-h2-f64
  init: random
  knowledge: [reaug_relation]
  strategy: Last-1
  batch_size: 16
  max_length: 16
  epochs: 1
  lr: 2.0e-3
  soft_weight: 0.9
  alpha: 0.1
overrides:
  - set: {{options: {{teacher_gate: false, reaugkd_head: true, reaugkd_head_epochs: 2, reaugkd_head_batch_size: 32}}}}
studies:
  train:
    fixed: {{options: {{retrieval_k: 4}}}}
  retrieval:
    axes:
      options:
        - {{reaugkd_evaluate: true, retrieval_k: 2, retrieval_beta: 0.0}}
        - {{reaugkd_evaluate: true, retrieval_k: 2, retrieval_beta: 1.0}}
        - {{reaugkd_evaluate: true, retrieval_k: 8, retrieval_beta: 0.5, retrieval_index: exact}}
"""


@pytest.mark.slow  # about 25 s on 2 busy CPU cores
@pytest.mark.timeout(300)
def test_a_reaugkd_sweep_runs_through_the_local_executor(
    tiny_teacher: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path / "cache"))
    sweep = tmp_path / "reaugkd_small.yaml"
    sweep.write_text(SWEEP.format(teacher=tiny_teacher))
    outcome = run_sweep(sweep, tmp_path / "store", RunOptions(executor_settings={"local_progress": False}))
    assert outcome.ok and outcome.done_now == 4
    rows = read_store(tmp_path / "store")
    assert set(rows["status"]) == {"done"} and len(rows) == 4
    (trained,) = [row for row in rows.itertuples() if row.study == "train"]
    trained_record = json.loads(trained.extra_json)["reaugkd"]
    evaluations = [
        json.loads(row.extra_json)["reaugkd"] for row in rows.itertuples() if row.study == "retrieval"
    ]
    assert len(evaluations) == 3
    assert {e["trained_by"] for e in evaluations} == {trained.trial_id}
    assert all(e["scores_without"] == trained_record["scores_without"] for e in evaluations)
    assert {e["settings"]["index"] for e in evaluations} == {"hnsw", "exact"}
    # the store's scores of an evaluation-only row are its scores with retrieval
    for row in rows.itertuples():
        if row.study == "retrieval":
            assert json.loads(row.scores_json) == json.loads(row.extra_json)["reaugkd"]["scores"]
    # running again trains nothing and evaluates nothing
    again = run_sweep(sweep, tmp_path / "store", RunOptions(executor_settings={"local_progress": False}))
    assert again.ok and again.done_now == 0
