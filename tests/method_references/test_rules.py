"""all_to_one, temperature_cosine, assistant and via_assistant (sweeps/methods.yaml) against their papers' rules;
lkd's reference is tests/core/test_lkd.py (its hypergradient against autograd through the lookahead)."""

from __future__ import annotations

import pytest
import torch

from kdgrid.core.matching import layer_pairs
from kdgrid.core.model.capture import Features
from kdgrid.core.model.shapes import StudentShape, student_shape
from kdgrid.core.training.objective import Objective
from kdgrid.grid import load_sweep
from kdgrid.trial import Trial
from tests.method_references._numpy import draw
from tests.method_references.schedules_and_mappings import all_to_one_pairs, cosine_temperature
from tests.method_references.soft_labels import soft_loss
from tests.sweep_studies import trials_of

SHAPE = StudentShape(2, 8, 2, 16)


@pytest.mark.parametrize(("student", "teacher"), [(2, 6), (4, 12), (3, 3)])
def test_all_to_one_matches_every_student_layer_with_the_last_teacher_layer(
    student: int, teacher: int
) -> None:
    assert layer_pairs("All-to-one", student, teacher) == all_to_one_pairs(student, teacher)


def test_the_cosine_temperature_curriculum_is_the_half_cosine_from_start_to_end() -> None:
    trial = Trial(task="synthetic-single-binary", teacher="t", student=SHAPE.name, knowledge=(), temperature=4.0,
                  options={"temperature_schedule": "cosine", "temperature_end": 1})  # fmt: skip
    objective = Objective(trial, [], SHAPE, SHAPE, regression=False)
    student, teacher = draw((4, 2), 0), draw((4, 2), 1, 3.0)
    features = [
        Features(
            logits=torch.tensor(z, dtype=torch.float32),
            mask=torch.ones(4, 3, dtype=torch.long),
            heads=2,
            hidden=[torch.zeros(4, 3, 8)],
        )
        for z in (student, teacher)
    ]
    steps = 189
    for step in (0, 1, 47, 94, 150, 188):
        objective.set_progress(step, steps)
        expected = cosine_temperature(step, steps, 4.0, 1.0)
        assert objective.temperature == pytest.approx(expected, rel=1e-12)
        value = objective.term_values(*features, torch.tensor([0, 1, 1, 0]))["soft"].item()
        assert value == pytest.approx(soft_loss(student, teacher, expected), rel=1e-5)
    assert cosine_temperature(0, steps, 4.0, 1.0) == 4.0 and cosine_temperature(188, steps, 4.0, 1.0) == 1.0


def test_the_assistant_chain_distils_the_student_from_the_assistant_of_its_seed() -> None:
    sweep = load_sweep("sweeps/methods.yaml")
    assistants, students = trials_of(sweep, "assistant"), trials_of(sweep, "via_assistant")
    assert len(assistants) == len(students) == 5
    for assistant, student in zip(assistants, students, strict=True):
        # the teacher -> assistant -> student chain, each step plain KD (soft and hard labels only)
        assert (assistant.teacher, assistant.student, assistant.knowledge) == ("minilm-l6", "bert-mini", ())
        assert student.teacher == f"trial:{assistant.trial_id}" and student.student == "bert-tiny"
        assert student.knowledge == () and student.seed == assistant.seed
    tiny, mini = student_shape("bert-tiny"), student_shape("bert-mini")
    assert (tiny.layers, tiny.width) < (mini.layers, mini.width)  # the assistant sits between the two
