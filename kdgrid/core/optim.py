"""The optimisation recipe shared by students and teachers: AdamW with linear warm-up then linear decay to 0; a
student may use DOT instead (option ``optimizer: dot``, `kdgrid.core.dot`) under the same schedule."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from kdgrid.core.dot import DOT
from kdgrid.core.method_options import DEFAULT_DOT_DELTA, DEFAULT_DOT_FORM, OPTIMIZERS
from kdgrid.errors import ConfigError


def decay_groups(
    modules: Iterable[nn.Module], weight_decay: float, leave_out: frozenset[int] = frozenset()
) -> list[dict[str, object]]:
    """Parameter groups: biases and LayerNorm weights get no weight decay (BERT's habit), the rest do. Parameters
    whose ``id`` is in ``leave_out`` are left out (they have groups of their own)."""
    decay, no_decay = [], []
    for module in modules:
        for name, param in module.named_parameters():
            if not param.requires_grad or id(param) in leave_out:
                continue
            (no_decay if name.endswith("bias") or "LayerNorm" in name or param.ndim < 2 else decay).append(
                param
            )
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def warmup_steps(total_steps: int, warmup_ratio: float) -> int:
    return math.ceil(total_steps * warmup_ratio)


def linear_schedule(
    optimizer: torch.optim.Optimizer, total_steps: int, warmup_ratio: float
) -> torch.optim.lr_scheduler.LambdaLR:
    """lr x step/warmup during warm-up, then lr x (total - step)/(total - warmup), reaching 0 at ``total_steps``."""
    warmup = warmup_steps(total_steps, warmup_ratio)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def build_optimizer(
    modules: Iterable[nn.Module],
    lr: float,
    weight_decay: float,
    total_steps: int,
    warmup_ratio: float,
    *,
    kind: str = "adamw",
    dot_delta: float | None = None,
    dot_form: str | None = None,
    learned: Iterable[nn.Module] = (),
    learned_lr_scale: float | None = None,
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW (or, ``kind="dot"``, DOT with ``dot_delta`` and ``dot_form``) over every trainable parameter of ``modules`` and its
    linear warm-up/decay scheduler.

    With ``learned_lr_scale`` m, the parameters of the ``learned`` modules (a method's learned parts, inside
    ``modules``) get groups of their own at learning rate ``m x lr`` (`kdgrid.core.learned_lr`); without it,
    ``learned`` is ignored and the groups are exactly those of ``modules``.

    AdamW's fused implementation (CPU and CUDA) is used: on CPU it makes a BERT-tiny step about a third cheaper
    than the per-tensor loop that is PyTorch's CPU default.
    """
    learned = list(learned) if learned_lr_scale is not None else []
    own = frozenset(id(p) for module in learned for p in module.parameters())
    groups = decay_groups(modules, weight_decay, own)
    if learned:
        groups += [
            {**group, "lr": lr * float(learned_lr_scale)}  # type: ignore[arg-type]
            for group in decay_groups(learned, weight_decay)
            if group["params"]
        ]
    if kind == "dot":
        delta = DEFAULT_DOT_DELTA if dot_delta is None else float(dot_delta)
        form = DEFAULT_DOT_FORM if dot_form is None else dot_form
        optimizer: torch.optim.Optimizer = DOT(groups, lr=lr, delta=delta, form=form)
    elif kind == "adamw":
        optimizer = torch.optim.AdamW(groups, lr=lr, fused=True)
    else:
        raise ConfigError(f"unknown optimizer {kind!r}; allowed: {', '.join(OPTIMIZERS)}")
    return optimizer, linear_schedule(optimizer, total_steps, warmup_ratio)


def scaled_step(
    optimizer: torch.optim.Optimizer, scheduler: Any, scaler: torch.amp.GradScaler | None
) -> bool:
    """Step the optimizer (through ``scaler`` when there is one), then the scheduler only if the optimizer stepped:
    a scaler skips the step when a gradient overflowed and lowers its scale, and a schedule that advanced anyway
    would run ahead of the updates actually made. Returns whether the optimizer stepped. The gradients are left
    for the caller to clear."""
    stepped = True
    if scaler is None:
        optimizer.step()
    else:
        scale = scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        stepped = scaler.get_scale() >= scale  # the scale drops exactly when the step was skipped
    if stepped:
        scheduler.step()
    return stepped
