"""Which blocks each optimizer step reads, and their masking, fixed by (seed, sample index) alone.

The order: sample index ``i = step x global_batch + j`` (j = 0..global_batch-1) reads block
``permutation(seed, epoch)[i mod N]`` with ``epoch = i // N`` (a fresh permutation of the N blocks per epoch).
Process ``r`` of ``W`` reads the ``r``-th contiguous slice of a step's samples, cut into micro-batches. The
masking of a sample (BERT's: ``mlm_probability`` of the non-special tokens chosen, 80% of them replaced by
[MASK], 10% by a random token, 10% kept; transformers' `DataCollatorForLanguageModeling`) draws from a generator
seeded by (seed, sample index). So the data a step sees, and how it is masked, do not depend on the number of
processes or the micro-batch, and a resumed run reads exactly what an uninterrupted one would have: the data
position is the step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from kdgrid.errors import ConfigError

IGNORE_INDEX = -100  # the label of a token that is not predicted (not masked)


def split_global_batch(global_batch: int, world_size: int, micro_batch: int) -> int:
    """The number of micro-batches each process accumulates per optimizer step; `ConfigError` when
    ``world_size x micro_batch`` does not divide the global batch (the recipe's batch would silently change)."""
    if micro_batch < 1:
        raise ConfigError(f"micro_batch must be at least 1, got {micro_batch}")
    per_step = world_size * micro_batch
    if global_batch % per_step:
        raise ConfigError(
            f"the global batch {global_batch} is not a multiple of {world_size} process(es) x micro-batch "
            f"{micro_batch} = {per_step}; choose a micro-batch (or a number of processes) whose product divides it"
        )
    return global_batch // per_step


class BlockOrder:
    """The block ids of each step, per process (see the module docstring)."""

    def __init__(self, num_blocks: int, global_batch: int, seed: int) -> None:
        self.num_blocks = num_blocks
        self.global_batch = global_batch
        self.seed = seed
        self._permutations: dict[int, np.ndarray] = {}

    def _permutation(self, epoch: int) -> np.ndarray:
        if epoch not in self._permutations:
            if len(self._permutations) > 1:  # a step spans at most two epochs: keep the latest ones only
                self._permutations.pop(min(self._permutations))
            self._permutations[epoch] = np.random.default_rng([self.seed, epoch]).permutation(self.num_blocks)
        return self._permutations[epoch]

    def samples(self, step: int, rank: int, world_size: int) -> np.ndarray:
        """The sample indices process ``rank`` reads at ``step`` (``global_batch / world_size`` of them)."""
        per_rank = self.global_batch // world_size
        start = step * self.global_batch + rank * per_rank
        return np.arange(start, start + per_rank, dtype=np.int64)

    def blocks(self, samples: np.ndarray) -> np.ndarray:
        """The block id of each sample index."""
        epochs = samples // self.num_blocks
        out = np.empty_like(samples)
        for epoch in np.unique(epochs):
            where = epochs == epoch
            out[where] = self._permutation(int(epoch))[samples[where] % self.num_blocks]
        return out


class Masker:
    """BERT's masking of one block at a time, seeded by (seed, sample index)."""

    def __init__(self, tokenizer: Any, mlm_probability: float, seed: int) -> None:
        from transformers import DataCollatorForLanguageModeling  # about 2 s, with the rest of transformers

        if tokenizer.mask_token_id is None:
            raise ConfigError(
                f"the tokenizer {type(tokenizer).__name__} has no [MASK] token: it cannot pre-train"
            )
        self.collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=mlm_probability)
        self.seed = seed

    def __call__(self, blocks: np.ndarray, samples: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """``(input_ids, labels)``, both ``[b, block_length]`` int64: the masked inputs, and the original token
        where a token is to be predicted, `IGNORE_INDEX` elsewhere."""
        inputs, labels = [], []
        for block, sample in zip(blocks, samples, strict=True):
            state = np.random.SeedSequence([self.seed, int(sample)]).generate_state(2, dtype=np.uint32)
            self.collator.generator = torch.Generator().manual_seed(int(state[0]) << 32 | int(state[1]))
            masked, label = self.collator.torch_mask_tokens(
                torch.as_tensor(block, dtype=torch.long)[None].clone()
            )
            inputs.append(masked[0])
            labels.append(label[0])
        return torch.stack(inputs), torch.stack(labels)
