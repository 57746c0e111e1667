"""Where and how a job computes: the device, mixed precision, compilation and gradient checkpointing.

Read once per job from the environment: on CUDA the forward passes run under bf16 autocast (``KDGRID_AMP=fp16``
for fp16 with a gradient scaler, ``off`` for fp32); ``KDGRID_COMPILE=1`` compiles each student (experimental);
students of width >= ``KDGRID_CHECKPOINT_WIDTH`` (default 1024) use gradient checkpointing (on any device).
Nothing CUDA-only runs on the CPU path.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any

import torch

from kdgrid.core.models import ATTENTION_BY_DEVICE, ATTENTION_IMPLEMENTATION

DEFAULT_CHECKPOINT_WIDTH = 1024


@dataclass(frozen=True)
class Runtime:
    """Where and how the job computes."""

    device: torch.device
    amp_dtype: torch.dtype | None  # autocast dtype on CUDA; None = fp32
    compile: bool
    checkpoint_width: int  # students at least this wide use gradient checkpointing

    @property
    def description(self) -> str:
        """The device as rows record it (``cpu``, ``cuda:0 (NVIDIA H100 ...)``)."""
        if self.device.type == "cuda":
            return f"{self.device} ({torch.cuda.get_device_name(self.device)})"
        return str(self.device)

    def place(self, model: Any) -> Any:
        """``model`` on this device, with the attention kernel that is fastest there (`ATTENTION_BY_DEVICE`)."""
        model.config._attn_implementation = ATTENTION_BY_DEVICE.get(
            self.device.type, ATTENTION_IMPLEMENTATION
        )
        return model.to(self.device)

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """Autocast to ``amp_dtype`` on this device, or nothing (fp32)."""
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype)

    def to_device(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """A batch's tensors on this device (non-blocking copies)."""
        return {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}


def make_runtime(device: str) -> Runtime:
    """The runtime of ``device`` (``auto``, ``cpu``, ``cuda`` or ``cuda:N``) with the settings of the environment
    (``KDGRID_AMP``, ``KDGRID_COMPILE``, ``KDGRID_CHECKPOINT_WIDTH``; see the module docstring)."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    amp = os.environ.get("KDGRID_AMP", "bf16").lower()
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp) if dev.type == "cuda" else None
    return Runtime(
        device=dev,
        amp_dtype=amp_dtype,
        compile=os.environ.get("KDGRID_COMPILE", "0") == "1",
        checkpoint_width=int(os.environ.get("KDGRID_CHECKPOINT_WIDTH", str(DEFAULT_CHECKPOINT_WIDTH))),
    )
