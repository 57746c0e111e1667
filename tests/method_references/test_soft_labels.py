"""soft_labels (sweeps/methods.yaml): kdgrid's soft and hard terms against Hinton et al.'s soft targets."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kdgrid.core.model.capture import Features
from kdgrid.core.model.shapes import StudentShape
from kdgrid.core.training.objective import Objective
from kdgrid.trial import Trial
from tests.method_references._numpy import draw
from tests.method_references.soft_labels import hard_loss, soft_loss

SHAPE = StudentShape(2, 8, 2, 16)


def logits_features(logits: np.ndarray) -> Features:
    batch = logits.shape[0]
    return Features(
        logits=torch.tensor(logits, dtype=torch.float32),
        mask=torch.ones(batch, 3, dtype=torch.long),
        heads=2,
        hidden=[torch.zeros(batch, 3, 8)],
    )


@pytest.mark.parametrize("temperature", [1.0, 4.0])
@pytest.mark.parametrize("t2", [False, True])
def test_the_soft_and_hard_terms_are_hintons(temperature: float, t2: bool) -> None:
    student, teacher = draw((5, 3), 0, 2.0), draw((5, 3), 1, 3.0)
    labels = np.array([0, 2, 1, 1, 0])
    options = {"soft_t2": True} if t2 else {}
    trial = Trial(task="synthetic-single-binary", teacher="t", student=SHAPE.name, temperature=temperature,
                  knowledge=(), options=options)  # fmt: skip
    objective = Objective(trial, [], SHAPE, SHAPE, regression=False)
    values = objective.term_values(logits_features(student), logits_features(teacher), torch.tensor(labels))
    assert values["soft"].item() == pytest.approx(soft_loss(student, teacher, temperature, t2), rel=1e-5)
    assert values["hard"].item() == pytest.approx(hard_loss(student, labels), rel=1e-5)
    # the soft loss is smallest where the student copies the teacher (a check of the reference itself)
    assert soft_loss(teacher, teacher, temperature) < soft_loss(student, teacher, temperature)
