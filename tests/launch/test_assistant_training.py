"""A teacher assistant chain through the real core and the local executor (tiny models, a few steps): the
assistant's trained student is kept, and the dependant learns from exactly that model."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from kdgrid.file_digest import file_sha256
from kdgrid.grid import load_sweep
from kdgrid.store import read_store
from kdgrid.store.trained_students import student_dir
from kdgrid.sweep_run import RunOptions, run_sweep
from tests.sweep_studies import trials_of


@pytest.mark.slow
def test_the_dependant_learns_from_the_assistants_kept_student(
    tiny_teacher: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "chain.yaml"
    path.write_text(textwrap.dedent(f"""
        name: chain
        fixed: {{task: synthetic-single-binary-n64-d32, teacher: {tiny_teacher}, init: random, batch_size: 16,
                max_length: 24, epochs: 1, lr: 0.002, options: {{teacher_gate: false}}}}
        studies:
          assistant: {{fixed: {{student: w32-l2-h2-f64}}}}
          student:
            fixed: {{student: w32-l1-h2-f64, teacher: "study:assistant", knowledge: [hidden_mse], strategy: Last}}
        """))  # fmt: skip
    sweep = load_sweep(path)
    (assistant,), (student,) = trials_of(sweep, "assistant"), trials_of(sweep, "student")
    outcome = run_sweep(path, tmp_path / "store", RunOptions(executor_settings={"local_progress": False}))
    assert outcome.ok and outcome.done_now == 2, outcome.failed_now
    rows = {row["trial_id"]: row for row in read_store(tmp_path / "store").to_dict("records")}
    kept, taught = rows[assistant.trial_id], rows[student.trial_id]
    saved = student_dir(tmp_path / "store", assistant.trial_id)
    digest = file_sha256(saved / "model.safetensors")
    assert json.loads(kept["extra_json"])["student_weights_sha256"] == digest
    extra = json.loads(taught["extra_json"])
    assert extra["teacher_trial_id"] == assistant.trial_id and extra["teacher_weights_sha256"] == digest
    # the dependant's teacher is the assistant's last-epoch student: scored on the same dev set, the same numbers
    assert extra["teacher_scores"] == json.loads(kept["last_scores_json"])
    assert taught["started_at"] >= kept["ended_at"]
    manifest = json.loads((saved / "kdgrid_student.json").read_text())
    assert manifest == {"trial_id": assistant.trial_id, "weights_file": "model.safetensors", "weights_sha256": digest}
