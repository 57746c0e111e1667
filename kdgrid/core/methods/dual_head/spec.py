"""The dual-head student's option and rule, and what it adds to a job's memory, without torch (the heads:
`kdgrid.core.methods.dual_head.heads`).

``dual_head: true`` puts a task head (trained on the hard labels, evaluated) and a distillation head (trained on
the soft labels) on one shared encoder, after the dual-head KD of Yang, Xie, Ye & Wu (docs/methods.md names how
kdgrid's loss on the distillation head relates to theirs).
"""

from __future__ import annotations

from kdgrid.core.method_registry import MethodMemory, MethodSpec, TrialFacts, register_method
from kdgrid.core.options import register_option

DUAL_HEAD = "dual_head"


def dual_head_rule(facts: TrialFacts) -> list[str]:
    """Each head needs its loss: alpha > 0 and soft_weight > 0."""
    trial = facts.trial
    if not trial.option(DUAL_HEAD) or (trial.alpha > 0 and trial.soft_weight > 0):
        return []
    return [
        f"option {DUAL_HEAD} gives the hard and the soft loss a head each: it needs alpha > 0 and "
        f"soft_weight > 0 (here {trial.alpha:g} and {trial.soft_weight:g})"
    ]


def second_head_memory(facts: TrialFacts) -> MethodMemory:
    """The distillation head: a second classifier of the student's shape."""
    if not facts.trial.option(DUAL_HEAD) or facts.student is None:
        return MethodMemory()
    return MethodMemory(parameters=facts.student.classifier_param_count())


register_option(
    DUAL_HEAD,
    "bool",
    False,
    "a task head (hard labels; evaluated) and a distillation head (soft labels) on the shared encoder",
)

register_method(
    MethodSpec(
        name="dual_head",
        title="dual-head KD: a task head and a distillation head on one shared encoder (dual_head: true)",
        paper="Yang, Xie, Ye & Wu, dual-head knowledge distillation (docs/methods.md)",
        options=(DUAL_HEAD,),
        rules=(("combination", dual_head_rule),),
        memory=second_head_memory,
        uses=lambda trial: bool(trial.option(DUAL_HEAD)),
        hooks="kdgrid.core.methods.dual_head.heads:step_hooks",
    )
)
