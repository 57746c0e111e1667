"""Length-grouped batches: coverage, padding, determinism in (seed, epoch), evaluation order."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kdgrid.core.data import eval_batches, steps_per_epoch, train_batches
from kdgrid.core.data.batching import train_order
from kdgrid.core.data.tokenization import TokenizedSplit
from kdgrid.errors import ConfigError


def make_split(lengths: list[int], regression: bool = False, pad: int = 0) -> TokenizedSplit:
    """Example i has tokens [1000 + i] * length (so rows identify their example), token type 1 on its second half."""
    ids, types = [], []
    for i, length in enumerate(lengths):
        ids += [1000 + i] * length
        types += [0] * (length // 2) + [1] * (length - length // 2)
    labels = np.arange(len(lengths), dtype=np.float32) / 10 if regression else np.arange(len(lengths)) % 3
    return TokenizedSplit(
        input_ids=np.array(ids, dtype=np.int32),
        token_type_ids=np.array(types, dtype=np.int8),
        offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        labels=labels,
        pad_token_id=pad,
    )


RNG_LENGTHS = np.random.default_rng(1).integers(3, 60, size=1003).tolist()


def test_every_example_appears_exactly_once_per_epoch() -> None:
    split = make_split(RNG_LENGTHS)
    batches = train_batches(split, 16, seed=0, epoch=0, chunk_batches=4)
    assert len(batches) == steps_per_epoch(split, 16) == 63  # ceil(1003 / 16)
    seen = np.concatenate([batches.indices(i) for i in range(len(batches))])
    assert sorted(seen.tolist()) == list(range(1003))
    sizes = sorted(len(batches.indices(i)) for i in range(len(batches)))
    assert sizes[0] == 1003 % 16 and sizes[1:] == [16] * 62  # only one short batch
    rows = torch.cat([b["input_ids"][:, 0] for b in batches]) - 1000
    assert sorted(rows.tolist()) == list(range(1003))


def test_padding_reaches_only_the_batch_longest_sequence() -> None:
    split = make_split(RNG_LENGTHS, pad=7)
    for batch in train_batches(split, 16, seed=3, epoch=1):
        lengths = batch["attention_mask"].sum(dim=1)
        assert batch["input_ids"].shape[1] == int(lengths.max())
        for row, length in enumerate(lengths.tolist()):
            example = int(batch["input_ids"][row, 0]) - 1000
            assert length == RNG_LENGTHS[example]
            assert (
                batch["input_ids"][row, length:].eq(7).all()
                and batch["token_type_ids"][row, length:].eq(0).all()
            )
            assert batch["labels"][row] == split.labels[example]
        assert all(t.dtype == torch.long for t in batch.values())


def test_length_grouping_shrinks_padding() -> None:
    split = make_split(RNG_LENGTHS)
    grouped = sum(b["input_ids"].numel() for b in train_batches(split, 16, seed=0, epoch=0))
    ungrouped = sum(
        b["input_ids"].numel() for b in train_batches(split, 16, seed=0, epoch=0, chunk_batches=0)
    )
    assert grouped < 0.75 * ungrouped
    assert grouped < 1.1 * sum(RNG_LENGTHS)


def test_the_order_is_a_function_of_seed_and_epoch_only() -> None:
    lengths = np.array(RNG_LENGTHS)

    def order(seed: int, epoch: int) -> list[list[int]]:
        return [b.tolist() for b in train_order(lengths, 16, seed, epoch)]

    assert order(0, 2) == order(0, 2)  # a resumed run at epoch 2 sees the same batches
    assert order(0, 2) != order(0, 3)
    assert order(0, 2) != order(1, 2)
    split = make_split(RNG_LENGTHS)
    a, b = train_batches(split, 16, 5, 4), train_batches(split, 16, 5, 4)
    assert all(torch.equal(x["input_ids"], y["input_ids"]) for x, y in zip(a, b, strict=True))
    assert torch.equal(a[10:][0]["input_ids"], b[10]["input_ids"])  # resuming mid-epoch by slicing


def test_regression_labels_are_float_tensors() -> None:
    batch = train_batches(make_split([4, 5, 6], regression=True), 8, seed=0, epoch=0)[0]
    assert batch["labels"].dtype == torch.float32
    assert sorted(batch["labels"].tolist()) == pytest.approx([0.0, 0.1, 0.2])


def test_eval_batches_are_sorted_and_outputs_come_back_in_dataset_order() -> None:
    lengths = [5, 30, 2, 17, 9, 30, 1]
    batches = eval_batches(make_split(lengths), 3)
    assert [b["input_ids"].shape for b in batches] == [(3, 30), (3, 9), (1, 1)]
    # pretend the model returns each example's id as its prediction
    outputs = [b["input_ids"][:, 0] - 1000 for b in batches]
    assert batches.restore_order(outputs).tolist() == list(range(len(lengths)))
    numpy_outputs = [o.numpy() * 2 for o in outputs]
    assert batches.restore_order(numpy_outputs).tolist() == [2 * i for i in range(len(lengths))]
    with pytest.raises(ValueError, match="expected 3 batch outputs"):
        batches.restore_order(outputs[:2])


def test_bad_batch_settings() -> None:
    with pytest.raises(ConfigError, match="batch_size"):
        train_batches(make_split([3]), 0, seed=0, epoch=0)
    with pytest.raises(ConfigError, match="non-negative"):
        train_order(np.array([3, 4]), 2, seed=-1, epoch=0)
    assert steps_per_epoch(100, 32) == 4 and steps_per_epoch(96, 32) == 3
