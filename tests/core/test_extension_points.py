"""The extension points against numbers computed here: schedules over the steps, per-example weights and their
normalisation, a learnable strategy's mapping (its gradient, the teacher layers it reads, its memory)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from kdgrid.core.example_weights import ExampleBatch, normalised_weights, register_example_weight
from kdgrid.core.mapping import LayerMapping
from kdgrid.core.matching import MappingContext, register_strategy
from kdgrid.core.model.capture import Features
from kdgrid.core.model.shapes import StudentShape, student_shape
from kdgrid.core.options import option_problems
from kdgrid.core.schedules import progress, register_schedule, register_temperature_learner, schedule_value
from kdgrid.core.temperature_learner import TemperatureLearner
from kdgrid.core.training.objective import Objective, captured_layers, knowledge_terms
from kdgrid.errors import ConfigError
from kdgrid.grid.memory_estimate import BYTES_PER_PARAMETER, GIB, _teacher_reads, estimate_trial_memory_gb
from kdgrid.trial import Trial
from tests.plugin_files import isolated_plugins

STUDENT = StudentShape(2, 8, 2, 16)
TEACHER = StudentShape(4, 8, 2, 16)


def trial(**kw: object) -> Trial:
    return Trial(task="synthetic-single-binary", teacher="t", student=STUDENT.name, **kw)  # type: ignore[arg-type]


def logits_features(logits: list[list[float]]) -> Features:
    z = torch.tensor(logits)
    return Features(logits=z, mask=torch.ones(z.shape[0], 3, dtype=torch.long), heads=2)


def _soft_by_hand(s: np.ndarray, t: np.ndarray, temperature: float) -> np.ndarray:
    """-sum_c softmax(t / T)_c log softmax(s / T)_c per example, in float64."""
    zs, zt = s / temperature, t / temperature
    log_ps = zs - np.log(np.exp(zs).sum(axis=1, keepdims=True))
    pt = np.exp(zt) / np.exp(zt).sum(axis=1, keepdims=True)
    return -(pt * log_ps).sum(axis=1)


# --- schedules ------------------------------------------------------------------------------------------------


def test_the_built_in_schedules_by_hand() -> None:
    assert schedule_value("constant", 0.7, 4.0, 2.0) == 4.0
    assert schedule_value("linear", 0.25, 4.0, 2.0) == pytest.approx(3.5)
    assert schedule_value("linear", 1.0, 4.0, 2.0) == pytest.approx(2.0)
    # cosine: end + (start - end) (1 + cos(pi p)) / 2; at p = 1/4: 2 + 2 (1 + 0.70710678...) / 2
    assert schedule_value("cosine", 0.25, 4.0, 2.0) == pytest.approx(2.0 + 1.0 + math.sqrt(0.5))
    assert schedule_value("cosine", 0.0, 4.0, 2.0) == pytest.approx(4.0)
    assert schedule_value("cosine", 0.5, 4.0, 2.0) == pytest.approx(3.0)
    assert [progress(k, 5) for k in range(5)] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert progress(0, 1) == 0.0
    with pytest.raises(ConfigError, match=r"allowed: constant, linear, cosine; did you mean 'cosine'"):
        schedule_value("cosin", 0.5, 1.0, 2.0)


def test_schedule_options_are_validated_naming_the_allowed_values() -> None:
    problems = option_problems(
        [("temperature_schedule", "cosin"), ("temperature_end", 0.001), ("alpha_end", -1)], ()
    )
    assert problems[0].startswith("option temperature_schedule='cosin' is invalid: schedule 'cosin'")
    assert "allowed: constant, linear, cosine" in problems[0]
    assert "temperature_end=0.001 is invalid; allowed: a finite number >= 0.01" in problems[1]
    assert "alpha_end=-1 is invalid" in problems[2]
    assert option_problems([("knowledge_weight_schedule", "linear"), ("knowledge_weight_end", 0.0)], ()) == []


def test_a_registered_schedule_is_an_allowed_value() -> None:
    with isolated_plugins():

        @register_schedule("step_half")
        def step_half(progress: float, start: float, end: float) -> float:
            return start if progress < 0.5 else end

        assert option_problems([("temperature_schedule", "step_half")], ()) == []
        assert schedule_value("step_half", 0.6, 4.0, 1.0) == 1.0
    assert option_problems([("temperature_schedule", "step_half")], ())  # gone with the plugin


def test_the_temperature_and_the_weights_follow_their_schedules() -> None:
    t = trial(
        temperature=4.0,
        soft_weight=1.0,
        alpha=0.0,
        options={
            "temperature_schedule": "linear",
            "temperature_end": 2.0,
            "alpha_schedule": "cosine",
            "alpha_end": 1.0,
        },
    )
    objective = Objective(t, [], STUDENT, TEACHER, regression=False)
    s, z = [[0.5, -1.0], [2.0, 0.0]], [[1.5, 0.0], [-0.5, 1.0]]
    objective.set_progress(2, 5)  # p = 0.5: T = 3, alpha = 1 + (0 - 1)(1 + cos(pi / 2)) / 2 = 0.5
    assert objective.temperature == pytest.approx(3.0)
    assert objective.weights()["hard"] == pytest.approx(0.5)
    values = objective.term_values(logits_features(s), logits_features(z), torch.tensor([0, 1]))
    expected = _soft_by_hand(np.array(s), np.array(z), 3.0).mean()
    assert values["soft"].item() == pytest.approx(expected, rel=1e-6)
    objective.set_progress(4, 5)
    assert objective.temperature == pytest.approx(2.0) and objective.weights()["hard"] == pytest.approx(1.0)


def test_the_knowledge_weight_schedule_scales_every_knowledge_weight() -> None:
    t = trial(
        knowledge=("hidden_mse",),
        strategy="Last-1",
        beta=10.0,
        options={"knowledge_weight_schedule": "linear", "knowledge_weight_end": 0.0},
    )
    terms = knowledge_terms(t, [(2, 4)], STUDENT, TEACHER)
    objective = Objective(t, terms, STUDENT, TEACHER, regression=False)
    objective.set_progress(1, 5)  # factor 1 + (0 - 1) * 0.25 = 0.75
    assert objective.weights()["hidden_mse@2-4"] == pytest.approx(7.5)
    assert objective.betas["hidden_mse@2-4"] == 10.0  # the calibrated / given weight itself is kept


# --- per-example weights --------------------------------------------------------------------------------------


def test_teacher_loss_weights_are_normalised_per_batch_and_scale_each_soft_loss() -> None:
    s = np.array([[0.5, -1.0], [2.0, 0.0], [0.0, 0.3]])
    z = np.array([[1.5, 0.0], [-0.5, 1.0], [0.2, 0.1]])
    labels = np.array([0, 0, 1])
    t = trial(temperature=2.0, options={"example_weight": "teacher_loss"})
    objective = Objective(t, [], STUDENT, TEACHER, regression=False)
    values = objective.term_values(logits_features(s.tolist()), logits_features(z.tolist()), torch.tensor(labels))
    # the teacher's cross-entropy per example, by hand; weights = losses / their mean
    log_pt = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    teacher_ce = -log_pt[np.arange(3), labels]
    weights = teacher_ce / teacher_ce.mean()
    assert weights.mean() == pytest.approx(1.0)
    expected = (weights * _soft_by_hand(s, z, 2.0)).mean()
    assert values["soft"].item() == pytest.approx(expected, rel=1e-6)
    uniform = Objective(trial(temperature=2.0), [], STUDENT, TEACHER, regression=False)
    plain = uniform.term_values(logits_features(s.tolist()), logits_features(z.tolist()), torch.tensor(labels))
    assert plain["soft"].item() == pytest.approx(_soft_by_hand(s, z, 2.0).mean(), rel=1e-6)
    assert abs(plain["soft"].item() - values["soft"].item()) > 1e-3  # the weights changed the number


def _batch(raw_loss: list[float]) -> ExampleBatch:
    loss = torch.tensor(raw_loss)
    z = torch.zeros(len(raw_loss), 2)
    return ExampleBatch(z, z, torch.zeros(len(raw_loss)), loss, False, 0.0, {})


def test_weights_that_would_make_a_silently_wrong_loss_are_refused() -> None:
    assert normalised_weights("teacher_loss", _batch([1.0, 3.0])).tolist() == [0.5, 1.5]
    with pytest.raises(ConfigError, match="all-zero weights"):
        normalised_weights("teacher_loss", _batch([0.0, 0.0]))
    with pytest.raises(ConfigError, match="negative or non-finite"):
        normalised_weights("teacher_loss", _batch([1.0, -1.0]))
    with isolated_plugins():

        @register_example_weight("wrong_shape")
        def wrong_shape(batch: ExampleBatch) -> torch.Tensor:
            return torch.ones(5)

        with pytest.raises(ConfigError, match=r"gave shape \[5\]; expected \[2\]"):
            normalised_weights("wrong_shape", _batch([1.0, 1.0]))
    problems = option_problems([("example_weight", "teacher_los")], ())
    assert problems == [
        "option example_weight='teacher_los' is invalid: example weight 'teacher_los' is not registered; "
        "allowed: uniform, teacher_loss, adakd, adakd_batchnorm; did you mean 'teacher_loss'?"
    ]


# --- a learnable strategy ---------------------------------------------------------------------------------------


class SoftLayerMix(LayerMapping):
    """Per student layer, softmax weights over the teacher layers; the target is their weighted sum."""

    def __init__(self, context: MappingContext) -> None:
        super().__init__(context)
        self.logits = nn.Parameter(torch.zeros(context.student_layers, context.teacher_layers))

    def forward(self, feature, student_layer, student, teacher):  # type: ignore[no-untyped-def]
        weights = self.logits[student_layer - 1].softmax(-1)
        return sum(w * t for w, t in zip(weights, teacher, strict=True))

    def summary(self):  # type: ignore[no-untyped-def]
        return {"weights": self.logits.softmax(-1).tolist()}


def _register_mix(name: str = "SoftMix") -> None:
    register_strategy(
        name,
        distinct_teacher_layers=False,
        description="softmax weights over all teacher layers per student layer",
        mapping=SoftLayerMix,
        mapping_parameters=lambda c: c.student_layers * c.teacher_layers,
    )(lambda student_layers, teacher_layers: [(i, teacher_layers) for i in range(1, student_layers + 1)])


def test_a_learnable_mapping_builds_the_target_from_every_teacher_layer_and_learns() -> None:
    with isolated_plugins():
        _register_mix()
        t = trial(knowledge=("hidden_mse",), strategy="SoftMix", beta=1.0)
        pairs = [(1, 4), (2, 4)]
        terms = knowledge_terms(t, pairs, STUDENT, TEACHER)
        assert all(term.mapped for term in terms)
        assert captured_layers(terms, 1, TEACHER.layers) == {1, 2, 3, 4}
        objective = Objective(t, terms, STUDENT, TEACHER, regression=False)
        assert isinstance(objective.mapping, SoftLayerMix)
        g = torch.Generator().manual_seed(0)
        hidden_s = [torch.randn(2, 3, 8, generator=g) for _ in range(3)]
        hidden_t = [torch.randn(2, 3, 8, generator=g) for _ in range(5)]
        mask = torch.ones(2, 3, dtype=torch.long)
        student = Features(logits=torch.zeros(2, 2), mask=mask, heads=2, hidden=hidden_s)
        teacher = Features(logits=torch.zeros(2, 2), mask=mask, heads=2, hidden=hidden_t)
        values = objective.knowledge_values(student, teacher)
        # zero logits: uniform weights; the target of each student layer is the mean of teacher layers 1..4
        target = torch.stack(hidden_t[1:]).mean(0)
        for layer in (1, 2):
            expected = (hidden_s[layer] - target).pow(2).mean().item()
            assert values[f"hidden_mse@{layer}-4"].item() == pytest.approx(expected, rel=1e-5)
        sum(values.values()).backward()
        grad = objective.mapping.logits.grad
        assert grad is not None and grad.abs().sum() > 0  # the mapping learns through the target
        assert set(objective.state_dict()) == {"mapping.logits"}  # checkpointed with the objective
        assert np.allclose(objective.learned_parts()["mapping"]["weights"], 0.25)


def test_the_memory_estimate_counts_the_mapping_and_every_teacher_layer() -> None:
    with isolated_plugins():
        _register_mix("SoftMixMemory")
        base = Trial(
            task="mrpc", teacher="bert-base", student="bert-mini", knowledge=("hidden_mse",), strategy="Last-1"
        )
        learned = Trial(
            task="mrpc", teacher="bert-base", student="bert-mini", knowledge=("hidden_mse",), strategy="SoftMixMemory"
        )
        student = student_shape("bert-mini")
        extra = student.layers * 12 * BYTES_PER_PARAMETER / GIB  # L_S x L_T weights, 16 bytes each
        # Last-1 has one projected pair, the mix one per student layer: projections differ by (L_S - 1) Linears
        projection = (student.layers - 1) * (student.width * 768 + 768) * BYTES_PER_PARAMETER / GIB
        assert estimate_trial_memory_gb(learned) - estimate_trial_memory_gb(base) == pytest.approx(
            extra + projection
        )
        features, _ = _teacher_reads(learned)
        assert features == {("hidden", layer) for layer in range(1, 13)}
        assert _teacher_reads(base)[0] == {("hidden", 12)}


# --- a learned temperature ------------------------------------------------------------------------------------


class LearnedTemperature(TemperatureLearner):
    """T = exp(log_t), starting at the trial's temperature (a CTKD-like learner without the reversal)."""

    def __init__(self, start: float, options: dict) -> None:  # type: ignore[type-arg]
        super().__init__()
        self.log_t = nn.Parameter(torch.tensor(math.log(start)))

    def forward(self, progress: float, scheduled: float) -> torch.Tensor:
        return self.log_t.exp()

    def summary(self):  # type: ignore[no-untyped-def]
        return {"temperature": float(self.log_t.detach().exp())}


def test_a_temperature_learner_sets_the_soft_temperature_and_learns_with_the_student() -> None:
    assert option_problems([("temperature_learner", "learned_t")], ()) == [
        "option temperature_learner='learned_t' is invalid: temperature learner 'learned_t' is not registered; "
        "allowed: none, ctkd"
    ]
    with isolated_plugins():
        register_temperature_learner("learned_t")(LearnedTemperature)
        t = trial(temperature=2.0, options={"temperature_learner": "learned_t"})
        assert option_problems(t.options, ()) == []
        objective = Objective(t, [], STUDENT, TEACHER, regression=False)
        s, z = [[0.5, -1.0], [2.0, 0.0]], [[1.5, 0.0], [-0.5, 1.0]]
        values = objective.term_values(logits_features(s), logits_features(z), torch.tensor([0, 1]))
        expected = _soft_by_hand(np.array(s), np.array(z), 2.0).mean()
        assert values["soft"].item() == pytest.approx(expected, rel=1e-6)
        values["soft"].backward()
        assert objective.temperature_learner is not None
        assert objective.temperature_learner.log_t.grad is not None
        assert objective.temperature_learner.log_t.grad.abs() > 0  # the temperature learns through the loss
        assert set(objective.state_dict()) == {"temperature_learner.log_t"}  # checkpointed with the objective
        assert objective.learned_parts() == {"learned_temperature": {"temperature": pytest.approx(2.0)}}
