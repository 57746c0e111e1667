"""ReAugKD's parts against hand-computed tiny cases: the supervised contrastive loss, the retrieval mix, HNSW
search against exact search, the head's training, the knowledge base's cache and identity, the option rules."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from kdgrid.core.methods.reaugkd import pipeline
from kdgrid.core.methods.reaugkd.knowledge_base import (
    KBIdentity,
    StaleKnowledgeBase,
    build_knowledge_base,
    cached_knowledge_base,
    check_identity,
    exact_search,
    kb_folder,
    normalize_rows,
    open_knowledge_base,
    recall_at_k,
    save_knowledge_base,
)
from kdgrid.core.methods.reaugkd.pipeline import label_order_identity
from kdgrid.core.methods.reaugkd.projection_head import HeadSettings, TeacherPass, cached_or_trained_head
from kdgrid.core.methods.reaugkd.retrieval import retrieval_mix
from kdgrid.core.methods.reaugkd.spec import student_trial
from kdgrid.core.methods.reaugkd.supcon import supcon_loss
from kdgrid.core.teacher.label_order import LabelOrder
from kdgrid.core.trial_rules import value_problems
from kdgrid.errors import ConfigError
from kdgrid.trial import Trial


def test_supcon_loss_by_hand() -> None:
    # unit vectors; sims z1.z2 = 0.6, z1.z3 = -1, z2.z3 = -0.6; labels 0, 0, 1 (anchor 3 has no positive)
    z = torch.tensor([[1.0, 0.0], [0.6, 0.8], [-1.0, 0.0]])
    labels = torch.tensor([0, 0, 1])
    for tau in (1.0, 0.5):
        l1 = -math.log(math.exp(0.6 / tau) / (math.exp(0.6 / tau) + math.exp(-1 / tau)))
        l2 = -math.log(math.exp(0.6 / tau) / (math.exp(0.6 / tau) + math.exp(-0.6 / tau)))
        expected = (l1 + l2) / 2
        assert supcon_loss(z, labels, tau).item() == pytest.approx(expected, rel=1e-6)
        assert supcon_loss(3 * z, labels, tau).item() == pytest.approx(expected, rel=1e-6)  # normalised first


def test_supcon_loss_averages_each_anchors_positives() -> None:
    # anchor 1 has two positives (2 and 3) and one negative (4); tau 1
    z = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8], [-1.0, 0.0]])
    labels = torch.tensor([0, 0, 0, 1])
    sims = (z / z.norm(dim=1, keepdim=True)) @ (z / z.norm(dim=1, keepdim=True)).T
    total = 0.0
    for i in range(3):  # anchors with a positive
        others = [a for a in range(4) if a != i]
        log_denominator = math.log(sum(math.exp(sims[i, a].item()) for a in others))
        positives = [p for p in range(3) if p != i]
        total += -sum(sims[i, p].item() - log_denominator for p in positives) / len(positives)
    assert supcon_loss(z, labels, 1.0).item() == pytest.approx(total / 3, rel=1e-6)


def test_supcon_loss_refusals_and_no_positive() -> None:
    assert supcon_loss(torch.eye(3), torch.tensor([0, 1, 2])).item() == 0.0
    with pytest.raises(ConfigError, match="tau must be > 0"):
        supcon_loss(torch.eye(2), torch.tensor([0, 0]), 0.0)
    with pytest.raises(ConfigError, match=r"\[N, d\]"):
        supcon_loss(torch.eye(2), torch.tensor([0, 0, 1]))


def test_retrieval_mix_by_hand() -> None:
    student = np.array([[0.8, 0.2]])
    sims = np.array([[0.5, 0.1]])
    neighbours = np.array([[[0.0, 1.0], [1.0, 0.0]]])
    beta, tau = 0.25, 0.5
    w1 = math.exp(0.5 / tau) / (math.exp(0.5 / tau) + math.exp(0.1 / tau))
    w2 = 1 - w1
    expected = [0.25 * 0.8 + 0.75 * w2, 0.25 * 0.2 + 0.75 * w1]
    got = retrieval_mix(student, sims, neighbours, beta, tau)
    np.testing.assert_allclose(got, [expected], rtol=1e-12)
    np.testing.assert_allclose(retrieval_mix(student, sims, neighbours, 1.0, tau), student)  # beta 1: student
    assert got.sum() == pytest.approx(1.0)
    with pytest.raises(ConfigError, match=r"beta must be in \[0, 1\]"):
        retrieval_mix(student, sims, neighbours, 1.5, tau)


def _identity(**changes: str) -> KBIdentity:
    fields = dict(teacher="t" * 8, head="h" * 8, task="polarity", train_split="s" * 8, tokenizer="v" * 8)
    return KBIdentity(**{**fields, **changes})


def test_hnsw_equals_exact_search_on_a_small_base() -> None:
    rng = np.random.default_rng(0)
    base = rng.standard_normal((300, 16)).astype(np.float32)
    kb, _ = build_knowledge_base(base, np.full((300, 2), 0.5, np.float32), _identity())
    queries = normalize_rows(rng.standard_normal((25, 16)))
    approx_sims, approx_ids = kb.search(queries, 10)
    exact_sims, exact_ids = kb.search(queries, 10, exact=True)
    assert recall_at_k(approx_ids, exact_ids) == 1.0
    np.testing.assert_array_equal(approx_ids, exact_ids)
    np.testing.assert_allclose(approx_sims, exact_sims, rtol=1e-5, atol=1e-6)
    # the exact search is the brute-force definition
    brute = normalize_rows(base) @ queries.T
    assert exact_ids[0].tolist() == np.argsort(-brute[:, 0])[:10].tolist()
    with pytest.raises(
        ConfigError, match="retrieval_k=301 is invalid; allowed: 1 to the knowledge base's size, 300"
    ):
        kb.search(queries, 301)


def test_exact_search_and_recall_by_hand() -> None:
    base = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], np.float32)
    sims, ids = exact_search(base, np.array([[0.8, 0.6]], np.float32), 2)
    assert ids.tolist() == [[2, 0]] and sims[0].tolist() == pytest.approx([0.96, 0.8])
    assert recall_at_k(np.array([[2, 1]]), ids) == 0.5


def test_knowledge_base_cache_round_trip_and_stale_refusal(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path))
    identity = _identity()
    assert cached_knowledge_base(identity) is None
    rng = np.random.default_rng(1)
    kb, _ = build_knowledge_base(rng.standard_normal((40, 8)), rng.dirichlet([1, 1], 40), identity)
    folder = save_knowledge_base(kb)
    assert folder == kb_folder(identity.key())
    loaded = cached_knowledge_base(identity)
    assert loaded is not None and len(loaded) == 40
    np.testing.assert_array_equal(loaded.embeddings, kb.embeddings)
    np.testing.assert_array_equal(loaded.search(kb.embeddings[:3], 1)[1][:, 0], [0, 1, 2])
    for field in ("teacher", "head", "task", "train_split", "tokenizer", "label_order"):
        other = _identity(**{field: "other"})
        with pytest.raises(
            StaleKnowledgeBase, match=rf"built for another {field} \(built for .*, expected other\)"
        ):
            open_knowledge_base(folder, other)


class _Recomputed(Exception):
    """Raised where the teacher pass would run the teacher: the memo was not used."""


class _FakeJob:
    """What `job_identity` and `teacher_pass` read of a job before running the teacher (whose model raises)."""

    def __init__(self, label_order: LabelOrder | None) -> None:
        self.label_order = label_order
        self.teacher = SimpleNamespace(source="teacher-dir")
        self.task = SimpleNamespace(name="mnli")
        self.tokenized = {"train": "the train split"}

    @property
    def teacher_model(self) -> None:
        raise _Recomputed


def test_the_teacher_label_order_is_part_of_the_knowledge_base_identity(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(pipeline, "base_digest", lambda source: "t" * 8)
    monkeypatch.setattr(pipeline, "tokenizer_digest", lambda job: "v" * 8)
    monkeypatch.setattr(pipeline, "_split_fingerprint", lambda split: "s" * 8)
    names = ("entailment", "neutral", "contradiction")
    wrong = LabelOrder(order=(0, 1, 2), basis="config", label_names=names)
    fixed = LabelOrder(order=(2, 0, 1), basis="declared", label_names=names)
    assert label_order_identity(None) == label_order_identity(wrong) == "identity"  # both leave the logits as they are
    assert label_order_identity(fixed) == "contradiction,entailment,neutral"  # the task label of each teacher output

    old, new = _FakeJob(wrong), _FakeJob(fixed)
    old_identity, new_identity = pipeline.job_identity(old), pipeline.job_identity(new)
    assert {k for k in old_identity if old_identity[k] != new_identity[k]} == {"label_order"}
    old_kb, new_kb = (KBIdentity(head="h" * 8, **identity) for identity in (old_identity, new_identity))
    assert old_kb.key() != new_kb.key()  # a corrected order names another knowledge base on disk
    with pytest.raises(StaleKnowledgeBase, match=r"built for another label_order \(built for identity, expected "):
        check_identity(old_kb, new_kb)

    # the in-process memo of the teacher pass: reused for the same identity, not across label orders
    memo = TeacherPass(np.zeros((1, 2)), np.full((1, 3), 1 / 3), np.zeros(1, np.int64), old_identity)
    monkeypatch.setattr(pipeline, "_LAST_PASS", {json.dumps(old_identity, sort_keys=True): memo})
    assert pipeline.teacher_pass(_FakeJob(wrong)) is memo
    with pytest.raises(_Recomputed):
        pipeline.teacher_pass(new)


def test_projection_head_trains_separates_classes_and_is_cached(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path))
    rng = np.random.default_rng(2)
    labels = np.repeat([0, 1], 32)
    sentence = rng.standard_normal((64, 12)).astype(np.float32)
    sentence[:, 0] += 2.0 * labels  # class information in one direction among noise
    passed = TeacherPass(sentence, np.full((64, 2), 0.5, np.float32), labels, {"teacher": "x"})
    settings = HeadSettings(out_width=4, epochs=15, lr=1e-2, batch_size=32)
    state = torch.get_rng_state()
    passes: list[int] = []

    def teacher_pass() -> TeacherPass:
        passes.append(1)
        return passed

    head, trained = cached_or_trained_head(passed.identity, settings, teacher_pass)
    assert trained and torch.equal(state, torch.get_rng_state())  # the caller's random stream untouched
    losses = head.info["epoch_losses"]
    assert losses[-1] < losses[0]
    again, trained_again = cached_or_trained_head(passed.identity, settings, teacher_pass)
    assert not trained_again and torch.equal(again.weight, head.weight)
    assert passes == [1]  # a cached head needs no teacher pass
    z = head(torch.from_numpy(sentence))
    assert z.shape == (64, 4)


def _trial(**options: object) -> Trial:
    # reaug_relation: the knowledge that reads the head's output (the head is refused without it)
    return Trial(
        task="polarity", teacher="minilm-l6", student="bert-tiny", knowledge=("reaug_relation",), strategy="Last-1",
        options=options,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"reaugkd_head": True, "retrieval_k": 5, "retrieval_beta": 1.5},
            r"retrieval_beta=1.5 is invalid; allowed: a number in \[0, 1\]",
        ),
        ({"reaugkd_head": True, "retrieval_k": 5, "retrieval_beta": -0.1}, r"retrieval_beta=-0.1 is invalid"),
        ({"reaugkd_head": True, "retrieval_k": 0}, r"retrieval_k=0 is invalid; allowed: an integer >= 1"),
        ({"retrieval_k": 5}, "retrieval_k needs reaugkd_head: true"),
        ({"retrieval_beta": 0.5}, "retrieval_beta need retrieval_k"),
        ({"reaugkd_head": True, "retrieval_k": 5, "retrieval_index": "ivf"}, "allowed: hnsw, exact"),
        ({"reaugkd_head_tau": 0.1}, "reaugkd_head_tau need reaugkd_head: true"),
    ],
)
def test_bad_retrieval_options_are_refused(options: dict[str, object], message: str) -> None:
    problems = value_problems(_trial(**options))
    assert any(__import__("re").search(message, p) for p in problems), problems


def test_k_above_the_training_subset_and_regression_are_refused() -> None:
    trial = Trial(
        task="polarity",
        teacher="minilm-l6",
        student="bert-tiny",
        max_train_samples=8,
        options={"reaugkd_head": True, "retrieval_k": 9},
    )
    assert any(
        "retrieval_k=9 is invalid; allowed: at most the knowledge base's size, 8" in p
        for p in value_problems(trial)
    )
    regression = Trial(
        task="stsb",
        teacher="minilm-l6",
        student="bert-tiny",
        options={"reaugkd_head": True, "retrieval_k": 5},
    )
    assert any("'stsb' is a regression task" in p for p in value_problems(regression))
    assert value_problems(_trial(reaugkd_head=True, retrieval_k=5, retrieval_beta=0.0)) == []


def test_an_evaluation_trial_names_the_student_trained_without_its_evaluation_options() -> None:
    trained = _trial(reaugkd_head=True)
    evaluation = _trial(reaugkd_head=True, retrieval_k=3, retrieval_beta=0.2, reaugkd_evaluate=True)
    assert student_trial(evaluation).trial_id == trained.trial_id
    assert student_trial(_trial(reaugkd_head=True, retrieval_k=7)).trial_id == trained.trial_id
