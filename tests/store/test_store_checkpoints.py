"""Epoch checkpoints under ``<store>/_checkpoints``: read with weights_only; one that cannot be read is moved aside
(never deleted), named in a warning, and its trial trains from scratch to the same result as a fresh run."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer, BertForSequenceClassification

from kdgrid.assets import teacher_dir
from kdgrid.core.model.models import bert_config
from kdgrid.core.model.shapes import StudentShape
from kdgrid.core.training.checkpoint import (
    CheckpointWriteError,
    checkpoint_path,
    load_checkpoint,
    save_checkpoint,
)
from kdgrid.trial import Trial
from tests.tiny_trials import tiny_trial


@pytest.fixture(scope="module")
def teacher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A tiny random BERT teacher (3 layers, width 64) with the MiniLM tokenizer, saved as a local directory."""
    root = tmp_path_factory.mktemp("kdcheckpoints")
    mp = pytest.MonkeyPatch()
    mp.setenv("KDGRID_CACHE", str(root / "cache"))
    path = root / "teacher"
    with torch.random.fork_rng():
        torch.manual_seed(0)
        BertForSequenceClassification(
            bert_config(StudentShape(layers=3, width=64, heads=4, ffn=128), 2)
        ).save_pretrained(path)
    AutoTokenizer.from_pretrained(teacher_dir()).save_pretrained(path)
    yield str(path)
    mp.undo()


def make_trial(teacher: str) -> Trial:
    return tiny_trial(teacher, knowledge=("cos",), strategy="First")


def run(trial: Trial, checkpoint_dir: Path | None = None):  # type: ignore[no-untyped-def]
    from kdgrid.core.training.train import run_job

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        (result,) = run_job([trial], device="cpu", checkpoint_dir=checkpoint_dir)
    finally:
        torch.set_num_threads(threads)
    return result


def write_real_checkpoint(trial: Trial, checkpoint_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The trial's checkpoint after its first epoch: its run is preempted in the second."""
    import kdgrid.core.training.train as train

    class Preempted(BaseException):
        pass

    original = train.train_batches

    def preempt_in_epoch_2(tokenized, batch_size, seed, epoch, **kw):  # type: ignore[no-untyped-def]
        if epoch == 1:
            raise Preempted
        return original(tokenized, batch_size, seed, epoch, **kw)

    with monkeypatch.context() as patch:
        patch.setattr(train, "train_batches", preempt_in_epoch_2)
        with pytest.raises(Preempted):
            run(trial, checkpoint_dir)


class Foreign:
    """An object weights_only refuses to unpickle."""


def zeros(path: Path) -> None:
    path.write_bytes(bytes(4096))


def truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def foreign_object(path: Path) -> None:
    state = torch.load(path, weights_only=True)
    state["result"]["extra"]["payload"] = Foreign()
    torch.save(state, path)


def another_trial(path: Path) -> None:
    state = torch.load(path, weights_only=True)
    torch.save({**state, "trial_id": "someone-else"}, path)


@pytest.mark.parametrize("damage", [zeros, truncated, foreign_object, another_trial])
def test_an_unreadable_checkpoint_is_moved_aside_and_the_trial_trains_from_scratch(
    teacher: str,
    tmp_path: Path,
    damage: Callable[[Path], None],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trial = make_trial(teacher)
    fresh = run(trial)
    path = checkpoint_path(tmp_path, trial.trial_id)
    write_real_checkpoint(trial, tmp_path, monkeypatch)
    assert load_checkpoint(tmp_path, trial.trial_id) is not None  # readable before the damage
    damage(path)
    original = path.read_bytes()
    with caplog.at_level(logging.WARNING, logger="kdgrid.core.training.checkpoint"):
        result = run(trial, tmp_path)
    assert result.status == "done" and "resumed_from_epoch" not in result.extra
    assert result.scores == fresh.scores and result.curve == fresh.curve  # exactly a run from scratch
    (aside,) = tmp_path.glob(f"{trial.trial_id}.pt.unreadable-*")
    assert aside.read_bytes() == original  # moved, not deleted nor changed
    assert not path.exists()  # the finished trial left no checkpoint of its own
    warning = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert str(path) in warning and str(aside) in warning and "starts from scratch" in warning


def test_a_readable_checkpoint_loads_with_weights_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[object] = []
    real = torch.load

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(kwargs.get("weights_only"))
        return real(*args, **kwargs)

    state = {
        "trial_id": "t", "model": {"w": torch.ones(2)}, "optimizer": {"state": {}, "param_groups": [{"betas": (0.9, 0.99)}]},
        "scheduler": {"lr_lambdas": [None]}, "epochs_done": 1, "result": {"curve": [{"epoch": 1}]},
        "cpu_rng": torch.get_rng_state(), "cuda_rng": None, "best_primary": float("-inf"),
    }  # fmt: skip
    save_checkpoint(tmp_path, "t", state)
    monkeypatch.setattr(torch, "load", spy)
    loaded = load_checkpoint(tmp_path, "t")
    assert calls == [True] and loaded is not None
    assert torch.equal(loaded["cpu_rng"], state["cpu_rng"]) and loaded["optimizer"]["param_groups"][0][
        "betas"
    ] == (0.9, 0.99)


def test_saving_anything_but_tensors_and_plain_data_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"checkpoint value /result/extra/payload: a Foreign"):
        save_checkpoint(tmp_path, "t", {"result": {"extra": {"payload": Foreign()}}})
    assert not list(tmp_path.iterdir())


def test_a_checkpoint_that_cannot_be_written_says_where_and_keeps_the_last_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_checkpoint(tmp_path, "t", {"epochs_done": 1})
    before = checkpoint_path(tmp_path, "t").read_bytes()

    def disk_full(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed")

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(
        CheckpointWriteError, match=r"cannot write the checkpoint .*t\.pt .*file write failed.*MiB free"
    ):
        save_checkpoint(tmp_path, "t", {"epochs_done": 2})
    assert checkpoint_path(tmp_path, "t").read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["t.pt"]  # no temporary file left
