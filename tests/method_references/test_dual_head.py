"""dual_head (sweeps/methods.yaml): the loss kdgrid puts on a dual-head student's distillation head against the
authors' BinaryKL-Norm."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from kdgrid.core.model.capture import Features
from kdgrid.core.model.shapes import StudentShape
from kdgrid.core.training.objective import Objective
from kdgrid.trial import Trial
from tests.method_references._numpy import draw
from tests.method_references.dual_head import binary_kl, binary_kl_norm
from tests.method_references.soft_labels import hard_loss, soft_loss

SHAPE = StudentShape(2, 8, 2, 16)
TEMPERATURE = 2.0  # the authors' BinaryKL_T


def logits_features(logits: np.ndarray, distill: np.ndarray | None = None) -> Features:
    batch = logits.shape[0]
    plain = Features(
        logits=torch.tensor(logits, dtype=torch.float32),
        mask=torch.ones(batch, 3, dtype=torch.long),
        heads=2,
        hidden=[torch.zeros(batch, 3, 8)],
    )
    if distill is None:
        return plain
    return dataclasses.replace(plain, distill_logits=torch.tensor(distill, dtype=torch.float32))


def dual_head_terms(
    **options: object,
) -> tuple[dict[str, torch.Tensor], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The sweep's dual_head cell (soft labels only, ``dual_head: true``) at the authors' temperature: kdgrid's
    terms, the task head's, the distillation head's and the teacher's logits, the labels."""
    trial = Trial(task="synthetic-single-binary", teacher="t", student=SHAPE.name, knowledge=(),
                  temperature=TEMPERATURE, alpha=0.1, options={"dual_head": True, **options})  # fmt: skip
    objective = Objective(trial, [], SHAPE, SHAPE, regression=False)
    task, distill, teacher = draw((6, 3), 0, 2.0), draw((6, 3), 1, 2.0), draw((6, 3), 2, 3.0)
    labels = np.array([0, 1, 2, 2, 1, 0])
    values = objective.term_values(
        logits_features(task, distill), logits_features(teacher), torch.tensor(labels)
    )
    return values, task, distill, teacher, labels


def test_the_binary_kl_references_behave_as_the_authors_losses() -> None:
    z = draw((4, 5), 3)
    assert binary_kl_norm(z, z, 2.0) == pytest.approx(0.0, abs=1e-12)
    assert binary_kl(z, z, 2.0) == pytest.approx(0.0, abs=1e-12)
    # BinaryKL-Norm depends on the logit differences only: a shift of both sides leaves it unchanged
    assert binary_kl_norm(z + 3.0, z + 1.0, 2.0) == pytest.approx(binary_kl_norm(z + 2.0, z, 2.0), rel=1e-12)
    # one class, student 1 logit above the teacher at T = 1: KL_bin(1/2 || sigma(1))
    q = 1 / (1 + np.exp(-1.0))
    by_hand = 0.5 * np.log(0.5 / q) + 0.5 * np.log(0.5 / (1 - q))
    assert binary_kl_norm(np.array([[1.0]]), np.array([[0.0]]), 1.0) == pytest.approx(by_hand, rel=1e-12)


def test_the_distillation_head_is_trained_with_binary_kl_norm() -> None:
    values, task, distill, teacher, labels = dual_head_terms()
    assert values["soft"].item() == pytest.approx(binary_kl_norm(distill, teacher, TEMPERATURE), rel=1e-5)
    assert values["hard"].item() == pytest.approx(hard_loss(task, labels), rel=1e-5)  # the task head


def test_dual_head_loss_binary_kl_is_the_authors_binary_kl() -> None:
    values, _, distill, teacher, _ = dual_head_terms(dual_head_loss="binary_kl")
    assert values["soft"].item() == pytest.approx(binary_kl(distill, teacher, TEMPERATURE), rel=1e-5)


def test_dual_head_loss_softmax_is_kdgrids_earlier_soft_label_loss_on_the_distillation_head() -> None:
    values, task, distill, teacher, labels = dual_head_terms(dual_head_loss="softmax")
    assert values["soft"].item() == pytest.approx(soft_loss(distill, teacher, TEMPERATURE), rel=1e-5)
    assert values["hard"].item() == pytest.approx(hard_loss(task, labels), rel=1e-5)
