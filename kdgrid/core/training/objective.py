"""The paper's objective (eq. 9) for one trial:

    L = soft_weight * L_soft(T) + alpha * L_hard + sum_k sum_l beta_kl * L_kl(f_T^l, f_S^l)

- ``L_soft``: cross-entropy of the student's softmax(z_S / T) against the teacher's softmax(z_T / T), averaged over
  the batch (regression: MSE between the two outputs). Option ``soft_t2`` multiplies it by T^2 (Hinton's scaling;
  the paper's numbers do not use it). With a learned temperature (`kdgrid.core.temperature_learner`) the value is
  the same, but the temperature's gradient is the KL divergence's (`Objective.soft_value`).
- ``L_hard``: cross-entropy with the gold labels (regression: MSE), averaged over the batch.
- ``L_kl``: knowledge type k (`kdgrid.core.knowledge`) on matched layer pair l = (student layer, teacher layer)
  from `kdgrid.core.matching`; student features go through a learned `Projection` to the teacher's width where the
  knowledge needs one (one projection per term). Knowledge on attention features (scores, Q, K, V) skips pairs
  that involve layer 0 (the embeddings have no attention).
- ``beta_kl``: the trial's ``beta``, or ``"auto"``: calibrated once on warm-up batches so that each term's mean
  equals 1/10 of the soft loss's mean (`calibrate`); the chosen weights are recorded.

Extension points read here (docs/extending.md): a learnable strategy's mapping (`kdgrid.core.mapping`) builds the
target of each term on a student layer from every teacher layer, and is owned by this module (so it trains, is
checkpointed and resumes with the projections); a per-example weight (option ``example_weight``,
`kdgrid.core.example_weights`) scales each example's soft loss; schedules (options ``{target}_schedule`` and
``{target}_end``, `kdgrid.core.schedules`) move the temperature, ``soft_weight``, ``alpha`` and a factor on every
knowledge weight over the training steps (`set_progress`). With none of them set, the numbers are exactly those
of eq. 9 above.

Terms are named ``soft``, ``hard`` and ``{knowledge}@{student layer}-{teacher layer}`` (``{knowledge}`` alone
for a knowledge without layers); `term_values` returns each unweighted, so the row can report them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from kdgrid.core.example_weights import DEFAULT_EXAMPLE_WEIGHT, ExampleBatch, normalised_weights
from kdgrid.core.knowledge import distilled_knowledge, get_knowledge, is_projected, placed_terms, term_name
from kdgrid.core.losses import compute_knowledge
from kdgrid.core.losses.logits import (
    soft_label_per_example,
    teacher_entropy_per_example,
    teacher_loss_per_example,
)
from kdgrid.core.mapping import LayerMapping, build_mapping
from kdgrid.core.matching import get_strategy, mapping_context
from kdgrid.core.method_registry import step_hooks
from kdgrid.core.model.capture import Features
from kdgrid.core.model.projection import Projection
from kdgrid.core.model.shapes import StudentShape
from kdgrid.core.options import EXAMPLE_WEIGHT, TEMPERATURE_LEARNER, end_option, schedule_option
from kdgrid.core.schedules import (
    DEFAULT_SCHEDULE,
    KNOWLEDGE_WEIGHT,
    NO_TEMPERATURE_LEARNER,
    SCHEDULED,
    progress,
    schedule_value,
)
from kdgrid.core.step_hooks import StepHooks
from kdgrid.core.teacher.targets import teacher_side, trainable_targets
from kdgrid.core.temperature_learner import TemperatureLearner, build_temperature_learner
from kdgrid.errors import ConfigError
from kdgrid.trial import Trial

LAYER_FEATURES = ("scores", "hidden", "query", "key", "value")
AUTO_TARGET_RATIO = 0.1  # auto weights bring each knowledge term to 1/10 of the soft loss


class DivergenceError(RuntimeError):
    """A loss term became NaN or infinite; names the step, the term and the layer pair."""

    def __init__(self, step: int, term: str, pair: tuple[int, int] | None, value: float) -> None:
        where = f" on layer pair (student {pair[0]}, teacher {pair[1]})" if pair is not None else ""
        super().__init__(f"diverged at step {step}: loss term {term!r}{where} is {value}")
        self.step, self.term, self.pair, self.value = step, term, pair, value


@dataclass(frozen=True)
class Term:
    """One knowledge term: a knowledge type applied on one (student layer, teacher layer) pair, or once
    (``pair`` None) for a knowledge without layers."""

    name: str
    knowledge: str
    pair: tuple[int, int] | None
    projected: bool
    mapped: bool = False  # the target comes from a learnable strategy's mapping over every teacher layer


def knowledge_options(trial: Trial, knowledge: str) -> dict[str, Any]:
    """A knowledge's variants from the trial's options, written ``{knowledge}.{option}`` (``pkd.scale``)."""
    prefix = f"{knowledge}."
    return {key[len(prefix) :]: value for key, value in trial.options if key.startswith(prefix)}


def knowledge_terms(
    trial: Trial, pairs: list[tuple[int, int]], student: StudentShape, teacher: StudentShape
) -> list[Term]:
    """The terms of a trial (its knowledge x the strategy's pairs, by each knowledge's placement).

    Raises `ConfigError` for an unknown knowledge or option, or a knowledge that needs a projection the trial
    forbids (``projection: none`` with different widths).
    """
    learnable = trial.strategy is not None and get_strategy(trial.strategy).learnable
    projected: dict[str, bool] = {}
    for name in distilled_knowledge(trial.knowledge):  # the soft and hard labels are eq. 9's own terms
        spec = get_knowledge(name)
        unknown = sorted(set(knowledge_options(trial, spec.name)) - set(spec.options()))
        if unknown:
            raise ConfigError(
                f"knowledge {spec.name!r} has no option(s) {unknown}; allowed: {sorted(spec.options()) or 'none'}"
            )
        projected[spec.name] = is_projected(spec.name, student.width, teacher.width)
        if projected[spec.name] and trial.projection == "none":
            raise ConfigError(
                f"knowledge {spec.name!r} needs a projection from the student's width {student.width} to the "
                f"teacher's {teacher.width}, but projection is 'none'; use projection 'linear' or 'mlp'"
            )
    # placed as plan counts them (`placed_terms`: no attention term on the embedding layer 0)
    return [
        Term(
            term_name(name, pair),
            name,
            pair,
            projected[name],
            learnable and pair is not None and get_knowledge(name).placement == "pairs",
        )
        for name, pair in placed_terms(trial.knowledge, pairs)
    ]


def _features_for(features: Features, needs: frozenset[str], layer: int | None) -> dict[str, torch.Tensor]:
    """The feature dict `kdgrid.core.losses.compute_knowledge` reads for one side of one term."""
    out: dict[str, torch.Tensor] = {}
    for need in needs:
        if need in LAYER_FEATURES:
            out[need] = features.layer_feature(need, 0 if layer is None else layer)
        elif need == "embeddings":
            out[need] = features.embeddings
        elif need == "sentence":
            out[need] = features.sentence
        elif need == "logits":
            out[need] = features.logits
    return out


class Objective(nn.Module):
    """Eq. 9 for one trial; owns the trial's projections (their parameters train with the student).

    Args:
        trial: the trial (weights, temperature, knowledge, projection kind, relation heads, options).
        terms: from `knowledge_terms`.
        student, teacher: the two shapes (for projections and relation heads).
        regression: the task has one output (MSE losses).
        teacher_head: ReAugKD's frozen head (`kdgrid.core.methods.reaugkd.projection_head`): maps the teacher's
            sentence vector ``[B, d_T]`` into the student's width, so sentence knowledge needs no student
            projection; None (default) leaves the teacher's features as they are.
        hooks: the trial's methods' hooks (`kdgrid.core.step_hooks`; the student's, so both share one set);
            None: built here for the trial.
    """

    def __init__(
        self,
        trial: Trial,
        terms: list[Term],
        student: StudentShape,
        teacher: StudentShape,
        regression: bool,
        teacher_head: Callable[[torch.Tensor], torch.Tensor] | None = None,
        hooks: list[StepHooks] | None = None,
    ) -> None:
        super().__init__()
        self.trial = trial
        self.hooks = step_hooks(trial) if hooks is None else hooks
        self.teacher_head = teacher_head
        if teacher_head is not None:  # the head brings the teacher to the student's width: no projection
            terms = [
                dataclasses.replace(t, projected=False)
                if get_knowledge(t.knowledge).needs == {"sentence"}
                else t
                for t in terms
            ]
        self.terms = terms
        self.regression = regression
        self.relation_heads = trial.relation_heads or student.heads
        self.heads = (student.heads, teacher.heads)
        self.options = {term.knowledge: knowledge_options(trial, term.knowledge) for term in terms}
        self.specs = {term.knowledge: get_knowledge(term.knowledge) for term in terms}
        projection_kwargs: dict[str, Any] = {}
        for hook in self.hooks:
            projection_kwargs.update(hook.projection_kwargs())
        self.projections = nn.ModuleDict(
            {
                _module_key(term.name): Projection(
                    student.width, teacher.width, kind=trial.projection, **projection_kwargs
                )
                for term in terms
                if term.projected
            }
        )
        # After the projections: their seeded draw is the same whether or not the strategy learns.
        self.mapping: LayerMapping | None = None
        if any(term.mapped for term in terms):
            context = mapping_context(trial, student, teacher)
            self.mapping = build_mapping(trial.strategy, context)
        self.temperature_learner: TemperatureLearner | None = build_temperature_learner(
            str(trial.option(TEMPERATURE_LEARNER, NO_TEMPERATURE_LEARNER)), trial.temperature, dict(trial.options)
        )
        self.auto = isinstance(trial.beta, str)
        self.betas: dict[str, float] = {} if self.auto else {term.name: float(trial.beta) for term in terms}
        # T^2 on the soft term: the option, else a method's default (CTKD's paper form), else off
        soft_t2_default = next((d for h in self.hooks if (d := h.default_soft_t2()) is not None), False)
        self.soft_t2 = bool(trial.option("soft_t2", soft_t2_default))
        self.example_weight = str(trial.option(EXAMPLE_WEIGHT, DEFAULT_EXAMPLE_WEIGHT))
        # Each scheduled value's schedule and end, read once here rather than from the options at every step.
        self.schedules: dict[str, tuple[str, float | None]] = {
            target: (str(trial.option(schedule_option(target), DEFAULT_SCHEDULE)), trial.option(end_option(target)))
            for target in SCHEDULED
        }
        self.progress = 0.0
        self.loss_weights: nn.Module | None = None  # learned loss weights, where a method owns them here (LKD's)
        for hook in self.hooks:  # after every seeded draw above: a method's parts change none of them
            hook.build_objective(self)

    def set_progress(self, step_index: int, total_steps: int) -> None:
        """Where training is: the 0-based index of the coming optimiser step among ``total_steps``
        (`kdgrid.core.schedules.progress`); the schedules read it."""
        self.progress = progress(step_index, total_steps)
        for hook in self.hooks:
            hook.set_progress(self, step_index, total_steps)

    def scheduled(self, target: str, start: float) -> float:
        """``target``'s value now: its schedule (option ``{target}_schedule``) from ``start`` to the option
        ``{target}_end`` (default ``start``); exactly ``start`` under the default constant schedule."""
        name, end = self.schedules[target]
        if name == DEFAULT_SCHEDULE:
            return start
        return schedule_value(name, self.progress, start, start if end is None else float(end))

    @property
    def temperature(self) -> float | torch.Tensor:
        """The soft-label temperature now: the trial's, or its schedule's value, or what a temperature learner
        makes of that (a 0-dim tensor whose graph reaches the learner's parameters)."""
        scheduled = self.scheduled("temperature", self.trial.temperature)
        if self.temperature_learner is None:
            return scheduled
        return self.temperature_learner(self.progress, scheduled)

    @property
    def calibrated(self) -> bool:
        return len(self.betas) == len(self.terms)

    def weights(self) -> dict[str, float]:
        """Every term's weight now (auto weights once calibrated; scheduled weights at the current progress)."""
        factor = self.scheduled(KNOWLEDGE_WEIGHT, 1.0)
        betas = self.betas if factor == 1.0 else {name: beta * factor for name, beta in self.betas.items()}
        weights = {
            "soft": self.scheduled("soft_weight", self.trial.soft_weight),
            "hard": self.scheduled("alpha", self.trial.alpha),
            **betas,
        }
        for hook in self.hooks:  # the terms a method adds (a penalty), after eq. 9's
            weights.update(hook.extra_terms(self))
        return weights

    def term_values(
        self, student: Features, teacher: Features, labels: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """Each term's unweighted value (0-dim float32 tensors) for one batch; ``soft`` at the trial's temperature
        (times T^2 with the option ``soft_t2``), ``hard`` against the gold labels.

        The losses are computed in float32 with autocast off, whatever precision the forward passes ran in
        (`kdgrid.core.model.runtime`): both sides' features and logits are cast to float32 first, so softmaxes, logs,
        Gram products and relations never round to bf16/fp16 (the projections run in float32 too).

        A method with a loss of its own gives its terms' values in place of all these (`StepHooks.own_values`)."""
        own = next((v for h in self.hooks if (v := h.own_values(self, student, teacher, labels)) is not None), None)
        if own is not None:
            return own
        temperature = self.temperature  # once per step: a learner's forward pass runs once, not once per term
        with torch.autocast(device_type=student.logits.device.type, enabled=False):
            s_logits, t_logits = {"logits": student.logits.float()}, {"logits": teacher.logits.float()}
            # A dual-head student's soft loss reads its distillation head (kdgrid.core.methods.dual_head.heads), weighted per
            # example or not.
            soft_s = (
                s_logits if student.distill_logits is None else {"logits": student.distill_logits.float()}
            )
            alphas = self.instance_trade_off(t_logits["logits"], labels)
            values = {
                "soft": self.soft_value(soft_s["logits"], t_logits["logits"], labels, temperature, alphas),
                "hard": self.hard_value(s_logits["logits"], labels, alphas),
            }
        values = {**values, **self.knowledge_values(student, teacher, labels, temperature)}
        for hook in self.hooks:
            values.update(hook.extra_values(self))
        return values

    def instance_trade_off(self, logits_t: torch.Tensor, labels: torch.Tensor) -> torch.Tensor | None:
        """A method's per-example trade-off ``alpha_i`` ``[B]`` between each example's soft and hard losses
        (`StepHooks.instance_trade_off`: AdaKD's), None where no method of the trial trades them."""
        teacher_loss: list[torch.Tensor] = []

        def loss() -> torch.Tensor:  # computed once, and only for a method that reads it
            if not teacher_loss:
                teacher_loss.append(teacher_loss_per_example(logits_t, labels, regression=self.regression))
            return teacher_loss[0]

        return next((a for h in self.hooks if (a := h.instance_trade_off(self, loss)) is not None), None)

    def hard_value(
        self, logits_s: torch.Tensor, labels: torch.Tensor, alphas: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The hard term: `hard_label`, or under a per-example trade-off ``mean_i (1 - alpha_i) hard_i``."""
        if alphas is None:
            return compute_knowledge(
                "hard_label", {"logits": logits_s}, {}, labels=labels, options={"regression": self.regression}
            )
        if self.regression:
            per_example = (logits_s[:, 0] - labels.to(logits_s.dtype)).pow(2)
        else:
            per_example = torch.nn.functional.cross_entropy(logits_s, labels.long(), reduction="none")
        return ((1 - alphas) * per_example).mean()

    def soft_value(
        self,
        logits_s: torch.Tensor,
        logits_t: torch.Tensor,
        labels: torch.Tensor,
        temperature: float | torch.Tensor | None = None,
        alphas: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The soft term: `soft_label` at ``temperature`` (None: the temperature now, `temperature`), or with per-example weights ``mean_i w_i * soft_i``,
        the weights normalised to average 1 over the batch (`kdgrid.core.example_weights.normalised_weights`);
        times T^2 with ``soft_t2``.

        With a temperature learner (classification), the value stays this cross-entropy but its gradient is that
        of the KL divergence ``KL(p_T || p_S) = CE - H(p_T)`` (the same weights and T^2 factor): the teacher's
        entropy ``H(p_T)`` is subtracted and added back detached. The student's gradient is unchanged (the entropy
        does not depend on it); the temperature's follows the KL, which CTKD maximises (Li et al., AAAI 2023),
        rather than the entropy, which grows with T whatever the student does.

        A method may put its own loss per example in place of the cross-entropy (`StepHooks.soft_per_example`: a
        dual head's binary divergences, which carry their own T^2 and have no entropy part); per-example
        ``alphas`` (a trade-off, `instance_trade_off`) weight it unnormalised, in place of the example weight."""
        temperature = self.temperature if temperature is None else temperature
        own = next(
            (v for h in self.hooks if (v := h.soft_per_example(self, logits_s, logits_t, temperature)) is not None),
            None,
        )
        weights = alphas
        if self.example_weight == DEFAULT_EXAMPLE_WEIGHT and own is None and alphas is None:
            loss = compute_knowledge(
                "soft_label",
                {"logits": logits_s},
                {"logits": logits_t},
                temperature=temperature,
                options={"t2": self.soft_t2, "regression": self.regression},
            )
        else:
            per_example = (
                own
                if own is not None
                else soft_label_per_example(logits_s, logits_t, temperature, regression=self.regression)
            )
            if weights is None and self.example_weight != DEFAULT_EXAMPLE_WEIGHT:
                batch = ExampleBatch(
                    student_logits=logits_s.detach(),
                    teacher_logits=logits_t.detach(),
                    labels=labels,
                    teacher_loss=teacher_loss_per_example(logits_t, labels, regression=self.regression),
                    regression=self.regression,
                    progress=self.progress,
                    options=dict(self.trial.options),
                )
                weights = normalised_weights(self.example_weight, batch)
            loss = per_example.mean() if weights is None else (weights * per_example).mean()
            loss = loss * temperature**2 if self.soft_t2 and own is None else loss
        if self.temperature_learner is None or self.regression or own is not None:
            return loss  # regression's soft term, a squared distance, has no entropy part; nor a divergence
        per_entropy = teacher_entropy_per_example(logits_t, temperature)
        entropy = per_entropy.mean() if weights is None else (weights * per_entropy).mean()
        entropy = entropy * temperature**2 if self.soft_t2 else entropy
        return loss - entropy + entropy.detach()

    def knowledge_values(
        self,
        student: Features,
        teacher: Features,
        labels: torch.Tensor | None = None,
        temperature: float | torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        """Each knowledge term's unweighted value (0-dim float32 tensors), without the soft and hard terms: what
        task distillation adds to them, and what general distillation adds to the masked-LM loss
        (`kdgrid.pretrain.loss`). Computed in float32 with autocast off (see `term_values`), at ``temperature``
        (None: the temperature now, computed once for every term)."""
        temperature = self.temperature if temperature is None else temperature
        if self.mapping is not None:
            self.mapping.begin_batch()  # the terms below are one batch's (a mapping's statistics count it once)
        with torch.autocast(device_type=student.mask.device.type, enabled=False):
            values: dict[str, torch.Tensor] = {}
            for term in self.terms:
                spec = self.specs[term.knowledge]
                s_layer, t_layer = term.pair if term.pair is not None else (None, None)
                s_feats = {k: v.float() for k, v in _features_for(student, spec.needs, s_layer).items()}
                mask = student.mask
                for hook in self.hooks:  # which tokens the term compares (ALP-KD's [CLS] alone)
                    mask = hook.term_mask(self, term, mask)
                if term.mapped:
                    with trainable_targets():
                        t_feats = self._mapped_targets(term, s_feats, teacher)
                        values[term.name] = self._term_value(term, s_feats, t_feats, mask, labels, temperature)
                    continue
                t_feats = {  # one fp32 copy per batch for the whole group (a no-op for fp32 features)
                    k: teacher_side(("float",), (v,), v.float)
                    for k, v in _features_for(teacher, spec.needs, t_layer).items()
                }
                if self.teacher_head is not None and "sentence" in t_feats:
                    t_feats["sentence"] = self.teacher_head(t_feats["sentence"])
                for hook in self.hooks:  # a method's per-term target (Flex-KD's selected dimensions)
                    t_feats = hook.teacher_features(self, term, t_feats)
                values[term.name] = self._term_value(term, s_feats, t_feats, mask, labels, temperature)
        return values

    def _term_value(
        self,
        term: Term,
        s_feats: dict[str, torch.Tensor],
        t_feats: dict[str, torch.Tensor],
        mask: torch.Tensor,
        labels: torch.Tensor | None,
        temperature: float | torch.Tensor,
    ) -> torch.Tensor:
        return compute_knowledge(
            term.knowledge,
            s_feats,
            t_feats,
            mask,
            projection=self.projections[_module_key(term.name)] if term.projected else None,
            heads_s=self.heads[0],
            heads_t=self.heads[1],
            relation_heads=self.relation_heads,
            temperature=temperature,
            labels=labels,
            options=self.options[term.knowledge],
        )

    def _mapped_targets(
        self, term: Term, s_feats: dict[str, torch.Tensor], teacher: Features
    ) -> dict[str, torch.Tensor]:
        """The targets the learnable mapping builds for a term from the teacher's feature on every layer."""
        assert self.mapping is not None and term.pair is not None
        layers = range(1, self.mapping.context.teacher_layers + 1)
        targets: dict[str, torch.Tensor] = {}
        for need, student_feature in s_feats.items():
            per_layer = [
                teacher_side(("float",), (v,), v.float)
                for v in (teacher.layer_feature(need, layer) for layer in layers)
            ]
            targets[need] = self.mapping(need, term.pair[0], student_feature, per_layer)
        return targets

    def formulation(self) -> dict[str, str]:
        """Which formulation each paper method of the trial computes, by option, where an option's default changed
        meaning (an option at its default is not written into the trial, so its id cannot say): each method's
        `StepHooks.formulation` (the dual head's loss, AdaKD's form, CTKD's form, ALP-KD's compared tokens, DOT's
        one-sided step, a curriculum's last stage, LAD's aggregation). A row without it was computed before, with
        kdgrid's earlier forms."""
        found: dict[str, str] = {}
        for hook in self.hooks:
            found.update(hook.formulation(self))
        return found

    def learned_parts(self) -> dict[str, dict[str, Any]]:
        """What the row records of the learned parts: ``mapping`` and ``learned_temperature``, where present, and
        the ``formulation`` of its paper methods (`formulation`)."""
        parts: dict[str, dict[str, Any]] = {}
        formulation = self.formulation()
        if formulation:
            parts["formulation"] = formulation
        if self.mapping is not None:
            parts["mapping"] = self.mapping.summary()
        if self.temperature_learner is not None:
            parts["learned_temperature"] = self.temperature_learner.summary()
        return parts

    def learned_modules(self) -> list[nn.Module]:
        """The learned parts beside the student: the learnable mapping, the learned temperature and a method's
        (LKD's weights), where present."""
        learned = [module for module in (self.mapping, self.temperature_learner) if module is not None]
        for hook in self.hooks:
            learned += hook.learned_modules(self)
        return learned

    def learned_parameter_count(self) -> int:
        """The parameters of the learnable mapping, the learned temperature and LKD's weights (not projections)."""
        return sum(p.numel() for module in self.learned_modules() for p in module.parameters())

    def total(self, values: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The weighted sum; a term of weight 0 is left out (so a hard-only baseline ignores the teacher). The
        weights are the terms' now as the trial's methods make them for the step (`StepHooks.step_weights`: under
        LKD each times its learned multiplier, without gradient; in a layer stage of a curriculum, 0 for the terms
        outside the stage)."""
        weights = self.weights()
        for hook in self.hooks:
            weights = hook.step_weights(self, weights)
        total = torch.zeros((), device=next(iter(values.values())).device)
        for name, value in values.items():
            weight = weights[name]
            if weight != 0:
                total = total + weight * value
        return total

    def check_finite(self, values: Mapping[str, torch.Tensor], total: torch.Tensor, step: int) -> None:
        """Raise `DivergenceError` naming the first non-finite weighted term (or the total)."""
        if torch.isfinite(total):
            return
        weights = self.weights()
        pairs = {term.name: term.pair for term in self.terms}
        for name, value in values.items():
            weighted = value.item() * weights[name] if weights[name] != 0 else 0.0
            if not math.isfinite(value.item()) or not math.isfinite(weighted):
                raise DivergenceError(
                    step, name, pairs.get(name), weighted if math.isfinite(value.item()) else value.item()
                )
        raise DivergenceError(step, "total", None, total.item())

    def calibrate(self, means: Mapping[str, float]) -> dict[str, float]:
        """Set every knowledge term's weight to ``AUTO_TARGET_RATIO * mean(soft) / mean(term)`` (1 when the term
        is ~0 on the warm-up batches) from mean unweighted values; returns the chosen weights."""
        soft = means["soft"]
        for term in self.terms:
            value = means[term.name]
            self.betas[term.name] = (
                AUTO_TARGET_RATIO * soft / value if value > 1e-12 and math.isfinite(value) else 1.0
            )
        return dict(self.betas)


def _module_key(term_name: str) -> str:
    return term_name.replace("@", "_at_").replace("-", "_").replace(".", "_")


def captured_layers(terms: list[Term], side: int, last_layer: int) -> frozenset[int]:
    """The layers of one side (``side`` 0 = student, 1 = teacher) whose features these terms read: each term's
    layer on that side, and ``last_layer`` for a term without layers (sentence vectors are its [CLS] vector);
    on the teacher's side, every layer 1..``last_layer`` for a term a learnable mapping builds."""
    layers = {last_layer if term.pair is None else term.pair[side] for term in terms}
    if side == 1 and any(term.mapped for term in terms):
        layers |= set(range(1, last_layer + 1))
    return frozenset(layers)


def teacher_needs(terms: list[Term], specs: Mapping[str, Any]) -> frozenset[str]:
    """What the teacher (and the student) must capture for these terms (logits always)."""
    needs: set[str] = {"logits"}
    for term in terms:
        needs |= set(specs[term.knowledge].needs)
    return frozenset(needs)
