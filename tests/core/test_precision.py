"""Mixed precision: the policy (device, compute capability, ``KDGRID_AMP``) and the autocast training path,
exercised on the CPU (``torch.autocast("cpu", ...)`` and a CPU ``GradScaler``) so that it runs without a GPU."""

from __future__ import annotations

import pytest
import torch

from kdgrid.core.job.loaded_job import LoadedJob, load_job, teacher_forward
from kdgrid.core.model.capture import FeatureCapture
from kdgrid.core.model.runtime import FP32, Precision, Runtime, make_runtime, precision_policy
from kdgrid.core.training.student import StudentRun, setup_student, train_step
from kdgrid.core.training.train import teacher_capture_needs
from kdgrid.core.training.trial_setup import set_up_trial
from kdgrid.errors import ConfigError
from kdgrid.trial import Trial
from tests.tiny_trials import tiny_trial

BF16 = Precision(torch.bfloat16, grad_scaling=False)
FP16_SCALED = Precision(torch.float16, grad_scaling=True)
VOLTA, TURING, AMPERE, HOPPER = (7, 0), (7, 5), (8, 0), (9, 0)


# -- the policy -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("capability", "setting", "expected"),
    [
        (AMPERE, None, BF16),
        (HOPPER, "auto", BF16),
        (
            VOLTA,
            None,
            FP16_SCALED,
        ),  # is_bf16_supported() would say yes here (emulation): the capability decides
        (TURING, "", FP16_SCALED),
        (HOPPER, "fp16", FP16_SCALED),
        (AMPERE, "BF16", BF16),
        (AMPERE, "off", FP32),
        (VOLTA, "off", FP32),
    ],
)
def test_cuda_precision_follows_the_compute_capability_and_the_setting(
    capability: tuple[int, int], setting: str | None, expected: Precision
) -> None:
    assert precision_policy("cuda", capability, setting) == expected


@pytest.mark.parametrize("setting", [None, "auto", "bf16", "fp16", "off"])
def test_the_cpu_computes_in_fp32_whatever_the_setting(setting: str | None) -> None:
    assert precision_policy("cpu", None, setting) == FP32


@pytest.mark.parametrize("capability", [VOLTA, TURING])
def test_bf16_asked_for_on_a_gpu_without_native_bf16_is_refused(capability: tuple[int, int]) -> None:
    with pytest.raises(
        ConfigError, match=r"native bf16.*compute capability >= 8\.0.*KDGRID_AMP=fp16"
    ) as caught:
        precision_policy("cuda", capability, "bf16")
    assert f"{capability[0]}.{capability[1]}" in str(caught.value)


def test_an_unknown_precision_setting_is_refused_with_the_allowed_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ConfigError, match="allowed: auto, bf16, fp16, off"):
        precision_policy("cuda", AMPERE, "fp8")
    monkeypatch.setenv("KDGRID_AMP", "half")
    with pytest.raises(ConfigError, match="KDGRID_AMP='half'"):
        make_runtime("cpu")


def test_the_cpu_runtime_has_no_autocast_and_no_scaler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KDGRID_AMP", "fp16")
    runtime = make_runtime("cpu")
    assert runtime.amp_dtype is None and not runtime.grad_scaling and runtime.grad_scaler() is None


# -- the autocast training path on the CPU --------------------------------------------------------------------------


def make_trial(teacher: str, **overrides: object) -> Trial:
    """Every knowledge family at once, one epoch: only the precision machinery is under test."""
    config: dict[str, object] = dict(
        knowledge=("hidden_mse", "attention_ce_mean", "value_relation", "gram"), strategy="Last", epochs=1
    )
    return tiny_trial(teacher, **{**config, **overrides})


def cpu_runtime(precision: Precision) -> Runtime:
    return Runtime(
        device=torch.device("cpu"),
        amp_dtype=precision.amp_dtype,
        compile=False,
        checkpoint_width=1 << 30,
        grad_scaling=precision.grad_scaling,
    )


def set_up(trial: Trial, precision: Precision) -> tuple[LoadedJob, StudentRun, dict[str, torch.Tensor], object]:
    """A job and one student under ``precision`` on the CPU, the first training batch and its teacher features."""
    from kdgrid.core.data.batching import train_batches

    job = load_job(trial, cpu_runtime(precision))
    run = setup_student(set_up_trial(trial, job.teacher), job)
    capture = FeatureCapture(job.teacher_model, *teacher_capture_needs([run]))
    batch = job.runtime.to_device(train_batches(job.tokenized["train"], trial.batch_size, trial.seed, 0)[0])
    return job, run, batch, teacher_forward(job, capture, batch)


def record_optimizer_steps(run: StudentRun) -> list[dict[str, float]]:
    """Wrap the student's optimizer so that each step records the gradients it is given (their total norm and
    whether all are finite) before stepping."""
    assert run.optimizer is not None
    seen: list[dict[str, float]] = []
    step = run.optimizer.step

    def recording_step(*args: object, **kwargs: object) -> object:
        grads = [p.grad for g in run.optimizer.param_groups for p in g["params"] if p.grad is not None]
        seen.append(
            {
                "norm": float(
                    torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
                ),
                "finite": float(all(bool(torch.isfinite(g).all()) for g in grads)),
                "count": float(len(grads)),
            }
        )
        return step(*args, **kwargs)

    run.optimizer.step = recording_step  # type: ignore[method-assign]
    return seen


def test_a_training_step_under_cpu_bf16_autocast_gives_float32_losses_and_finite_gradients(
    teacher: str,
) -> None:
    trial = make_trial(teacher)
    job, run, batch, teacher_features = set_up(trial, BF16)
    assert run.scaler is None
    assert run.objective is not None and run.capture is not None
    with job.runtime.autocast():
        student_features = run.capture(batch)
        assert student_features.logits.dtype == torch.bfloat16  # the forward pass did run under autocast
        values = run.objective.term_values(student_features, teacher_features, batch["labels"])
    assert len(values) == 2 + len(run.objective.terms) and len(run.objective.terms) >= 4
    assert {name: value.dtype for name, value in values.items()} == dict.fromkeys(values, torch.float32)
    before = {k: v.detach().clone() for k, v in run.model.state_dict().items()}
    steps = record_optimizer_steps(run)
    train_step(run, job, batch, teacher_features, step=1)
    assert len(steps) == 1 and steps[0]["finite"] == 1.0 and steps[0]["count"] > 0 and steps[0]["norm"] > 0
    assert all(v.dtype == torch.float32 for v in run.sums.values())
    after = run.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)  # the step moved the weights
    assert all(torch.isfinite(v).all() for v in after.values())


def test_fp16_with_a_gradient_scaler_unscales_before_clipping(teacher: str) -> None:
    """With ``max_grad_norm`` the optimizer must see the clipped TRUE gradients: clipping the scaled ones (or
    skipping the clip, as an earlier version did under the scaler) gives another norm."""
    max_norm = 1e-3  # far below the gradients' norm: clipping always acts
    trial = make_trial(teacher, options={"max_grad_norm": max_norm})
    job, run, batch, teacher_features = set_up(trial, FP16_SCALED)
    assert isinstance(run.scaler, torch.amp.GradScaler)
    run.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)  # no overflow on the first step
    calls: list[str] = []
    unscale, clip = run.scaler.unscale_, torch.nn.utils.clip_grad_norm_

    def recording_unscale(optimizer: torch.optim.Optimizer) -> None:
        calls.append("unscale_")
        unscale(optimizer)

    def recording_clip(*args: object, **kwargs: object) -> torch.Tensor:
        calls.append("clip")
        return clip(*args, **kwargs)  # type: ignore[arg-type]

    run.scaler.unscale_ = recording_unscale  # type: ignore[method-assign]
    steps = record_optimizer_steps(run)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch.nn.utils, "clip_grad_norm_", recording_clip)
        train_step(run, job, batch, teacher_features, step=1)
    assert calls == ["unscale_", "clip"]
    assert len(steps) == 1 and steps[0]["finite"] == 1.0
    assert steps[0]["norm"] == pytest.approx(max_norm, rel=1e-3)
    assert run.scaler.get_scale() == 2.0**8  # a finite step keeps the scale


def test_fp16_without_clipping_still_steps_through_the_scaler(teacher: str) -> None:
    trial = make_trial(teacher)
    job, run, batch, teacher_features = set_up(trial, FP16_SCALED)
    assert run.scaler is not None
    run.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    steps = record_optimizer_steps(run)
    train_step(run, job, batch, teacher_features, step=1)
    assert len(steps) == 1 and steps[0]["finite"] == 1.0 and steps[0]["norm"] > 0


def test_compiled_students_take_dynamic_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    """``KDGRID_COMPILE=1`` compiles the forward with dynamic shapes: each batch is padded to its own longest
    sequence, and a static compile would recompile at every new length until it fell back to eager."""
    from kdgrid.core.model import runtime

    seen: dict[str, object] = {}

    def fake_compile(function, **kwargs):
        seen.update(kwargs, function=function)
        return function

    monkeypatch.setattr(runtime.torch, "compile", fake_compile)
    model = torch.nn.Linear(2, 2)
    assert runtime.compile_forward(model) == model.forward
    assert seen["dynamic"] is True and seen["function"] == model.forward
