"""dot (sweeps/methods.yaml): kdgrid's DOT optimizer against the authors' update (mdistiller), step by step."""

from __future__ import annotations

import torch

from kdgrid.core.methods.dot.optimizer import DOT
from tests.method_references.dot import ReferenceDOT

LR, MU, DELTA, WD = 0.05, 0.9, 0.075, 5e-4


def gradients(step: int, shapes: list[tuple[int, ...]]) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(100 + step)
    return [torch.randn(shape, generator=generator, dtype=torch.float64) for shape in shapes]


def run_both(
    task_side: list[bool], distill_side: list[bool], steps: int = 4, form: str = "paper"
) -> tuple[list, list]:
    """kdgrid's DOT and the reference from the same start over ``steps`` steps; parameter i has a task gradient
    where ``task_side[i]`` and a distillation gradient where ``distill_side[i]``."""
    shapes = [(3, 2)] * len(task_side)
    start = gradients(0, shapes)
    ours = [torch.nn.Parameter(p.clone()) for p in start]
    theirs = [p.clone() for p in start]
    optimizer = DOT([{"params": ours, "weight_decay": WD}], lr=LR, momentum=MU, delta=DELTA, form=form)
    reference = ReferenceDOT(theirs, lr=LR, mu=MU, delta=DELTA, wd=WD)
    for step in range(1, steps + 1):
        g_task = [g if side else None for g, side in zip(gradients(2 * step, shapes), task_side, strict=True)]
        g_kd = [
            g if side else None for g, side in zip(gradients(2 * step + 1, shapes), distill_side, strict=True)
        ]
        optimizer.set_gradients(ours, g_task, g_kd)
        optimizer.step()
        reference.step(g_task, g_kd)
    return [p.detach() for p in ours], theirs


def test_a_parameter_with_both_gradients_steps_as_the_authors_dot() -> None:
    ours, theirs = run_both([True, True], [True, True])
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    # and DOT is not plain SGD: with Delta = 0 the two momenta coincide and the step differs
    assert not torch.allclose(ours[0], run_with_delta_zero()[0])


def run_with_delta_zero() -> list[torch.Tensor]:
    shapes = [(3, 2)] * 2
    params = [torch.nn.Parameter(p.clone()) for p in gradients(0, shapes)]
    optimizer = DOT([{"params": params, "weight_decay": WD}], lr=LR, momentum=MU, delta=0.0)
    for step in range(1, 5):
        optimizer.set_gradients(params, gradients(2 * step, shapes), gradients(2 * step + 1, shapes))
        optimizer.step()
    return [p.detach() for p in params]


def test_a_parameter_with_one_gradient_steps_as_the_authors_dot() -> None:
    ours, theirs = run_both([True, False], [False, True])
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_dot_form_kdgrid_steps_a_one_sided_parameter_by_kdgrids_earlier_rule() -> None:
    """``dot_form: kdgrid``: the missing side counts as zero (both buffers kept, decay on the task side)."""
    ours, _ = run_both([False], [True], steps=3, form="kdgrid")
    p = gradients(0, [(3, 2)])[0]
    v_task, v_kd = torch.zeros_like(p), torch.zeros_like(p)
    for step in range(1, 4):
        g_kd = gradients(2 * step + 1, [(3, 2)])[0]
        v_task = (MU - DELTA) * v_task + WD * p
        v_kd = (MU + DELTA) * v_kd + g_kd
        p = p - LR * (v_task + v_kd)
    torch.testing.assert_close(ours[0], p, rtol=1e-12, atol=1e-12)
