"""MOHAWK's three stages as a chain of trials through the real core and the local executor (a tiny BERT teacher
and an SSM student of its shape, a few steps): each stage starts from the stage before's kept student, checked by
the hash its row records; a run killed inside the chain resumes where it stopped."""

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
from tests.preemption import preempted_in_epoch
from tests.sweep_studies import trials_of


def mohawk_sweep(tmp_path: Path, teacher: str) -> Path:
    path = tmp_path / "mohawk.yaml"
    path.write_text(textwrap.dedent(f"""
        name: mohawk-chain
        fixed: {{task: synthetic-single-binary-n64-d32, teacher: {teacher}, student: ssm-l2-h32-a2-f64,
                init: random, batch_size: 16, max_length: 24, epochs: 2, lr: 0.002,
                options: {{teacher_gate: false}}}}
        studies:
          orient: {{fixed: {{soft_weight: 0, alpha: 0, options: {{mohawk_stage: 1}}}}}}
          align: {{fixed: {{soft_weight: 0, alpha: 0, init_from: "study:orient", options: {{mohawk_stage: 2}}}}}}
          distil: {{fixed: {{epochs: 1, init_from: "study:align", options: {{mohawk_stage: 3}}}}}}
        """))  # fmt: skip
    return path


def test_the_stages_chain_and_a_killed_chain_resumes(
    tiny_teacher: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path / "cache"))
    path = mohawk_sweep(tmp_path, tiny_teacher)
    sweep = load_sweep(path)
    (orient,), (align,), (distil,) = (trials_of(sweep, s) for s in ("orient", "align", "distil"))
    assert align.init_from == f"trial:{orient.trial_id}" and distil.init_from == f"trial:{align.trial_id}"
    store = tmp_path / "store"
    options = RunOptions(executor_settings={"local_progress": False})
    with preempted_in_epoch(monkeypatch, 1):  # killed in stage 1's second epoch, after its first checkpoint
        run_sweep(path, store, options)
    assert read_store(store).empty  # nothing finished
    outcome = run_sweep(path, store, options)  # the run again: it continues the chain where it stopped
    assert outcome.ok and outcome.done_now == 3, outcome.failed_now
    rows = {row["trial_id"]: row for row in read_store(store).to_dict("records")}
    extra = {trial_id: json.loads(row["extra_json"]) for trial_id, row in rows.items()}
    assert extra[orient.trial_id]["resumed_from_epoch"] == 1  # stage 1 continued from its epoch checkpoint
    for source, dependant in ((orient, align), (align, distil)):
        digest = file_sha256(student_dir(store, source.trial_id) / "model.safetensors")
        assert extra[source.trial_id]["student_weights_sha256"] == digest
        assert extra[dependant.trial_id]["init_trial_id"] == source.trial_id
        assert extra[dependant.trial_id]["init_weights_sha256"] == digest
        assert extra[dependant.trial_id]["init_source"] == f"trial:{source.trial_id}"
        assert rows[dependant.trial_id]["started_at"] >= rows[source.trial_id]["ended_at"]
    terms = json.loads(rows[align.trial_id]["loss_terms_json"])
    assert sorted(terms) == ["mohawk_hidden@1-1", "mohawk_hidden@2-2"]
    assert extra[distil.trial_id]["mohawk_transferred"] == 2 * 8 + 5 + 2 + 2
    assert sorted(json.loads(rows[distil.trial_id]["loss_terms_json"])) == ["hard", "soft"]
