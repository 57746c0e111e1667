"""ALP-KD as a learnable layer-matching strategy, registered without torch, with its one option and its rule
(the attention module: `kdgrid.core.methods.alp_kd.attention`).

Passban, Wu, Rezagholizadeh & Liu, "ALP-KD: Attention-Based Layer Projection for Knowledge Distillation", AAAI
2021. The target of student layer i is ``sum_t softmax_t(q_i . k_t / s) f_t`` per example: attention over the
teacher's layers from the student layer's [CLS] vector ``q_i``; docs/learned_methods.md gives the formula and
conventions. One term per student layer, named by its nominal teacher layer (`kdgrid.core.matching.nominal_pairs`).
"""

from __future__ import annotations

import importlib
from typing import Any

from kdgrid.core.knowledge import known_specs
from kdgrid.core.matching import nominal_pairs, register_strategy, strategy_name
from kdgrid.core.method_registry import MethodSpec, TrialFacts, register_method
from kdgrid.core.options import register_option
from kdgrid.core.step_hooks import StepHooks

ALP_KD = "ALP-KD"
DESCRIPTION = "ALP-KD: attention over every teacher layer from the student layer's [CLS] (Passban et al., 2021)"

# ALP-KD's option: the divisor s of the attention scores q . k_t. The paper uses the plain dot product ("none");
# "sqrt_width" divides by sqrt(d_T) (scaled dot-product attention, Vaswani et al., NeurIPS 2017), which keeps
# the softmax off one-hot when the teacher's [CLS] vectors are long.
ALP_KD_SCALE = "alp_kd_scale"
ALP_KD_SCALES = ("none", "sqrt_width")
# The features ALP-KD can attend with: [B, L, d] tensors whose [CLS] row is a representation (not scores).
ALP_KD_FEATURES = ("hidden", "query", "key", "value")
# ALP-KD's option: which tokens its loss compares. The paper's attention and loss read the [CLS] vectors only
# ("cls", the default); "all" (kdgrid's earlier form) compares every token with the attended teacher layers.
ALP_KD_TOKENS = "alp_kd_tokens"
ALP_KD_TOKEN_CHOICES = ("cls", "all")
DEFAULT_ALP_KD_TOKENS = "cls"
# The knowledge that compares the two sides vector by vector, so that it can compare the [CLS] vectors alone (the
# others relate tokens to each other: with one token they would compare nothing).
ALP_KD_CLS_KNOWLEDGE = ("hidden_mse", "cos", "pkd")


def build_attention(context: Any) -> Any:
    """ALP-KD's module for a `kdgrid.core.matching.MappingContext` (torch, imported on first use)."""
    return importlib.import_module("kdgrid.core.methods.alp_kd.attention").AlpAttention(context)


def attention_parameters(context: Any) -> int:
    """ALP-KD's query map ``[d_T, d_S]`` when the widths differ (none when they agree, as in the paper)."""
    if context.student_width == context.teacher_width:
        return 0
    return int(context.student_width * context.teacher_width)


def alp_kd_scale_problem(value: object) -> str | None:
    """Why ``value`` is not an ALP-KD score divisor (None when it is); names the allowed ones."""
    if value in ALP_KD_SCALES:
        return None
    return f"option {ALP_KD_SCALE}={value!r} is invalid; allowed: {', '.join(ALP_KD_SCALES)}"


def alp_kd_tokens_problem(value: object) -> str | None:
    """Why ``value`` is not a choice of ALP-KD's compared tokens (None when it is); names the allowed ones."""
    if value in ALP_KD_TOKEN_CHOICES:
        return None
    return f"option {ALP_KD_TOKENS}={value!r} is invalid; allowed: {', '.join(ALP_KD_TOKEN_CHOICES)}"


def tokens(trial: Any) -> str:
    """The tokens the trial's ALP-KD loss compares (`DEFAULT_ALP_KD_TOKENS` unless the option says)."""
    return str(trial.option(ALP_KD_TOKENS) or DEFAULT_ALP_KD_TOKENS)


def scale_rule(facts: TrialFacts) -> list[str]:
    """``alp_kd_scale`` and ``alp_kd_tokens`` belong to strategy ALP-KD (on a trial of another strategy they would
    do nothing); under ``alp_kd_tokens: cls`` (the default) the knowledge on pairs that cannot compare one vector
    is refused, naming the way out."""
    trial = facts.trial
    options = dict(trial.options)
    if strategy_name(trial.strategy) != ALP_KD:
        return [
            f"option {name!r} is {ALP_KD}'s; the trial's strategy is {trial.strategy!r}"
            for name in (ALP_KD_SCALE, ALP_KD_TOKENS)
            if name in options
        ]
    if tokens(trial) != "cls":
        return []
    return [
        f"strategy {ALP_KD} compares the [CLS] vectors only ({ALP_KD_TOKENS}: cls, the paper's loss); knowledge "
        f"{spec.name!r} relates tokens to each other: use {', '.join(ALP_KD_CLS_KNOWLEDGE)}, or {ALP_KD_TOKENS}: all"
        for spec in known_specs(trial.knowledge)
        if spec.placement == "pairs" and spec.name not in ALP_KD_CLS_KNOWLEDGE
    ]


class AlpKdHooks(StepHooks):
    """ALP-KD's part in the objective: under ``alp_kd_tokens: cls`` its terms compare the [CLS] position alone,
    and which form the row measured."""

    def __init__(self, trial: Any) -> None:
        self.tokens = tokens(trial)

    def term_mask(self, objective: Any, term: Any, mask: Any) -> Any:
        if self.tokens != "cls" or not term.mapped:
            return mask
        cls_only = mask.new_zeros(mask.shape)  # tensor methods only: this module imports no torch
        cls_only[:, 0] = 1
        return cls_only

    def formulation(self, objective: Any) -> dict[str, str]:
        return {ALP_KD_TOKENS: self.tokens}


def step_hooks(trial: Any) -> AlpKdHooks:
    """The hooks of a trial with strategy ALP-KD."""
    return AlpKdHooks(trial)


register_strategy(
    ALP_KD,
    distinct_teacher_layers=False,
    description=DESCRIPTION,
    aliases=("ALP",),
    mapping=build_attention,
    mapping_parameters=attention_parameters,
    mapping_features=ALP_KD_FEATURES,
)(nominal_pairs)

register_option(
    ALP_KD_SCALE,
    "text",
    "none",
    "strategy ALP-KD: the attention scores' divisor, none (the paper's plain dot product) or sqrt_width (sqrt(d_T))",
    check=alp_kd_scale_problem,
)
register_option(
    ALP_KD_TOKENS,
    "text",
    DEFAULT_ALP_KD_TOKENS,
    "strategy ALP-KD: which tokens its loss compares, cls (the paper's: the [CLS] vectors) or all (kdgrid's "
    "earlier form: every token against the attended teacher layers)",
    check=alp_kd_tokens_problem,
)

register_method(
    MethodSpec(
        name="alp_kd",
        title="ALP-KD: each student layer attends over every teacher layer from its [CLS] (strategy: ALP-KD)",
        paper="Passban, Wu, Rezagholizadeh & Liu, ALP-KD: Attention-Based Layer Projection for Knowledge "
        "Distillation, AAAI 2021",
        options=(ALP_KD_SCALE, ALP_KD_TOKENS),
        rules=(("options", scale_rule),),
        uses=lambda trial: bool(trial.knowledge) and strategy_name(trial.strategy) == ALP_KD,
        hooks="kdgrid.core.methods.alp_kd.spec:step_hooks",
    )
)
