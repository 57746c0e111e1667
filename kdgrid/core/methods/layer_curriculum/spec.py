"""Layer-wise curriculum extraction: the student is trained layer by layer, shallow to deep, then its classifier
(or everything) in a last stage (trial option ``layer_curriculum``, a list of stage boundaries).

Stage-wise distillation as in Kulkarni, Panchi, Raparthy & Chiddarwar, "Data Efficient Stagewise Knowledge
Distillation" (arXiv:1911.06786, 2019), which trains a student one block at a time against the teacher's matching
block with the earlier blocks frozen and the classifier last; FitNets (Romero et al., ICLR 2015) is its two-stage ancestor
(hints first, then the task). kdgrid's form:

- The trial's strategy gives its matched pairs; the student layers that some knowledge term is placed on,
  sorted shallow to deep, are ``s_1 < s_2 < ... < s_K``. The option gives K boundaries ``0 < b_1 < ... < b_K <
  1``, fractions of the trial's S optimiser steps.
- Step k (0-based) is in stage ``j = #{i : k >= b_i S}``. Stage j < K (a *layer stage*) minimises only the
  knowledge terms on student layer ``s_{j+1}`` (each with its usual weight, beta or the calibrated ``auto``
  weight; the soft and hard labels and every other term are left out), and only the student layers
  ``s_j + 1 .. s_{j+1}`` learn (with ``s_0 = 0``; the embeddings, layer 0, learn in the first stage): every
  other student parameter, the pooler and the classifier included, gets no gradient, so AdamW neither moves it
  nor decays it. The stage's projections (and a learnable strategy's mapping) learn with it. Stage K, the last,
  is the option ``layer_curriculum_last``: ``classifier`` (default, the paper's: the hard-label term alone, weighted
  by alpha, trains the pooler and the heads, `HEAD`; the encoder is frozen) or ``all`` (kdgrid's earlier form:
  the trial's full objective with every parameter trainable).
- The option ``layer_curriculum_optimizer``: ``fresh`` (default, the paper's: the optimizer's state is cleared at
  each later stage's first step, a new Adam per stage; the learning-rate schedule still runs over all stages) or
  ``shared`` (kdgrid's earlier form: one AdamW state throughout).
- A stage that would get no step (two boundaries within one step of each other for the trial's S) is refused
  when the student is set up; the row records the stages (``extra.layer_curriculum``): each stage's student
  layer, its terms, its first step and the layers it trains.

The stage is a function of the step alone, so a resumed trial is in the same stage (and clears the optimizer at
the same steps) as an uninterrupted one. The learning-rate schedule is the trial's, over all the stages. Torch-free: the grid validates the option.
"""

from __future__ import annotations

import itertools
import math
import numbers
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kdgrid.core.knowledge import distilled_knowledge, placed_terms
from kdgrid.core.method_registry import MethodSpec, Preset, TrialFacts, register_method
from kdgrid.core.model.ssm.rules import bert_only
from kdgrid.core.optimizers import GRADIENT_SPLITTING, OPTIMIZER
from kdgrid.core.options import register_option
from kdgrid.errors import ConfigError

LAYER_CURRICULUM = "layer_curriculum"
EXTRA_KEY = "layer_curriculum"
# The last stage (option ``layer_curriculum_last``): "classifier", the paper's (the head alone, on the gold labels
# alone, the encoder frozen), or "all", kdgrid's earlier form (every parameter on the trial's full objective).
LAYER_CURRICULUM_LAST = "layer_curriculum_last"
CLASSIFIER_LAST, ALL_LAST = "classifier", "all"
LAST_STAGES: tuple[str, ...] = (CLASSIFIER_LAST, ALL_LAST)
DEFAULT_LAST = CLASSIFIER_LAST
HEAD = None  # `parameter_layer` of the pooler and the heads: what the classifier stage trains
# The optimizer across stages (option ``layer_curriculum_optimizer``): "fresh", the paper's (a new Adam in each
# stage: its state cleared at every stage's first step), or "shared", kdgrid's earlier form (one AdamW throughout).
LAYER_CURRICULUM_OPTIMIZER = "layer_curriculum_optimizer"
STAGE_OPTIMIZERS: tuple[str, ...] = ("fresh", "shared")
DEFAULT_STAGE_OPTIMIZER = "fresh"

# A student parameter's layer: BERT's encoder layer i (0-based in the name) is layer i + 1; the embeddings are 0.
_ENCODER_LAYER = re.compile(r"(?:^|\.)encoder\.layer\.(\d+)\.")
_EMBEDDINGS = re.compile(r"(?:^|\.)embeddings\.")


def boundaries_problem(value: Any) -> str | None:
    """Why ``layer_curriculum`` = ``value`` is not allowed: a non-empty list of numbers strictly increasing in
    (0, 1)."""
    ok = (
        isinstance(value, list | tuple)
        and len(value) > 0
        and all(isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) for v in value)
        and all(0 < v < 1 for v in value)
        and all(a < b for a, b in itertools.pairwise(value))
    )
    if ok:
        return None
    return (
        f"option {LAYER_CURRICULUM}={value!r} is invalid; allowed: a list of stage boundaries, fractions of the "
        "training steps strictly increasing in (0, 1), one per matched student layer (e.g. [0.2, 0.4])"
    )


def last_stage_problem(value: Any) -> str | None:
    """Why ``layer_curriculum_last`` = ``value`` is not allowed (None when it is)."""
    if isinstance(value, str) and value in LAST_STAGES:
        return None
    return f"option {LAYER_CURRICULUM_LAST}={value!r} is invalid; allowed: {', '.join(LAST_STAGES)}"


def stage_optimizer_problem(value: Any) -> str | None:
    """Why ``layer_curriculum_optimizer`` = ``value`` is not allowed (None when it is)."""
    if isinstance(value, str) and value in STAGE_OPTIMIZERS:
        return None
    return f"option {LAYER_CURRICULUM_OPTIMIZER}={value!r} is invalid; allowed: {', '.join(STAGE_OPTIMIZERS)}"


def stage_layers(pairs: Iterable[tuple[int, int] | None]) -> tuple[int, ...]:
    """The student layers of the layer stages, shallow to deep: those of the pairs some term is placed on."""
    return tuple(sorted({pair[0] for pair in pairs if pair is not None and pair[0] > 0}))


def curriculum_layers(knowledge: Iterable[str], pairs: Iterable[tuple[int, int]]) -> tuple[int, ...]:
    """The student layers of the layer stages of a trial with ``knowledge`` on the strategy's ``pairs``: those of
    its knowledge terms (`kdgrid.core.knowledge.placed_terms`: no soft or hard label, no knowledge without
    layers, no ``embedding_mse``, no attention term on layer 0), as `Curriculum.of` counts them from the
    objective's terms."""
    return stage_layers(pair for _, pair in placed_terms(list(knowledge), list(pairs)))


def curriculum_problems(trial: Any, pairs: list[tuple[int, int]] | None) -> list[str]:
    """What a trial with ``layer_curriculum`` cannot combine with (empty when it can, or without the option):
    no strategy or knowledge terms to match (the soft and hard labels are none), an optimiser or log that takes
    the gradients apart, or a boundary count other than the student layers its knowledge terms are placed on
    (`curriculum_layers`; ``pairs``: the strategy's, None when the shapes are unknown)."""
    boundaries = trial.option(LAYER_CURRICULUM)
    if boundaries is None:
        return [
            f"option {name} is a setting of {LAYER_CURRICULUM}: it needs it"
            for name in (LAYER_CURRICULUM_LAST, LAYER_CURRICULUM_OPTIMIZER)
            if trial.option(name) is not None
        ]
    problems: list[str] = []
    if trial.option(LAYER_CURRICULUM_LAST, DEFAULT_LAST) == CLASSIFIER_LAST and not trial.alpha > 0:
        problems.append(
            f"option {LAYER_CURRICULUM}'s last stage trains the classifier on the gold labels "
            f"({LAYER_CURRICULUM_LAST}: {CLASSIFIER_LAST}): it needs alpha > 0 (here {trial.alpha:g}), or "
            f"{LAYER_CURRICULUM_LAST}: {ALL_LAST}"
        )
    if trial.strategy is None or not distilled_knowledge(trial.knowledge):
        problems.append(
            f"option {LAYER_CURRICULUM} trains the student layer by layer against matched teacher layers: it needs "
            f"a strategy and knowledge other than soft_label and hard_label; here strategy {trial.strategy!r}, "
            f"knowledge {list(trial.knowledge)}"
        )
    if trial.option(OPTIMIZER) in GRADIENT_SPLITTING or trial.option("grad_cosine_batches") is not None:
        splitting = ", ".join(repr(name) for name in sorted(GRADIENT_SPLITTING))
        problems.append(
            f"option {LAYER_CURRICULUM} cannot go with optimizer {splitting} or grad_cosine_batches: its layer "
            "stages have no task gradient"
        )
    if pairs is not None and not problems:
        try:
            layers = curriculum_layers(trial.knowledge, pairs)
        except ConfigError:  # an unknown knowledge: refused, with the allowed names, by its own check
            return problems
        if len(layers) != len(boundaries):
            problems.append(
                f"option {LAYER_CURRICULUM} has {len(boundaries)} boundaries, but strategy {trial.strategy!r} "
                f"matches {len(layers)} student layers {list(layers)} with knowledge terms of knowledge "
                f"{list(trial.knowledge)}: give one boundary per such layer (knowledge without layers, "
                "embedding_mse and attention knowledge on layer 0 place no term there)"
            )
    return problems


def parameter_layer(name: str) -> int | None:
    """The student layer a parameter belongs to (0 for the embeddings), None for the rest (pooler, heads)."""
    found = _ENCODER_LAYER.search(name)
    if found:
        return int(found.group(1)) + 1
    return 0 if _EMBEDDINGS.search(name) else None


@dataclass(frozen=True)
class Curriculum:
    """The stages of one trial: ``boundaries`` (b_1..b_K) and the student ``layers`` (s_1..s_K) they train."""

    boundaries: tuple[float, ...]
    layers: tuple[int, ...]
    terms: tuple[tuple[str, ...], ...]  # the knowledge terms of each layer stage
    last: str = DEFAULT_LAST  # the last stage: the classifier on the labels, or everything on the full objective
    optimizer: str = DEFAULT_STAGE_OPTIMIZER  # a fresh optimizer state in each stage, or one shared

    @classmethod
    def of(
        cls,
        boundaries: Iterable[float],
        terms: Iterable[tuple[str, tuple[int, int] | None]],
        last: str = DEFAULT_LAST,
        optimizer: str = DEFAULT_STAGE_OPTIMIZER,
    ) -> Curriculum:
        """From the option's boundaries, the trial's (term name, pair) list and the last stage's kind.

        Raises:
            ConfigError: the boundaries do not match the student layers the terms are placed on.
        """
        bounds, named = tuple(float(b) for b in boundaries), list(terms)
        layers = stage_layers(pair for _, pair in named)
        if len(layers) != len(bounds):
            raise ConfigError(
                f"option {LAYER_CURRICULUM} has {len(bounds)} boundaries for {len(layers)} matched student "
                f"layers {list(layers)}"
            )
        per_stage = tuple(
            tuple(name for name, pair in named if pair is not None and pair[0] == layer) for layer in layers
        )
        return cls(bounds, layers, per_stage, last, optimizer)

    @property
    def full_stage(self) -> int:
        """The index of the last stage, the full objective."""
        return len(self.layers)

    def stage(self, step_index: int, total_steps: int) -> int:
        """The stage of the 0-based ``step_index`` among ``total_steps``: ``#{i : k >= b_i S}``."""
        return sum(step_index >= b * total_steps for b in self.boundaries)

    def first_steps(self, total_steps: int) -> list[int]:
        """The first step (0-based) of every stage: 0, then ``ceil(b_i S)``.

        Raises:
            ConfigError: a stage would get no step.
        """
        starts = [0, *(math.ceil(b * total_steps) for b in self.boundaries)]
        ends = [*starts[1:], total_steps]
        empty = [j for j, (a, b) in enumerate(zip(starts, ends, strict=True)) if b <= a]
        if empty:
            raise ConfigError(
                f"option {LAYER_CURRICULUM}={list(self.boundaries)}: stage(s) {empty} get no step of the trial's "
                f"{total_steps} (stage starts {starts}); spread the boundaries or train longer"
            )
        return starts

    def restarts_optimizer(self, step_index: int, total_steps: int) -> bool:
        """Whether the 0-based ``step_index`` is a later stage's first step under a fresh optimizer per stage (the
        optimizer's state is then cleared before the step: a new Adam, as the paper's stages start)."""
        return self.optimizer == "fresh" and step_index in self.first_steps(total_steps)[1:]

    def trainable_layers(self, stage: int) -> frozenset[int | None] | None:
        """The student layers that learn in ``stage`` (0 = the embeddings; `HEAD` = the pooler and the heads, in
        the classifier stage); None in a last stage of kind ``all`` (every parameter)."""
        if stage >= self.full_stage:
            return None if self.last == ALL_LAST else frozenset({HEAD})
        low = 0 if stage == 0 else self.layers[stage - 1] + 1
        return frozenset(range(low, self.layers[stage] + 1))

    def stage_terms(self, stage: int) -> frozenset[str] | None:
        """The terms the stage minimises (the last: the hard labels alone, or None: every term)."""
        if stage >= self.full_stage:
            return None if self.last == ALL_LAST else frozenset({"hard"})
        return frozenset(self.terms[stage])

    def summary(self, total_steps: int) -> dict[str, Any]:
        """What the row records: the boundaries and, per stage, its first step, layer, terms and trained layers."""
        starts = self.first_steps(total_steps)
        stages: list[dict[str, Any]] = [
            {
                "first_step": starts[j],
                "student_layer": layer,
                "terms": list(self.terms[j]),
                "trainable_layers": sorted(self.trainable_layers(j) or ()),
            }
            for j, layer in enumerate(self.layers)
        ]
        last = (
            {"terms": "all", "trainable_layers": "all"}
            if self.last == ALL_LAST
            else {"terms": ["hard"], "trainable_layers": "classifier"}
        )
        stages.append({"first_step": starts[-1], "student_layer": None, **last})
        return {
            "boundaries": list(self.boundaries),
            "total_steps": total_steps,
            "last": self.last,
            "optimizer": self.optimizer,
            "stages": stages,
        }


def drop_frozen_gradients(
    named_parameters: Iterable[tuple[str, Any]], trainable: frozenset[int | None] | None
) -> None:
    """Clear the gradient of every parameter outside the ``trainable`` layers (pooler and heads included), so
    the optimiser skips it this step; ``trainable`` None (the full stage) leaves every gradient."""
    if trainable is None:
        return
    for name, param in named_parameters:
        if parameter_layer(name) not in trainable:
            param.grad = None


def curriculum_rule(facts: TrialFacts) -> list[str]:
    """`curriculum_problems` of a trial, with its layer pairs where they are known; the student is a BERT (a
    parameter's layer is found by BERT's module names)."""
    return bert_only(facts.trial, LAYER_CURRICULUM) + curriculum_problems(facts.trial, facts.pairs)


register_option(
    LAYER_CURRICULUM,
    "number_list",
    None,
    "train the student layer by layer, shallow to deep, then on the full objective: the stage boundaries as "
    "fractions of the training steps, one per matched student layer (kdgrid.core.methods.layer_curriculum); "
    "unset: none",
    check=boundaries_problem,
)
register_option(
    LAYER_CURRICULUM_LAST,
    "text",
    None,
    "layer_curriculum: the last stage, classifier (the paper's: the pooler and the heads on the gold labels alone, "
    "the encoder frozen) or all (every parameter on the full objective); unset: classifier",
    check=last_stage_problem,
)
register_option(
    LAYER_CURRICULUM_OPTIMIZER,
    "text",
    None,
    "layer_curriculum: fresh (the paper's: the optimizer's state cleared at each stage's first step) or shared "
    "(one optimizer state throughout); unset: fresh",
    check=stage_optimizer_problem,
)

register_method(
    MethodSpec(
        name="layer_curriculum",
        title="layer-wise curriculum extraction: the student trained layer by layer, shallow to deep, then whole "
        "(layer_curriculum)",
        paper="curriculum extraction, layer by layer (docs/learned_methods.md)",
        options=(LAYER_CURRICULUM, LAYER_CURRICULUM_LAST, LAYER_CURRICULUM_OPTIMIZER),
        rules=(("combination", curriculum_rule),),
        uses=lambda trial: trial.option(LAYER_CURRICULUM) is not None,
        hooks="kdgrid.core.methods.layer_curriculum.hooks:step_hooks",
        presets=(
            Preset(
                "paper",
                options=((LAYER_CURRICULUM_LAST, CLASSIFIER_LAST), (LAYER_CURRICULUM_OPTIMIZER, "fresh")),
                adapted="the paper's classifier last stage and a fresh optimizer per stage, written into the trial; "
                "its equal stages are the boundaries [1/(K+1), ..., K/(K+1)] for K layer stages, which the study "
                "names itself (the option that turns the method on)",
            ),
        ),
    )
)
