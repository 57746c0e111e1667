"""DOT's optimizer, its option and its rule, registered without torch (the optimizer itself:
`kdgrid.core.methods.dot.optimizer`).

Zhao, Song & Qiu, "DOT: A Distillation-Oriented Trainer", ICCV 2023: SGD whose task and distillation gradients keep
separate momenta, ``mu - Delta`` and ``mu + Delta``. ``optimizer: dot`` chooses it, ``dot_delta`` sets Delta.
``optimizer: dot_adam`` is kdgrid's own extension, not the paper's: AdamW whose first moment is split the same way
(betas ``beta1 -+ Delta``, one second moment; `kdgrid.core.methods.dot.adam`). Both need the step's task and
distillation gradients apart: the method declares the gradient split (`kdgrid.core.methods.grad_split`) as its
dependency, whose rules and memory cover the second gradient; ``dot_adam``'s third state tensor is counted here.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from kdgrid.core.method_registry import MethodMemory, MethodSpec, Preset, TrialFacts, register_method
from kdgrid.core.optimizers import GRADIENT_SPLITTING, OPTIMIZER, optimizer_problem, register_optimizer
from kdgrid.core.options import register_option
from kdgrid.number_range import NumberRange
from kdgrid.suggest import choice_problem
from kdgrid.trial import Trial

DOT = "dot"
DOT_ADAM = "dot_adam"  # kdgrid's Adam form of DOT (not the paper's)
DOT_DELTA = "dot_delta"
DOT_MOMENTUM = 0.9  # DOT's base momentum mu (Zhao et al., ICCV 2023, SGD with momentum 0.9)
DEFAULT_DOT_DELTA = 0.075  # Zhao et al.'s Delta: task momentum mu - Delta, distillation momentum mu + Delta
# How DOT steps a parameter with one of the two gradients only (a projection: distillation only): "paper" (the
# authors' code, mdistiller: one buffer at the mean momentum mu, weight decay on that side) or "kdgrid" (kdgrid's
# earlier form: both buffers kept, the missing gradient counted as zero, weight decay on the task side).
DOT_FORM = "dot_form"
DOT_FORMS: tuple[str, ...] = ("paper", "kdgrid")
DEFAULT_DOT_FORM = "paper"
# dot_adam's beta1, beta2 and eps: those of the student's AdamW (torch.optim.AdamW's defaults, which
# `kdgrid.core.optimizers.adamw` keeps). beta1 equals DOT's mu, so one range of Delta serves both optimizers.
DOT_ADAM_BETAS: tuple[float, float] = (0.9, 0.999)
DOT_ADAM_EPS = 1e-8
# dot_adam's state beside the split's second gradient: three tensors the size of each parameter where AdamW (and
# DOT) keep two, so one more fp32 value per parameter.
DOT_ADAM_EXTRA_STATE_BYTES = 4
# What a row of each optimizer records in extra.formulation: DOT's one-sided form; for dot_adam, that the row
# measured kdgrid's extension.
DOT_ADAM_FORMULATION = "dot_adam (kdgrid's Adam form of DOT, not the paper's)"


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


@register_optimizer(DOT_ADAM)
def build_dot_adam(groups: list[dict[str, Any]], lr: float, options: Mapping[str, Any]) -> Any:
    """kdgrid's Adam form of DOT over the parameter groups at ``lr``, with the trial's ``dot_delta`` (default
    DOT's) and the student AdamW's betas and eps."""
    delta = options.get(DOT_DELTA)
    module = importlib.import_module("kdgrid.core.methods.dot.adam")
    return module.DotAdam(
        groups,
        lr=lr,
        betas=DOT_ADAM_BETAS,
        delta=DEFAULT_DOT_DELTA if delta is None else float(delta),
        eps=DOT_ADAM_EPS,
    )


GRADIENT_SPLITTING.update((DOT, DOT_ADAM))


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


def uses_dot(trial: Trial) -> bool:
    """Whether the trial's optimizer is DOT or kdgrid's Adam form of it."""
    return trial.option(OPTIMIZER) in (DOT, DOT_ADAM)


def dot_rule(facts: TrialFacts) -> list[str]:
    """``dot_delta`` only with DOT or ``dot_adam``; ``dot_form`` only with DOT; neither clips gradients (they
    step on the split gradients they are handed, never on the ``.grad`` a clip would scale)."""
    trial = facts.trial
    optimizer = trial.option(OPTIMIZER)
    problems: list[str] = []
    if trial.option(DOT_DELTA) is not None and not uses_dot(trial):
        problems.append(f"option {DOT_DELTA} is only for optimizer 'dot' or '{DOT_ADAM}'")
    if trial.option(DOT_FORM) is not None and optimizer == DOT_ADAM:
        problems.append(
            f"option {DOT_FORM} is only for optimizer 'dot': '{DOT_ADAM}' steps a one-sided parameter as plain "
            "AdamW (no SGD buffers to choose between); leave it unset"
        )
    elif trial.option(DOT_FORM) is not None and optimizer != DOT:
        problems.append(f"option {DOT_FORM} is only for optimizer 'dot'")
    if uses_dot(trial) and trial.option("max_grad_norm"):
        problems.append(f"optimizer {optimizer!r} does not clip gradients: leave max_grad_norm unset")
    return problems


def dot_memory(facts: TrialFacts) -> MethodMemory:
    """``dot_adam``'s third state tensor per parameter (`DOT_ADAM_EXTRA_STATE_BYTES`); DOT's two momenta cost
    what AdamW's two moments cost (the split's second gradient: `kdgrid.core.methods.grad_split.spec`)."""
    extra = DOT_ADAM_EXTRA_STATE_BYTES if facts.trial.option(OPTIMIZER) == DOT_ADAM else 0
    return MethodMemory(bytes_per_parameter=extra)


register_option(
    OPTIMIZER,
    "text",
    None,
    "the student's optimizer: adamw (unset), dot (Zhao et al., ICCV 2023: SGD with separate momenta for the "
    "task and distillation gradients) or dot_adam (kdgrid's own extension, not the paper's: AdamW with DOT's "
    "split first moments, betas 0.9 -+ dot_delta, and one second moment of the summed gradient)",
    check=optimizer_problem,
)
register_option(
    DOT_DELTA,
    "number",
    None,
    f"optimizer dot: Delta, the task momentum is {DOT_MOMENTUM} - Delta and the distillation momentum "
    f"{DOT_MOMENTUM} + Delta (optimizer dot_adam: the first moments' betas, the same); unset: {DEFAULT_DOT_DELTA}",
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
        title="DOT: SGD with separate momenta for the task and distillation gradients (optimizer: dot); its Adam "
        "form, kdgrid's own extension (optimizer: dot_adam)",
        paper="Zhao, Song & Qiu, DOT: A Distillation-Oriented Trainer, ICCV 2023 (dot_adam: kdgrid's own, from "
        "DOT's split momenta)",
        options=(OPTIMIZER, DOT_DELTA, DOT_FORM),
        rules=(("combination", dot_rule),),
        memory=dot_memory,
        uses=uses_dot,
        hooks="kdgrid.core.methods.dot.optimizer:step_hooks",
        depends_on=("grad_split",),
        presets=(
            Preset(
                "paper",
                fields=(("lr", 0.05),),
                options=((DOT_DELTA, DEFAULT_DOT_DELTA),),
                adapted="the paper's SGD (momentum 0.9, Delta 0.075) at its CIFAR learning rate 0.05; no learning "
                "rate of the paper is for BERT-style students (docs/method_references.md measures DOT against SGD "
                "with momentum at matched rates); for optimizer dot only (dot_adam keeps the study's AdamW rate)",
                applies=lambda trial: trial.option(OPTIMIZER) == DOT,
            ),
        ),
    )
)
