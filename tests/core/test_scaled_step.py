"""A trial's optimizer step (`kdgrid.core.optim.scaled_step`, what `train_step` calls): the learning-rate schedule
advances only on steps the gradient scaler took, so an fp16 student's schedule never runs ahead of its updates."""

from __future__ import annotations

import torch

from kdgrid.core.optim import build_optimizer, scaled_step


def test_a_skipped_step_leaves_the_schedule_where_it_was() -> None:
    model = torch.nn.Linear(3, 1)
    # 4 steps, 2 of them warm-up: lr x 1/2, 1, 1, 1/2
    optimizer, scheduler = build_optimizer([model], 1e-2, 0.0, 4, 0.5)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    before = model.weight.detach().clone()
    scaler.scale(model(torch.ones(2, 3)).sum() * float("inf")).backward()
    assert scaled_step(optimizer, scheduler, scaler) is False
    assert scheduler.last_epoch == 0 and optimizer.param_groups[0]["lr"] == 1e-2 / 2  # still the first step's
    assert torch.equal(model.weight.detach(), before) and scaler.get_scale() == 2.0**9
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(model(torch.ones(2, 3)).sum()).backward()
    assert scaled_step(optimizer, scheduler, scaler) is True
    assert scheduler.last_epoch == 1 and optimizer.param_groups[0]["lr"] == 1e-2
    optimizer.zero_grad(set_to_none=True)
    model(torch.ones(2, 3)).sum().backward()
    assert scaled_step(optimizer, scheduler, None) is True and scheduler.last_epoch == 2
