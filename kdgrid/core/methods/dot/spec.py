"""DOT's optimizer, its option and its rule, registered without torch (the optimizer itself:
`kdgrid.core.methods.dot.optimizer`).

Zhao, Song & Qiu, "DOT: A Distillation-Oriented Trainer", ICCV 2023: SGD whose task and distillation gradients keep
separate momenta, ``mu - Delta`` and ``mu + Delta``. ``optimizer: dot`` chooses it, ``dot_delta`` sets Delta. DOT
needs the step's task and distillation gradients apart: it declares the gradient split
(`kdgrid.core.methods.grad_split`) as its dependency, whose rules and memory cover it.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from kdgrid.core.method_registry import MethodSpec, Preset, TrialFacts, register_method
from kdgrid.core.optimizers import GRADIENT_SPLITTING, OPTIMIZER, optimizer_problem, register_optimizer
from kdgrid.core.options import register_option
from kdgrid.number_range import NumberRange
from kdgrid.suggest import choice_problem

DOT = "dot"
DOT_DELTA = "dot_delta"
DOT_MOMENTUM = 0.9  # DOT's base momentum mu (Zhao et al., ICCV 2023, SGD with momentum 0.9)
DEFAULT_DOT_DELTA = 0.075  # Zhao et al.'s Delta: task momentum mu - Delta, distillation momentum mu + Delta
# How DOT steps a parameter with one of the two gradients only (a projection: distillation only): "paper" (the
# authors' code, mdistiller: one buffer at the mean momentum mu, weight decay on that side) or "kdgrid" (kdgrid's
# earlier form: both buffers kept, the missing gradient counted as zero, weight decay on the task side).
DOT_FORM = "dot_form"
DOT_FORMS: tuple[str, ...] = ("paper", "kdgrid")
DEFAULT_DOT_FORM = "paper"


@register_optimizer(DOT)
def build_dot(groups: list[dict[str, Any]], lr: float, options: Mapping[str, Any]) -> Any:
    """DOT over the parameter groups at ``lr``, with the trial's ``dot_delta`` (default the paper's)."""
    delta, form = options.get(DOT_DELTA), options.get(DOT_FORM)
    module = importlib.import_module("kdgrid.core.methods.dot.optimizer")
    return module.DOT(
        groups,
        lr=lr,
        delta=DEFAULT_DOT_DELTA if delta is None else float(delta),
        form=DEFAULT_DOT_FORM if form is None else str(form),
    )


GRADIENT_SPLITTING.add(DOT)


def dot_delta_problem(value: Any) -> str | None:
    """Why ``dot_delta`` = ``value`` is not allowed: both momenta ``mu -+ Delta`` must lie in [0, 1)."""
    return NumberRange(low=0, high=1 - DOT_MOMENTUM, high_open=True).problem(
        DOT_DELTA,
        value,
        f"DOT's Delta: the momenta {DOT_MOMENTUM:g} - Delta and {DOT_MOMENTUM:g} + Delta must stay below 1",
    )


def dot_form_problem(value: Any) -> str | None:
    """Why ``dot_form`` = ``value`` is not allowed (None when it is)."""
    return choice_problem(DOT_FORM, value, DOT_FORMS)


def dot_rule(facts: TrialFacts) -> list[str]:
    """``dot_delta`` and ``dot_form`` only with DOT; DOT does not clip gradients."""
    trial = facts.trial
    dot = trial.option(OPTIMIZER) == DOT
    problems: list[str] = []
    for name in (DOT_DELTA, DOT_FORM):
        if trial.option(name) is not None and not dot:
            problems.append(f"option {name} is only for optimizer 'dot'")
    if dot and trial.option("max_grad_norm"):
        problems.append("optimizer 'dot' does not clip gradients: leave max_grad_norm unset")
    return problems


register_option(
    OPTIMIZER,
    "text",
    None,
    "the student's optimizer: adamw (unset) or dot (Zhao et al., ICCV 2023: SGD with separate momenta for the "
    "task and distillation gradients)",
    check=optimizer_problem,
)
register_option(
    DOT_DELTA,
    "number",
    None,
    f"optimizer dot: Delta, the task momentum is {DOT_MOMENTUM} - Delta and the distillation momentum "
    f"{DOT_MOMENTUM} + Delta; unset: {DEFAULT_DOT_DELTA}",
    check=dot_delta_problem,
)
register_option(
    DOT_FORM,
    "text",
    None,
    "optimizer dot: how a parameter with one of the two gradients steps, paper (the authors': one buffer at the "
    "mean momentum, weight decay on its side) or kdgrid (both buffers, the missing gradient zero); "
    f"unset: {DEFAULT_DOT_FORM}",
    check=dot_form_problem,
)

register_method(
    MethodSpec(
        name="dot",
        title="DOT: SGD with separate momenta for the task and distillation gradients (optimizer: dot)",
        paper="Zhao, Song & Qiu, DOT: A Distillation-Oriented Trainer, ICCV 2023",
        options=(OPTIMIZER, DOT_DELTA, DOT_FORM),
        rules=(("combination", dot_rule),),
        uses=lambda trial: trial.option(OPTIMIZER) == DOT,
        hooks="kdgrid.core.methods.dot.optimizer:step_hooks",
        depends_on=("grad_split",),
        presets=(
            Preset(
                "paper",
                fields=(("lr", 0.05),),
                options=((DOT_DELTA, DEFAULT_DOT_DELTA),),
                adapted="the paper's SGD (momentum 0.9, Delta 0.075) at its CIFAR learning rate 0.05; no learning "
                "rate of the paper is for BERT-style students (docs/method_references.md measures DOT against SGD "
                "with momentum at matched rates)",
            ),
        ),
    )
)
