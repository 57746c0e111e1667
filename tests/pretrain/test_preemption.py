"""Preemption: a run signalled mid-way (SIGUSR2 at a SLURM time limit, SIGTERM at a preemption) stops at the next
step boundary every process agrees on, with a step checkpoint, and a restarted run then equals an uninterrupted
one; under ``--nproc-per-node`` a refusal met only in the started processes exits 2 with its one message."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.multiprocessing as mp

from kdgrid.cli import main
from kdgrid.commands import pretrain as pretrain_command
from kdgrid.core.pretrained import artifacts
from kdgrid.core.pretrained.recipe import PretrainRecipe
from kdgrid.pretrain import step_checkpoint, train
from kdgrid.pretrain.preemption import StopSignals, stopped_exit_status
from kdgrid.pretrain.train import RunSettings, run_pretrain
from tests.pretrain.test_train import _free_port, _recipe, _weights

SIGNALLED_STEP = 1  # the signal arrives during this step (0-based); the run stops after it, at step 2


def _signal_during(step: int, signum: int) -> Callable[..., dict[str, float]]:
    """`_Steps.run` that sends ``signum`` to this process in the middle of ``step`` (after its forward passes,
    before the optimizer step: where a real signal lands)."""
    original = train._Steps.run

    def run(self: Any, current: int) -> dict[str, float]:
        values = original(self, current)
        if current == step:
            os.kill(os.getpid(), signum)
        return values

    return run


def _settings() -> RunSettings:
    return RunSettings(micro_batch=2, device="cpu", progress=False, checkpoint_every=100)


@pytest.mark.parametrize("signum", [signal.SIGUSR2, signal.SIGTERM], ids=["SIGUSR2", "SIGTERM"])
def test_a_signalled_run_stops_with_a_checkpoint_and_resumes_to_the_uninterrupted_result(
    corpus: str,
    cache: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
    signum: int,
) -> None:
    recipe = _recipe(corpus, steps=4, dropout=0.1)
    cache("whole")
    whole = run_pretrain(recipe, _settings())
    cache("stopped")
    before = signal.getsignal(signum)
    with monkeypatch.context() as patch:
        patch.setattr(train._Steps, "run", _signal_during(SIGNALLED_STEP, signum))
        stopped = run_pretrain(recipe, _settings())
    assert signal.getsignal(signum) is before  # the handler it replaced is back
    assert not stopped.finished and stopped.path is None
    assert stopped.steps_done == SIGNALLED_STEP + 1 and stopped.stopped_by == signum
    assert [step for step, _ in step_checkpoint.checkpoints(artifacts.work_dir(recipe))] == [2]
    resumed = run_pretrain(recipe, _settings())
    assert resumed.finished and resumed.stopped_by is None
    assert [h["mlm"] for h in stopped.history + resumed.history] == pytest.approx(
        [h["mlm"] for h in whole.history]
    )
    one, two = _weights(whole.path), _weights(resumed.path)
    for name in one:
        torch.testing.assert_close(two[name], one[name], rtol=1e-5, atol=1e-6, msg=name)


def test_a_signal_during_the_last_step_finishes_the_run(
    corpus: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recipe = _recipe(corpus, steps=2)
    monkeypatch.setattr(train._Steps, "run", _signal_during(1, signal.SIGUSR2))
    outcome = run_pretrain(recipe, _settings())
    assert outcome.finished and outcome.stopped_by is None and artifacts.exists(recipe)


def _worker_signalling_rank_1(
    rank: int, world_size: int, port: int, recipe: PretrainRecipe, folder: str
) -> None:
    os.environ.update(
        {
            "WORLD_SIZE": str(world_size),
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
    )
    torch.set_num_threads(1)
    if rank == 1:  # only one process is signalled: both must stop after the same step
        train._Steps.run = _signal_during(SIGNALLED_STEP, signal.SIGUSR2)  # type: ignore[method-assign]
    outcome = run_pretrain(recipe, _settings())
    Path(folder, f"rank-{rank}.txt").write_text(f"{outcome.steps_done} {outcome.stopped_by}")


def _worker(rank: int, world_size: int, port: int, recipe: PretrainRecipe) -> None:
    os.environ.update(
        {
            "WORLD_SIZE": str(world_size),
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
    )
    torch.set_num_threads(1)
    run_pretrain(recipe, _settings())


def test_two_processes_agree_on_the_step_and_resume_to_the_single_process_result(
    corpus: str,
    cache: Callable[[str], Path],
    tmp_path: Path,
) -> None:
    recipe = _recipe(corpus, steps=4)  # no dropout: its masks differ between 1 and 2 processes
    cache("single")
    single = run_pretrain(recipe, RunSettings(micro_batch=4, device="cpu", progress=False))
    cache("ddp")
    # fork: the children inherit the imported torch and transformers, so the test pays no second start-up
    args = (2, _free_port(), recipe, str(tmp_path))
    mp.start_processes(_worker_signalling_rank_1, args=args, nprocs=2, start_method="fork")
    expected = f"{SIGNALLED_STEP + 1} {int(signal.SIGUSR2)}"
    assert [Path(tmp_path, f"rank-{rank}.txt").read_text() for rank in (0, 1)] == [expected, expected]
    assert [step for step, _ in step_checkpoint.checkpoints(artifacts.work_dir(recipe))] == [2]
    assert not artifacts.exists(recipe)
    mp.start_processes(_worker, args=(2, _free_port(), recipe), nprocs=2, start_method="fork")
    one, two = _weights(single.path), _weights(artifacts.artifact_dir(recipe))
    for name in one:
        torch.testing.assert_close(two[name], one[name], rtol=1e-5, atol=1e-5, msg=name)


def test_the_cli_exits_128_plus_the_signal_after_its_checkpoint(
    corpus: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(train._Steps, "run", _signal_during(0, signal.SIGTERM))
    args = ["pretrain", "--student", "w16-l2-h2-f32", "--corpus", corpus, "--steps", "3", "--global-batch", "8",
            "--block-length", "16", "--micro-batch", "4", "--device", "cpu", "--no-progress"]  # fmt: skip
    with pytest.raises(SystemExit) as stopped:
        main(args)
    assert stopped.value.code == stopped_exit_status(signal.SIGTERM) == 143
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    assert '"stopped_by": "SIGTERM"' in printed and '"steps": 1' in printed


def test_stop_signals_only_record_and_restore_the_handlers() -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGUSR2, lambda signum, _: seen.append(signum))
    try:
        with StopSignals() as stop:
            assert stop.received is None
            os.kill(os.getpid(), signal.SIGUSR2)
            os.kill(os.getpid(), signal.SIGTERM)  # a second signal: the first one is what stopped the run
            assert stop.received == signal.SIGUSR2 and seen == []
        os.kill(os.getpid(), signal.SIGUSR2)
        assert seen == [signal.SIGUSR2]
    finally:
        signal.signal(signal.SIGUSR2, previous)


# -- a refusal inside the processes --nproc-per-node started --------------------------------------------------------
def _refusing_args(corpus_path: Path) -> list[str]:
    return ["pretrain", "--student", "w16-l2-h2-f32", "--corpus", str(corpus_path), "--steps", "3",
            "--global-batch", "8", "--block-length", "16", "--micro-batch", "2", "--device", "cpu",
            "--no-progress"]  # fmt: skip


def test_a_started_process_hands_its_refusal_back_silently(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    refusal = tmp_path / "refusal.txt"
    monkeypatch.setenv(pretrain_command.REFUSAL_FILE_ENV, str(refusal))
    with pytest.raises(SystemExit) as refused:
        main(_refusing_args(empty))
    assert refused.value.code == 2
    assert "is empty" in refusal.read_text() and "is empty" not in capsys.readouterr().err
    with pytest.raises(SystemExit):  # a second process's refusal does not replace the first
        main([*_refusing_args(tmp_path / "missing.txt")])
    assert "is empty" in refusal.read_text()


class _RefusingTorchrun:
    """Stands for the torchrun child: its processes refused (they wrote the file) and it exited 1."""

    def __init__(self, command: list[str], env: dict[str, str], **popen_options: object) -> None:
        Path(env[pretrain_command.REFUSAL_FILE_ENV]).write_text("corpus 'x' is empty: it has no document")

    def wait(self) -> int:
        return 1

    def send_signal(self, signum: int) -> None:
        raise AssertionError("no signal was sent")


def test_the_starting_process_prints_the_refusal_once_and_exits_2(
    corpus: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(subprocess, "Popen", _RefusingTorchrun)
    with pytest.raises(SystemExit) as refused:
        main([*_refusing_args(Path(corpus)), "--nproc-per-node", "2"])
    assert refused.value.code == 2
    assert capsys.readouterr().err.count("corpus 'x' is empty: it has no document") == 1


@pytest.mark.slow
def test_torchrun_processes_refusing_an_empty_corpus_exit_2(tmp_path: Path) -> None:
    """End to end: `kdgrid pretrain --nproc-per-node 2` on an empty corpus (met only in the processes)."""
    import sys

    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    env = {**os.environ, "KDGRID_CACHE": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "kdgrid.cli", *_refusing_args(empty), "--nproc-per-node", "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert (
        done.stderr.strip().splitlines()[-1]
        == f"error: corpus '{empty}' is empty: it has no document with text"
    )
