"""A held-out split carved from the training data (LKD's validation split, `kdgrid.core.methods.lkd.lookahead`): which examples,
chosen deterministically from a seed, the two splits they make, and the held-out batches served one per step
(`HeldOut`).

``k = max(1, round(f N))`` of the N training examples are held out: the first k of a permutation drawn by numpy
from ``default_rng([seed, HOLDOUT_STREAM])`` (the trial's data-order seed; the stream number keeps the draw apart
from the batch order's ``[seed, epoch]``), in their original order. The rest, in their original order, is the
training split. The draw is numpy's; `HeldOut` serves its batches as torch tensors.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from kdgrid.core.data.batching import Batch, collate
from kdgrid.core.data.tokenization import TokenizedSplit

HOLDOUT_STREAM = 7_000_001  # far from any epoch number: the batch order draws from [seed, epoch]
HELD_OUT_STREAM = 7_000_002  # the held-out batches' order: apart from the batch order's [seed, epoch]


def holdout_indices(num_examples: int, fraction: float, seed: int) -> np.ndarray:
    """The sorted indices of the held-out examples (at least 1, at most N - 1)."""
    if num_examples < 2:
        raise ValueError(f"a held-out split needs at least 2 training examples, not {num_examples}")
    count = min(num_examples - 1, max(1, round(fraction * num_examples)))
    order = np.random.default_rng([seed, HOLDOUT_STREAM]).permutation(num_examples)
    return np.sort(order[:count])


def subset(split: TokenizedSplit, indices: np.ndarray) -> TokenizedSplit:
    """The examples of ``split`` at ``indices``, in that order."""
    lengths = split.lengths[indices]
    offsets = np.zeros(len(indices) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    pieces = [slice(int(split.offsets[i]), int(split.offsets[i + 1])) for i in indices]
    ids = np.concatenate([split.input_ids[s] for s in pieces]) if pieces else split.input_ids[:0]
    types = np.concatenate([split.token_type_ids[s] for s in pieces]) if pieces else split.token_type_ids[:0]
    return TokenizedSplit(ids, types, offsets, split.labels[indices], split.pad_token_id)


def split_off(
    split: TokenizedSplit, fraction: float, seed: int
) -> tuple[TokenizedSplit, TokenizedSplit, np.ndarray]:
    """(the training split without the held-out examples, the held-out split, the held-out indices)."""
    held = holdout_indices(len(split), fraction, seed)
    kept = np.setdiff1d(np.arange(len(split)), held, assume_unique=True)
    return subset(split, kept), subset(split, held), held


def indices_digest(indices: np.ndarray) -> str:
    """SHA-256 of the indices as little-endian int64: what a row records to name its held-out split."""
    return hashlib.sha256(np.asarray(indices, dtype="<i8").tobytes()).hexdigest()


@dataclass(frozen=True)
class HeldOut:
    """The held-out split of a job's training data: its examples, their indices in the training data, and how
    they were drawn."""

    split: TokenizedSplit
    indices: np.ndarray
    fraction: float
    seed: int

    def record(self) -> dict[str, Any]:
        """What the row records of it."""
        return {
            "fraction": self.fraction,
            "examples": len(self.indices),
            "seed": self.seed,
            "indices_sha256": indices_digest(self.indices),
        }

    def batch(self, step: int, batch_size: int) -> Batch:
        """The held-out batch of the job's 1-based ``step``: pass ``p`` over the split serves batch ``i``, from
        the order ``default_rng([seed, HELD_OUT_STREAM, p]).permutation``."""
        per_pass = -(-len(self.split) // batch_size)
        pass_, index = divmod(step - 1, per_pass)
        order = np.random.default_rng([self.seed, HELD_OUT_STREAM, pass_]).permutation(len(self.split))
        return collate(self.split, order[index * batch_size : (index + 1) * batch_size])
