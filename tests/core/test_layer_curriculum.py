"""The layer-wise curriculum: stages by hand from the boundaries, only the stage's layers change in each stage
(checked on the parameters themselves, step by step, through the trainer's own steps), the layer stages
minimise their own terms only, the row records the stages, the option is refused where it cannot work, and a
preempted trial resumes mid-curriculum bit for bit."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from kdgrid.core.data.batching import train_batches
from kdgrid.core.methods.layer_curriculum.spec import Curriculum, parameter_layer
from kdgrid.core.model.capture import FeatureCapture
from kdgrid.core.training.train import (
    load_job,
    make_runtime,
    set_up_trial,
    setup_student,
    teacher_forward,
    train_step,
)
from kdgrid.core.trial_rules import trial_problems
from kdgrid.errors import ConfigError
from kdgrid.trial import data_order_seed
from tests.core.test_train_methods import make_trial, run
from tests.preemption import preempted_in_epoch

CURRICULUM = {"layer_curriculum": [0.25, 0.5]}


pytestmark = pytest.mark.usefixtures("deterministic_torch")  # bit-for-bit comparisons (tests/conftest.py)


def test_stages_by_hand() -> None:
    curriculum = Curriculum.of(
        [0.25, 0.5], [("hidden_mse@1-2", (1, 2)), ("hidden_mse@2-3", (2, 3)), ("cka", None)]
    )
    # 12 steps: stage j starts at ceil(b_j * 12) = 3 and 6
    assert [curriculum.stage(k, 12) for k in range(12)] == [0] * 3 + [1] * 3 + [2] * 6
    assert curriculum.first_steps(12) == [0, 3, 6]
    assert curriculum.trainable_layers(0) == {0, 1} and curriculum.trainable_layers(1) == {2}
    # the last stage: the pooler and the heads (parameter layer None) on the gold labels alone, by default ...
    assert curriculum.trainable_layers(2) == {None} and curriculum.stage_terms(2) == {"hard"}
    assert curriculum.stage_terms(0) == {"hidden_mse@1-2"}
    # ... or everything on the full objective
    everything = Curriculum.of([0.25, 0.5], [("hidden_mse@1-2", (1, 2)), ("hidden_mse@2-3", (2, 3))], "all")
    assert everything.trainable_layers(2) is None and everything.stage_terms(2) is None
    with pytest.raises(ConfigError, match=r"stage\(s\) \[1\] get no step"):
        Curriculum.of([0.31, 0.32], [("a", (1, 1)), ("b", (2, 2))]).first_steps(10)  # both start at step 4
    # a deeper student skipping layers: stage 2 trains layers 3..4
    skip = Curriculum.of([0.1, 0.2], [("x@2-1", (2, 1)), ("x@4-2", (4, 2))])
    assert skip.trainable_layers(0) == {0, 1, 2} and skip.trainable_layers(1) == {3, 4}
    assert parameter_layer("bert.encoder.layer.3.output.dense.weight") == 4
    assert parameter_layer("bert.embeddings.word_embeddings.weight") == 0
    assert parameter_layer("classifier.weight") is None and parameter_layer("bert.pooler.dense.bias") is None


@pytest.mark.parametrize(("last", "optimizer"), [("all", "shared"), ("classifier", "fresh")])
def test_only_the_stages_layers_change_and_the_stage_minimises_its_own_terms(
    teacher: str, last: str, optimizer: str
) -> None:
    options = {**CURRICULUM, "layer_curriculum_last": last, "layer_curriculum_optimizer": optimizer}
    trial = make_trial(teacher, knowledge=("hidden_mse",), strategy="Last", options=options)
    job = load_job(trial, make_runtime("cpu"))
    run_ = setup_student(set_up_trial(trial, job.teacher), job)
    total = job.steps_per_epoch * trial.epochs
    assert total == 12
    summary = run_.result.extra["layer_curriculum"]
    assert [s["first_step"] for s in summary["stages"]] == [0, 3, 6]
    last_terms, last_layers = ("all", "all") if last == "all" else (["hard"], "classifier")
    assert [s["terms"] for s in summary["stages"]] == [["hidden_mse@1-2"], ["hidden_mse@2-3"], last_terms]
    assert [s["trainable_layers"] for s in summary["stages"]] == [[0, 1], [2], last_layers]
    assert summary["last"] == last
    assert run_.objective is not None and run_.capture is not None
    capture = FeatureCapture(job.teacher_model, frozenset({"logits", "hidden"}), frozenset({2, 3}))
    watched = {"model": run_.model, "objective": run_.objective}

    def snapshot() -> dict[str, torch.Tensor]:
        return {
            f"{side}.{name}": p.detach().clone()
            for side, module in watched.items()
            for name, p in module.named_parameters()
        }

    changed_by_stage: dict[int, set[str]] = {0: set(), 1: set(), 2: set()}
    step = 0
    for epoch in range(trial.epochs):
        for batch in train_batches(job.tokenized["train"], trial.batch_size, data_order_seed(trial), epoch):
            features = teacher_forward(job, capture, batch)
            stage = sum(step >= b * total for b in (0.25, 0.5))
            if stage < 2:  # the step's loss is the stage's one term, weighted by beta (1), by hand
                run_.model.train()
                own = run_.objective.term_values(run_.capture(batch), features, batch["labels"])
                run_.objective.set_progress(step, total)
                assert run_.objective.total(own).item() == pytest.approx(
                    own[f"hidden_mse@{stage + 1}-{stage + 2}"].item(), rel=1e-6
                )
            before = snapshot()
            train_step(run_, job, batch, features, step + 1)
            after = snapshot()
            if step == 3:  # stage 1's first step: which parameters have an optimizer state now
                stateful = {id(p) for p in run_.optimizer.state}
            changed_by_stage[stage] |= {k for k in before if not torch.equal(before[k], after[k])}
            step += 1
    layer_of = {k: parameter_layer(k.split(".", 1)[1]) for k in snapshot() if k.startswith("model.")}
    model_changed = {
        s: {k for k in changed if k.startswith("model.")} for s, changed in changed_by_stage.items()
    }
    assert model_changed[0] == {k for k, layer in layer_of.items() if layer in (0, 1)}
    assert model_changed[1] == {k for k, layer in layer_of.items() if layer == 2}
    if last == "all":
        assert model_changed[2] == set(layer_of)  # the full objective: every parameter, classifier included
    else:  # the paper's last stage: the pooler and the classifier alone
        assert model_changed[2] == {k for k, layer in layer_of.items() if layer is None} != set()
    projection = {
        s: {k for k in changed if k.startswith("objective.")} for s, changed in changed_by_stage.items()
    }
    assert projection[0] and all("at_1_2" in k for k in projection[0])
    assert projection[1] and all("at_2_3" in k for k in projection[1])
    # a fresh optimizer per stage (the paper's) holds state only for what stage 1 trained; a shared one keeps
    # stage 0's too
    params = {f"{side}.{n}": p for side, module in watched.items() for n, p in module.named_parameters()}
    stage_1 = {id(params[k]) for k in model_changed[1] | projection[1]}
    assert stateful == stage_1 if optimizer == "fresh" else stateful > stage_1
    assert summary["optimizer"] == optimizer


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"options": {"layer_curriculum": [0.5, 0.2]}}, "strictly increasing in (0, 1)"),
        ({"options": {"layer_curriculum": [0.2, 1.0]}}, "strictly increasing in (0, 1)"),
        ({"options": {"layer_curriculum": "0.2"}}, "a list of stage boundaries"),
        (
            {"options": {"layer_curriculum": [0.5]}},
            "has 1 boundaries, but strategy 'Last' matches 2 student layers",
        ),
        (
            {"knowledge": (), "strategy": None, "options": {"layer_curriculum": [0.5]}},
            "needs a strategy and knowledge",
        ),
        ({"options": {"layer_curriculum": [0.2, 0.4], "optimizer": "dot"}}, "cannot go with optimizer 'dot'"),
        ({"alpha": 0.0, "options": {"layer_curriculum": [0.2, 0.4]}}, "last stage trains the classifier on the gold"),
        ({"options": {"layer_curriculum_last": "all"}}, "option layer_curriculum_last is a setting of"),
        ({"options": {"layer_curriculum_optimizer": "fresh"}}, "option layer_curriculum_optimizer is a setting of"),
        ({"options": {"layer_curriculum": [0.2, 0.4], "layer_curriculum_optimizer": "new"}}, "allowed: fresh, shared"),
        ({"options": {"layer_curriculum": [0.2, 0.4], "layer_curriculum_last": "head"}}, "allowed: classifier, all"),
    ],
)
def test_the_option_is_refused_before_anything_runs(teacher: str, fields: dict, message: str) -> None:
    config = {"knowledge": ("hidden_mse",), "strategy": "Last", **fields}
    problems = trial_problems(make_trial(teacher, **config))
    assert any(message in p and "layer_curriculum" in p for p in problems), problems


def test_a_preempted_curriculum_resumes_bit_for_bit(
    teacher: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # stage 1 runs from step 3 to step 8: across the epoch boundary (6 steps per epoch)
    trial = make_trial(
        teacher, knowledge=("hidden_mse",), strategy="Last", options={"layer_curriculum": [0.25, 0.75]}
    )
    [straight], straight_weights = run([trial])
    assert straight.status == "done", straight.error_message
    assert math.isfinite(straight.curve[-1]["loss_terms"]["hidden_mse@2-3"])

    with preempted_in_epoch(monkeypatch, 1):
        run([trial], checkpoint_dir=tmp_path)
    [resumed], resumed_weights = run([trial], checkpoint_dir=tmp_path)
    assert resumed.extra["resumed_from_epoch"] == 1
    assert (
        resumed.curve == straight.curve
        and resumed.extra["layer_curriculum"] == straight.extra["layer_curriculum"]
    )
    for key, value in straight_weights[trial.trial_id].items():
        assert torch.equal(value, resumed_weights[trial.trial_id][key]), key
