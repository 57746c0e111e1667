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

from kdgrid.core.matching import get_strategy, nominal_pairs, register_strategy
from kdgrid.core.method_registry import MethodSpec, TrialFacts, register_method
from kdgrid.core.options import register_option
from kdgrid.errors import KdgridError

ALP_KD = "ALP-KD"
DESCRIPTION = "ALP-KD: attention over every teacher layer from the student layer's [CLS] (Passban et al., 2021)"

# ALP-KD's option: the divisor s of the attention scores q . k_t. The paper uses the plain dot product ("none");
# "sqrt_width" divides by sqrt(d_T) (scaled dot-product attention, Vaswani et al., NeurIPS 2017), which keeps
# the softmax off one-hot when the teacher's [CLS] vectors are long.
ALP_KD_SCALE = "alp_kd_scale"
ALP_KD_SCALES = ("none", "sqrt_width")
# The features ALP-KD can attend with: [B, L, d] tensors whose [CLS] row is a representation (not scores).
ALP_KD_FEATURES = ("hidden", "query", "key", "value")


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


def scale_rule(facts: TrialFacts) -> list[str]:
    """``alp_kd_scale`` belongs to strategy ALP-KD: on a trial of another strategy it would do nothing."""
    trial = facts.trial
    if ALP_KD_SCALE not in dict(trial.options):
        return []
    try:
        strategy = get_strategy(trial.strategy).name if trial.strategy is not None else None
    except KdgridError:  # an unknown strategy: refused, with the allowed ones, by the strategy check
        strategy = None
    if strategy == ALP_KD:
        return []
    return [f"option {ALP_KD_SCALE!r} is {ALP_KD}'s; the trial's strategy is {trial.strategy!r}"]


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

register_method(
    MethodSpec(
        name="alp_kd",
        title="ALP-KD: each student layer attends over every teacher layer from its [CLS] (strategy: ALP-KD)",
        paper="Passban, Wu, Rezagholizadeh & Liu, ALP-KD: Attention-Based Layer Projection for Knowledge "
        "Distillation, AAAI 2021",
        options=(ALP_KD_SCALE,),
        rules=(("options", scale_rule),),
    )
)
