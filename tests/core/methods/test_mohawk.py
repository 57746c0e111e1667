"""MOHAWK's stage losses against references written here from the paper's equations (plain torch loops, no kdgrid
loss code), the teacher's captured features against transformers' own outputs, and the stages trained by the core:
what each stage trains, what it leaves, and the rules of a stage's trial."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from kdgrid.core.method_registry import step_hooks
from kdgrid.core.methods.mohawk.hooks import MohawkHooks
from kdgrid.core.methods.mohawk.losses import hidden_alignment, matrix_orientation, teacher_probabilities
from kdgrid.core.model.capture import FeatureCapture
from kdgrid.core.model.shapes import StudentShape, ssm_shape
from kdgrid.core.model.ssm.model import build_ssm
from kdgrid.core.training.objective import Objective
from kdgrid.core.trial_rules import trial_problems
from kdgrid.trial import Trial
from tests.tiny_trials import tiny_trial

MASK = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])


def reference_l1(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> float:
    """mean over (b, h) of sqrt(sum over real (i, j) of (S - T)^2), in plain Python."""
    norms = []
    for b in range(student.shape[0]):
        real = [i for i in range(mask.shape[1]) if mask[b, i]]
        for h in range(student.shape[1]):
            total = sum((float(student[b, h, i, j]) - float(teacher[b, h, i, j])) ** 2 for i in real for j in real)
            norms.append(math.sqrt(total))
    return sum(norms) / len(norms)


def reference_l2(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> float:
    """mean over real (b, t) of the Euclidean norm of S - T, in plain Python."""
    norms = [
        math.sqrt(sum((float(student[b, t, k]) - float(teacher[b, t, k])) ** 2 for k in range(student.shape[2])))
        for b in range(student.shape[0])
        for t in range(student.shape[1])
        if mask[b, t]
    ]
    return sum(norms) / len(norms)


def test_stage_1_loss_is_the_mean_per_head_frobenius_norm_over_real_pairs():
    g = torch.Generator().manual_seed(0)
    student, teacher = torch.randn(2, 3, 5, 5, generator=g), torch.rand(2, 3, 5, 5, generator=g)
    value = matrix_orientation(student, teacher, MASK)
    assert float(value) == pytest.approx(reference_l1(student, teacher, MASK), rel=1e-6)
    # not squared: scaling the difference by 2 doubles it
    assert float(matrix_orientation(teacher + 2 * (student - teacher), teacher, MASK)) == pytest.approx(
        2 * float(value), rel=1e-6
    )
    # whatever the padding holds (even NaN), the value is that of the real pairs
    poisoned = student.clone()
    poisoned[1, :, 3:, :] = float("nan")
    poisoned[1, :, :, 3:] = float("inf")
    assert float(matrix_orientation(poisoned, teacher, MASK)) == pytest.approx(float(value), rel=1e-6)


def test_stage_2_loss_is_the_mean_per_token_euclidean_norm_over_real_tokens():
    g = torch.Generator().manual_seed(1)
    student, teacher = torch.randn(2, 5, 4, generator=g), torch.randn(2, 5, 4, generator=g)
    value = hidden_alignment(student, teacher, MASK)
    assert float(value) == pytest.approx(reference_l2(student, teacher, MASK), rel=1e-6)
    poisoned = student.clone()
    poisoned[1, 3:] = float("nan")
    assert float(hidden_alignment(poisoned, teacher, MASK)) == pytest.approx(float(value), rel=1e-6)
    # by hand: one real token, difference (3, 4) -> 5
    one = torch.tensor([[1, 0]])
    assert float(hidden_alignment(torch.tensor([[[3.0, 4.0], [9.0, 9.0]]]), torch.zeros(1, 2, 2), one)) == 5.0


def test_the_losses_give_the_student_finite_gradients_at_equality():
    student = torch.rand(1, 2, 5, 5, requires_grad=True)
    matrix_orientation(student, student.detach().clone(), torch.ones(1, 5)).backward()
    assert torch.isfinite(student.grad).all()


def _teacher() -> BertForSequenceClassification:
    torch.manual_seed(0)
    config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, num_labels=2, attn_implementation="eager")  # fmt: skip
    return BertForSequenceClassification(config).eval()


def test_the_teachers_captured_targets_are_transformers_own():
    """Probabilities from capture's scores = transformers' attentions; ``layer_input`` l = hidden state l - 1;
    ``attention_output`` = the output projection of (attentions x values), recomputed here."""
    teacher = _teacher()
    ids = torch.randint(0, 40, (2, 5))
    capture = FeatureCapture(teacher, {"scores", "layer_input", "attention_output"})
    with torch.no_grad():
        features = capture({"input_ids": ids, "attention_mask": MASK})
        reference = teacher(input_ids=ids, attention_mask=MASK, output_attentions=True, output_hidden_states=True)
        for layer in (1, 2):
            probs = teacher_probabilities(features.scores[layer], MASK)
            expected = reference.attentions[layer - 1] * MASK[:, None, None, :]
            assert torch.allclose(probs, expected, atol=1e-6)
            assert torch.equal(features.layer_input[layer], reference.hidden_states[layer - 1])
            block = teacher.bert.encoder.layer[layer - 1].attention
            values = block.self.value(reference.hidden_states[layer - 1]).view(2, 5, 2, 8).transpose(1, 2)
            context = (reference.attentions[layer - 1] @ values).transpose(1, 2).reshape(2, 5, 16)
            assert torch.allclose(features.attention_output[layer], block.output.dense(context), atol=1e-5)


def _stage_objective(student: torch.nn.Module, trial: Trial) -> tuple[Objective, MohawkHooks]:
    """The trial's objective as the student's set-up builds it: eq. 9's, with the stage's hooks, which take the
    student before it is placed."""
    (hooks,) = step_hooks(trial)
    teacher_shape = StudentShape(layers=2, width=16, heads=2, ffn=32)
    objective = Objective(trial, [], student.config.shape, teacher_shape, False, hooks=[hooks])
    hooks.prepare_model(SimpleNamespace(), SimpleNamespace(), student)
    return objective, hooks


@pytest.mark.parametrize("stage", [1, 2])
def test_the_teacher_forced_objective_feeds_each_student_layer_the_teachers_input(stage):
    teacher = _teacher()
    student = build_ssm(ssm_shape("ssm-l2-h16-a2-f32"), 2, seed=0, vocab_size=40)
    trial = Trial(task="sst2", teacher="t", student="ssm-l2-h16-a2-f32", init="random", soft_weight=0, alpha=0,
                  beta=0.5, options={"mohawk_stage": stage})  # fmt: skip
    objective, hooks = _stage_objective(student, trial)
    needs, layers = hooks.teacher_capture(SimpleNamespace())
    assert layers == {1, 2}
    ids = torch.randint(0, 40, (2, 5))
    capture = FeatureCapture(teacher, needs, layers)
    with torch.no_grad():
        features = capture({"input_ids": ids, "attention_mask": MASK})
        reference = teacher(input_ids=ids, attention_mask=MASK, output_attentions=True, output_hidden_states=True)
    # the student's side is not read (its features: zero logits, no pass)
    values = objective.term_values(features, features, torch.zeros(2, dtype=torch.long))
    name = {1: "mohawk_matrix", 2: "mohawk_hidden"}[stage]
    assert sorted(values) == [f"{name}@1-1", f"{name}@2-2"]  # eq. 9's soft and hard terms are not computed
    assert objective.weights() == {"soft": 0.0, "hard": 0.0, f"{name}@1-1": 0.5, f"{name}@2-2": 0.5}
    for layer in (1, 2):
        entering = reference.hidden_states[layer - 1]
        mixer = student.layers[layer - 1].mixer
        with torch.no_grad():
            if stage == 1:
                expected = reference_l1(mixer.matrices(entering, MASK), reference.attentions[layer - 1], MASK)
            else:
                block = teacher.bert.encoder.layer[layer - 1].attention
                v = block.self.value(entering).view(2, 5, 2, 8).transpose(1, 2)
                target = block.output.dense((reference.attentions[layer - 1] @ v).transpose(1, 2).reshape(2, 5, 16))
                expected = reference_l2(mixer(entering, MASK), target, MASK)
        assert float(values[f"{name}@{layer}-{layer}"].detach()) == pytest.approx(expected, rel=1e-5)
    total = objective.total(values)
    assert float(total.detach()) == pytest.approx(0.5 * sum(float(v.detach()) for v in values.values()), rel=1e-6)
    total.backward()
    grads = {n for n, p in student.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert grads and all(".mixer." in n for n in grads)  # the rest of the student is not in the loss
    trained_by_stage = {"forward_scan", "backward_scan", "skip"} | ({"value", "output"} if stage == 2 else set())
    assert {n.split(".mixer.")[1].split(".")[0] for n in grads} == trained_by_stage
    if stage == 1:  # its terms are recomputed in the backward pass: the gradients are those of the plain sum
        kept = {n: p.grad.clone() for n, p in student.named_parameters() if p.grad is not None}
        student.zero_grad()
        plain = sum(
            matrix_orientation(student.layers[n - 1].mixer.matrices(reference.hidden_states[n - 1], MASK),
                               teacher_probabilities(features.scores[n], MASK), MASK)
            for n in (1, 2)
        )  # fmt: skip
        (0.5 * plain).backward()
        for n, p in student.named_parameters():
            if n in kept:
                assert torch.allclose(p.grad, kept[n], atol=1e-6), n


def test_the_rules_of_a_stages_trial():
    base = dict(task="polarity", teacher="minilm-l6", student="ssm-l6-h384-a12", init="random")
    assert trial_problems(Trial(**base, soft_weight=0, alpha=0, options={"mohawk_stage": 1})) == []
    assert trial_problems(Trial(**base, options={"mohawk_stage": 3}, knowledge=("attention_mse_sum",),
                                strategy="First")) == []  # fmt: skip
    (problem,) = trial_problems(Trial(**base, options={"mohawk_stage": 2}))
    assert "set soft_weight: 0 and alpha: 0" in problem
    (problem,) = trial_problems(Trial(**{**base, "student": "ssm-l6-h384-a6"}, options={"mohawk_stage": 3}))
    assert "heads 6 (teacher 12)" in problem
    (problem,) = trial_problems(Trial(**{**base, "student": "bert-tiny"}, options={"mohawk_stage": 3}))
    assert "distils into an SSM student" in problem
    assert "allowed: 1, 2, 3" in trial_problems(Trial(**base, options={"mohawk_stage": 4}))[0]
    problems = trial_problems(Trial(**base, soft_weight=0, alpha=0, options={"mohawk_stage": 1, "optimizer": "adamw"}))
    assert problems == ["MOHAWK stage 1 trains on its own loss: option(s) optimizer do not apply to it (it takes "
                        "data_seed, max_dev_samples, max_grad_norm, mohawk_stage, teacher_gate, teacher_label_order)"]
    problems = trial_problems(Trial(**{**base, "init": "pretrain", "init_from": "some/dir"},
                                    knowledge=("value_relation",), strategy="Last-1"))  # fmt: skip
    assert any("starts from init 'random'" in p for p in problems)
    assert any("names a trial (trial:<id>" in p for p in problems)
    assert any("value_relation reads Q, K or V" in p for p in problems)
    problems = trial_problems(Trial(**base, knowledge=("hidden_mse",), strategy="First",
                                    options={"layer_curriculum": [0.5]}))  # fmt: skip
    assert "option layer_curriculum is for BERT students, not the SSM student ssm-l6-h384-a12" in problems
    # each BERT-only option refused once, by the rule of what owns it (the method's own, or the trial rules')
    problems = trial_problems(Trial(**base, options={"dual_head": True, "init_recipe": "some_recipe"}))
    refused = [p for p in problems if "is for BERT students" in p]
    assert sorted(refused) == [
        f"option {name} is for BERT students, not the SSM student ssm-l6-h384-a12" for name in ("dual_head", "init_recipe")
    ]
    assert not [p for p in trial_problems(Trial(**{**base, "student": "bert-tiny"}, options={"dual_head": True}))
                if "is for BERT students" in p]  # fmt: skip


def test_a_stage_registers_as_a_method_whose_own_loss_leaves_something_to_learn():
    from kdgrid.core.method_registry import METHODS, trains_on_own_loss
    from kdgrid.core.options import OPTIONS

    spec = METHODS["mohawk"]
    assert spec.options == ("mohawk_stage",) and "mohawk_stage" in OPTIONS
    base = dict(task="polarity", teacher="minilm-l6", student="ssm-l6-h384-a12", init="random")
    stages = {n: Trial(**base, soft_weight=0, alpha=0, options={"mohawk_stage": n}) for n in (1, 2, 3)}
    assert [trains_on_own_loss(stages[n]) for n in (1, 2, 3)] == [True, True, False]
    assert [spec.uses(stages[n]) for n in (1, 2, 3)] == [True, True, True]
    assert not spec.uses(Trial(**base))
    # stage 3 trains on eq. 9: with nothing in it, nothing to learn from
    assert any("nothing to learn from" in p for p in trial_problems(stages[3]))
    assert not any("nothing to learn from" in p for p in trial_problems(stages[1]))


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_a_stages_hooks_replace_the_terms_and_the_students_pass_only_when_teacher_forced(stage):
    """Stages 1 and 2: their terms in place of eq. 9's, the teacher capturing their inputs on every layer, and the
    student's features given without a forward pass; stage 3 changes none of these (its part is the weight
    transfer, below)."""
    model = build_ssm(ssm_shape("ssm-l2-h16-a2-f32"), 2, seed=0, vocab_size=40)
    trial = Trial(task="sst2", teacher="t", student="ssm-l2-h16-a2-f32", init="random", soft_weight=0, alpha=0,
                  beta=0.5, options={"mohawk_stage": stage})  # fmt: skip
    if stage == 3:
        (hooks,) = step_hooks(trial)
        objective = Objective(trial, [], model.config.shape, model.config.shape, False, hooks=[hooks])
    else:
        objective, hooks = _stage_objective(model, trial)
    run = SimpleNamespace(model=model)
    calls: list[int] = []
    model.register_forward_hook(lambda *args: calls.append(1))
    batch = {"input_ids": torch.tensor([[1, 2, 3, 0]]), "attention_mask": torch.tensor([[1, 1, 1, 0]])}
    features = hooks.student_features(run, None, batch, 0, 1)
    if stage == 3:
        assert features is None and hooks.teacher_capture(run) == (frozenset(), frozenset())
        assert objective.weights() == {"soft": 0.0, "hard": 0.0}
        return
    needs = {1: {"layer_input", "scores"}, 2: {"layer_input", "attention_output"}}[stage]
    assert hooks.teacher_capture(run) == (needs, {1, 2})
    assert torch.equal(features.logits, torch.zeros(1, 2)) and torch.equal(features.mask, batch["attention_mask"])
    assert calls == []  # the student ran no pass of its own


@pytest.mark.usefixtures("deterministic_torch")
def test_the_stages_train_in_the_core_what_they_should(teacher: str):
    from kdgrid.core.training.train import run_job

    student = "ssm-l3-h64-a4-f128"  # the `teacher` fixture's shape (tests/conftest.py)
    first = tiny_trial(teacher, student=student, soft_weight=0, alpha=0, epochs=3, options={"mohawk_stage": 1})
    third = tiny_trial(teacher, student=student, epochs=1, options={"mohawk_stage": 3})
    kept: dict[str, dict[str, torch.Tensor]] = {}

    def keep(trial: Trial, model: torch.nn.Module) -> None:
        kept[trial.trial_id] = {k: v.detach().clone() for k, v in model.state_dict().items()}

    results = run_job([first], device="cpu", on_model=keep) + run_job([third], device="cpu", on_model=keep)
    assert [r.status for r in results] == ["done", "done"], [r.error_message for r in results]
    one, three = results
    curve = [epoch["loss_terms"]["mohawk_matrix@2-2"] for epoch in one.curve]
    assert curve[-1] < curve[0]  # stage 1 orients the matrices towards the teacher's attention
    fresh = build_ssm(ssm_shape(student), 2, seed=first.seed, vocab_size=kept[first.trial_id][
        "embeddings.word_embeddings.weight"].shape[0]).state_dict()  # fmt: skip
    for name, value in kept[first.trial_id].items():
        moved = not torch.equal(value, fresh[name])
        trained = ".mixer." in name and ".value." not in name and ".output." not in name
        assert moved == trained, name
    # per block 2 LayerNorms and 2 feed-forward layers (8 tensors), 5 of the embeddings, pooler and head (2 each)
    assert three.extra["mohawk_transferred"] == 3 * 8 + 5 + 2 + 2


def test_stage_3_puts_the_copied_classifier_in_the_tasks_label_order():
    from kdgrid.core.methods.mohawk.transfer import align_transferred_head, prepare_student

    teacher = _teacher()
    teacher.classifier = torch.nn.Linear(16, 3)
    teacher.config.num_labels = 3
    student = build_ssm(ssm_shape("ssm-l2-h16-a2-f32"), 3, seed=0, vocab_size=40)
    trial = Trial(task="mnli", teacher="t", student="ssm-l2-h16-a2-f32", init="random", options={"mohawk_stage": 3})
    assert prepare_student(trial, student, teacher) == {"mohawk_transferred": 2 * 8 + 5 + 2 + 2}
    # teacher output 0 means label 2, output 1 label 0, output 2 label 1: label j is teacher output columns[j]
    align_transferred_head(trial, student, (1, 2, 0))
    assert torch.equal(student.classifier.weight, teacher.classifier.weight[[1, 2, 0]])
    assert torch.equal(student.classifier.bias, teacher.classifier.bias[[1, 2, 0]])
    ids = torch.randint(0, 40, (2, 5))
    student.eval()
    with torch.no_grad():  # the student's logits are the teacher head's, re-ordered as the job re-orders the teacher's
        pooled = student.pool(student(ids, output_hidden_states=True).hidden_states[-1], torch.ones(2, 5))
        assert torch.allclose(student.classifier(pooled), teacher.classifier(pooled)[:, [1, 2, 0]])
