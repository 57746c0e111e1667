"""The dual-head student: the soft loss reads the distillation head and only it, the hard loss the task head and
only it, the soft value matches one computed by hand from the pooled [CLS] vector, evaluation reads the task head,
and a dual-head trial trains, resumes and records the head's size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import BertForSequenceClassification

from kdgrid.core.methods.dual_head.heads import (
    DISTILL_HEAD,
    attach_distill_head,
    with_distill_logits,
)
from kdgrid.core.model.added_parts import deployed_parameter_count as own_parameter_count
from kdgrid.core.model.added_parts import save_deployed as save_student_model
from kdgrid.core.model.capture import FeatureCapture, Features
from kdgrid.core.model.models import bert_config
from kdgrid.core.model.shapes import StudentShape
from kdgrid.core.training.objective import Objective
from kdgrid.core.trial_rules import method_combination_problems as method_problems
from kdgrid.trial import Trial
from tests.core.test_train_methods import make_trial, run

SHAPE = StudentShape(layers=2, width=16, heads=2, ffn=32)


pytestmark = pytest.mark.usefixtures("deterministic_torch")  # bit-for-bit comparisons (tests/conftest.py)


def tiny_dual_head() -> BertForSequenceClassification:
    torch.manual_seed(0)
    model = BertForSequenceClassification(bert_config(SHAPE, 3, vocab_size=50))
    before = torch.get_rng_state()
    attach_distill_head(model, seed=5)
    assert torch.equal(before, torch.get_rng_state())  # the head draws from its own seeded state
    return model.eval()


def batch() -> dict[str, torch.Tensor]:
    ids = torch.tensor([[2, 7, 9, 11, 3], [2, 5, 3, 0, 0]])
    return {"input_ids": ids, "attention_mask": (ids != 0).long(), "labels": torch.tensor([0, 2])}


TEACHER_LOGITS = torch.tensor([[1.0, -1.0, 0.5], [0.0, 2.0, -2.0]])


def soft_case(
    **options: object,
) -> tuple[BertForSequenceClassification, Features, dict[str, torch.Tensor], np.ndarray, np.ndarray]:
    """A tiny dual-head student's loss terms at T = 2 against `TEACHER_LOGITS` on `batch`: the model, its features,
    the term values, and, computed by hand from the pooled [CLS] vector (eval mode: no dropout), the
    distillation head's and the task head's logits."""
    model = tiny_dual_head()
    trial = Trial("sst2", "bert-base", SHAPE.name, temperature=2.0, options={"dual_head": True, **options})
    objective = Objective(trial, [], SHAPE, SHAPE, regression=False)
    inputs = batch()
    features = with_distill_logits(model, FeatureCapture(model, frozenset({"logits"}), frozenset())(inputs))
    teacher = Features(logits=TEACHER_LOGITS, mask=inputs["attention_mask"], heads=2)
    values = objective.term_values(features, teacher, inputs["labels"])
    head, classifier = getattr(model, DISTILL_HEAD), model.classifier
    with torch.no_grad():
        pooled = model.bert(
            input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]
        ).pooler_output
        z_s = (pooled @ head.weight.T + head.bias).double().numpy()
        task_logits = (pooled @ classifier.weight.T + classifier.bias).double().numpy()
    return model, features, values, z_s, task_logits


def soft_ce_at_2(z_s: np.ndarray) -> np.ndarray:
    """Each example's soft cross-entropy at T = 2 of student logits ``z_s`` against `TEACHER_LOGITS`."""
    z_t = TEACHER_LOGITS.double().numpy()
    p_t = np.exp(z_t / 2) / np.exp(z_t / 2).sum(1, keepdims=True)
    log_p_s = z_s / 2 - np.log(np.exp(z_s / 2).sum(1, keepdims=True))
    return -(p_t * log_p_s).sum(1)


def binary_kl_norm_at_2(z_s: np.ndarray) -> float:
    """BinaryKL-Norm at T = 2 of the head's logits ``z_s`` against `TEACHER_LOGITS` (the authors' loss):
    ``T^2 / N sum_bc KL_bin(1/2 || sigmoid((z_s - z_t) / T))``."""
    q = 1 / (1 + np.exp(-(z_s - TEACHER_LOGITS.double().numpy()) / 2))
    return float(4 * (0.5 * np.log(0.5 / q) + 0.5 * np.log(0.5 / (1 - q))).sum() / len(z_s))


def test_the_distillation_head_learns_by_binary_kl_norm_unless_told_otherwise() -> None:
    model, _, values, z_s, _ = soft_case()
    assert values["soft"].item() == pytest.approx(binary_kl_norm_at_2(z_s), rel=1e-5)
    values["soft"].backward()
    assert model.classifier.weight.grad is None and getattr(model, DISTILL_HEAD).weight.grad is not None


def test_each_loss_reaches_its_own_head_and_the_soft_value_matches_a_hand_computation() -> None:
    model, features, values, z_s, task_logits = soft_case(dual_head_loss="softmax")
    head, classifier = getattr(model, DISTILL_HEAD), model.classifier
    np.testing.assert_allclose(features.logits.detach().double().numpy(), task_logits, rtol=1e-5, atol=1e-6)
    assert values["soft"].item() == pytest.approx(float(soft_ce_at_2(z_s).mean()), rel=1e-5)
    values["soft"].backward(retain_graph=True)
    assert classifier.weight.grad is None and head.weight.grad is not None
    assert model.bert.pooler.dense.weight.grad is not None  # the shared encoder learns from it
    head.weight.grad = None
    values["hard"].backward()
    assert classifier.weight.grad is not None and head.weight.grad is None
    assert own_parameter_count(model) == sum(p.numel() for p in model.parameters()) - (16 * 3 + 3)


@pytest.mark.parametrize("weighting", ["adakd_batchnorm", "teacher_loss"])
def test_per_example_weights_read_the_distillation_head_too(weighting: str) -> None:
    model, _, values, z_s, _ = soft_case(example_weight=weighting, dual_head_loss="softmax")
    head, classifier = getattr(model, DISTILL_HEAD), model.classifier
    # By hand: each example's soft CE from the distillation head's logits, weighted by a function of the
    # teacher's own cross-entropy on its gold label, the weights normalised to average 1.
    z_t, labels = TEACHER_LOGITS.double().numpy(), batch()["labels"].numpy()
    teacher_ce = np.log(np.exp(z_t).sum(1)) - z_t[np.arange(2), labels]
    raw = np.exp(-1 / np.sqrt(teacher_ce)) if weighting == "adakd_batchnorm" else teacher_ce
    expected = float((raw / raw.mean() * soft_ce_at_2(z_s)).mean())
    assert values["soft"].item() == pytest.approx(expected, rel=1e-5)
    values["soft"].backward()
    assert classifier.weight.grad is None  # the task head gets the hard loss only
    assert head.weight.grad is not None and head.weight.grad.abs().sum() > 0


def test_evaluation_reads_the_task_head_whatever_the_distillation_head_holds() -> None:
    from kdgrid.core.model.evaluate import predictions_of

    model = tiny_dual_head()
    with torch.no_grad():
        getattr(model, DISTILL_HEAD).weight.copy_(-model.classifier.weight * 100)
    inputs = batch()
    logits = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).logits
    features = with_distill_logits(model, Features(logits=logits, mask=inputs["attention_mask"], heads=2))
    task = predictions_of(logits, regression=False)
    assert not torch.equal(task, predictions_of(features.distill_logits, regression=False))
    with torch.no_grad():
        pooled = model.bert(
            input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]
        ).pooler_output
    assert torch.equal(task, (pooled @ model.classifier.weight.T + model.classifier.bias).argmax(-1))


def test_a_saved_dual_head_student_loads_back_as_a_plain_classifier_of_its_task_head(
    teacher: str, tmp_path: Path
) -> None:
    from kdgrid.core.model.models import load_checkpoint
    from kdgrid.core.model.shapes import resolve_teacher
    from kdgrid.core.training.student_export import save_student

    model = tiny_dual_head()
    with torch.no_grad():  # a distillation head far from the task head: the reloaded logits tell which was saved
        getattr(model, DISTILL_HEAD).weight.copy_(-model.classifier.weight * 100)
    inputs = batch()
    ids = {k: inputs[k] for k in ("input_ids", "attention_mask")}
    with torch.no_grad():
        task_logits = model(**ids).logits
        pooled = model.bert(**ids).pooler_output
    assert torch.allclose(task_logits, pooled @ model.classifier.weight.T + model.classifier.bias, atol=1e-6)
    digest = save_student(model, "t-dual", resolve_teacher(teacher, "sst2"), tmp_path / "student")
    loaded = load_checkpoint(str(tmp_path / "student"), 3, what="assistant", fresh_head=False)
    assert loaded.fresh_keys == () and not hasattr(loaded.model, DISTILL_HEAD)
    with torch.no_grad():
        assert torch.equal(loaded.model.eval()(**ids).logits, task_logits)
    assert len(digest) == 64
    # ReAugKD's and `kdgrid trial --save-student`'s path: the same helper, and a plain student is saved whole
    plain = BertForSequenceClassification(bert_config(SHAPE, 3, vocab_size=50)).eval()
    save_student_model(plain, tmp_path / "plain")
    reloaded = load_checkpoint(str(tmp_path / "plain"), 3, what="student", fresh_head=False).model.eval()
    with torch.no_grad():
        assert torch.equal(reloaded(**ids).logits, plain(**ids).logits)


def test_a_dual_head_needs_both_losses() -> None:
    base = {"task": "sst2", "teacher": "bert-base", "student": "bert-tiny", "options": {"dual_head": True}}
    assert method_problems(Trial(**base)) == []
    assert method_problems(Trial(**base, alpha=0.0)) == [
        "option dual_head gives the hard and the soft loss a head each: it needs alpha > 0 and soft_weight > 0 "
        "(here 0 and 1)"
    ]


def test_a_dual_head_trial_trains_in_a_group_and_records_the_head(teacher: str) -> None:
    dual = make_trial(teacher, options={"dual_head": True})
    plain = make_trial(teacher)
    (r_dual, r_plain), weights = run([dual, plain])
    assert r_dual.status == "done", r_dual.error_message
    assert r_dual.extra["distill_head_params"] == 32 * 2 + 2
    assert r_dual.student_params == r_plain.student_params  # the deployed student, without the head
    assert f"{DISTILL_HEAD}.weight" in weights[dual.trial_id]
    # The task head learns from the hard loss only: it differs from the plain student's, trained on both.
    assert not torch.equal(
        weights[dual.trial_id]["classifier.weight"], weights[plain.trial_id]["classifier.weight"]
    )
