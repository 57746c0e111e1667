"""adakd (sweeps/methods.yaml): kdgrid's ``example_weight: adakd`` against AdaKD's per-instance trade-off."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kdgrid.core.model.capture import Features
from kdgrid.core.model.shapes import StudentShape
from kdgrid.core.training.objective import Objective
from kdgrid.trial import Trial
from tests.method_references._numpy import draw, log_softmax, softmax
from tests.method_references.adakd import adakd_alpha, adakd_loss, teacher_difficulty

SHAPE = StudentShape(2, 8, 2, 16)


def logits_features(logits: np.ndarray) -> Features:
    batch = logits.shape[0]
    return Features(
        logits=torch.tensor(logits, dtype=torch.float32),
        mask=torch.ones(batch, 3, dtype=torch.long),
        heads=2,
        hidden=[torch.zeros(batch, 3, 8)],
    )


def adakd_cell(
    weight: str = "adakd", alpha: float = 0.1
) -> tuple[Objective, dict[str, torch.Tensor], np.ndarray, np.ndarray, np.ndarray]:
    """The sweep's adakd cell (soft labels only, alpha 0.1, T = 1, ``example_weight: adakd``) on one batch."""
    trial = Trial(task="synthetic-single-binary", teacher="t", student=SHAPE.name, knowledge=(), alpha=alpha,
                  temperature=1.0, options={"example_weight": weight})  # fmt: skip
    objective = Objective(trial, [], SHAPE, SHAPE, regression=False)
    student, teacher = draw((6, 2), 0), draw((6, 2), 1, 3.0)
    labels = np.array([0, 1, 1, 0, 1, 0])
    values = objective.term_values(logits_features(student), logits_features(teacher), torch.tensor(labels))
    return objective, values, student, teacher, labels


def test_the_difficulty_weight_is_adakds() -> None:
    assert adakd_alpha(np.array([1.0]))[0] == pytest.approx(np.exp(-1.0))
    assert adakd_alpha(np.array([0.0]))[0] == 0.0
    assert np.all(np.diff(adakd_alpha(np.array([0.01, 0.1, 1.0, 4.0]))) > 0)  # grows with the teacher's loss


def test_adakd_batchnorm_is_kdgrids_earlier_batch_normalised_soft_term_weight() -> None:
    objective, values, student, teacher, labels = adakd_cell("adakd_batchnorm")
    raw = adakd_alpha(teacher_difficulty(teacher, labels))
    weights = raw / raw.mean()
    per_example = -(softmax(teacher) * log_softmax(student)).sum(axis=1)
    assert values["soft"].item() == pytest.approx(float((weights * per_example).mean()), rel=1e-5)
    hard = float(-log_softmax(student)[np.arange(6), labels].mean())
    assert values["hard"].item() == pytest.approx(hard, rel=1e-5)  # unweighted, at the trial's alpha
    assert objective.total(values).item() == pytest.approx(values["soft"].item() + 0.1 * hard, rel=1e-5)


def test_the_objective_is_adakds_per_instance_trade_off() -> None:
    """At the paper's weights (soft_weight = alpha = 1) the total is AdaKD's loss; the sweep's alpha 0.1 scales
    the traded hard term."""
    objective, values, student, teacher, labels = adakd_cell(alpha=1.0)
    assert objective.total(values).item() == pytest.approx(
        adakd_loss(student, teacher, labels, 1.0), rel=1e-5
    )
    objective, values, student, teacher, labels = adakd_cell(alpha=0.1)
    alpha = adakd_alpha(teacher_difficulty(teacher, labels))
    soft = -(softmax(teacher) * log_softmax(student)).sum(axis=1)
    hard = -log_softmax(student)[np.arange(6), labels]
    assert values["soft"].item() == pytest.approx(float((alpha * soft).mean()), rel=1e-5)
    assert values["hard"].item() == pytest.approx(float(((1 - alpha) * hard).mean()), rel=1e-5)
