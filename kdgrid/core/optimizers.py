"""The optimizer registry: the trial option ``optimizer`` names a registered optimizer, without torch.

An optimizer is registered with ``@register_optimizer(name)`` as a factory ``(parameter groups, lr, the trial's
options) -> torch.optim.Optimizer``; `kdgrid.core.optim.build_optimizer` calls it under the trial's warm-up and
decay schedule. The built-in ``adamw`` (the paper's) is here; a method adds its own (DOT:
`kdgrid.core.methods.dot.spec`). A factory imports torch itself, when it is called, so that registering and
validating need none.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from kdgrid.core.named_registry import registrar
from kdgrid.suggest import choice_problem

OPTIMIZER = "optimizer"
DEFAULT_OPTIMIZER = "adamw"
# The option giving the parameters a method learns beside the student their own learning rate, a multiple of lr
# (`kdgrid.core.optim.build_optimizer`; the option and its rule: `kdgrid.core.methods.learned_lr`).
LEARNED_LR_SCALE = "learned_lr_scale"

# name -> ``(parameter groups, lr, the trial's options) -> torch.optim.Optimizer``.
OPTIMIZERS: dict[str, Callable[[list[dict[str, Any]], float, Mapping[str, Any]], Any]] = {}

# ``@register_optimizer(name)``: register the decorated factory as ``name``.
register_optimizer = registrar(OPTIMIZERS, "optimizer")


@register_optimizer(DEFAULT_OPTIMIZER)
def adamw(groups: list[dict[str, Any]], lr: float, options: Mapping[str, Any]) -> Any:
    """AdamW, fused (CPU and CUDA): on CPU it makes a BERT-tiny step about a third cheaper than the per-tensor
    loop that is PyTorch's CPU default."""
    torch = importlib.import_module("torch")
    return torch.optim.AdamW(groups, lr=lr, fused=True)


def optimizer_problem(value: object) -> str | None:
    """Why ``value`` is not a registered optimizer (None when it is); names the allowed ones and the closest."""
    return choice_problem(OPTIMIZER, value, OPTIMIZERS)


# The optimizers whose step takes the task and distillation gradients apart (`kdgrid.core.methods.grad_split`):
# a trial using one needs both gradients, and its step holds both at once.
GRADIENT_SPLITTING: set[str] = set()
