"""ReAugKD through `run_job`: a student trained against the SupCon head, its knowledge base built once, a k x beta
evaluation sweep that reuses the one trained student, and the refusals (a student not trained yet, k above the
knowledge base, a knowledge base of another teacher)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from transformers import BertForSequenceClassification

from kdgrid.core.methods.reaugkd.knowledge_base import kb_folder
from kdgrid.core.methods.reaugkd.pipeline import student_folder
from kdgrid.core.methods.reaugkd.projection_head import reaugkd_cache_root
from kdgrid.core.methods.reaugkd.spec import student_trial
from kdgrid.core.training.train import run_job
from kdgrid.trial import Trial
from tests.tiny_trials import tiny_trial

TASK = "synthetic-single-binary-n64-d24"
HEAD = {
    "reaugkd_head": True,
    "reaugkd_head_epochs": 2,
    "reaugkd_head_batch_size": 32,
    "reaugkd_head_lr": 1e-3,
}


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def make_trial(teacher: str, seed: int = 1, **options: object) -> Trial:
    return tiny_trial(
        teacher, task=TASK, knowledge=("reaug_relation",), strategy="Last-1", max_length=16, epochs=1, seed=seed,
        options={**HEAD, **options},
    )  # fmt: skip


def test_a_k_by_beta_evaluation_sweep_reuses_one_trained_student(teacher: str) -> None:
    trained = make_trial(teacher, retrieval_k=3)
    evaluations = [
        make_trial(teacher, reaugkd_evaluate=True, retrieval_k=k, retrieval_beta=beta)
        for k in (1, 5)
        for beta in (0.0, 1.0)
    ]
    students = reaugkd_cache_root() / "students"
    before = set(students.iterdir()) if students.is_dir() else set()
    results = run_job([evaluations[0], trained, *evaluations[1:]], device="cpu")
    assert [r.trial for r in results] == [evaluations[0], trained, *evaluations[1:]]
    assert all(r.status == "done" for r in results), [r.traceback for r in results][1]
    train_result, evaluated = results[1], [results[0], *results[2:]]
    record = train_result.extra["reaugkd"]
    # trained against the head: the relation term needs no student projection; the base built once, here
    assert train_result.extra["projection_params"] == 0
    assert record["knowledge_base_built"] is True and record["knowledge_base_size"] == 64
    assert set(record["scores"]) == set(record["scores_without"]) == {"validation"}
    latency = record["latency"]["validation"]
    assert (
        latency["examples"] == 24
        and latency["with_retrieval_ms_per_batch"] >= latency["student_ms_per_batch"]
    )
    assert record["search"]["validation"]["recall_at_k"] == 1.0
    key = student_trial(trained).trial_id
    assert [p.name for p in set(students.iterdir()) - before] == [key]  # one student saved, for five trials
    for result in evaluated:
        extra = result.extra["reaugkd"]
        assert extra["evaluates_student"] == key and extra["trained_by"] == trained.trial_id
        assert extra["knowledge_base_built"] is False
        assert extra["knowledge_base"] == record["knowledge_base"]
        # the same student, evaluated alone, scores what the trained trial's own evaluation scored
        assert extra["scores_without"] == record["scores_without"]
        assert result.scores == extra["scores"]
        assert result.predictions["validation"].student.shape == (24,)
        assert result.predictions["validation"].teacher is not None
    beta_one = [r for r in evaluated if r.trial.option("retrieval_beta") == 1.0]
    assert all(
        r.scores == r.extra["reaugkd"]["scores_without"] for r in beta_one
    )  # beta 1: the student alone
    # k = 1, beta = 0: the prediction is the nearest teacher embedding's soft label, whatever the student says
    nearest = next(
        r for r in evaluated if r.trial.option("retrieval_k") == 1 and r.trial.option("retrieval_beta") == 0.0
    )
    assert nearest.extra["reaugkd"]["settings"] == {"k": 1, "beta": 0.0, "tau": 0.07, "index": "hnsw"}

    # Run again: the head, the base and the student are read from the cache, never rebuilt
    base = kb_folder(record["knowledge_base"])
    stamp = (base / "kb.npz").stat().st_mtime_ns
    again = run_job([evaluations[1]], device="cpu")
    assert again[0].status == "done" and again[0].extra["reaugkd"]["knowledge_base_built"] is False
    assert again[0].scores == evaluated[1].scores
    assert (base / "kb.npz").stat().st_mtime_ns == stamp


def test_an_evaluation_of_a_student_not_trained_yet_is_refused_naming_it(teacher: str) -> None:
    evaluation = make_trial(teacher, reaugkd_evaluate=True, retrieval_k=2, reaugkd_head_epochs=3)
    (result,) = run_job([evaluation], device="cpu")
    key = student_trial(evaluation).trial_id
    assert result.status == "failed" and result.error_type == "StudentNotTrained"
    assert f"evaluates the trained student {key}, which is not there yet" in (result.error_message or "")
    assert not student_folder(key).exists()


def test_k_above_the_knowledge_base_fails_before_training(teacher: str) -> None:
    (result,) = run_job([make_trial(teacher, retrieval_k=65)], device="cpu")
    assert result.status == "failed" and result.curve == []
    assert "retrieval_k=65 is invalid; allowed: 1 to the knowledge base's size, 64 training examples" in (
        result.error_message or ""
    )


def test_a_student_trained_with_another_teacher_is_refused(teacher: str, tmp_path: Path) -> None:
    own = tmp_path / "teacher"
    shutil.copytree(teacher, own)
    trained = make_trial(str(own), seed=7)
    assert run_job([trained], device="cpu")[0].status == "done"
    model = BertForSequenceClassification.from_pretrained(own)
    with torch.no_grad():
        model.classifier.weight.add_(1.0)  # the teacher changes under the same path
    model.save_pretrained(own)
    (result,) = run_job([make_trial(str(own), seed=7, reaugkd_evaluate=True, retrieval_k=2)], device="cpu")
    assert result.status == "failed" and result.error_type == "StaleKnowledgeBase"
    assert "built for another teacher (built for " in (result.error_message or "")
