"""DOT and the task/distillation gradient cosine: the optimizer against its update written out by hand, the
cosine against hand-derived gradients of a tiny linear model, the sampled batches, and both through run_job."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from kdgrid.core.methods.dot.optimizer import DOT
from kdgrid.core.methods.grad_split.split import (
    gradient_cosine,
    sampled_batches,
    split_gradients,
    task_and_distillation,
)
from kdgrid.core.optim import build_optimizer

torch.set_num_threads(1)


def test_dot_keeps_separate_momenta_as_written_by_hand() -> None:
    """Two steps of DOT on a 2x3 weight (decayed) and a bias (not), against mu -+ Delta momenta in numpy (the
    bias, task gradient only, under ``dot_form: kdgrid``: its missing distillation gradient counts as zero)."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(3, 2)
    w0, b0 = layer.weight.detach().double().numpy().copy(), layer.bias.detach().double().numpy().copy()
    optimizer, _ = build_optimizer(
        [layer], 0.1, 0.01, total_steps=100, warmup_ratio=0.0, kind="dot",
        options={"dot_delta": 0.05, "dot_form": "kdgrid"},
    )
    assert isinstance(optimizer, DOT)
    rng = np.random.default_rng(3)
    grads = [
        (rng.normal(size=(2, 3)), rng.normal(size=2), rng.normal(size=(2, 3)), rng.normal(size=2))
        for _ in range(2)
    ]
    params = [layer.weight, layer.bias]
    for gw_t, gb_t, gw_k, _ in grads:
        task = [torch.tensor(gw_t, dtype=torch.float32), torch.tensor(gb_t, dtype=torch.float32)]
        distill = [torch.tensor(gw_k, dtype=torch.float32), None]  # the bias has no distillation gradient
        optimizer.set_gradients(params, task, distill)
        optimizer.step()
    # By hand: lr 0.1 at every step (no warm-up; the schedule is not stepped here), mu = 0.9, Delta = 0.05.
    w, b = w0, b0
    vw_t = vw_k = np.zeros((2, 3))
    vb_t = vb_k = np.zeros(2)
    for gw_t, gb_t, gw_k, _ in grads:
        vw_t = 0.85 * vw_t + gw_t + 0.01 * w
        vw_k = 0.95 * vw_k + gw_k
        vb_t = 0.85 * vb_t + gb_t  # biases carry no weight decay
        vb_k = 0.95 * vb_k
        w = w - 0.1 * (vw_t + vw_k)
        b = b - 0.1 * (vb_t + vb_k)
    np.testing.assert_allclose(layer.weight.detach().double().numpy(), w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(layer.bias.detach().double().numpy(), b, rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="call set_gradients first"):
        optimizer.step()


def test_the_cosine_of_a_tiny_linear_model_matches_its_gradients_derived_by_hand() -> None:
    """y = W x: task loss 0.5 * |W x - a|^2 (weight alpha), distillation 0.5 * |W x - c|^2 (weight 2); the
    gradients are alpha (Wx - a) x^T and 2 (Wx - c) x^T."""
    torch.manual_seed(1)
    weight = torch.nn.Parameter(torch.randn(2, 3))
    x, a, c = torch.randn(3), torch.randn(2), torch.randn(2)
    y = weight @ x
    values = {"hard": 0.5 * ((y - a) ** 2).sum(), "soft": 0.5 * ((y - c) ** 2).sum(), "off": y.sum()}
    task, distill = task_and_distillation(values, {"hard": 0.3, "soft": 2.0, "off": 0.0})
    g_task, g_kd = split_gradients(task, distill, [weight], keep_graph=False)
    wn, xn, an, cn = (t.detach().double().numpy() for t in (weight, x, a, c))
    hand_task = 0.3 * np.outer(wn @ xn - an, xn)
    hand_kd = 2.0 * np.outer(wn @ xn - cn, xn)
    np.testing.assert_allclose(g_task[0].double().numpy(), hand_task, rtol=1e-5)
    np.testing.assert_allclose(g_kd[0].double().numpy(), hand_kd, rtol=1e-5)
    expected = (hand_task * hand_kd).sum() / (np.linalg.norm(hand_task) * np.linalg.norm(hand_kd))
    assert gradient_cosine(g_task, g_kd) == pytest.approx(expected, rel=1e-6)
    # A side that reaches no parameter is zero: the cosine is undefined.
    assert math.isnan(gradient_cosine([None], g_kd))


def test_the_sampled_batches_are_evenly_spaced() -> None:
    assert sampled_batches(10, 3) == {0, 3, 6}
    assert sampled_batches(10, 1) == {0}
    assert sampled_batches(4, 9) == {0, 1, 2, 3}
