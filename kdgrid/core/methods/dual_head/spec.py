"""The dual-head student's option and rule, and what it adds to a job's memory, without torch (the heads:
`kdgrid.core.methods.dual_head.heads`).

``dual_head: true`` puts a task head (trained on the hard labels, evaluated) and a distillation head (trained on
the soft labels) on one shared encoder (Yang, Zong, Huang, Feng & An, "Dual-Head Knowledge Distillation: Enhancing
Logits Utilization with an Auxiliary Head", arXiv:2411.08937, 2024); ``dual_head_loss`` chooses the distillation
head's loss (`kdgrid.core.methods.dual_head.loss`: the authors' BinaryKL-Norm by default).
"""

from __future__ import annotations

from typing import Any

from kdgrid.core.method_registry import MethodMemory, MethodSpec, Preset, TrialFacts, register_method
from kdgrid.core.model.ssm.rules import bert_only
from kdgrid.core.options import register_option
from kdgrid.suggest import choice_problem
from kdgrid.trial import Trial

DUAL_HEAD = "dual_head"
# The distillation head's loss (`kdgrid.core.methods.dual_head.loss`): the authors' BinaryKL-Norm by default, their
# BinaryKL, or kdgrid's earlier softmax soft-label loss.
DUAL_HEAD_LOSS = "dual_head_loss"
BINARY_KL_NORM, BINARY_KL, SOFTMAX_HEAD_LOSS = "binary_kl_norm", "binary_kl", "softmax"
DUAL_HEAD_LOSSES: tuple[str, ...] = (BINARY_KL_NORM, BINARY_KL, SOFTMAX_HEAD_LOSS)
DEFAULT_DUAL_HEAD_LOSS = BINARY_KL_NORM


def head_loss(trial: Trial) -> str:
    """The trial's distillation-head loss (`DEFAULT_DUAL_HEAD_LOSS` unless the option says)."""
    return str(trial.option(DUAL_HEAD_LOSS) or DEFAULT_DUAL_HEAD_LOSS)


def dual_head_loss_problem(value: Any) -> str | None:
    """Why ``dual_head_loss`` = ``value`` is not allowed (None when it is)."""
    return choice_problem(DUAL_HEAD_LOSS, value, DUAL_HEAD_LOSSES)


def dual_head_rule(facts: TrialFacts) -> list[str]:
    """Each head needs its loss: alpha > 0 and soft_weight > 0; the student is a BERT (the second head hooks its
    classifier)."""
    trial = facts.trial
    problems: list[str] = bert_only(trial, DUAL_HEAD)
    if trial.option(DUAL_HEAD) and not (trial.alpha > 0 and trial.soft_weight > 0):
        problems.append(
            f"option {DUAL_HEAD} gives the hard and the soft loss a head each: it needs alpha > 0 and "
            f"soft_weight > 0 (here {trial.alpha:g} and {trial.soft_weight:g})"
        )
    if trial.option(DUAL_HEAD_LOSS) is not None and not trial.option(DUAL_HEAD):
        problems.append(
            f"option {DUAL_HEAD_LOSS} is the loss of a dual head's distillation head: it needs {DUAL_HEAD}"
        )
    return problems


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
register_option(
    DUAL_HEAD_LOSS,
    "text",
    None,
    "dual_head: the distillation head's loss, binary_kl_norm (the authors'), binary_kl, or softmax (kdgrid's "
    f"earlier soft-label cross-entropy); unset: {DEFAULT_DUAL_HEAD_LOSS}",
    check=dual_head_loss_problem,
)

register_method(
    MethodSpec(
        name="dual_head",
        title="dual-head KD: a task head and a distillation head on one shared encoder (dual_head: true)",
        paper="Yang, Zong, Huang, Feng & An, Dual-Head Knowledge Distillation: Enhancing Logits Utilization with an "
        "Auxiliary Head, arXiv:2411.08937, 2024",
        options=(DUAL_HEAD, DUAL_HEAD_LOSS),
        rules=(("combination", dual_head_rule),),
        memory=second_head_memory,
        uses=lambda trial: bool(trial.option(DUAL_HEAD)),
        hooks="kdgrid.core.methods.dual_head.heads:step_hooks",
        presets=(
            Preset(
                "paper",
                fields=(("temperature", 2),),
                adapted="the authors' temperature 2 (their CIFAR runs); their SGD schedule is not applied: the "
                "study's optimizer and learning rate are kept",
            ),
        ),
    )
)
