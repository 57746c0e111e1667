"""Projector ensemble, spectral-norm penalty, their options and combinations, their memory, and the projector
overfitting rule: each against numbers computed independently here."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from kdgrid.core.method_registry import method_memory
from kdgrid.core.methods.projectors.overfit import ALIGNMENT_FRACTION, STALL_GAIN, projector_overfit
from kdgrid.core.methods.projectors.spectral import SPECTRAL_TERM, spectral_penalty
from kdgrid.core.model.projection import Projection
from kdgrid.core.model.shapes import StudentShape
from kdgrid.core.options import option_problems
from kdgrid.core.training.objective import Objective, knowledge_terms
from kdgrid.core.trial_rules import method_combination_problems as method_problems
from kdgrid.core.trial_rules import method_term_problems as term_problems
from kdgrid.errors import ConfigError
from kdgrid.grid.memory_estimate import method_facts, projection_params
from kdgrid.trial import Trial

torch.set_num_threads(1)


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def _mlp_by_hand(member: torch.nn.Module, x: np.ndarray) -> np.ndarray:
    first, second = (m for m in member if isinstance(m, torch.nn.Linear))
    w1, b1 = first.weight.detach().double().numpy(), first.bias.detach().double().numpy()
    w2, b2 = second.weight.detach().double().numpy(), second.bias.detach().double().numpy()
    return _gelu(x @ w1.T + b1) @ w2.T + b2


def test_ensemble_is_the_mean_of_independently_drawn_mlp_members() -> None:
    torch.manual_seed(0)
    projection = Projection(6, 10, kind="ensemble", members=4, hidden_width=7)
    members = list(projection.net)
    assert len(members) == 4 and projection.members == 4
    assert not torch.equal(members[0][0].weight, members[1][0].weight)  # drawn one after another
    with torch.no_grad():  # biases drawn too, so the check sees them
        for member in members:
            for module in member:
                if isinstance(module, torch.nn.Linear):
                    module.bias.normal_()
    x = np.random.default_rng(1).normal(size=(2, 3, 6))
    expected = np.mean([_mlp_by_hand(m, x) for m in members], axis=0)
    got = projection(torch.from_numpy(x).float()).detach().double().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert "members=4" in repr(projection)


def test_ensemble_defaults_to_three_members_and_refuses_bad_counts() -> None:
    assert Projection(4, 8, kind="ensemble").members == 3
    with pytest.raises(ConfigError, match="members must be an integer >= 2, got 1"):
        Projection(4, 8, kind="ensemble", members=1)
    with pytest.raises(ConfigError, match="only for kind 'ensemble', not 'mlp'"):
        Projection(4, 8, kind="mlp", members=3)


def test_spectral_penalty_is_half_the_sum_of_squared_top_singular_values_with_its_gradient() -> None:
    torch.manual_seed(2)
    projections = [Projection(5, 7, kind="mlp", hidden_width=4), Projection(5, 7)]
    penalty = spectral_penalty(projections)
    weights = [m.weight for p in projections for m in p.modules() if isinstance(m, torch.nn.Linear)]
    assert len(weights) == 3
    svds = [np.linalg.svd(w.detach().double().numpy()) for w in weights]
    assert penalty.item() == pytest.approx(sum(0.5 * s[0] ** 2 for _, s, _ in svds), rel=1e-5)
    penalty.backward()
    for weight, (u, s, vt) in zip(weights, svds, strict=True):  # d/dW (sigma^2 / 2) = sigma u v^T
        np.testing.assert_allclose(
            weight.grad.double().numpy(), s[0] * np.outer(u[:, 0], vt[0]), rtol=1e-4, atol=1e-6
        )
    assert spectral_penalty([]).item() == 0.0


def _objective(trial: Trial, width_s: int = 8, width_t: int = 12) -> Objective:
    student = StudentShape(layers=2, width=width_s, heads=2, ffn=4 * width_s)
    teacher = StudentShape(layers=2, width=width_t, heads=2, ffn=4 * width_t)
    terms = knowledge_terms(trial, [(1, 1), (2, 2)], student, teacher)
    return Objective(trial, terms, student, teacher, regression=False)


def test_the_objective_adds_the_penalty_as_a_term_weighted_by_lambda() -> None:
    trial = Trial(
        "sst2", "bert-base", "w8-l2-h2-f32", knowledge=("hidden_mse",), strategy="First",
        projection="ensemble", options={"projector_members": 2, "projector_spectral": 0.3},
    )  # fmt: skip
    torch.manual_seed(0)
    objective = _objective(trial)
    assert [p.members for p in objective.projections.values()] == [2, 2]
    assert objective.weights()[SPECTRAL_TERM] == 0.3
    features_s, features_t = _features(8), _features(12)
    values = objective.term_values(features_s, features_t, torch.tensor([0, 1]))
    expected = spectral_penalty(objective.projections.values())
    assert values[SPECTRAL_TERM].item() == pytest.approx(expected.item())
    total = objective.total(values)
    by_hand = sum(objective.weights()[k] * v for k, v in values.items())
    assert total.item() == pytest.approx(float(by_hand.detach()), rel=1e-6)


def _features(width: int):
    from kdgrid.core.model.capture import Features

    torch.manual_seed(width)
    hidden = [torch.randn(2, 4, width) for _ in range(3)]
    return Features(logits=torch.randn(2, 2), mask=torch.ones(2, 4, dtype=torch.long), heads=2, hidden=hidden)


def test_method_options_are_checked_with_the_allowed_values() -> None:
    problems = option_problems([("optimizer", "adam"), ("dot_delta", 0.2), ("projector_members", 1)], ())
    assert problems[0] == (
        "option optimizer='adam' is invalid; allowed: adamw, dot, dot_adam; did you mean 'adamw' or 'dot_adam'?"
    )
    assert problems[1].startswith("option dot_delta=0.2 is invalid; allowed: a number in [0, 0.1)")
    assert problems[2].startswith("option projector_members=1 is invalid; allowed: an integer >= 2")
    assert option_problems([("projector_members", 17)], ())[0].startswith(
        "option projector_members=17 is invalid; allowed: below 17"
    )
    assert option_problems([("projector_spectral", -1)], ())[0].startswith(
        "option projector_spectral=-1 is invalid; allowed: a finite number >= 0"
    )
    assert option_problems([("grad_cosine_batches", 0)], ()) != []
    assert option_problems([("optimizer", "dot"), ("dot_delta", 0.05), ("grad_cosine_batches", 4)], ()) == []


def test_method_combinations_are_refused_before_anything_runs() -> None:
    base = {"task": "sst2", "teacher": "bert-base", "student": "bert-tiny"}
    assert method_problems(Trial(**base, options={"projector_members": 3})) == [
        "option projector_members is only for projection 'ensemble', not 'linear'"
    ]
    spectral = method_problems(Trial(**base, options={"projector_spectral": 0.1}))
    assert spectral and "needs knowledge with a projection" in spectral[0]
    assert method_problems(Trial(**base, options={"dot_delta": 0.05})) == [
        "option dot_delta is only for optimizer 'dot' or 'dot_adam'"
    ]
    no_task = method_problems(Trial(**base, alpha=0.0, options={"optimizer": "dot"}))
    assert no_task and no_task[0].startswith("optimizer 'dot' needs both a task gradient (alpha > 0, here 0)")
    clipped = method_problems(Trial(**base, options={"optimizer": "dot", "max_grad_norm": 1.0}))
    assert clipped == ["optimizer 'dot' does not clip gradients: leave max_grad_norm unset"]
    assert method_problems(Trial(**base, options={"optimizer": "dot", "grad_cosine_batches": 2})) == []
    with_spectral = Trial(
        **base, knowledge=("hidden_mse",), strategy="First", options={"projector_spectral": 1.0}
    )
    assert method_problems(with_spectral) == []
    assert term_problems(with_spectral, 0) and term_problems(with_spectral, 2) == []


@pytest.mark.parametrize("kind", ["mlp", "ensemble"])
def test_a_projection_kind_no_term_uses_is_refused_not_trained_as_linear(kind: str) -> None:
    # A student of the teacher's width has nothing projected: an mlp or ensemble projection would silently train
    # as the linear trial (a row under the projector's name measuring none); the default linear one stays allowed.
    base = {"task": "polarity", "teacher": "minilm-l6", "student": "w384-l2-h12-f1536", "init": "preload"}
    projected = Trial(**base, knowledge=("hidden_mse",), strategy="Last-1", projection=kind)
    assert term_problems(projected, 0) == [
        f"projection {kind!r} is never used: no loss term of this trial is projected (same widths, or knowledge "
        "that compares the two sides in their own widths); leave it unset"
    ]
    assert term_problems(projected, 1) == []
    assert term_problems(Trial(**base, knowledge=("hidden_mse",), strategy="Last-1"), 0) == []


def test_memory_counts_every_member_of_an_ensemble() -> None:
    # bert-tiny (width 128) against bert-base (768) on Last: 2 pairs of hidden_mse, each one projection.
    common = {"task": "sst2", "teacher": "bert-base", "student": "bert-tiny", "knowledge": ("hidden_mse",)}
    linear = Trial(**common, strategy="Last")
    mlp = Trial(**common, strategy="Last", projection="mlp")
    ensemble = Trial(**common, strategy="Last", projection="ensemble", options={"projector_members": 4})
    one_linear = 128 * 768 + 768
    one_mlp = one_linear + 768 * 768 + 768

    def projections(trial: Trial) -> int:
        # one projector per term, and the members beyond the first counted by the projectors method
        return projection_params(trial) + method_memory(method_facts(trial)).parameters

    assert projections(linear) == 2 * one_linear
    assert projections(mlp) == 2 * one_mlp
    assert projections(ensemble) == 2 * 4 * one_mlp
    default = Trial(**common, strategy="Last", projection="ensemble")
    assert projections(default) == 2 * 3 * one_mlp


def _curve(alignment: list[float], scores: list[float]) -> list[dict[str, object]]:
    return [
        {
            "epoch": e + 1,
            "scores": {"dev": {"accuracy": s}},
            "loss_terms": {"soft": 1.0, "a@1-1": a / 2, "a@2-2": a / 2},
        }
        for e, (a, s) in enumerate(zip(alignment, scores, strict=True))
    ]


def test_projector_overfitting_flags_a_collapsed_alignment_loss_with_a_stalled_metric() -> None:
    terms = ["a@1-1", "a@2-2"]
    flagged = projector_overfit(_curve([2.0, 0.5, 0.09], [0.70, 0.705, 0.708]), terms, "dev", "accuracy")
    assert flagged is not None and "fell to 4.5% of its first epoch's (2 -> 0.09)" in flagged
    assert "accuracy on dev gained +0.0080" in flagged
    # The boundaries, each on its own: the loss at exactly 5% still counts; a gain of 0.01 is not a stall.
    at_fraction = ALIGNMENT_FRACTION * 2.0
    assert projector_overfit(_curve([2.0, at_fraction], [0.7, 0.7]), terms, "dev", "accuracy") is not None
    assert projector_overfit(_curve([2.0, at_fraction * 1.01], [0.7, 0.7]), terms, "dev", "accuracy") is None
    assert projector_overfit(_curve([2.0, 0.0], [0.5, 0.5 + STALL_GAIN]), terms, "dev", "accuracy") is None
    # The best later epoch counts, not the last: a metric that rose then fell did not stall.
    assert projector_overfit(_curve([2.0, 0.1, 0.05], [0.5, 0.6, 0.5]), terms, "dev", "accuracy") is None
    # Never flagged: one epoch, no projected term, a first epoch without alignment loss.
    assert projector_overfit(_curve([2.0], [0.5]), terms, "dev", "accuracy") is None
    assert projector_overfit(_curve([2.0, 0.0], [0.5, 0.5]), [], "dev", "accuracy") is None
    assert projector_overfit(_curve([0.0, 0.0], [0.5, 0.5]), terms, "dev", "accuracy") is None
