"""Teacher-side loss targets shared by the students of a batch: same values and gradients as unshared, computed
once, keyed by tensor identity, dropped with the scope."""

from __future__ import annotations

import pytest
import torch

from kdgrid.core.knowledge import get_knowledge
from kdgrid.core.losses import compute_knowledge
from kdgrid.core.model.projection import Projection
from kdgrid.core.teacher.targets import TeacherTargets, shared_teacher_targets, teacher_side
from kdgrid.paper import PAPER_KNOWLEDGE

BATCH, LENGTH, WIDTH_S, WIDTH_T, HEADS_S, HEADS_T = 3, 5, 8, 48, 2, 4
# cka and the extra knowledge types beside the paper's ten, all computed from (student, teacher, mask).
KNOWLEDGE = (*PAPER_KNOWLEDGE, "cka", "embedding_mse")


def features(width: int, heads: int, seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    hidden = torch.randn(BATCH, LENGTH, width, generator=generator, dtype=torch.float64)
    return {
        "hidden": hidden,
        "embeddings": hidden,
        "query": torch.randn(BATCH, LENGTH, width, generator=generator, dtype=torch.float64),
        "key": torch.randn(BATCH, LENGTH, width, generator=generator, dtype=torch.float64),
        "value": torch.randn(BATCH, LENGTH, width, generator=generator, dtype=torch.float64),
        "scores": torch.randn(BATCH, heads, LENGTH, LENGTH, generator=generator, dtype=torch.float64),
    }


MASK = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 0, 0, 0]])


def loss_and_grads(
    name: str, student_seed: int, teacher: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """One student's loss and the gradients of its features and projection."""
    student = {k: v.clone().requires_grad_() for k, v in features(WIDTH_S, HEADS_S, student_seed).items()}
    torch.manual_seed(student_seed)
    projection = Projection(WIDTH_S, WIDTH_T).double()
    spec = get_knowledge(name)
    loss = compute_knowledge(
        name,
        student,
        teacher,
        MASK,
        projection=projection if spec.needs_projection else None,
        heads_s=HEADS_S,
        heads_t=HEADS_T,
    )
    inputs = [student[need] for need in sorted(spec.needs)] + list(projection.parameters())
    grads = torch.autograd.grad(loss, inputs, allow_unused=True)
    return loss.detach(), [g if g is not None else torch.zeros(()) for g in grads]


@pytest.mark.parametrize("name", KNOWLEDGE)
def test_students_reading_shared_targets_get_the_values_and_gradients_they_get_alone(name: str) -> None:
    teacher = features(WIDTH_T, HEADS_T, seed=99)
    alone = [loss_and_grads(name, seed, teacher) for seed in (1, 2, 3)]
    with shared_teacher_targets() as memo:
        shared = [loss_and_grads(name, seed, teacher) for seed in (1, 2, 3)]
    for (loss_a, grads_a), (loss_s, grads_s) in zip(alone, shared, strict=True):
        assert torch.equal(loss_a, loss_s)
        assert all(torch.equal(a, s) for a, s in zip(grads_a, grads_s, strict=True))
    # What the first student computed, the next two read: no entry was computed twice.
    assert memo.hits >= 2 * memo.misses


def test_the_teacher_targets_of_the_expensive_losses_are_computed_once() -> None:
    teacher = features(WIDTH_T, HEADS_T, seed=99)
    for name in ("gram", "mmd", "attention_ce_mean", "attention_mse_sum", "query_relation", "cos", "cka"):
        with shared_teacher_targets() as memo:
            for seed in range(4):
                loss_and_grads(name, seed, teacher)
        assert memo.misses >= 1, name
        assert memo.hits == 3 * memo.misses, name


def test_the_key_is_the_tensor_not_its_value() -> None:
    calls: list[int] = []
    first = torch.ones(3)
    twin = torch.ones(3)  # equal values, another tensor: another entry

    def compute() -> torch.Tensor:
        calls.append(1)
        return first * 2

    with shared_teacher_targets() as memo:
        teacher_side(("double",), (first,), compute)
        teacher_side(("double",), (first,), compute)
        teacher_side(("double",), (twin,), compute)
        teacher_side(("triple",), (first,), compute)
    assert len(calls) == 3 and len(memo) == 3 and memo.hits == 1


def test_no_scope_no_memo_and_a_memo_can_be_reentered() -> None:
    calls: list[int] = []
    tensor = torch.zeros(2)

    def compute() -> torch.Tensor:
        calls.append(1)
        return tensor + 1

    teacher_side(("plus one",), (tensor,), compute)
    teacher_side(("plus one",), (tensor,), compute)
    assert len(calls) == 2  # outside a scope, every call computes
    memo = TeacherTargets()
    with shared_teacher_targets(memo):
        teacher_side(("plus one",), (tensor,), compute)
    with shared_teacher_targets(memo):
        value = teacher_side(("plus one",), (tensor,), compute)
    assert len(calls) == 3 and torch.equal(value, torch.ones(2))


def test_targets_carry_no_autograd_graph() -> None:
    teacher = torch.randn(2, 3, requires_grad=True)
    with shared_teacher_targets():
        target = teacher_side(("square",), (teacher,), lambda: teacher * teacher)
    assert not target.requires_grad
