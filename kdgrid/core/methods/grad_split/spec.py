"""The gradient split: the task and distillation gradients of a student's step taken apart, for an optimizer that
needs both (`kdgrid.core.optimizers.GRADIENT_SPLITTING`: DOT) and for the logged cosine between them (option
``grad_cosine_batches``). Without torch; the split itself: `kdgrid.core.methods.grad_split.split`.

The cosine between the two gradients is the usual diagnosis of gradient conflict in distillation (e.g. Zhao, Song
& Qiu, ICCV 2023).
"""

from __future__ import annotations

from kdgrid.core.method_registry import MethodMemory, MethodSpec, TrialFacts, register_method
from kdgrid.core.optimizers import GRADIENT_SPLITTING, OPTIMIZER
from kdgrid.core.options import register_option
from kdgrid.trial import Trial

GRAD_COSINE_BATCHES = "grad_cosine_batches"
# A step that takes the task and distillation gradients apart holds both at once beside the parameters' own: two
# more fp32 values per parameter (DOT's two momenta take the place of AdamW's two moments, so its optimizer
# state costs the same).
SPLIT_GRADIENT_BYTES = 8


def splits_gradients(trial: Trial) -> bool:
    """Whether the trial's step needs its task and distillation gradients apart (a gradient-splitting optimizer,
    or the logged cosine)."""
    return trial.option(OPTIMIZER) in GRADIENT_SPLITTING or trial.option(GRAD_COSINE_BATCHES) is not None


def split_rule(facts: TrialFacts) -> list[str]:
    """A split needs both a task gradient (alpha > 0) and a distillation gradient (a soft term or knowledge)."""
    trial = facts.trial
    if not splits_gradients(trial):
        return []
    if trial.alpha > 0 and (trial.soft_weight > 0 or bool(trial.knowledge)):
        return []
    optimizer = trial.option(OPTIMIZER)
    what = f"optimizer {optimizer!r}" if optimizer in GRADIENT_SPLITTING else f"option {GRAD_COSINE_BATCHES}"
    return [
        f"{what} needs both a task gradient (alpha > 0, here {trial.alpha:g}) and a distillation gradient "
        f"(soft_weight > 0 or knowledge; here soft_weight {trial.soft_weight:g}, knowledge "
        f"{list(trial.knowledge)})"
    ]


def split_memory(facts: TrialFacts) -> MethodMemory:
    """The second gradient of every student parameter (`SPLIT_GRADIENT_BYTES`)."""
    return MethodMemory(bytes_per_parameter=SPLIT_GRADIENT_BYTES if splits_gradients(facts.trial) else 0)


register_option(
    GRAD_COSINE_BATCHES,
    "int",
    None,
    "log the cosine between the task and distillation gradients on this many evenly spaced batches per epoch "
    "(the row's extra grad_cosine: one mean per epoch); unset: not logged",
    minimum=1,
)

register_method(
    MethodSpec(
        name="grad_split",
        title="the task and distillation gradients taken apart: DOT's, and their logged cosine "
        "(grad_cosine_batches)",
        paper="the gradient-conflict diagnosis of distillation (Zhao, Song & Qiu, ICCV 2023)",
        options=(GRAD_COSINE_BATCHES,),
        rules=(("combination", split_rule),),
        memory=split_memory,
        uses=splits_gradients,
        hooks="kdgrid.core.methods.grad_split.hooks:step_hooks",
    )
)
