"""Flex-KD as a method: the knowledge ``flex_kd``, its option and its rules, without torch.

Saadi & Wang, "What Should Feature Distillation Transfer in LLMs? A Task-Tangent Geometry View" (arXiv
2507.10155, v3; v1 "Task-Based Flexible Feature Distillation for LLMs"): no projector; a gradient-based
importance score for each of the teacher's d_T hidden dimensions on the task's data, the d_S most important
kept, and the student's d_S hidden dimensions aligned to them by correlation; logit KD beside it is optional.

kdgrid's reading (the paper's exact equations were not at hand; each choice below is kdgrid's, and named so):

1. **Importance** of dimension j of teacher layer l (`importance.importance_scores`):
   ``s_j = sum_n sum_{t real in n} |dL_n / dh^l_{n,t,j}| / sum_n #real(n)``: the mean absolute gradient of the
   teacher's own task loss ``L_n`` (cross-entropy of its logits, in the task's label order, against the gold
   label; squared error for regression) with respect to its hidden state, over every real token of the
   training examples (all of them, or the first ``flex_kd_examples``), teacher in eval mode, float32. The
   gradient magnitude of the output's loss is the "gradient-based score" the paper describes; averaging over
   tokens and examples is its aggregation "over the dataset".
2. **Selection** (`importance.select_dimensions`): the d_S dimensions of highest score (ties to the lower
   index), kept in the teacher's own order (ascending index): student dimension i learns the i-th kept one.
3. **Alignment** (`loss.flex_kd`): over the N real tokens of the batch, each of the d_S columns of the
   student's hidden state S and of the kept teacher dimensions T is standardised (its mean over the real
   tokens subtracted, divided by ``sqrt(var + 1e-6)``, the population variance); ``rho_i = (1/N) sum_n
   S^_{n,i} T^_{n,i}`` is column i's Pearson correlation, and the loss is ``(1/d_S) sum_i (1 - rho_i)``, in
   [0, 2], 0 when every student dimension is an increasing affine function of its teacher dimension. The
   paper names a correlation-based alignment; its diagonal is the loss that asks each student unit to follow
   one teacher unit and nothing else (a cross-correlation's off-diagonal would push the teacher's own
   correlated dimensions apart in the student).

The knowledge is declared ``teacher_at_student_width``: its loss compares equal widths, the hooks handing each
term its kept teacher dimensions (`kdgrid.core.step_hooks.StepHooks.teacher_features`), so no projection is built.
Logit KD is the trial's soft label (``soft_weight``), as for every other knowledge. The importance pass runs once
per (teacher weights, task, training examples as tokenized, label order, layer, reading) and is cached by that
content (`importance.score_key`); students of any width share it (the selection is made from the scores).
"""

from __future__ import annotations

from pathlib import Path

from kdgrid.core.knowledge import canonical_knowledge, declare_module
from kdgrid.core.matching import get_strategy
from kdgrid.core.method_registry import MethodSpec, TrialFacts, register_method
from kdgrid.core.options import register_option
from kdgrid.errors import ConfigError
from kdgrid.number_range import NumberRange
from kdgrid.trial import Trial

KNOWLEDGE = "flex_kd"
EXAMPLES = "flex_kd_examples"
EXTRA_KEY = "flex_kd"
LOSS_MODULE = "kdgrid.core.methods.flex_kd.loss"

declare_module(Path(__file__).with_name("loss.py"), LOSS_MODULE)


def uses_flex_kd(trial: Trial) -> bool:
    """Whether the trial distils the knowledge ``flex_kd`` (any accepted spelling)."""
    for name in trial.knowledge:
        try:
            if canonical_knowledge(name) == KNOWLEDGE:
                return True
        except ConfigError:  # an unknown name: refused, with the allowed ones, by its own check
            continue
    return False


def option_rule(facts: TrialFacts) -> list[str]:
    """``flex_kd_examples`` belongs to the knowledge ``flex_kd``."""
    if facts.trial.option(EXAMPLES) is not None and not uses_flex_kd(facts.trial):
        return [
            f"option {EXAMPLES} sets the examples of Flex-KD's importance pass: it needs knowledge {KNOWLEDGE!r}; "
            f"here knowledge {list(facts.trial.knowledge)}"
        ]
    return []


def combination_rule(facts: TrialFacts) -> list[str]:
    """Flex-KD needs a fixed strategy (its selection is per teacher layer) and a student no wider than the
    teacher (it keeps d_S of the teacher's d_T dimensions)."""
    trial = facts.trial
    if not uses_flex_kd(trial):
        return []
    problems: list[str] = []
    if trial.strategy is None:
        problems.append(
            f"knowledge {KNOWLEDGE!r} aligns matched hidden states: it needs a strategy (e.g. 'Last'); here none"
        )
    else:
        try:
            learnable = get_strategy(trial.strategy).learnable
        except ConfigError:  # an unknown strategy: refused by its own check
            learnable = False
        if learnable:
            problems.append(
                f"knowledge {KNOWLEDGE!r} keeps teacher dimensions chosen per teacher layer: it needs a fixed "
                f"strategy, not the learnable {trial.strategy!r}"
            )
    if facts.student is not None and facts.teacher is not None and facts.student.width > facts.teacher.width:
        problems.append(
            f"knowledge {KNOWLEDGE!r} keeps d_S of the teacher's d_T hidden dimensions: the student's width "
            f"{facts.student.width} must be at most the teacher's {facts.teacher.width}"
        )
    return problems


register_option(
    EXAMPLES,
    "int",
    None,
    "Flex-KD: score the teacher's hidden dimensions on the first N training examples (unset: all of them)",
    check=NumberRange(low=1, integer=True).checker(EXAMPLES, "training examples of the importance pass"),
)

register_method(
    MethodSpec(
        name="flex_kd",
        title="Flex-KD: the teacher's d_S most task-important hidden dimensions (gradient scores), aligned to the "
        "student's by correlation, no projector (knowledge: flex_kd; kdgrid's reading)",
        paper="Saadi & Wang, What Should Feature Distillation Transfer in LLMs? A Task-Tangent Geometry View "
        "(Flex-KD), arXiv 2507.10155, 2025",
        options=(EXAMPLES,),
        rules=(("options", option_rule), ("combination", combination_rule)),
        uses=uses_flex_kd,
        hooks="kdgrid.core.methods.flex_kd.hooks:step_hooks",
    )
)
