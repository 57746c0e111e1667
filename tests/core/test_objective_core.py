"""The objective (eq. 9): soft and hard terms by hand, weighting, auto calibration, terms per placement, a
method's per-term teacher features."""

from __future__ import annotations

import math

import pytest
import torch

from kdgrid.core.losses import compute_knowledge
from kdgrid.core.model.capture import Features
from kdgrid.core.model.shapes import StudentShape
from kdgrid.core.step_hooks import StepHooks
from kdgrid.core.training.objective import DivergenceError, Objective, knowledge_terms
from kdgrid.errors import ConfigError
from kdgrid.trial import Trial

STUDENT = StudentShape(2, 8, 2, 16)
TEACHER = StudentShape(4, 12, 3, 24)


def trial(**kw: object) -> Trial:
    return Trial(task="synthetic-single-binary", teacher="t", student=STUDENT.name, **kw)  # type: ignore[arg-type]


def features(logits: list[list[float]]) -> Features:
    z = torch.tensor(logits)
    return Features(logits=z, mask=torch.ones(z.shape[0], 3, dtype=torch.long), heads=2)


def test_soft_and_hard_terms_by_hand_and_their_weights() -> None:
    t = trial(temperature=2.0, alpha=0.5, soft_weight=1.0)
    objective = Objective(t, [], STUDENT, TEACHER, regression=False)
    student, teacher = features([[0.0, 0.0], [2.0, 0.0]]), features([[2.0, 0.0], [0.0, 0.0]])
    labels = torch.tensor([0, 1])
    values = objective.term_values(student, teacher, labels)
    # soft: -sum p_T log p_S at T = 2, averaged over the batch
    p1 = torch.softmax(torch.tensor([1.0, 0.0]), 0)
    expected_soft = (
        -(p1 * math.log(0.5)).sum() - (0.5 * torch.log_softmax(torch.tensor([1.0, 0.0]), 0)).sum()
    ) / 2
    assert values["soft"].item() == pytest.approx(expected_soft.item(), rel=1e-6)
    expected_hard = (math.log(2) + (-torch.log_softmax(torch.tensor([2.0, 0.0]), 0)[1]).item()) / 2
    assert values["hard"].item() == pytest.approx(expected_hard, rel=1e-6)
    assert objective.total(values).item() == pytest.approx(
        values["soft"].item() + 0.5 * values["hard"].item()
    )
    # soft_t2 multiplies the soft term by T^2 (Hinton's scaling, off by default as in the paper).
    t2 = Objective(trial(temperature=2.0, options={"soft_t2": True}), [], STUDENT, TEACHER, regression=False)
    assert t2.term_values(student, teacher, labels)["soft"].item() == pytest.approx(4 * values["soft"].item())


def test_a_hard_only_baseline_ignores_the_teacher_even_if_it_is_nan() -> None:
    objective = Objective(trial(soft_weight=0.0, alpha=1.0), [], STUDENT, TEACHER, regression=False)
    values = objective.term_values(features([[1.0, 0.0]]), features([[math.nan, 0.0]]), torch.tensor([0]))
    total = objective.total(values)
    assert total.item() == pytest.approx(values["hard"].item())
    objective.check_finite(values, total, step=1)  # no divergence: the soft term has weight 0


def test_regression_uses_mse() -> None:
    objective = Objective(trial(), [], STUDENT, TEACHER, regression=True)
    values = objective.term_values(
        features([[1.0], [3.0]]), features([[2.0], [3.0]]), torch.tensor([0.0, 5.0])
    )
    assert values["soft"].item() == pytest.approx(0.5) and values["hard"].item() == pytest.approx((1 + 4) / 2)


def test_terms_follow_each_knowledge_placement() -> None:
    pairs = [(1, 2), (2, 4)]
    names = [
        t.name
        for t in knowledge_terms(
            trial(knowledge=("cos", "embedding_mse", "soft_label")), pairs, STUDENT, TEACHER
        )
    ]
    assert names == ["cos@1-2", "cos@2-4", "embedding_mse@0-0"]
    terms = knowledge_terms(trial(knowledge=("attention_mse_sum",)), pairs, STUDENT, TEACHER)
    assert [t.projected for t in terms] == [False, False]
    assert all(
        t.projected for t in knowledge_terms(trial(knowledge=("hidden_mse",)), pairs, STUDENT, TEACHER)
    )
    # A projection is not needed when the widths agree, so projection 'none' is fine then.
    assert knowledge_terms(trial(knowledge=("hidden_mse",), projection="none"), pairs, STUDENT, STUDENT)
    with pytest.raises(
        ConfigError, match=r"needs a projection from the student's width 8 to the teacher's 12"
    ):
        knowledge_terms(trial(knowledge=("hidden_mse",), projection="none"), pairs, STUDENT, TEACHER)


def test_auto_calibration_and_divergence_reporting() -> None:
    t = trial(knowledge=("cos",), beta="auto")
    terms = knowledge_terms(t, [(1, 2), (2, 4)], STUDENT, TEACHER)
    objective = Objective(t, terms, STUDENT, TEACHER, regression=False)
    assert not objective.calibrated
    chosen = objective.calibrate({"soft": 0.7, "hard": 0.7, "cos@1-2": 0.35, "cos@2-4": 0.0})
    assert chosen == {"cos@1-2": pytest.approx(0.2), "cos@2-4": 1.0}  # a zero term keeps weight 1
    assert objective.calibrated and objective.weights()["cos@1-2"] == pytest.approx(0.2)
    values = {
        "soft": torch.tensor(0.5),
        "hard": torch.tensor(0.5),
        "cos@1-2": torch.tensor(math.inf),
        "cos@2-4": torch.tensor(0.1),
    }
    with pytest.raises(
        DivergenceError, match=r"step 7: loss term 'cos@1-2' on layer pair \(student 1, teacher 2\)"
    ):
        objective.check_finite(values, objective.total(values), step=7)


class KeepFirstDimensions(StepHooks):
    """A method's per-term target: each term reads the teacher's first ``width`` hidden dimensions."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.terms: list[str] = []

    def teacher_features(self, objective: object, term: object, features: dict) -> dict:
        self.terms.append(term.name)  # type: ignore[attr-defined]
        return {**features, "hidden": features["hidden"][..., : self.width]}


def test_a_methods_teacher_features_are_what_each_term_reads() -> None:
    t = trial(knowledge=("cka",))
    pairs = [(1, 2), (2, 4)]
    hook = KeepFirstDimensions(5)
    objective = Objective(t, knowledge_terms(t, pairs, STUDENT, TEACHER), STUDENT, TEACHER, regression=False,
                          hooks=[hook])  # fmt: skip
    generator = torch.Generator().manual_seed(0)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    s_hidden = [torch.randn(2, 4, STUDENT.width, generator=generator) for _ in range(3)]
    t_hidden = [torch.randn(2, 4, TEACHER.width, generator=generator) for _ in range(5)]
    kept = [h.clone() for h in t_hidden]
    student = Features(logits=torch.zeros(2, 2), mask=mask, heads=2, hidden=s_hidden)
    teacher = Features(logits=torch.zeros(2, 2), mask=mask, heads=3, hidden=t_hidden)
    values = objective.knowledge_values(student, teacher)
    assert hook.terms == ["cka@1-2", "cka@2-4"]
    for s_layer, t_layer in pairs:
        s_feats = {"hidden": s_hidden[s_layer]}
        expected = compute_knowledge("cka", s_feats, {"hidden": t_hidden[t_layer][..., :5]}, mask)
        whole = compute_knowledge("cka", s_feats, {"hidden": t_hidden[t_layer]}, mask)
        assert values[f"cka@{s_layer}-{t_layer}"].item() == pytest.approx(expected.item(), rel=1e-6)
        assert abs(expected.item() - whole.item()) > 1e-3  # the hook's target, not the whole hidden state
    # the job's shared teacher features are untouched
    assert all(torch.equal(a, b) for a, b in zip(t_hidden, kept, strict=True))
