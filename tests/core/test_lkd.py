"""LKD: the first-order hypergradient of a one-step lookahead against an independent autograd computation through
the lookahead itself, the held-out split carved from the training data by the data seed (never the dev set) and
recorded, the weights' trajectory in the row, the option's refusals, and a preempted LKD trial resuming bit for
bit."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.func import functional_call

from kdgrid.core.data.holdout import HOLDOUT_STREAM, indices_digest
from kdgrid.core.methods.lkd.lookahead import LossWeights, lkd_gradients
from kdgrid.core.training.train import load_job, make_runtime
from kdgrid.core.trial_rules import trial_problems
from kdgrid.grid.memory_estimate import GIB, estimate_trial_memory_gb
from kdgrid.trial import Trial, group_key
from tests.core.test_train_methods import make_trial, run
from tests.preemption import preempted_in_epoch

LKD = {"lkd_holdout": 0.25}


pytestmark = pytest.mark.usefixtures("deterministic_torch")  # bit-for-bit comparisons (tests/conftest.py)


def test_the_hypergradient_equals_autograd_through_the_lookahead() -> None:
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    x, y = torch.randn(5, 3), torch.tensor([0, 1, 1, 0, 1])
    x_val, y_val = torch.randn(4, 3), torch.tensor([1, 0, 0, 1])
    teacher = torch.softmax(torch.randn(5, 2), -1)
    target = torch.randn(5, 2)
    base = {"soft": 0.7, "hard": 0.3, "k@1-1": 2.0, "penalty": 0.05}
    weights = LossWeights(["soft", "hard", "k@1-1"])
    with torch.no_grad():
        weights.phi.copy_(torch.tensor([0.2, -0.1, 0.3]))
    rates = {"weight": 0.1, "bias": 0.05}

    def terms(params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        z = functional_call(model, params, (x,))
        return {
            "soft": -(teacher * torch.log_softmax(z, -1)).sum(-1).mean(),
            "hard": nn.functional.cross_entropy(z, y),
            "k@1-1": ((z - target) ** 2).mean(),
            "penalty": (params["weight"] ** 2).sum(),
        }

    theta = {name: p.detach().clone() for name, p in model.named_parameters()}
    # Independently: w(phi) -> theta' = theta - eta sum_k w_k g_k -> L_val(theta'), differentiated to phi by autograd
    phi = weights.phi.detach().clone().requires_grad_(True)
    learned = dict(zip(weights.names, 3 * torch.softmax(phi, 0), strict=True))
    w = {name: base[name] * learned[name] if name in learned else torch.tensor(base[name]) for name in base}
    leaves = {name: t.clone().requires_grad_(True) for name, t in theta.items()}
    values = terms(leaves)
    g: dict[str, dict[str, torch.Tensor]] = {}
    for k, v in values.items():
        found = torch.autograd.grad(v, list(leaves.values()), retain_graph=True, allow_unused=True)
        g[k] = {
            n: torch.zeros_like(t) if d is None else d
            for (n, t), d in zip(leaves.items(), found, strict=True)
        }
    step = {name: sum(w[k] * g[k][name] for k in base) for name in theta}
    ahead = {name: theta[name] - rates[name] * step[name] for name in theta}
    l_val = nn.functional.cross_entropy(functional_call(model, ahead, (x_val,)), y_val)
    expected_phi = torch.autograd.grad(l_val, phi)[0]

    params = list(model.parameters())
    values = terms(dict(model.named_parameters()))
    hyper = lkd_gradients(
        values,
        base,
        weights,
        params,
        [rates[name] for name, _ in model.named_parameters()],
        lambda: nn.functional.cross_entropy(model(x_val), y_val),
    )
    torch.testing.assert_close(weights.phi.grad, expected_phi, rtol=1e-5, atol=1e-8)
    for name, p in model.named_parameters():
        assert torch.equal(p.detach(), theta[name])  # restored bit for bit after the lookahead
        torch.testing.assert_close(p.grad, step[name].detach(), rtol=1e-6, atol=1e-8)
    assert set(hyper) == set(base) and expected_phi.abs().sum() > 0


def test_the_held_out_split_comes_from_train_by_the_data_seed_and_leaves_the_dev_set(teacher: str) -> None:
    trial = make_trial(teacher, knowledge=("hidden_mse",), strategy="Last", options=LKD)
    job = load_job(trial, make_runtime("cpu"))
    assert job.held_out is not None
    expected = np.sort(np.random.default_rng([trial.seed, HOLDOUT_STREAM]).permutation(96)[:24])
    assert np.array_equal(job.held_out.indices, expected)
    assert len(job.tokenized["train"]) == 72 and len(job.held_out.split) == 24 and job.steps_per_epoch == 5
    assert job.held_out.record() == {
        "fraction": 0.25,
        "examples": 24,
        "seed": 3,
        "indices_sha256": indices_digest(expected),
    }
    plain = load_job(make_trial(teacher), make_runtime("cpu"))
    train_rows = {tuple(plain.tokenized["train"].example(i)[0]) for i in range(96)}
    held_rows = [tuple(job.held_out.split.example(i)[0]) for i in range(24)]
    assert all(row in train_rows for row in held_rows)  # carved from the training data
    assert all(len(job.tokenized[name]) == len(plain.tokenized[name]) for name in job.task.dev_sets)
    assert group_key(trial) != group_key(make_trial(teacher, knowledge=("hidden_mse",), strategy="Last"))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"options": {"lkd_holdout": 0.9}}, "allowed: a number in (0, 0.5]"),
        ({"knowledge": (), "strategy": None, "alpha": 0.0, "options": LKD}, "it needs at least two"),
        ({"options": {**LKD, "optimizer": "dot"}}, "cannot go with optimizer dot"),
    ],
)
def test_the_option_is_refused_before_anything_runs(teacher: str, fields: dict, message: str) -> None:
    config = {"knowledge": ("hidden_mse",), "strategy": "Last", "alpha": 0.5, **fields}
    problems = trial_problems(make_trial(teacher, **config))
    assert any(message in p and "lkd_holdout" in p for p in problems), problems


def test_lkd_trains_records_its_trajectory_and_resumes_bit_for_bit(
    teacher: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trial = make_trial(
        teacher, knowledge=("hidden_mse",), strategy="Last", alpha=0.5, lr=2e-2,
        options={**LKD, "learned_lr_scale": 20.0},
    )  # fmt: skip
    [straight], weights = run([trial])
    assert straight.status == "done", straight.error_message
    record = straight.extra["lkd"]
    assert record["terms"] == ["soft", "hard", "hidden_mse@1-2", "hidden_mse@2-3"]
    assert record["held_out"]["examples"] == 24 and record["held_out"]["seed"] == 3
    trajectory = np.array(record["trajectory"])
    assert (
        trajectory.shape == (3, 4) and np.allclose(trajectory.sum(1), 4.0) and np.allclose(trajectory[0], 1.0)
    )
    assert np.abs(trajectory[-1] - 1.0).max() > 1e-3  # the weights moved

    with preempted_in_epoch(monkeypatch, 1):
        run([trial], checkpoint_dir=tmp_path)
    [resumed], resumed_weights = run([trial], checkpoint_dir=tmp_path)
    assert resumed.extra["resumed_from_epoch"] == 1 and resumed.extra["lkd"] == record
    assert resumed.curve == straight.curve
    for key, value in weights[trial.trial_id].items():
        assert torch.equal(value, resumed_weights[trial.trial_id][key]), key


def test_the_held_out_pass_runs_in_the_steps_precision_and_leaves_nothing_in_the_students_hooks(
    teacher: str,
) -> None:
    import gc
    import weakref

    from kdgrid.core.methods.dual_head.heads import DISTILL_HEAD
    from kdgrid.core.training.student import train_step
    from tests.core.test_precision import BF16, set_up

    trial = make_trial(
        teacher, knowledge=("value_relation",), strategy="Last", alpha=0.5, epochs=1,
        options={**LKD, "dual_head": True},
    )  # fmt: skip
    job, run_, batch, teacher_features = set_up(trial, BF16)
    assert run_.model is not None and hasattr(run_.model, DISTILL_HEAD)
    passes: list[dict[str, object]] = []  # per forward pass of the student: autocast on?, its V and pooled [CLS]

    def on_encoder(module: nn.Module, args: object) -> None:
        passes.append({"autocast": torch.is_autocast_enabled("cpu")})

    def on_value(module: nn.Module, args: object, output: torch.Tensor) -> None:
        passes[-1]["value"] = weakref.ref(output)

    def on_classifier(module: nn.Module, args: tuple[torch.Tensor, ...]) -> None:
        passes[-1]["pooled"] = weakref.ref(args[0])

    hooks = [
        run_.model.bert.register_forward_pre_hook(on_encoder),
        run_.model.bert.encoder.layer[1].attention.self.value.register_forward_hook(on_value),
        run_.model.classifier.register_forward_pre_hook(on_classifier),
    ]
    train_step(run_, job, batch, teacher_features, step=1)
    for hook in hooks:
        hook.remove()
    gc.collect()
    training, held_out = passes  # the step's forward pass, then LKD's on the held-out batch
    assert training["autocast"] and held_out["autocast"]  # both in bf16, as the step runs
    assert held_out["value"]() is None  # nothing holds the held-out pass's V (the capture kept none) ...
    assert held_out["pooled"]() is None  # ... nor its pooled [CLS] (the dual head's hook kept the step's)


def test_the_memory_estimate_counts_the_per_term_gradients_and_the_weights() -> None:
    fixed = Trial("polarity", "minilm-l6", "bert-tiny", knowledge=("hidden_mse",), strategy="Last", alpha=0.5)
    lkd = dataclasses.replace(fixed, options=(("lkd_holdout", 0.1),))
    parameters = estimate_trial_memory_gb(fixed) * GIB / 16  # 16 bytes per parameter without LKD
    terms = 2 + 2  # soft, hard, hidden_mse on bert-tiny's 2 matched layers
    # each term's gradient, their sum and the parameter copy: (terms + 2) fp32 values more per parameter
    assert estimate_trial_memory_gb(lkd) * GIB == pytest.approx((parameters + terms) * (16 + (terms + 2) * 4))
