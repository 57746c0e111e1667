"""The pre-training objective: the masked-LM loss, plus for general distillation the teacher's knowledge through
task distillation's own machinery (`kdgrid.core.training.objective.Objective.knowledge_values`: the knowledge functions,
the matching strategy's layer pairs, the projections, the weights beta).

    L = mlm_weight x L_mlm + sum over knowledge k and layer pair l of beta x L_k(l)

``L_mlm`` is the cross-entropy of the MLM head at the masked positions, averaged over every masked token of the
global batch (not per micro-batch, so any split of the batch over processes and micro-batches gives the same
gradient). Each knowledge term is a mean over its micro-batch's tokens; all blocks are full (no padding) and
micro-batches are equal, so their mean over micro-batches is the global batch's value.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import BertForMaskedLM

from kdgrid.assets import teacher_dir
from kdgrid.core.model.capture import FeatureCapture, Features
from kdgrid.core.model.models import bert_config, load_pretrained_bert
from kdgrid.core.model.shapes import (
    StudentShape,
    cached_config,
    fetch_config,
    is_local_source,
    local_config,
    student_shape,
)
from kdgrid.core.model.teacher_cache import MINILM_ALIAS, base_source
from kdgrid.core.pretrained.recipe import PretrainRecipe
from kdgrid.core.training.objective import Objective, Term, captured_layers, knowledge_terms, teacher_needs
from kdgrid.core.trial_rules import matched_pairs, relation_heads_problems
from kdgrid.errors import ConfigError
from kdgrid.pretrain.data import IGNORE_INDEX
from kdgrid.trial import Trial

PRETRAIN_TASK = "pretrain"  # the task name of the trial that carries a recipe's distillation settings


def teacher_source(recipe: PretrainRecipe) -> str:
    """Where the teacher's weights are: the offline MiniLM's base folder for ``minilm-l6``, else as written."""
    assert recipe.teacher is not None
    return str(teacher_dir()) if recipe.teacher == MINILM_ALIAS else base_source(recipe.teacher)


def teacher_shape(recipe: PretrainRecipe) -> StudentShape:
    """The teacher's shape from its config.json (no weights read; a Hub teacher from the cache or the Hub)."""
    source = teacher_source(recipe)
    if is_local_source(source):
        return local_config(Path(source).expanduser()).shape
    found = cached_config(source)
    return (found or fetch_config(source, what="teacher")).shape


def relation_heads(recipe: PretrainRecipe, student: StudentShape, teacher: StudentShape) -> int:
    """The relation heads of the q/k/v relations: the recipe's, or by default the largest count up to the
    student's attention heads that divides both widths (the student's heads wherever they divide the teacher's
    width, as in task distillation; MiniLMv2 chooses relation heads apart from attention heads). A function of
    the two shapes, both fixed by the recipe's key."""
    if recipe.relation_heads is not None:
        return recipe.relation_heads
    return max(h for h in range(1, student.heads + 1) if student.width % h == 0 and teacher.width % h == 0)


def distillation_trial(recipe: PretrainRecipe, heads: int | None = None) -> Trial:
    """The recipe's distillation settings as the `Trial` that task distillation's rules and `Objective` read
    (no soft or hard term: pre-training has no task head); ``heads``: the resolved relation heads."""
    spec = recipe.distillation
    if heads is not None:
        spec = dataclasses.replace(spec, relation_heads=heads)
    return Trial.with_distillation(
        spec,
        task=PRETRAIN_TASK,
        teacher=recipe.teacher or "",
        student=recipe.student,
        init="random",
        soft_weight=0.0,
        alpha=0.0,
        seed=recipe.seed,
    )


@dataclass(frozen=True)
class DistillationPlan:
    """A general distillation checked against its two shapes: the trial the `Objective` reads (relation heads
    resolved) and its knowledge terms."""

    trial: Trial
    terms: list[Term]


def plan_distillation(
    recipe: PretrainRecipe, student: StudentShape, teacher: StudentShape
) -> DistillationPlan:
    """The knowledge terms of a general distillation, with the refusals of task distillation: a strategy that
    cannot pair these depths, a knowledge that needs a projection the recipe forbids, relation heads that do
    not divide both widths. One `ConfigError` naming the student and the teacher."""
    trial = distillation_trial(recipe, relation_heads(recipe, student, teacher))
    try:
        pairs = matched_pairs(trial, student.layers, teacher.layers)
        problems = relation_heads_problems(trial, student, teacher)
        if problems:
            raise ConfigError("; ".join(problems))
        return DistillationPlan(trial, knowledge_terms(trial, pairs, student, teacher))
    except ConfigError as error:
        raise ConfigError(
            f"general distillation of {student.name} from {recipe.teacher} ({teacher.name}): {error}"
        ) from None


def build_student(recipe: PretrainRecipe, vocab_size: int) -> BertForMaskedLM:
    """A randomly initialised `BertForMaskedLM` of the recipe's shape (the global RNG decides its weights)."""
    config = bert_config(student_shape(recipe.student), num_labels=2, vocab_size=vocab_size)
    config.hidden_dropout_prob = recipe.dropout
    config.attention_probs_dropout_prob = recipe.dropout
    return BertForMaskedLM(config)


def load_teacher(recipe: PretrainRecipe) -> nn.Module:
    """The teacher's encoder in eval mode, gradients off, float32 (its task head, if any, is not read)."""
    # Its head is not read: a masked-LM checkpoint (no classifier, no pooler) is as good a teacher here.
    model = load_pretrained_bert(teacher_source(recipe), num_labels=2, what="teacher", fresh_head=True)
    model.eval()
    model.requires_grad_(False)
    return model


class _Encoder(nn.Module):
    """The student's encoder for `FeatureCapture`: its ``logits`` slot carries the last hidden state
    ``[B, L, d]``, so the MLM head runs on the masked positions only (not on every token x 30,522 words)."""

    def __init__(self, mlm: BertForMaskedLM) -> None:
        super().__init__()
        self.bert = mlm.bert
        self.config = mlm.config

    def forward(self, **inputs: Any) -> SimpleNamespace:
        out = self.bert(**inputs)
        return SimpleNamespace(logits=out.last_hidden_state, hidden_states=out.hidden_states)


@dataclass
class StepValues:
    """One micro-batch's loss terms: ``mlm_sum`` (summed over its masked tokens) and each knowledge term (mean)."""

    mlm_sum: torch.Tensor
    knowledge: dict[str, torch.Tensor]


class PretrainModel(nn.Module):
    """The student (a `BertForMaskedLM`) and, for general distillation, the `Objective` that owns the
    projections: the one module data parallelism wraps, so projections train and synchronise with the student.

    ``forward(input_ids, labels, teacher_features)``: ``[b, L]`` masked inputs and labels (`IGNORE_INDEX` where
    nothing is predicted), the teacher's `Features` of the same inputs or ``None``; returns `StepValues`.
    """

    def __init__(self, student: BertForMaskedLM, objective: Objective | None, terms: list[Term]) -> None:
        super().__init__()
        self.student = student
        self.objective = objective
        last = student.config.num_hidden_layers
        needs = teacher_needs(terms, objective.specs) - {"logits"} if objective is not None else frozenset()
        self.capture = FeatureCapture(_Encoder(student), needs=needs, layers=captured_layers(terms, 0, last))

    def forward(
        self, input_ids: torch.Tensor, labels: torch.Tensor, teacher_features: Features | None = None
    ) -> StepValues:
        mask = torch.ones_like(input_ids)
        features = self.capture({"input_ids": input_ids, "attention_mask": mask})
        chosen = labels != IGNORE_INDEX
        prediction = self.student.cls(features.logits[chosen])
        mlm_sum = F.cross_entropy(prediction.float(), labels[chosen], reduction="sum")
        knowledge: dict[str, torch.Tensor] = {}
        if self.objective is not None and teacher_features is not None:
            knowledge = self.objective.knowledge_values(features, teacher_features)
        return StepValues(mlm_sum, knowledge)


def teacher_capture(teacher: nn.Module, terms: list[Term], specs: dict[str, Any]) -> FeatureCapture:
    """The teacher's hooks: the features the terms read, on the teacher layers they are matched to."""
    last = teacher.config.num_hidden_layers
    return FeatureCapture(teacher, needs=teacher_needs(terms, specs), layers=captured_layers(terms, 1, last))
