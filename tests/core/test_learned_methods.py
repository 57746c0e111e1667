"""The learned methods against numbers computed here with numpy: LAD's gate, ALP-KD's attention over the teacher's
layers, AdaKD's instance weights, CTKD's learned temperature (its reversed gradient and curriculum); what the
memory estimate counts for them; and the combinations validation refuses before anything runs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from kdgrid.core.matching import get_strategy, layer_pairs, nominal_pairs
from kdgrid.core.methods.adakd.spec import DIFFICULTY_FUNCTIONS
from kdgrid.core.methods.ctkd.temperature import reversal_strength
from kdgrid.core.model.capture import Features
from kdgrid.core.model.shapes import StudentShape
from kdgrid.core.options import option_problems
from kdgrid.core.training.objective import Objective, captured_layers, knowledge_terms
from kdgrid.core.trial_rules import learned_method_problems
from kdgrid.core.trial_rules import option_problems as trial_option_problems
from kdgrid.grid.memory_estimate import BYTES_PER_PARAMETER, GIB, estimate_trial_memory_gb, mapping_params
from kdgrid.trial import Trial

STUDENT = StudentShape(2, 8, 2, 16)
TEACHER = StudentShape(3, 8, 2, 16)
NARROW = StudentShape(2, 4, 2, 8)


def trial(**kw: object) -> Trial:
    return Trial(task="synthetic-single-binary", teacher="t", student=STUDENT.name, **kw)  # type: ignore[arg-type]


def features(hidden: list[np.ndarray], logits: np.ndarray | None = None) -> Features:
    batch, length = hidden[0].shape[:2]
    z = torch.zeros(batch, 2) if logits is None else torch.tensor(logits, dtype=torch.float32)
    mask = torch.ones(batch, length, dtype=torch.long)
    return Features(
        logits=z, mask=mask, heads=2, hidden=[torch.tensor(h, dtype=torch.float32) for h in hidden]
    )


def draw(shape: tuple[int, ...], count: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(size=shape) for _ in range(count)]


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# --- LAD ------------------------------------------------------------------------------------------------------


def test_lad_targets_the_gate_weighted_sum_of_every_teacher_layer() -> None:
    t = trial(knowledge=("hidden_mse",), strategy="LAD", beta=1.0, options={"lad_form": "softmax"})
    pairs = layer_pairs("LAD", 2, 3)
    assert pairs == [(1, 1), (2, 3)] == nominal_pairs(2, 3)  # Dilatation's names: floor(i 3 / 2), at least 1
    assert layer_pairs("ALP-KD", 4, 2) == [(1, 1), (2, 1), (3, 1), (4, 2)]  # any depths: floor(i 2 / 4), at least 1
    terms = knowledge_terms(t, pairs, STUDENT, TEACHER)
    assert all(term.mapped for term in terms) and captured_layers(terms, 1, 3) == {1, 2, 3}
    objective = Objective(t, terms, STUDENT, TEACHER, regression=False)
    gate = np.array([[0.5, -1.0, 2.0], [0.0, 1.0, -0.5]])
    with torch.no_grad():
        objective.mapping.gate.copy_(torch.tensor(gate))
    hidden_s, hidden_t = draw((2, 3, 8), 3, 0), draw((2, 3, 8), 4, 1)
    values = objective.knowledge_values(features(hidden_s), features(hidden_t))
    weights = softmax(gate)
    for (student_layer, nominal), w in zip(pairs, weights, strict=True):
        target = sum(w[t - 1] * hidden_t[t] for t in (1, 2, 3))
        expected = ((hidden_s[student_layer] - target) ** 2).mean()  # same widths: no projection
        assert values[f"hidden_mse@{student_layer}-{nominal}"].item() == pytest.approx(expected, rel=1e-5)
    sum(values.values()).backward()
    assert objective.mapping.gate.grad is not None and objective.mapping.gate.grad.abs().min() > 0
    summary = objective.learned_parts()["mapping"]
    assert summary["method"] == "LAD" and np.allclose(summary["weights"], weights)
    assert set(objective.state_dict()) == {"mapping.gate"}  # checkpointed with the objective


# --- ALP-KD ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scale", ["none", "sqrt_width"])
def test_alp_kd_attends_over_teacher_layers_from_the_students_cls(scale: str) -> None:
    t = trial(knowledge=("hidden_mse",), strategy="alp_kd", beta=1.0,
              options={"alp_kd_scale": scale, "alp_kd_tokens": "all"})  # fmt: skip
    terms = knowledge_terms(t, layer_pairs("ALP-KD", 2, 3), STUDENT, TEACHER)
    objective = Objective(t, terms, STUDENT, TEACHER, regression=False)
    assert objective.mapping.query is None and not list(objective.mapping.parameters())  # equal widths: none
    hidden_s, hidden_t = draw((2, 3, 8), 3, 2), [0.5 * h for h in draw((2, 3, 8), 4, 3)]
    values = objective.knowledge_values(features(hidden_s), features(hidden_t))
    divisor = math.sqrt(8) if scale == "sqrt_width" else 1.0
    keys = np.stack([hidden_t[t][:, 0] for t in (1, 2, 3)], axis=1)  # [B, L_T, d]
    means = []
    for student_layer, nominal in layer_pairs("ALP-KD", 2, 3):
        attention = softmax(np.einsum("bd,btd->bt", hidden_s[student_layer][:, 0], keys) / divisor)
        target = np.einsum("bt,btld->bld", attention, np.stack(hidden_t[1:], axis=1))
        expected = ((hidden_s[student_layer] - target) ** 2).mean()
        assert values[f"hidden_mse@{student_layer}-{nominal}"].item() == pytest.approx(expected, rel=1e-5)
        means.append(attention.mean(axis=0))
    summary = objective.learned_parts()["mapping"]
    assert np.allclose(summary["weights"], means) and np.allclose(summary["last_batch_weights"], means)
    assert summary["examples"] == [2, 2]
    # the student learns through the attention too: its [CLS] gets a gradient from the weights
    student_cls = torch.tensor(hidden_s[2], dtype=torch.float32, requires_grad=True)
    objective.mapping(
        "hidden", 2, student_cls, [torch.tensor(h, dtype=torch.float32) for h in hidden_t[1:]]
    ).sum().backward()
    assert student_cls.grad is not None and student_cls.grad[:, 0].abs().sum() > 0


def test_alp_kd_counts_a_batch_once_per_student_layer_and_no_batch_without_gradients() -> None:
    t = trial(knowledge=("hidden_mse", "cos", "value_relation"), strategy="ALP-KD", beta=1.0,
              options={"alp_kd_tokens": "all"})  # fmt: skip
    terms = knowledge_terms(t, layer_pairs("ALP-KD", 2, 3), STUDENT, TEACHER)
    assert [sum(term.pair == pair for term in terms) for pair in ((1, 1), (2, 3))] == [3, 3]  # 3 terms a layer
    objective = Objective(t, terms, STUDENT, TEACHER, regression=False)
    hidden_s, hidden_t = draw((5, 3, 8), 3, 4), draw((5, 3, 8), 4, 5)
    value_s, value_t = draw((5, 3, 8), 3, 6), draw((5, 3, 8), 4, 7)

    def both(hidden: list[np.ndarray], value: list[np.ndarray]) -> Features:
        out = features(hidden)
        out.value = [None, *(torch.tensor(v, dtype=torch.float32) for v in value[1:])]
        return out

    def attention(student: list[np.ndarray], teacher: list[np.ndarray], layer: int) -> np.ndarray:
        keys = np.stack([teacher[t][:, 0] for t in (1, 2, 3)], axis=1)
        return softmax(np.einsum("bd,btd->bt", student[layer][:, 0], keys))  # [B, L_T]

    student, teacher = both(hidden_s, value_s), both(hidden_t, value_t)
    with torch.no_grad():  # beta: auto's calibration batches: no gradients, nothing recorded
        objective.knowledge_values(student, teacher)
    objective.eval()
    objective.knowledge_values(student, teacher)  # nor in eval mode
    objective.train()
    assert objective.learned_parts()["mapping"]["examples"] == [0, 0]
    objective.knowledge_values(student, teacher)  # one training batch of 5 examples
    summary = objective.learned_parts()["mapping"]
    assert summary["examples"] == [5, 5]  # once per student layer, not once per term
    # hidden_mse and cos read the hidden states (the same attention), value_relation V: the batch records the mean
    # of its terms' weights on the layer
    for layer in (1, 2):
        hidden = attention(hidden_s, hidden_t, layer).mean(axis=0)
        value = attention(value_s, value_t, layer).mean(axis=0)
        expected = (2 * hidden + value) / 3
        assert np.allclose(summary["weights"][layer - 1], expected, atol=1e-6)
        assert np.allclose(summary["last_batch_weights"][layer - 1], expected, atol=1e-6)
    objective.knowledge_values(student, both(hidden_t, [0.5 * v for v in value_t]))  # a second batch
    assert objective.learned_parts()["mapping"]["examples"] == [5 + 5, 5 + 5]


def test_alp_kd_maps_a_narrower_students_query_and_the_estimate_counts_it() -> None:
    t = Trial(task="synthetic-single-binary", teacher="t", student=NARROW.name, knowledge=("hidden_mse",),
              strategy="ALP-KD", beta=1.0)  # fmt: skip
    terms = knowledge_terms(t, layer_pairs("ALP-KD", 2, 3), NARROW, TEACHER)
    objective = Objective(t, terms, NARROW, TEACHER, regression=False)
    assert [tuple(p.shape) for p in objective.mapping.parameters()] == [(8, 4)]  # W: d_S -> d_T, no bias
    assert "mapping.query.weight" in objective.state_dict() and "mapping.weight_sum" in objective.state_dict()
    real = Trial(
        task="mrpc", teacher="bert-base", student="bert-mini", knowledge=("hidden_mse",), strategy="ALP-KD"
    )
    lad = Trial(
        task="mrpc", teacher="bert-base", student="bert-mini", knowledge=("hidden_mse",), strategy="LAD",
        options={"lad_form": "softmax"},
    )  # fmt: skip
    assert mapping_params(real) == 256 * 768 and mapping_params(lad) == 4 * 12  # bert-mini: 4 layers of 256
    gates = Trial(
        task="mrpc", teacher="bert-base", student="bert-mini", knowledge=("hidden_mse",), strategy="LAD"
    )  # LAD's gate blocks: 11 of them on the teacher's width 768, the LayerNorm affine over max_length 128
    assert mapping_params(gates) == 11 * (768 * 768 + 768 + 2 * 128 * 768)
    # same pairs and projections: the two differ by their mappings' parameters, 16 bytes each
    difference = (256 * 768 - 4 * 12) * BYTES_PER_PARAMETER / GIB
    assert estimate_trial_memory_gb(real) - estimate_trial_memory_gb(lad) == pytest.approx(difference)


# --- AdaKD ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("function", "by_hand"),
    [
        ("exp_inv_sqrt", lambda loss: np.exp(-1 / np.sqrt(loss))),
        ("linear", lambda loss: loss),
        ("sqrt", np.sqrt),
        ("square", lambda loss: loss**2),
    ],
)
def test_adakd_weights_grow_with_the_teachers_loss_normalised_per_batch(function: str, by_hand) -> None:  # type: ignore[no-untyped-def]
    s = np.array([[0.5, -1.0], [2.0, 0.0], [0.0, 0.3], [1.0, 1.0]])
    z = np.array([[3.0, 0.0], [-0.5, 1.0], [0.2, 0.1], [0.0, 2.0]])
    labels = np.array([0, 0, 1, 1])
    options = {"example_weight": "adakd_batchnorm", "adakd_function": function}
    objective = Objective(trial(temperature=2.0, options=options), [], STUDENT, TEACHER, regression=False)
    hidden = draw((4, 3, 8), 1, 0)
    values = objective.term_values(features(hidden, s), features(hidden, z), torch.tensor(labels))
    teacher_ce = -np.log(softmax(z))[np.arange(4), labels]
    raw = by_hand(teacher_ce)
    weights = raw / raw.mean()
    order = np.argsort(teacher_ce)
    assert np.all(np.diff(weights[order]) >= 0)  # harder for the teacher: more weight
    soft = -(softmax(z / 2.0) * np.log(softmax(s / 2.0))).sum(axis=1)
    assert values["soft"].item() == pytest.approx((weights * soft).mean(), rel=1e-5)
    assert set(DIFFICULTY_FUNCTIONS) == {"exp_inv_sqrt", "linear", "sqrt", "square"}


# --- CTKD -------------------------------------------------------------------------------------------------------


def test_ctkds_curriculum_by_hand() -> None:
    assert reversal_strength(0.0, 1.0, 1.0) == 0.0
    assert reversal_strength(0.5, 1.0, 1.0) == pytest.approx(0.5)  # (1 - cos(pi / 2)) / 2
    assert reversal_strength(0.25, 2.0, 0.5) == pytest.approx(1.0)  # p / ramp = 1/2
    assert reversal_strength(0.1, 2.0, 0.2) == pytest.approx(1.0)
    assert reversal_strength(0.9, 2.0, 0.2) == pytest.approx(2.0)  # past the ramp: lambda_max
    assert reversal_strength(0.25, 1.0, 1.0) == pytest.approx((1 - math.cos(math.pi / 4)) / 2)


def test_ctkd_learns_the_temperature_up_the_loss_through_gradient_reversal() -> None:
    options = {"temperature_learner": "ctkd", "ctkd_min_temperature": 1.0, "ctkd_max_temperature": 9.0,
               "ctkd_form": "kdgrid"}  # fmt: skip
    objective = Objective(trial(temperature=3.0, options=options), [], STUDENT, TEACHER, regression=False)
    learned = objective.temperature_learner
    assert learned is not None and learned.value().item() == pytest.approx(3.0, abs=1e-6)
    s = np.array([[0.5, -1.0, 0.2], [2.0, 0.0, -1.0]])
    z = np.array([[3.0, 0.0, 1.0], [-0.5, 1.0, 2.0]])
    objective.set_progress(1, 5)  # p = 1/4: lambda = (1 - cos(pi / 4)) / 2
    hidden = draw((2, 3, 8), 1, 0)
    values = objective.term_values(features(hidden, s), features(hidden, z), torch.tensor([0, 1]))

    def soft(temperature: float) -> float:
        return float(-(softmax(z / temperature) * np.log(softmax(s / temperature))).sum(axis=1).mean())

    def kl(temperature: float) -> float:  # the soft term less the teacher's entropy, which T alone moves
        p_t = softmax(z / temperature)
        return soft(temperature) + float((p_t * np.log(p_t)).sum(axis=1).mean())

    assert values["soft"].item() == pytest.approx(soft(3.0), rel=1e-5)
    values["soft"].backward()
    d_loss_d_t = (kl(3.0 + 1e-5) - kl(3.0 - 1e-5)) / 2e-5  # central difference, float64: T follows the KL
    sigma = (3.0 - 1.0) / 8.0
    d_t_d_theta = 8.0 * sigma * (1 - sigma)
    strength = (1 - math.cos(math.pi / 4)) / 2
    assert learned.theta.grad.item() == pytest.approx(-strength * d_loss_d_t * d_t_d_theta, rel=1e-3)
    assert set(objective.state_dict()) == {"temperature_learner.theta"}
    summary = learned.summary()
    assert summary["temperature"] == pytest.approx(3.0, abs=1e-6) and summary["range"] == [1.0, 9.0]
    assert summary["reversal_strength"] == pytest.approx(strength)


@pytest.mark.parametrize("t2", [False, True])
@pytest.mark.parametrize("weighting", ["uniform", "adakd_batchnorm"])
def test_ctkds_temperature_is_pushed_up_the_kl_and_the_students_gradient_is_the_cross_entropys(
    t2: bool, weighting: str
) -> None:
    """T's reversed gradient is -d KL(p_T || p_S) / dT (not -d CE / dT, whose teacher-entropy part grows with T
    whatever the student does); the soft value and the student's gradient are those of the cross-entropy."""
    options = {"temperature_learner": "ctkd", "ctkd_max_temperature": 9.0, "ctkd_ramp": 0.5, "soft_t2": t2,
               "example_weight": weighting, "ctkd_form": "kdgrid"}  # fmt: skip
    objective = Objective(trial(temperature=3.0, options=options), [], STUDENT, TEACHER, regression=False)
    learned = objective.temperature_learner
    assert learned is not None
    objective.set_progress(4, 5)  # p = 1 >= ramp: lambda = lambda_max = 1
    s = np.array([[0.5, -1.0, 0.2], [2.0, 0.0, -1.0], [-0.3, 0.4, 1.5]])
    z = np.array([[3.0, 0.0, 1.0], [-0.5, 1.0, 2.0], [0.2, 0.1, -2.0]])
    labels = np.array([0, 1, 2])
    hidden = draw((3, 3, 8), 1, 0)
    student = features(hidden, s)
    student.logits.requires_grad_(True)
    values = objective.term_values(student, features(hidden, z), torch.tensor(labels))
    values["soft"].backward()
    t = float(learned.value().detach())  # 3 up to float32 rounding of theta

    # By hand, float64: AdaKD's weights from the teacher's own cross-entropy, normalised to average 1.
    teacher_ce = np.log(np.exp(z).sum(1)) - z[np.arange(3), labels]
    raw = np.exp(-1 / np.sqrt(teacher_ce)) if weighting == "adakd_batchnorm" else np.ones(3)
    w = raw / raw.mean()

    def ce(temperature: float) -> float:
        per = -(softmax(z / temperature) * np.log(softmax(s / temperature))).sum(axis=1)
        return float((w * per).mean()) * (temperature**2 if t2 else 1.0)

    def kl(temperature: float) -> float:
        p_t, p_s = softmax(z / temperature), softmax(s / temperature)
        per = (p_t * (np.log(p_t) - np.log(p_s))).sum(axis=1)
        return float((w * per).mean()) * (temperature**2 if t2 else 1.0)

    assert values["soft"].item() == pytest.approx(ce(t), rel=1e-5)
    d_kl_d_t = (kl(t + 1e-5) - kl(t - 1e-5)) / 2e-5
    d_ce_d_t = (ce(t + 1e-5) - ce(t - 1e-5)) / 2e-5
    sigma = (t - 1.0) / 8.0
    d_t_d_theta = 8.0 * sigma * (1 - sigma)
    assert learned.theta.grad.item() == pytest.approx(-d_kl_d_t * d_t_d_theta, rel=1e-3)
    assert abs(d_ce_d_t - d_kl_d_t) > 0.05 * abs(d_kl_d_t)  # the two differ here: the test tells them apart
    # The student's gradient is the cross-entropy's: the same trial at a fixed T, differentiated by autograd
    fixed = Objective(
        trial(temperature=t, options={"soft_t2": t2, "example_weight": weighting}), [], STUDENT, TEACHER,
        regression=False,
    )  # fmt: skip
    plain = features(hidden, s)
    plain.logits.requires_grad_(True)
    fixed.term_values(plain, features(hidden, z), torch.tensor(labels))["soft"].backward()
    assert student.logits.grad is not None and plain.logits.grad is not None
    torch.testing.assert_close(student.logits.grad, plain.logits.grad, rtol=1e-5, atol=1e-7)


def test_the_memory_estimate_counts_the_learned_temperature() -> None:
    plain = Trial(task="mrpc", teacher="bert-base", student="bert-mini", temperature=4.0)
    learned = Trial(task="mrpc", teacher="bert-base", student="bert-mini", temperature=4.0,
                    options={"temperature_learner": "ctkd"})  # fmt: skip
    assert estimate_trial_memory_gb(learned) - estimate_trial_memory_gb(plain) == pytest.approx(
        BYTES_PER_PARAMETER / GIB
    )


# --- validation --------------------------------------------------------------------------------------------------


def test_each_option_is_refused_naming_its_allowed_values() -> None:
    assert option_problems([("alp_kd_scale", "sqrt")], ()) == [
        "option alp_kd_scale='sqrt' is invalid; allowed: none, sqrt_width"
    ]
    assert option_problems([("adakd_function", "cubic")], ()) == [
        "option adakd_function='cubic' is invalid; allowed: exp_inv_sqrt, linear, sqrt, square"
    ]
    assert option_problems([("temperature_learner", "learned")], ()) == [
        "option temperature_learner='learned' is invalid: temperature learner 'learned' is not registered; "
        "allowed: none, ctkd"
    ]
    assert "allowed: a number in (0, 1]" in option_problems([("ctkd_ramp", 0)], ())[0]
    assert "ctkd_lambda_max=-1 is invalid" in option_problems([("ctkd_lambda_max", -1)], ())[0]
    assert "did you mean 'adakd_batchnorm' or 'adakd'" in option_problems([("example_weight", "adakd_")], ())[0]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"knowledge": ("attention_mse_sum",), "strategy": "ALP-KD"},
         "strategy 'ALP-KD' builds targets for hidden, key, query, value only; knowledge 'attention_mse_sum' reads scores"),
        ({"knowledge": ("hidden_mse",), "strategy": "LAD", "options": {"alp_kd_scale": "none"}},
         "option 'alp_kd_scale' is ALP-KD's; the trial's strategy is 'LAD'"),
        ({"options": {"ctkd_ramp": 0.5}}, "option(s) ['ctkd_ramp'] need temperature_learner: ctkd"),
        ({"temperature": 30.0, "options": {"temperature_learner": "ctkd", "ctkd_form": "kdgrid"}},
         "must lie strictly between ctkd_min_temperature=1 and ctkd_max_temperature=21; got temperature=30"),
        ({"options": {"temperature_learner": "ctkd", "temperature_schedule": "linear", "temperature_end": 2.0}},
         "temperature_schedule must be constant, got 'linear'"),
        ({"soft_weight": 0.0, "alpha": 1.0, "options": {"temperature_learner": "ctkd"}}, "soft_weight is 0"),
    ],
)  # fmt: skip
def test_impossible_combinations_are_refused_before_anything_runs(fields: dict, message: str) -> None:
    t = trial(**fields)
    problems = trial_option_problems(t)
    assert any(message in problem for problem in problems), problems
    assert learned_method_problems(t) == problems


def test_the_learned_methods_combine_with_what_they_support() -> None:
    ok = [
        trial(
            knowledge=("hidden_mse", "value_relation"),
            strategy="ALP-KD",
            options={"alp_kd_scale": "sqrt_width", "alp_kd_tokens": "all"},
        ),
        trial(knowledge=("hidden_mse", "cos", "pkd"), strategy="ALP-KD"),  # [CLS] vectors: the paper's loss
        trial(knowledge=("attention_mse_sum", "hidden_mse"), strategy="LAD", options={"lad_form": "softmax"}),
        trial(knowledge=("hidden_mse",), strategy="LAD"),
        trial(temperature=4.0, options={"temperature_learner": "ctkd", "example_weight": "adakd"}),
    ]
    for t in ok:
        assert trial_option_problems(t) == []
    # ALP-KD's [CLS] loss (the default) cannot compare relations between tokens: refused, naming the way out
    (problem,) = trial_option_problems(trial(knowledge=("hidden_mse", "value_relation"), strategy="ALP-KD"))
    assert "knowledge 'value_relation' relates tokens to each other" in problem and "alp_kd_tokens: all" in problem
    # LAD's gate blocks (the default) aggregate hidden states: attention knowledge is refused, naming the way out
    (problem,) = trial_option_problems(trial(knowledge=("attention_mse_sum", "hidden_mse"), strategy="LAD"))
    assert "knowledge 'attention_mse_sum' reads scores" in problem and "lad_form: softmax" in problem
    (problem,) = trial_option_problems(trial(knowledge=("hidden_mse",), strategy="Last", options={"lad_form": "gates"}))
    assert problem == "option 'lad_form' is LAD's; the trial's strategy is 'Last'"
    assert get_strategy("alp").name == "ALP-KD" and get_strategy("lad").learnable


def test_a_learned_temperature_is_computed_once_per_step_whatever_the_terms() -> None:
    """The learner's forward pass runs once per `term_values`, not once for the soft term and again per knowledge
    term; the values are those of one temperature."""
    options = {"temperature_learner": "ctkd", "ctkd_form": "kdgrid"}  # starts at the trial's temperature
    t = trial(temperature=3.0, knowledge=("hidden_mse",), strategy="Last", beta=1.0, options=options)
    terms = knowledge_terms(t, layer_pairs("Last", 2, 3), STUDENT, TEACHER)
    assert len(terms) == 2
    objective = Objective(t, terms, STUDENT, TEACHER, regression=False)
    learner = objective.temperature_learner
    assert learner is not None
    calls = []
    learner.register_forward_hook(lambda module, args, out: calls.append(out.item()))
    objective.set_progress(1, 5)
    hidden = draw((2, 3, 8), 3, 0)
    values = objective.term_values(features(hidden), features(draw((2, 3, 8), 4, 1)), torch.tensor([0, 1]))
    assert len(calls) == 1 and calls[0] == pytest.approx(3.0, abs=1e-6)
    assert set(values) == {"soft", "hard", *(term.name for term in terms)}
