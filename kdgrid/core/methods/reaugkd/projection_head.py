"""ReAugKD's teacher projection head (Zhang et al., ACL 2023, sec. 3.1 and A.2): a linear map of the frozen
teacher's sentence vector (the last layer's [CLS], ``[B, d_T]``) to the student's width (``[B, d_S]``), trained
with the supervised contrastive loss (Khosla et al., NeurIPS 2020; `kdgrid.core.methods.reaugkd.supcon`) while the
teacher stays frozen.

The teacher being frozen, its sentence vectors of the train split are computed once (`TeacherPass`) and the head
trains on them: an epoch of the head costs a matrix product per batch, not a teacher forward pass. A head is
cached by content hash (`head_key`: the teacher's weights, the train split as tokenized, the head's settings) in
``$KDGRID_CACHE/reaugkd/heads/<key>/`` (``head.pt`` + ``head.json``), beside the fine-tuned teachers' cache, and
shared by every trial with the same teacher, task and head settings; it is written to a temporary folder and
renamed, so a reader never sees half a head.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from kdgrid.assets import cache_dir
from kdgrid.core.methods.reaugkd.spec import (
    DEFAULT_HEAD_BATCH_SIZE,
    DEFAULT_HEAD_EPOCHS,
    DEFAULT_HEAD_LR,
    DEFAULT_TAU,
    HEAD_BATCH_SIZE,
    HEAD_EPOCHS,
    HEAD_LR,
    HEAD_TAU,
)
from kdgrid.core.methods.reaugkd.supcon import supcon_loss
from kdgrid.errors import ConfigError
from kdgrid.trial import Trial

HEAD_FILE = "head.pt"
HEAD_INFO = "head.json"
HEAD_SEED = 0  # one head per (teacher, task, settings), whatever the students' seeds: they share it


def reaugkd_cache_root() -> Path:
    """Where ReAugKD's artifacts live: beside the fine-tuned teachers (`kdgrid.core.model.teacher_cache`)."""
    return cache_dir() / "reaugkd"


@dataclass(frozen=True)
class TeacherPass:
    """The frozen teacher on the train split, once: what the head trains on and the knowledge base holds.

    Attributes:
        sentence: ``[N, d_T]`` float32 sentence vectors (the last layer's [CLS]), in the split's order.
        soft_labels: ``[N, C]`` float32 ``softmax(teacher logits)`` (T = 1) in the task's label order.
        labels: ``[N]`` int64 gold labels.
        identity: the content hashes of what produced them (`kdgrid.core.methods.reaugkd.knowledge_base.KBIdentity`
            fields without the head): ``teacher``, ``tokenizer``, ``task``, ``train_split``.
    """

    sentence: np.ndarray
    soft_labels: np.ndarray
    labels: np.ndarray
    identity: dict[str, str]


@dataclass(frozen=True)
class HeadSettings:
    """How a head is trained (the paper's A.2 by default: tau 0.07, 3 epochs, AdamW at 2e-5, batches of 512)."""

    out_width: int
    tau: float = DEFAULT_TAU
    epochs: int = DEFAULT_HEAD_EPOCHS
    lr: float = DEFAULT_HEAD_LR
    batch_size: int = DEFAULT_HEAD_BATCH_SIZE
    seed: int = HEAD_SEED

    @classmethod
    def of(cls, trial: Trial, student_width: int) -> HeadSettings:
        """A trial's head settings (its ``reaugkd_head_*`` options) for a student of ``student_width``."""
        return cls(
            out_width=int(student_width),
            tau=float(trial.option(HEAD_TAU, DEFAULT_TAU)),
            epochs=int(trial.option(HEAD_EPOCHS, DEFAULT_HEAD_EPOCHS)),
            lr=float(trial.option(HEAD_LR, DEFAULT_HEAD_LR)),
            batch_size=int(trial.option(HEAD_BATCH_SIZE, DEFAULT_HEAD_BATCH_SIZE)),
        )


def head_key(identity: dict[str, str], settings: HeadSettings) -> str:
    """16 hex digits naming the head of (teacher weights, tokenizer, task, train split, settings)."""
    payload = {"identity": identity, "settings": asdict(settings)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class ProjectionHead:
    """A trained, frozen head: ``z = x W^T + b``, ``[..., d_T] -> [..., d_S]``.

    Attributes:
        weight: ``[d_S, d_T]``; bias: ``[d_S]``; key: its `head_key`; info: what ``head.json`` records.
    """

    weight: Tensor
    bias: Tensor
    key: str
    info: dict[str, Any]

    def __call__(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight.to(x.device, x.dtype), self.bias.to(x.device, x.dtype))

    def to(self, device: torch.device | str) -> ProjectionHead:
        return ProjectionHead(self.weight.to(device), self.bias.to(device), self.key, self.info)


def train_head(
    sentence: np.ndarray, labels: np.ndarray, settings: HeadSettings
) -> tuple[Tensor, Tensor, list[float]]:
    """Train a linear head ``d_T -> settings.out_width`` on fixed teacher vectors with `supcon_loss`.

    Args:
        sentence: ``[N, d_T]`` teacher sentence vectors; labels: ``[N]`` class ids.
    Returns:
        The weight ``[d_S, d_T]``, the bias ``[d_S]`` and each epoch's mean loss. Deterministic for a seed
        (its own generator: the caller's random streams are untouched).
    """
    if len(sentence) < 2:
        raise ConfigError(
            f"ReAugKD head: the train split has {len(sentence)} example(s); it needs at least 2"
        )
    generator = torch.Generator().manual_seed(settings.seed)
    x = torch.from_numpy(np.ascontiguousarray(sentence, dtype=np.float32))
    y = torch.from_numpy(np.asarray(labels, dtype=np.int64))
    bound = 1.0 / x.shape[1] ** 0.5  # PyTorch's nn.Linear init, drawn from the head's own generator
    weight = torch.empty(settings.out_width, x.shape[1]).uniform_(-bound, bound, generator=generator)
    bias = torch.empty(settings.out_width).uniform_(-bound, bound, generator=generator)
    weight.requires_grad_(True)
    bias.requires_grad_(True)
    optimizer = torch.optim.AdamW([weight, bias], lr=settings.lr, weight_decay=0.0)
    losses: list[float] = []
    for _ in range(settings.epochs):
        order = torch.randperm(len(x), generator=generator)
        total, batches = 0.0, 0
        for start in range(0, len(x), settings.batch_size):
            index = order[start : start + settings.batch_size]
            if len(index) < 2:
                continue  # one example has no positive and no negative
            loss = supcon_loss(F.linear(x[index], weight, bias), y[index], settings.tau)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total, batches = total + float(loss.detach()), batches + 1
        losses.append(total / max(1, batches))
    return weight.detach().clone(), bias.detach().clone(), losses


def head_folder(key: str) -> Path:
    return reaugkd_cache_root() / "heads" / key


def load_head(key: str) -> ProjectionHead | None:
    """The cached head of ``key``, or None."""
    folder = head_folder(key)
    if not (folder / HEAD_INFO).is_file():
        return None
    state = torch.load(folder / HEAD_FILE, weights_only=True)
    return ProjectionHead(state["weight"], state["bias"], key, json.loads((folder / HEAD_INFO).read_text()))


def cached_or_trained_head(
    identity: dict[str, str], settings: HeadSettings, teacher_pass: Callable[[], TeacherPass]
) -> tuple[ProjectionHead, bool]:
    """The head of (``identity``: the teacher pass's content hashes, settings) from the cache, else trained on
    ``teacher_pass()`` (asked for only then: a cached head costs no teacher pass) and cached; and whether it was
    trained now."""
    key = head_key(identity, settings)
    cached = load_head(key)
    if cached is not None:
        return cached, False
    passed = teacher_pass()
    if passed.identity != identity:
        raise ValueError(f"the teacher pass is of {passed.identity}, the head was asked for {identity}")
    started = time.perf_counter()
    weight, bias, losses = train_head(passed.sentence, passed.labels, settings)
    info = {
        "key": key,
        "identity": identity,
        "settings": asdict(settings),
        "epoch_losses": losses,
        "examples": len(passed.labels),
        "seconds": round(time.perf_counter() - started, 3),
    }
    final = head_folder(key)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=final.parent))
    try:
        torch.save({"weight": weight, "bias": bias}, staging / HEAD_FILE)
        (staging / HEAD_INFO).write_text(json.dumps(info, indent=2, sort_keys=True))
        with contextlib.suppress(OSError):  # another process cached the same head meanwhile: keep its copy
            os.rename(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return ProjectionHead(weight, bias, key, info), True
