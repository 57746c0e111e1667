"""Where and how a job computes: the device, mixed precision, compilation and gradient checkpointing.

Read once per job from the environment. Mixed precision (`precision_policy`, ``KDGRID_AMP``):

- ``auto`` (default): on a GPU with native bf16 (compute capability >= 8.0, Ampere and later) the forward passes
  run under bf16 autocast; on an older GPU under fp16 autocast with a gradient scaler (``torch.amp.GradScaler``;
  gradients are unscaled before clipping); on the CPU in fp32.
- ``bf16``: bf16 autocast, refused on a GPU without native bf16 (torch would emulate it: slow, and
  ``torch.cuda.is_bf16_supported()`` says yes there, which is why the capability is read instead).
- ``fp16``: fp16 autocast with a gradient scaler; ``off``: fp32.

The loss terms are computed in float32 outside autocast whatever the setting (`kdgrid.core.training.objective`).
``KDGRID_COMPILE=1`` compiles each student (experimental); students of width >= ``KDGRID_CHECKPOINT_WIDTH``
(default 1024) use gradient checkpointing (on any device). Nothing CUDA-only runs on the CPU path.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any

import torch

from kdgrid.core.model.models import ATTENTION_BY_DEVICE, ATTENTION_IMPLEMENTATION
from kdgrid.errors import ConfigError

DEFAULT_CHECKPOINT_WIDTH = 1024
AMP_SETTINGS = ("auto", "bf16", "fp16", "off")  # the values of KDGRID_AMP
NATIVE_BF16_CAPABILITY = (8, 0)  # CUDA compute capability from which bf16 runs natively (Ampere)


@dataclass(frozen=True)
class Precision:
    """How a job's forward passes compute.

    Attributes:
        amp_dtype: the autocast dtype, or None for fp32.
        grad_scaling: backward passes go through a ``torch.amp.GradScaler`` (fp16: small gradients underflow).
    """

    amp_dtype: torch.dtype | None
    grad_scaling: bool


FP32 = Precision(None, False)


def precision_policy(device_type: str, capability: tuple[int, int] | None, setting: str | None) -> Precision:
    """The precision of a job on a device: a pure function of what the device is and what ``KDGRID_AMP`` says.

    Args:
        device_type: ``"cuda"`` or ``"cpu"`` (any other device computes in fp32).
        capability: the CUDA device's compute capability ``(major, minor)``
            (``torch.cuda.get_device_capability``); ignored off CUDA.
        setting: ``KDGRID_AMP`` (`AMP_SETTINGS`, any case; None or empty = ``auto``).

    Raises:
        ConfigError: an unknown setting, or ``bf16`` on a GPU without native bf16.
    """
    amp = (setting or "auto").strip().lower()
    if amp not in AMP_SETTINGS:
        raise ConfigError(f"KDGRID_AMP={setting!r} is not a precision; allowed: {', '.join(AMP_SETTINGS)}")
    if device_type != "cuda" or amp == "off":
        return FP32
    native_bf16 = capability is not None and tuple(capability) >= NATIVE_BF16_CAPABILITY
    if amp == "bf16" and not native_bf16:
        major, minor = capability if capability is not None else ("?", "?")
        raise ConfigError(
            f"KDGRID_AMP=bf16 needs a GPU with native bf16 (compute capability >= "
            f"{NATIVE_BF16_CAPABILITY[0]}.{NATIVE_BF16_CAPABILITY[1]}); this GPU has {major}.{minor}, where bf16 "
            "is emulated; use KDGRID_AMP=fp16 (or leave KDGRID_AMP unset: fp16 with a gradient scaler here)"
        )
    if amp == "bf16" or (amp == "auto" and native_bf16):
        return Precision(torch.bfloat16, False)
    return Precision(torch.float16, True)


def set_attention(model: Any, implementation: str) -> None:
    """Switch a transformers model (and its sub-models) to the attention ``implementation`` (``eager``,
    ``sdpa``) through transformers' own API, which checks that the model supports it. A model without attention
    (an SSM student, `kdgrid.core.model.ssm`) is left as it is."""
    if not hasattr(model, "set_attn_implementation"):
        return
    if model.config._attn_implementation != implementation:
        model.set_attn_implementation(implementation)


def autocast(device: torch.device, precision: Precision) -> contextlib.AbstractContextManager[Any]:
    """Autocast to ``precision.amp_dtype`` on ``device``, or nothing (fp32)."""
    if precision.amp_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=precision.amp_dtype)


def device_precision(device: torch.device) -> Precision:
    """`precision_policy` of ``device`` with this environment's ``KDGRID_AMP``: the one policy of trials and
    pre-training (the GPU's compute capability read, never ``torch.cuda.is_bf16_supported()``, which says yes
    where bf16 is emulated)."""
    capability = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
    return precision_policy(device.type, capability, os.environ.get("KDGRID_AMP"))


def cuda_ordinal(local_rank: int, visible: int) -> int:
    """The CUDA device of the process of ``local_rank`` on its node when it sees ``visible`` GPUs: its local rank
    where every task sees all the node's GPUs (torchrun, ``srun --gpus-per-node``), 0 where the task was bound to
    one GPU (``srun --gpus-per-task=1``: ``CUDA_VISIBLE_DEVICES`` names only its own, and ``cuda:LOCAL_ID`` would
    not exist).

    Raises:
        ConfigError: neither (several GPUs visible, but fewer than the local ranks).
    """
    if visible < 1:
        raise ConfigError("device 'cuda': this process sees no GPU (CUDA_VISIBLE_DEVICES is empty?)")
    if visible == 1:
        return 0
    if local_rank < visible:
        return local_rank
    raise ConfigError(
        f"local rank {local_rank} sees {visible} GPUs: bind one GPU per task or let each task see all of its "
        "node's GPUs (CUDA_VISIBLE_DEVICES)"
    )


@dataclass(frozen=True)
class Runtime:
    """Where and how the job computes."""

    device: torch.device
    amp_dtype: torch.dtype | None  # autocast dtype; None = fp32
    compile: bool
    checkpoint_width: int  # students at least this wide use gradient checkpointing
    grad_scaling: bool = False  # backward through a GradScaler (fp16 autocast)

    def grad_scaler(self) -> torch.amp.GradScaler | None:
        """A fresh gradient scaler for one student's optimizer on this device, or None without grad scaling."""
        return torch.amp.GradScaler(self.device.type) if self.grad_scaling else None

    @property
    def description(self) -> str:
        """The device as rows record it (``cpu``, ``cuda:0 (NVIDIA H100 ...)``)."""
        if self.device.type == "cuda":
            return f"{self.device} ({torch.cuda.get_device_name(self.device)})"
        return str(self.device)

    def place(self, model: Any) -> Any:
        """``model`` on this device, with the attention kernel that is fastest there (`ATTENTION_BY_DEVICE`)."""
        set_attention(model, ATTENTION_BY_DEVICE.get(self.device.type, ATTENTION_IMPLEMENTATION))
        return model.to(self.device)

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """Autocast to ``amp_dtype`` on this device, or nothing (fp32)."""
        return autocast(self.device, Precision(self.amp_dtype, self.grad_scaling))

    def to_device(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """A batch's tensors on this device (non-blocking copies)."""
        return {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}


def compile_forward(model: torch.nn.Module) -> Any:
    """``model.forward`` compiled (``KDGRID_COMPILE=1``) with dynamic shapes: training batches are padded to each
    batch's longest sequence and evaluation runs at other batch sizes, so a static compile would recompile on
    nearly every new shape until torch gives up and falls back to eager."""
    return torch.compile(model.forward, dynamic=True)


def make_runtime(device: str) -> Runtime:
    """The runtime of ``device`` (``auto``, ``cpu``, ``cuda`` or ``cuda:N``) with the settings of the environment
    (``KDGRID_AMP``, ``KDGRID_COMPILE``, ``KDGRID_CHECKPOINT_WIDTH``; see the module docstring).

    Raises:
        ConfigError: ``KDGRID_AMP`` is unknown, or asks for bf16 on a GPU without native bf16."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    precision = device_precision(dev)
    return Runtime(
        device=dev,
        amp_dtype=precision.amp_dtype,
        grad_scaling=precision.grad_scaling,
        compile=os.environ.get("KDGRID_COMPILE", "0") == "1",
        checkpoint_width=int(os.environ.get("KDGRID_CHECKPOINT_WIDTH", str(DEFAULT_CHECKPOINT_WIDTH))),
    )
