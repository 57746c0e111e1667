"""fixed_hidden, projector_mlp and best_fixed (sweeps/methods.yaml): kdgrid's ``hidden_mse`` and
``value_relation`` terms against TinyBERT's and MiniLMv2's formulas."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kdgrid.core.model.capture import Features
from kdgrid.core.model.shapes import StudentShape
from kdgrid.core.training.objective import Objective, knowledge_terms
from kdgrid.trial import Trial
from tests.method_references._numpy import draw
from tests.method_references.hidden_states import hidden_mse, value_relation

STUDENT = StudentShape(2, 4, 2, 8)
TEACHER = StudentShape(3, 8, 4, 16)


def features(hidden: list[np.ndarray], value: list[np.ndarray] | None = None, heads: int = 2) -> Features:
    batch, length = hidden[0].shape[:2]
    as_tensor = [torch.tensor(h, dtype=torch.float32) for h in hidden]
    return Features(
        logits=torch.zeros(batch, 2),
        mask=torch.ones(batch, length, dtype=torch.long),
        heads=heads,
        hidden=as_tensor,
        value=None if value is None else [torch.tensor(v, dtype=torch.float32) for v in value],
    )


def test_hidden_mse_is_tinyberts_mse_through_the_projection() -> None:
    trial = Trial(task="synthetic-single-binary", teacher="t", student=STUDENT.name, knowledge=("hidden_mse",),
                  strategy="Last-1", beta=1.0)  # fmt: skip
    terms = knowledge_terms(trial, [(1, 2)], STUDENT, TEACHER)
    objective = Objective(trial, terms, STUDENT, TEACHER, regression=False)
    hidden_s = [draw((3, 5, 4), s) for s in range(3)]
    hidden_t = [draw((3, 5, 8), 10 + s) for s in range(4)]
    (projection,) = objective.projections.values()
    weight = projection.net.weight.detach().double().numpy()
    bias = projection.net.bias.detach().double().numpy() + 0.0
    values = objective.knowledge_values(features(hidden_s), features(hidden_t, heads=4))
    expected = hidden_mse(hidden_s[1], hidden_t[2], weight, bias)
    assert values["hidden_mse@1-2"].item() == pytest.approx(expected, rel=1e-5)


def test_value_relation_is_minilmv2s() -> None:
    trial = Trial(task="synthetic-single-binary", teacher="t", student=STUDENT.name,
                  knowledge=("value_relation",), strategy="Last-1", beta=1.0)  # fmt: skip
    terms = knowledge_terms(trial, [(2, 3)], STUDENT, TEACHER)
    objective = Objective(trial, terms, STUDENT, TEACHER, regression=False)
    hidden_s, hidden_t = [draw((2, 6, 4), s) for s in range(3)], [draw((2, 6, 8), 5 + s) for s in range(4)]
    value_s, value_t = (
        [draw((2, 6, 4), 20 + s) for s in range(3)],
        [draw((2, 6, 8), 30 + s) for s in range(4)],
    )
    values = objective.knowledge_values(features(hidden_s, value_s), features(hidden_t, value_t, heads=4))
    # R defaults to the student's head count (2): the teacher's 8 wide values are re-split into 2 heads of 4
    expected = value_relation(value_s[2], value_t[3], relation_heads=2)
    assert values["value_relation@2-3"].item() == pytest.approx(expected, rel=1e-5)
    assert value_relation(value_t[3], value_t[3], 2) == pytest.approx(0.0, abs=1e-12)
