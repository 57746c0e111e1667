"""Pre-training's precision and device: the trials' policy (``KDGRID_AMP``, the compute capability), an fp16 path
through a gradient scaler whose skipped steps do not advance the learning-rate schedule, and the GPU a SLURM task
actually sees. Run on the CPU: the policy is patched where a GPU would decide it."""

from __future__ import annotations

import pytest
import torch

from kdgrid.core.model import runtime
from kdgrid.core.model.runtime import FP32, Precision, cuda_ordinal, device_precision
from kdgrid.core.optim import build_optimizer
from kdgrid.core.pretrained.recipe import PretrainRecipe
from kdgrid.errors import ConfigError
from kdgrid.pretrain import train
from kdgrid.pretrain.train import RunSettings, optimizer_step, run_pretrain


def _recipe(corpus: str, **changes: object) -> PretrainRecipe:
    fields: dict[str, object] = {
        "student": "w16-l2-h2-f32",
        "corpus": corpus,
        "steps": 3,
        "global_batch": 8,
        "block_length": 16,
        "lr": 1e-3,
        "warmup_ratio": 0.0,
        "dropout": 0.0,
        **changes,
    }
    return PretrainRecipe.from_dict(fields)


@pytest.mark.parametrize(
    ("capability", "setting", "expected"),
    [
        ((7, 0), None, Precision(torch.float16, True)),  # V100: bf16 would be emulated
        ((7, 5), "auto", Precision(torch.float16, True)),  # T4
        ((8, 0), None, Precision(torch.bfloat16, False)),
        ((9, 0), "fp16", Precision(torch.float16, True)),
        ((9, 0), "off", FP32),
    ],
)
def test_pre_training_takes_the_trials_precision_policy(
    monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int], setting: str | None, expected: Precision
) -> None:
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(
        torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True
    )  # says yes when emulated
    if setting is None:
        monkeypatch.delenv("KDGRID_AMP", raising=False)
    else:
        monkeypatch.setenv("KDGRID_AMP", setting)
    assert device_precision(torch.device("cuda", 0)) == expected
    assert train.device_precision is runtime.device_precision  # one policy, imported


def test_an_unknown_kdgrid_amp_refuses_a_pre_training_run(
    corpus: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KDGRID_AMP", "fp8")
    with pytest.raises(
        ConfigError, match="KDGRID_AMP='fp8' is not a precision; allowed: auto, bf16, fp16, off"
    ):
        run_pretrain(_recipe(corpus), RunSettings(micro_batch=4, progress=False, device="cpu"))


@pytest.mark.parametrize("precision", [Precision(torch.bfloat16, False), Precision(torch.float16, True)])
def test_a_run_under_autocast_and_a_scaler_trains(
    corpus: str, monkeypatch: pytest.MonkeyPatch, precision: Precision
) -> None:
    """The bf16 and fp16-with-scaler paths, under CPU autocast: the losses stay finite and fall, every step is
    taken (no overflow at these sizes), the scaler sees every backward pass."""
    scaled: list[int] = []
    real_scale = torch.amp.GradScaler.scale
    monkeypatch.setattr(train, "device_precision", lambda device: precision)
    monkeypatch.setattr(
        torch.amp.GradScaler, "scale", lambda self, x: scaled.append(1) or real_scale(self, x)
    )
    outcome = run_pretrain(_recipe(corpus, steps=6), RunSettings(micro_batch=4, progress=False, device="cpu"))
    assert outcome.finished and outcome.steps_done == 6
    losses = [h["mlm"] for h in outcome.history]
    assert all(torch.isfinite(torch.tensor(losses))) and losses[-1] < losses[0]
    assert len(scaled) == (12 if precision.grad_scaling else 0)  # 2 micro-batches per step


def test_the_schedule_advances_only_on_steps_the_scaler_took() -> None:
    model = torch.nn.Linear(4, 1)
    optimizer, scheduler = build_optimizer([model], 1e-3, 0.0, 10, 0.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    weights = model.weight.detach().clone()
    scaler.scale(model(torch.ones(2, 4)).sum() * float("inf")).backward()  # an overflowed backward pass
    assert optimizer_step(model, optimizer, scheduler, scaler) is False
    assert scheduler.last_epoch == 0 and scaler.get_scale() == 2.0**7
    torch.testing.assert_close(model.weight.detach(), weights)  # skipped
    scaler.scale(model(torch.ones(2, 4)).sum()).backward()
    assert optimizer_step(model, optimizer, scheduler, scaler) is True
    assert scheduler.last_epoch == 1 and not torch.equal(model.weight.detach(), weights)
    assert model.weight.grad is None  # zeroed for the next accumulation
    model(torch.ones(2, 4)).sum().backward()
    assert optimizer_step(model, optimizer, scheduler, None) is True and scheduler.last_epoch == 2


def test_the_gpu_is_the_one_the_task_sees() -> None:
    assert cuda_ordinal(local_rank=3, visible=1) == 0  # srun --gpus-per-task=1: only its own GPU is visible
    assert cuda_ordinal(local_rank=3, visible=4) == 3  # torchrun / --gpus-per-node: all of them
    with pytest.raises(ConfigError, match="local rank 5 sees 4 GPUs"):
        cuda_ordinal(local_rank=5, visible=4)
    with pytest.raises(ConfigError, match="sees no GPU"):
        cuda_ordinal(local_rank=0, visible=0)


def test_a_process_of_a_bound_slurm_task_uses_cuda_0(monkeypatch: pytest.MonkeyPatch) -> None:
    """Local rank 2 with one visible GPU (its task was bound to it): ``cuda:0``, where ``cuda:2`` would not
    exist. (One process of its own here: no process group is started.)"""
    chosen: list[torch.device] = []
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "2")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    place = train._processes("cuda")
    assert place.device == torch.device("cuda", 0) and chosen == [torch.device("cuda", 0)]


def test_the_attention_kernel_is_switched_through_transformers_api(monkeypatch: pytest.MonkeyPatch) -> None:
    """`set_attn_implementation` checks that the model supports the kernel; writing ``config._attn_implementation``
    would skip that check (and the sub-models)."""
    from transformers import BertForSequenceClassification

    from kdgrid.core.model.models import bert_config
    from kdgrid.core.model.shapes import StudentShape

    model = BertForSequenceClassification(bert_config(StudentShape(1, 16, 2, 32), 2, vocab_size=50))
    asked: list[str] = []
    real = model.set_attn_implementation
    monkeypatch.setattr(model, "set_attn_implementation", lambda name: asked.append(name) or real(name))
    placed = runtime.Runtime(torch.device("cpu"), None, False, 1024).place(model)
    assert asked == [] and placed.config._attn_implementation == "eager"  # already eager: nothing to switch
    runtime.set_attention(model, "sdpa")
    assert asked == ["sdpa"] and model.config._attn_implementation == "sdpa"
    runtime.Runtime(torch.device("cpu"), None, False, 1024).place(model)
    assert asked == ["sdpa", "eager"] and model.config._attn_implementation == "eager"
