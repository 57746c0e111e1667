"""One maker per checkpoint (`kdgrid.pretrain.claim`): the key's lock excludes a second holder, dies with its
holder, and a run that finds it held waits, then returns the checkpoint the holder made without training."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from transformers import BertForMaskedLM

from kdgrid.core.model.models import bert_config
from kdgrid.core.model.shapes import student_shape
from kdgrid.core.pretrained import artifacts
from kdgrid.core.pretrained.recipe import PretrainRecipe
from kdgrid.pretrain import claim
from kdgrid.pretrain.train import RunOutcome, RunSettings, run_pretrain

HOLD_AND_WAIT = """
import sys, time
from pathlib import Path
from kdgrid.pretrain.claim import KeyLock
lock = KeyLock(Path(sys.argv[1]))
assert lock.try_acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_a_held_lock_excludes_others_until_released(tmp_path: Path) -> None:
    path = tmp_path / "k.lock"
    first, second = claim.KeyLock(path), claim.KeyLock(path)
    assert first.try_acquire() and first.held
    assert not second.try_acquire() and not second.held
    assert second.holder().startswith("host ") and f" pid {os.getpid()} since " in second.holder()
    first.release()
    assert second.try_acquire()
    second.release()
    # the file stays, its holder line goes
    assert path.is_file() and claim.KeyLock(path).holder() == "unknown"


def test_the_lock_dies_with_its_holder(tmp_path: Path) -> None:
    path = tmp_path / "k.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_AND_WAIT, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        mine = claim.KeyLock(path)
        assert not mine.try_acquire() and f"pid {holder.pid} " in mine.holder()
    finally:
        holder.kill()  # SIGKILL: no clean-up of its own
        holder.wait()
    assert mine.try_acquire()
    mine.release()


def test_a_run_waits_for_the_holder_and_takes_its_checkpoint(
    corpus: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = PretrainRecipe.from_dict(
        {"student": "w16-l2-h2-f32", "corpus": corpus, "steps": 3, "global_batch": 8, "block_length": 16}
    )
    monkeypatch.setattr(claim, "POLL_S", 0.05)
    other_run = claim.KeyLock(artifacts.lock_path(recipe))
    assert other_run.try_acquire()
    outcomes: list[RunOutcome] = []
    waiting = threading.Thread(
        target=lambda: outcomes.append(
            run_pretrain(recipe, RunSettings(micro_batch=8, device="cpu", progress=False))
        )
    )
    waiting.start()
    try:
        time.sleep(1.0)
        assert waiting.is_alive() and not outcomes  # it waits ...
        assert not artifacts.work_dir(recipe).exists()  # ... without writing anything
        torch.manual_seed(0)
        model = BertForMaskedLM(bert_config(student_shape(recipe.student), 2))
        # the holder finishes
        made = artifacts.publish(recipe, model.save_pretrained, steps_done=recipe.steps)
    finally:
        other_run.release()
    waiting.join(timeout=60)
    assert not waiting.is_alive()
    assert outcomes == [RunOutcome(made, recipe.steps, True)]
    assert not artifacts.work_dir(recipe).exists()  # nothing was trained
    err = capsys.readouterr().err
    assert f"({recipe.key}) is being made by another run (host " in err and "waiting for it" in err
