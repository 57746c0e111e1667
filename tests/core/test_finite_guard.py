"""The loss finiteness guard: no host read per step, the first diverged step and term named at the check."""

from __future__ import annotations

import math

import pytest
import torch

from kdgrid.core.model.shapes import StudentShape
from kdgrid.core.training.finite_guard import CHECK_EVERY_STEPS, FiniteGuard
from kdgrid.core.training.objective import DivergenceError, Objective, knowledge_terms
from kdgrid.trial import Trial

STUDENT = StudentShape(2, 8, 2, 16)
TEACHER = StudentShape(4, 12, 3, 24)


def objective() -> Objective:
    trial = Trial(
        task="synthetic-single-binary", teacher="t", student=STUDENT.name, knowledge=("cos",), beta=2.0
    )
    terms = knowledge_terms(trial, [(1, 2), (2, 4)], STUDENT, TEACHER)
    return Objective(trial, terms, STUDENT, TEACHER, regression=False)


def values(cos12: float = 0.2, cos24: float = 0.1) -> dict[str, torch.Tensor]:
    return {
        "soft": torch.tensor(0.5),
        "hard": torch.tensor(0.5),
        "cos@1-2": torch.tensor(cos12),
        "cos@2-4": torch.tensor(cos24),
    }


def observe(guard: FiniteGuard, target: Objective, step: int, **terms: float) -> None:
    v = values(**terms)
    guard.observe(v, target.total(v), step)


def test_observing_reads_nothing_back_to_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of these is a device -> host synchronisation on a GPU; the per-step path must use none."""
    target, guard = objective(), FiniteGuard(every=10)
    for name in ("item", "tolist", "__bool__", "__float__", "__int__", "cpu", "numpy"):
        monkeypatch.setattr(torch.Tensor, name, lambda *a, _n=name, **k: pytest.fail(f"Tensor.{_n} per step"))
    for step in range(1, 6):
        observe(guard, target, step, cos12=math.nan if step == 3 else 0.2)
    monkeypatch.undo()
    with pytest.raises(DivergenceError):
        guard.check(target, 5)


def test_the_check_names_the_first_diverged_step_term_and_pair_and_the_steps_it_covered() -> None:
    target, guard = objective(), FiniteGuard(every=10)
    for step in range(1, 11):  # finite, then cos@1-2 infinite at step 4, then everything NaN
        if step < 4:
            observe(guard, target, step)
        elif step == 4:
            observe(guard, target, step, cos12=math.inf)
        else:
            observe(guard, target, step, cos12=math.nan, cos24=math.nan)
        if guard.due(step):
            with pytest.raises(DivergenceError) as caught:
                guard.check(target, step)
    error = caught.value
    assert (error.step, error.term, error.pair, error.value) == (4, "cos@1-2", (1, 2), math.inf)
    assert str(error) == (
        "diverged at step 4: loss term 'cos@1-2' on layer pair (student 1, teacher 2) is inf "
        "(found by the finiteness check of steps 1-10)"
    )


def test_the_guard_refuses_what_check_finite_refuses_at_that_step() -> None:
    """The same term, pair and value as the per-step check on the diverged step's values (weights applied)."""
    target, guard = objective(), FiniteGuard(every=100)
    observe(guard, target, 2)
    target.betas["cos@2-4"] = 1e308  # a finite value, weighted to infinity from step 3 on
    diverged = values(cos24=10.0)
    with pytest.raises(DivergenceError) as direct:
        target.check_finite(diverged, target.total(diverged), step=3)
    guard.observe(diverged, target.total(diverged), 3)
    with pytest.raises(DivergenceError) as guarded:
        guard.check(target, 3)
    assert (guarded.value.step, guarded.value.term, guarded.value.pair) == (3, "cos@2-4", (2, 4))
    assert (direct.value.step, direct.value.term, direct.value.value) == (3, "cos@2-4", guarded.value.value)


def test_a_finite_run_passes_every_check_and_a_check_starts_a_new_range() -> None:
    target, guard = objective(), FiniteGuard(every=3)
    assert [s for s in range(1, 10) if guard.due(s)] == [3, 6, 9]
    for step in range(1, 7):
        observe(guard, target, step)
        if guard.due(step):
            guard.check(target, step)
    observe(guard, target, 7, cos12=math.nan)
    with pytest.raises(DivergenceError, match=r"step 7: .*check of steps 7-8\)$"):
        observe(guard, target, 8)
        guard.check(target, 8)
    guard.check(target, 8)  # nothing observed since: nothing to refuse
    with pytest.raises(ValueError, match="every must be at least 1"):
        FiniteGuard(every=0)
    assert CHECK_EVERY_STEPS > 1
