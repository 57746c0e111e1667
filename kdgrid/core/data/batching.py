"""Batches: length-grouped, dynamically padded, in an order that is a pure function of (seed, epoch).

Training order (`train_order`): a seeded permutation of the examples; within consecutive chunks of
``chunk_batches x batch_size`` examples, a stable sort by length (longest first); cut into batches of
``batch_size`` (only the very last batch may be smaller, since chunks are whole numbers of batches); then the batch
order is shuffled with the same generator. Each batch holds examples of similar length and pads only to its own
longest one, so short GLUE sentences do not pay for ``max_length`` tokens. A run resumed at epoch ``e`` gets the
same batches as an uninterrupted one, because nothing but (seed, epoch) feeds the generator.

Evaluation order (`eval_batches`): sorted by length (longest first) for speed; `EvalBatches.restore_order` puts
per-batch outputs back into the dataset's order.

A batch is a dict of tensors: ``input_ids``, ``token_type_ids``, ``attention_mask`` (LongTensor ``[B, L_batch]``,
1 = real token) and ``labels`` (LongTensor ``[B]``, or FloatTensor ``[B]`` for regression).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np
import torch

from kdgrid.core.data.tokenization import TokenizedSplit
from kdgrid.errors import ConfigError

Batch = dict[str, torch.Tensor]
DEFAULT_CHUNK_BATCHES = 50


def _check_batch_size(batch_size: int) -> None:
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive integer, got {batch_size!r}")


def steps_per_epoch(num_examples: int | TokenizedSplit, batch_size: int) -> int:
    """Batches (= optimizer steps) per training epoch, without building them: ``ceil(N / batch_size)``."""
    _check_batch_size(batch_size)
    count = num_examples if isinstance(num_examples, int) else len(num_examples)
    return math.ceil(count / batch_size)


def train_order(
    lengths: np.ndarray, batch_size: int, seed: int, epoch: int, chunk_batches: int = DEFAULT_CHUNK_BATCHES
) -> list[np.ndarray]:
    """The example indices of every training batch of one epoch, in the order they are served.

    Args:
        lengths: tokens per example ``[N]``.
        batch_size: examples per batch.
        seed, epoch: the only inputs of the random generator (non-negative integers).
        chunk_batches: how many batches' worth of examples are sorted by length together; larger groups
            lengths better, smaller keeps the order more random.
    """
    _check_batch_size(batch_size)
    if seed < 0 or epoch < 0:
        raise ConfigError(f"seed and epoch must be non-negative, got seed={seed}, epoch={epoch}")
    lengths = np.asarray(lengths)
    rng = np.random.default_rng([seed, epoch])
    permutation = rng.permutation(len(lengths))
    chunk = batch_size * max(1, chunk_batches)
    grouped = []
    for start in range(0, len(permutation), chunk):
        members = permutation[start : start + chunk]
        grouped.append(members[np.argsort(-lengths[members], kind="stable")])
    order = np.concatenate(grouped) if grouped else np.zeros(0, dtype=np.int64)
    batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def collate(split: TokenizedSplit, indices: np.ndarray) -> Batch:
    """Pad the given examples to their longest one; see the module docstring for the keys."""
    lengths = split.lengths[indices]
    width = int(lengths.max()) if len(indices) else 0
    input_ids = torch.full((len(indices), width), split.pad_token_id, dtype=torch.long)
    token_type_ids = torch.zeros((len(indices), width), dtype=torch.long)
    attention_mask = torch.zeros((len(indices), width), dtype=torch.long)
    for row, index in enumerate(indices):
        ids, types = split.example(int(index))
        input_ids[row, : len(ids)] = torch.from_numpy(ids.astype(np.int64))
        token_type_ids[row, : len(ids)] = torch.from_numpy(types.astype(np.int64))
        attention_mask[row, : len(ids)] = 1
    labels = torch.from_numpy(np.ascontiguousarray(split.labels[indices]))
    labels = labels.float() if labels.is_floating_point() else labels.long()
    return {
        "input_ids": input_ids,
        "token_type_ids": token_type_ids,
        "attention_mask": attention_mask,
        "labels": labels,
    }


class _Batches(Sequence[Batch]):
    """A list of batches built on demand (so an epoch of MNLI is never all padded in memory at once)."""

    def __init__(self, split: TokenizedSplit, batches: list[np.ndarray]) -> None:
        self.split = split
        self._batches = batches

    def __len__(self) -> int:
        return len(self._batches)

    @overload
    def __getitem__(self, index: int) -> Batch: ...

    @overload
    def __getitem__(self, index: slice) -> list[Batch]: ...

    def __getitem__(self, index: int | slice) -> Batch | list[Batch]:
        if isinstance(index, slice):
            return [collate(self.split, members) for members in self._batches[index]]
        return collate(self.split, self._batches[index])

    def __iter__(self) -> Iterator[Batch]:
        for members in self._batches:
            yield collate(self.split, members)

    def indices(self, index: int) -> np.ndarray:
        """The dataset indices of the examples in batch ``index``, in row order."""
        return self._batches[index]


class TrainBatches(_Batches):
    """One training epoch's batches (`train_order`); ``batches[i]`` is batch i, ``batches[k:]`` resumes at k."""

    def __init__(
        self, split: TokenizedSplit, batch_size: int, seed: int, epoch: int, chunk_batches: int
    ) -> None:
        super().__init__(split, train_order(split.lengths, batch_size, seed, epoch, chunk_batches))
        self.seed, self.epoch, self.batch_size = seed, epoch, batch_size


class EvalBatches(_Batches):
    """Dev batches sorted by length; `restore_order` maps per-batch outputs back to the dataset's order."""

    def __init__(self, split: TokenizedSplit, batch_size: int) -> None:
        _check_batch_size(batch_size)
        order = np.argsort(-split.lengths, kind="stable")
        super().__init__(split, [order[s : s + batch_size] for s in range(0, len(order), batch_size)])
        self.order = order

    def restore_order(self, outputs: Sequence[Any]) -> Any:
        """Concatenate one output per batch (tensors or arrays ``[B, ...]``) and undo the length sort."""
        if len(outputs) != len(self):
            raise ValueError(f"expected {len(self)} batch outputs, got {len(outputs)}")
        inverse = np.empty_like(self.order)
        inverse[self.order] = np.arange(len(self.order))
        if outputs and isinstance(outputs[0], torch.Tensor):
            return torch.cat(list(outputs))[torch.from_numpy(inverse)]
        return np.concatenate([np.asarray(o) for o in outputs])[inverse]


def train_batches(
    tokenized_train: TokenizedSplit,
    batch_size: int,
    seed: int,
    epoch: int,
    *,
    chunk_batches: int = DEFAULT_CHUNK_BATCHES,
) -> TrainBatches:
    """The training batches of one epoch (a list-like of dicts of tensors); see the module docstring."""
    return TrainBatches(tokenized_train, batch_size, seed, epoch, chunk_batches)


def eval_batches(tokenized_dev: TokenizedSplit, batch_size: int) -> EvalBatches:
    """The dev batches (a list-like of dicts of tensors), longest first; see `EvalBatches.restore_order`."""
    return EvalBatches(tokenized_dev, batch_size)
