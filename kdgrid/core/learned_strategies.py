"""The learnable layer-matching strategies built into kdgrid, registered without torch.

Each is a `kdgrid.core.matching` strategy with a mapping module (`kdgrid.core.mapping.LayerMapping`) whose
parameters train with the student; docs/learned_methods.md gives their formulas and conventions.

==========  ==========================================================================  =========================
strategy    target of student layer i (teacher feature ``f_t`` on layer t = 1..L_T)      module
==========  ==========================================================================  =========================
LAD         ``a_{n(i)}``: the teacher's hidden states aggregated by a chain of highway      `kdgrid.core.lad_gates`
            gate blocks (``lad_form: gates``); or ``sum_t softmax(g_i)_t f_t``, a gate of  and `kdgrid.core.lad`
            learned logits per student layer (``lad_form: softmax``)                       (Lin, Sensors 2023)
ALP-KD      ``sum_t softmax_t(q_i . k_t / s) f_t`` per example: attention over the       `kdgrid.core.alp_kd` (Passban
            teacher layers from the student layer's [CLS] vector ``q_i``                  al., AAAI 2021)
==========  ==========================================================================  =========================

Both give one term per student layer, ``(i, nominal(i))`` with the nominal teacher layer ``max(1, floor(i L_T /
L_S))`` (Dilatation's, at least 1): it names the term and is what the row records; the target is built from every
teacher layer. They work for any depths.

This module imports no torch and nothing of kdgrid: `kdgrid.core.matching` registers the two strategies from the
facts here (so every process that knows the fixed strategies knows these), `kdgrid.core.options` their option,
and `kdgrid.core.trial_rules` checks their combinations; the modules `kdgrid.core.lad` and `kdgrid.core.alp_kd` (torch)
are imported by name when a trial builds its mapping.
"""

from __future__ import annotations

import importlib
from typing import Any

LAD = "LAD"
ALP_KD = "ALP-KD"
LAD_DESCRIPTION = "LAD: a learned gate per student layer weights every teacher layer (Lin et al., 2023)"
ALP_KD_DESCRIPTION = (
    "ALP-KD: attention over every teacher layer from the student layer's [CLS] (Passban et al., 2021)"
)

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
# LAD's option: its aggregation. "gates" (the default, the paper's chain of highway gate blocks over the teacher's
# hidden states, `kdgrid.core.lad_gates`) or "softmax" (kdgrid's earlier form, one softmax gate over every teacher
# layer per student layer, any feature, `kdgrid.core.lad`).
LAD_FORM = "lad_form"
LAD_FORMS = ("gates", "softmax")
DEFAULT_LAD_FORM = "gates"
# Which options belong to which strategy: a trial that sets one under another strategy is refused.
STRATEGY_OPTIONS: dict[str, tuple[str, ...]] = {ALP_KD: (ALP_KD_SCALE, ALP_KD_TOKENS), LAD: (LAD_FORM,)}


def nominal_pairs(student_layers: int, teacher_layers: int) -> list[tuple[int, int]]:
    """``(i, max(1, floor(i L_T / L_S)))`` for every student layer i: one term each, named by Dilatation's layer."""
    return [(i, max(1, i * teacher_layers // student_layers)) for i in range(1, student_layers + 1)]


def _module(name: str) -> Any:
    """A torch module of `kdgrid.core` (``lad``, ``alp_kd``), imported by name on first use: registering needs no
    torch, and that module's imports of the registry make no import cycle."""
    return importlib.import_module(f"kdgrid.core.{name}")


def lad_form(options: Any) -> str:
    """The trial's LAD form (``gates`` unless ``lad_form`` says ``softmax``)."""
    return str(options.get(LAD_FORM, DEFAULT_LAD_FORM))


def build_lad(context: Any) -> Any:
    """LAD's module for a `kdgrid.core.matching.MappingContext`: the gate blocks, or kdgrid's softmax gate."""
    if lad_form(context.options) == "softmax":
        return _module("lad").LadGate(context)
    return _module("lad_gates").LadGateBlocks(context)


def build_alp_kd(context: Any) -> Any:
    """ALP-KD's module for a `kdgrid.core.matching.MappingContext`."""
    return _module("alp_kd").AlpAttention(context)


def lad_parameters(context: Any) -> int:
    """LAD's gate blocks: per teacher layer after the first a ``[d_T, d_T]`` map with its bias and a LayerNorm
    affine ``[max_length, d_T]`` twice; the softmax form: one logit per (student layer, teacher layer)."""
    if lad_form(context.options) == "softmax":
        return int(context.student_layers * context.teacher_layers)
    width = context.teacher_width
    return int((context.teacher_layers - 1) * (width * width + width + 2 * context.max_length * width))


def alp_kd_parameters(context: Any) -> int:
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


def alp_kd_token_problems(knowledge: list[str], options: dict[str, Any]) -> list[str]:
    """Under ``alp_kd_tokens: cls`` (the default), the knowledge on pairs that cannot compare one vector (ALP-KD's
    [CLS] loss) is refused, naming the way out."""
    if options.get(ALP_KD_TOKENS, DEFAULT_ALP_KD_TOKENS) != "cls":
        return []
    return [
        f"strategy {ALP_KD} compares the [CLS] vectors only ({ALP_KD_TOKENS}: cls, the paper's loss); knowledge "
        f"{name!r} relates tokens to each other: use {', '.join(ALP_KD_CLS_KNOWLEDGE)}, or {ALP_KD_TOKENS}: all"
        for name in knowledge
        if name not in ALP_KD_CLS_KNOWLEDGE
    ]


def lad_form_problem(value: object) -> str | None:
    """Why ``value`` is not a LAD form (None when it is); names the allowed ones."""
    if value in LAD_FORMS:
        return None
    return f"option {LAD_FORM}={value!r} is invalid; allowed: {', '.join(LAD_FORMS)}"


def lad_form_problems(knowledge: list[tuple[str, frozenset[str]]], options: dict[str, Any]) -> list[str]:
    """Under ``lad_form: gates`` (the default) the gate blocks aggregate hidden states: knowledge on pairs that
    reads another feature is refused, naming the way out."""
    if lad_form(options) != "gates":
        return []
    return [
        f"strategy {LAD}'s gate blocks ({LAD_FORM}: gates, the paper's) aggregate the teacher's hidden states; "
        f"knowledge {name!r} reads {', '.join(sorted(needs))}: use hidden-state knowledge, or {LAD_FORM}: softmax"
        for name, needs in knowledge
        if needs != {"hidden"}
    ]
