"""Masked distillation: the teacher or the student sees its training inputs with a fraction of tokens masked.

Options (`kdgrid.core.options`): ``mask_input`` (``teacher`` | ``student``; unset: no masking), ``mask_fraction``
(f in (0, 1), default `DEFAULT_MASK_FRACTION`), ``mask_by`` (``random`` | ``saliency``, default ``random``).

- **Candidates**: the real tokens of example b (attention mask 1) that are not special tokens ([CLS], [SEP], ...
  of the teacher's tokenizer); n_b of them. ``k_b = floor(f n_b + 1/2)`` are masked: their input id becomes the
  tokenizer's [MASK] id (the attention mask is unchanged, so the model still attends to the [MASK] token).
- **random**: k_b candidates drawn uniformly without replacement, from a numpy generator seeded by
  ``SeedSequence([seed, phase, step])``: for teacher masking ``seed`` is the job's data-order seed (every student of
  the job reads the same masked teacher pass), for student masking the trial's seed; ``phase`` is 0 in training
  (``step`` the job's 1-based step) and 1 in ``beta: auto`` calibration (``step`` the warm-up batch's index).
- **saliency**: the k_b candidates the teacher attends to least from [CLS] in its last layer on the unmasked
  input: ``a_j = mean over heads of softmax_j(q_[CLS] . k_j / sqrt(d_h))`` over real keys (`cls_saliency`; ties
  broken by position). This is the criterion of MaskedKD (Son, Ryu, Lee & Lee, "The Role of Masking for Efficient
  Supervised Knowledge Distillation of Vision Transformers", ECCV 2024: mask the patches with the lowest [CLS]
  attention), with the teacher's attention in place of their student's, as the method's option here says.
- **maskedkd** (teacher masking only): MaskedKD's own criterion (Son et al., ECCV 2024, after the authors' code,
  effl-lab/MaskedKD): the k_b candidates the **student** attends to least from [CLS] in its last layer (the same
  ``a_j`` of the student, from a forward pass without dropout on the whole input, eval mode, no gradient; theirs
  reads the training pass's attention) are **removed** from the teacher's input: their attention mask becomes 0
  (ids unchanged), so no kept token attends to them and the kept tokens keep their positions, which is what
  dropping them from a ViT's token sequence is for a BERT. The teacher's input depends on the trial's own student,
  so each such trial has a teacher pass of its own (`kdgrid.trial.teacher_pass_key`).
- **teacher**: the shared teacher pass runs on the masked batch (the student sees the whole input); trials with
  different teacher masking are different groups (`kdgrid.trial.teacher_pass_key`), so a job's one teacher pass
  is right for every student in it. With ``saliency`` the teacher runs once more per batch, unmasked, to score.
- **student**: the student's forward pass (its features and logits) runs on its own masked batch; the teacher's
  pass is the shared unmasked one (its saliency computed once per batch for every student that needs it).

Dev sets are never masked: evaluation, the teacher gate and latency see whole inputs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from kdgrid.core.job.loaded_job import LoadedJob
from kdgrid.core.methods.masking.spec import DEFAULT_MASK_FRACTION
from kdgrid.core.model.models import load_tokenizer
from kdgrid.core.step_hooks import StepHooks
from kdgrid.core.teacher.targets import teacher_side
from kdgrid.trial import MASK_BY, MASK_FRACTION, MASK_INPUT, MASKEDKD, Trial, data_order_seed


@dataclass(frozen=True)
class Masking:
    side: str  # "teacher" or "student"
    fraction: float
    by: str  # "random" or "saliency"


def masking_of(trial: Trial) -> Masking | None:
    """The trial's masking, None when it masks nothing."""
    side = trial.option(MASK_INPUT)
    if side is None:
        return None
    fraction = trial.option(MASK_FRACTION)
    return Masking(
        side,
        DEFAULT_MASK_FRACTION if fraction is None else float(fraction),
        trial.option(MASK_BY) or "random",
    )


@functools.lru_cache(maxsize=8)
def _special_ids(source: str, teacher: Any) -> tuple[int, tuple[int, ...]]:
    tokenizer = load_tokenizer(teacher)
    if tokenizer.mask_token_id is None:
        raise ValueError(f"the tokenizer of {source!r} has no [MASK] token: masked inputs need one")
    return int(tokenizer.mask_token_id), tuple(int(i) for i in tokenizer.all_special_ids)


def special_ids(job: LoadedJob) -> tuple[int, tuple[int, ...]]:
    """The teacher tokenizer's [MASK] id and its special ids (loaded once per teacher)."""
    return _special_ids(job.teacher.source, job.teacher)


def mask_counts(candidates: torch.Tensor, fraction: float) -> torch.Tensor:
    """``k_b = floor(f n_b + 1/2)`` per example, from the ``[B, L]`` candidate mask."""
    return torch.floor(candidates.sum(dim=1).double() * fraction + 0.5).long()


def candidates_of(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, specials: tuple[int, ...]
) -> torch.Tensor:
    """``[B, L]`` bool: real tokens that are not special."""
    special = torch.isin(input_ids, torch.tensor(specials, dtype=input_ids.dtype, device=input_ids.device))
    return attention_mask.bool() & ~special


def random_positions(candidates: torch.Tensor, fraction: float, key: tuple[int, int, int]) -> torch.Tensor:
    """``[B, L]`` bool: k_b candidates per example drawn uniformly without replacement (seeded by ``key``)."""
    rng = np.random.default_rng(np.random.SeedSequence(list(key)))
    chosen = torch.zeros_like(candidates)
    counts = mask_counts(candidates, fraction).tolist()
    for b, row in enumerate(candidates.cpu().numpy()):
        where = np.flatnonzero(row)
        picked = rng.choice(where, size=counts[b], replace=False) if counts[b] else []
        chosen[b, torch.as_tensor(np.asarray(picked, dtype=np.int64))] = True
    return chosen


def saliency_positions(candidates: torch.Tensor, fraction: float, saliency: torch.Tensor) -> torch.Tensor:
    """``[B, L]`` bool: the k_b candidates of lowest ``saliency`` per example (ties: the earlier position)."""
    chosen = torch.zeros_like(candidates)
    counts = mask_counts(candidates, fraction).tolist()
    scores = saliency.double().masked_fill(~candidates, float("inf"))
    for b in range(candidates.shape[0]):
        order = torch.argsort(scores[b], stable=True)
        chosen[b, order[: counts[b]]] = True
    return chosen


def cls_saliency(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """``[B, L]`` float32: the head-mean attention probability from [CLS] to each key in the last layer of
    ``model`` (a BERT) on ``batch``; padded keys get 0. Q and K are taken from the last layer's projections by
    hooks, so any attention kernel works."""
    attention = model.bert.encoder.layer[-1].attention.self
    kept: dict[str, torch.Tensor] = {}
    hooks = [
        getattr(attention, name).register_forward_hook(
            lambda _m, _i, out, name=name: kept.__setitem__(name, out)
        )
        for name in ("query", "key")
    ]
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch}
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        for hook in hooks:
            hook.remove()
    heads = model.config.num_attention_heads
    q, k = kept["query"].float(), kept["key"].float()
    batch_size, length, width = k.shape
    q_cls = q[:, 0].reshape(batch_size, heads, width // heads)
    k_heads = k.reshape(batch_size, length, heads, width // heads)
    scores = torch.einsum("bhd,blhd->bhl", q_cls, k_heads) / (width // heads) ** 0.5
    scores = scores.masked_fill(~batch["attention_mask"].bool()[:, None, :], float("-inf"))
    return torch.softmax(scores, dim=-1).mean(dim=1)


def _masked(batch: dict[str, torch.Tensor], positions: torch.Tensor, mask_id: int) -> dict[str, torch.Tensor]:
    return {**batch, "input_ids": batch["input_ids"].masked_fill(positions, mask_id)}


def _removed(batch: dict[str, torch.Tensor], positions: torch.Tensor) -> dict[str, torch.Tensor]:
    return {**batch, "attention_mask": batch["attention_mask"].masked_fill(positions, 0)}


def student_saliency(student: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """`cls_saliency` of the student on ``batch`` in eval mode (no dropout, its RNG untouched), mode restored."""
    was_training = student.training
    student.eval()
    try:
        return cls_saliency(student, batch)
    finally:
        student.train(was_training)


def _positions(
    job: LoadedJob,
    masking: Masking,
    batch: dict[str, torch.Tensor],
    key: tuple[int, int, int],
    student: Any = None,
) -> torch.Tensor:
    _, specials = special_ids(job)
    candidates = candidates_of(batch["input_ids"], batch["attention_mask"], specials)
    if masking.by == "random":
        return random_positions(candidates, masking.fraction, key)
    if masking.by == MASKEDKD:
        if student is None:
            raise RuntimeError(f"{MASK_BY}: {MASKEDKD} masks the teacher's input by its student's attention: one student")
        return saliency_positions(candidates, masking.fraction, student_saliency(student, batch))
    saliency = teacher_side(
        ("cls_saliency",), (batch["input_ids"],), lambda: cls_saliency(job.teacher_model, batch)
    )
    return saliency_positions(candidates, masking.fraction, saliency)


def teacher_input(
    job: LoadedJob,
    trial: Trial,
    batch: dict[str, torch.Tensor],
    phase: int,
    step: int,
    student: Any = None,
) -> dict[str, torch.Tensor]:
    """The batch the shared teacher pass reads: masked when the job's trials mask the teacher's input (every
    trial of a job agrees on it: it is part of the group key), else ``batch`` itself. ``student``: the job's one
    student model, which MaskedKD's criterion reads (None otherwise)."""
    masking = masking_of(trial)
    if masking is None or masking.side != "teacher":
        return batch
    positions = _positions(job, masking, batch, (data_order_seed(trial), phase, step), student)
    if masking.by == MASKEDKD:
        return _removed(batch, positions)
    mask_id, _ = special_ids(job)
    return _masked(batch, positions, mask_id)


def student_input(
    job: LoadedJob, trial: Trial, batch: dict[str, torch.Tensor], phase: int, step: int
) -> dict[str, torch.Tensor]:
    """The batch a student's forward pass reads: masked for student masking, else ``batch`` itself."""
    masking = masking_of(trial)
    if masking is None or masking.side != "student":
        return batch
    mask_id, _ = special_ids(job)
    return _masked(batch, _positions(job, masking, batch, (trial.seed, phase, step)), mask_id)


class MaskingHooks(StepHooks):
    """Masked distillation's part in training: the teacher's batch (on the job's first trial's hooks: every
    trial of a job masks the teacher alike) or the student's, masked."""

    def __init__(self, trial: Trial) -> None:
        self.trial = trial

    def teacher_batch(
        self, job: LoadedJob, batch: dict[str, torch.Tensor], phase: int, index: int, students: list[Any]
    ) -> dict[str, torch.Tensor]:
        one = students[0].model if len(students) == 1 else None  # MaskedKD reads the job's one student
        return teacher_input(job, self.trial, batch, phase, index, one)

    def student_batch(
        self, run: Any, job: LoadedJob, batch: dict[str, torch.Tensor], phase: int, index: int
    ) -> dict[str, torch.Tensor]:
        return student_input(job, run.trial, batch, phase, index)


def step_hooks(trial: Trial) -> MaskingHooks:
    """The hooks of a trial that masks the teacher's or the student's inputs."""
    return MaskingHooks(trial)
