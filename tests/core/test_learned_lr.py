"""A separate learning rate for a method's learned parameters: the optimiser's groups and one AdamW step computed
by hand, the default building exactly today's groups, LAD's gate moving further with it through the real
trainer, and a preempted trial with it resuming bit for bit."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from kdgrid.core.optim import build_optimizer, decay_groups
from kdgrid.core.trial_rules import trial_problems
from tests.core.test_train_methods import make_trial, run
from tests.preemption import preempted_in_epoch

LR, WD, SCALE = 0.01, 0.1, 30.0


pytestmark = pytest.mark.usefixtures("deterministic_torch")  # bit-for-bit comparisons (tests/conftest.py)


class Owner(nn.Module):
    """An objective-like module: a projection of its own and a learned part (2-D gate and a 0-D scalar)."""

    def __init__(self) -> None:
        super().__init__()
        self.projection = nn.Linear(3, 2)
        self.mapping = nn.Module()
        self.mapping.gate = nn.Parameter(torch.tensor([[0.5, -0.25], [0.0, 1.0]]))
        self.mapping.theta = nn.Parameter(torch.tensor(0.3))


def test_learned_parameters_get_their_own_groups_and_step_by_hand() -> None:
    torch.manual_seed(0)
    student, owner = nn.Linear(3, 3), Owner()
    optimizer, scheduler = build_optimizer(
        [student, owner],
        LR,
        WD,
        total_steps=10,
        warmup_ratio=0.0,
        learned=[owner.mapping],
        learned_lr_scale=SCALE,
    )
    rates = [(group["lr"], group["weight_decay"], len(group["params"])) for group in optimizer.param_groups]
    # student weight + projection weight | their biases | the gate (2-D, decayed) | theta (0-D, not decayed)
    assert rates == [(LR, WD, 2), (LR, 0.0, 2), (LR * SCALE, WD, 1), (LR * SCALE, 0.0, 1)]
    x = torch.randn(4, 3)
    loss = (owner.projection(student(x)) @ owner.mapping.gate).pow(2).sum() * owner.mapping.theta
    loss.backward()
    before = {name: p.detach().clone() for name, p in owner.named_parameters()}
    grads = {name: p.grad.detach().clone() for name, p in owner.named_parameters()}
    optimizer.step()
    scheduler.step()
    eps = 1e-8  # AdamW's first step: m_hat = g, v_hat = g^2; decoupled decay p (1 - lr wd) first

    def expected(name: str, lr: float, wd: float) -> torch.Tensor:
        g, p = grads[name], before[name]
        return p * (1 - lr * wd) - lr * g / (g.abs() + eps)

    params = dict(owner.named_parameters())
    torch.testing.assert_close(params["mapping.gate"].detach(), expected("mapping.gate", LR * SCALE, WD))
    torch.testing.assert_close(params["mapping.theta"].detach(), expected("mapping.theta", LR * SCALE, 0.0))
    torch.testing.assert_close(params["projection.weight"].detach(), expected("projection.weight", LR, WD))
    # the schedule scales every group alike: the ratio stays SCALE after the step
    assert optimizer.param_groups[2]["lr"] == pytest.approx(SCALE * optimizer.param_groups[0]["lr"])


def test_without_the_option_the_groups_are_exactly_todays() -> None:
    student, owner = nn.Linear(3, 3), Owner()
    optimizer, _ = build_optimizer([student, owner], LR, WD, 10, 0.1, learned=[owner.mapping])
    today = decay_groups([student, owner], WD)
    assert [[id(p) for p in g["params"]] for g in optimizer.param_groups] == [
        [id(p) for p in g["params"]]
        for g in today  # type: ignore[union-attr]
    ]
    assert {g["lr"] for g in optimizer.param_groups} == {LR}


def test_the_option_needs_a_learned_part_and_a_positive_number(teacher: str) -> None:
    fixed = make_trial(
        teacher, knowledge=("hidden_mse",), strategy="Last", options={"learned_lr_scale": 10.0}
    )
    assert any("it needs a learnable strategy" in p for p in trial_problems(fixed))
    negative = make_trial(teacher, knowledge=("hidden_mse",), strategy="LAD", options={"learned_lr_scale": 0})
    assert any("learned_lr_scale=0 is invalid" in p and "> 0" in p for p in trial_problems(negative))
    ctkd = make_trial(
        teacher, options={"learned_lr_scale": 10.0, "temperature_learner": "ctkd"}, temperature=2.0
    )
    assert trial_problems(ctkd) == []


def test_the_gate_moves_further_and_resumes_bit_for_bit(
    teacher: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    softmax = {"lad_form": "softmax"}  # kdgrid's softmax gate: its weights show how far it moved
    plain = make_trial(teacher, knowledge=("hidden_mse",), strategy="LAD", beta=1.0, options=softmax)
    scaled = make_trial(
        teacher, knowledge=("hidden_mse",), strategy="LAD", beta=1.0,
        options={"learned_lr_scale": SCALE, **softmax},
    )  # fmt: skip
    (r_plain, r_scaled), weights = run([plain, scaled])
    assert r_plain.status == r_scaled.status == "done", (r_plain.error_message, r_scaled.error_message)

    def spread(result) -> float:  # type: ignore[no-untyped-def]
        gate = torch.tensor(result.extra["mapping"]["weights"])  # softmax of the gate: 1/3 each at the start
        return float((gate - 1 / 3).abs().max())

    assert spread(r_scaled) > 5 * spread(r_plain) > 0

    with preempted_in_epoch(monkeypatch, 1):
        run([scaled], checkpoint_dir=tmp_path)
    [resumed], resumed_weights = run([scaled], checkpoint_dir=tmp_path)
    assert resumed.extra["resumed_from_epoch"] == 1 and resumed.extra["mapping"] == r_scaled.extra["mapping"]
    assert resumed.curve == r_scaled.curve and resumed.scores == r_scaled.scores
    for key, value in weights[scaled.trial_id].items():
        assert torch.equal(value, resumed_weights[scaled.trial_id][key]), key
