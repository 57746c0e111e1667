"""A method is one folder: a plugin package laid out as a built-in method (a torch-free ``spec.py`` that registers
the method, its option, its rule, its memory and an optimizer; a torch module loaded on first use) is found by
``kdgrid plan`` (its rule refuses a bad combination), the memory estimate, ``kdgrid run``, the epoch checkpoints
(a preempted trial resumes bit for bit) and ``kdgrid methods``, with no other file edited."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kdgrid.cli import main
from kdgrid.core.model.shapes import student_shape
from kdgrid.core.teacher.options import NOT_MEANT_TO_BE_ACCURATE
from kdgrid.grid import load_sweep
from kdgrid.grid.memory_estimate import GIB, estimate_trial_memory_gb
from kdgrid.store import read_table
from kdgrid.sweep_run import RunOptions, run_sweep
from kdgrid.trial import Trial
from tests.plugin_files import isolated_plugins
from tests.preemption import preempted_in_epoch

PACKAGE = "kdfolder_methods"
SPEC = "kdfolder_methods.heavy_ball.spec"
SPEC_SOURCE = '''\
"""Heavy-ball SGD as a method folder: its option, rule, memory and optimizer, without torch."""
import importlib

from kdgrid.core.method_registry import MethodMemory, MethodSpec, register_method
from kdgrid.core.optimizers import OPTIMIZER, register_optimizer
from kdgrid.core.options import register_option
from kdgrid.number_range import NumberRange

MOMENTUM = "heavy_ball_momentum"


@register_optimizer("heavy_ball")
def build(groups, lr, options):
    module = importlib.import_module("kdfolder_methods.heavy_ball.optimizer")
    return module.heavy_ball(groups, lr, options.get(MOMENTUM, 0.9))


def momentum_rule(facts):
    trial = facts.trial
    if trial.option(MOMENTUM) is not None and trial.option(OPTIMIZER) != "heavy_ball":
        return [f"option {MOMENTUM} is only for optimizer 'heavy_ball'"]
    return []


def memory(facts):
    on = facts.trial.option(OPTIMIZER) == "heavy_ball"
    return MethodMemory(parameters=7 if on else 0, bytes_per_parameter=4 if on else 0)


register_option(MOMENTUM, "number", None, "heavy ball: the momentum",
                check=NumberRange(low=0, high=1, high_open=True).checker(MOMENTUM))
register_method(MethodSpec(
    name="heavy_ball", title="heavy-ball SGD (a test method folder)", paper="Polyak, 1964",
    options=(MOMENTUM,), rules=(("combination", momentum_rule),), memory=memory,
))
'''
OPTIMIZER_SOURCE = '''\
"""Heavy-ball SGD (torch)."""
import torch


def heavy_ball(groups, lr, momentum):
    return torch.optim.SGD(groups, lr=lr, momentum=momentum)
'''
TASK = "synthetic-single-binary-n96-d32"


@pytest.fixture
def method_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = tmp_path / "plugins"
    folder = root / PACKAGE / "heavy_ball"
    folder.mkdir(parents=True)
    (root / PACKAGE / "__init__.py").write_text('"""Methods of a test."""\n')
    (folder / "__init__.py").write_text('"""Heavy-ball SGD."""\n')
    (folder / "spec.py").write_text(textwrap.dedent(SPEC_SOURCE))
    (folder / "optimizer.py").write_text(textwrap.dedent(OPTIMIZER_SOURCE))
    monkeypatch.syspath_prepend(str(root))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with isolated_plugins(prefix="kdfolder"):
        yield root
    torch.set_num_threads(threads)


def sweep_file(path: Path, teacher: str, options: dict[str, object]) -> Path:
    spec = {
        "name": "heavy-ball",
        "plugins": [SPEC],
        "fixed": {"task": TASK, "teacher": teacher, "student": "w32-l2-h2-f64", "init": "random", "batch_size": 16,
                  "max_length": 24, "epochs": 2, "lr": 0.05, "seed": 3, "knowledge": [], "strategy": None,
                  "options": {**NOT_MEANT_TO_BE_ACCURATE, **options}},
    }  # fmt: skip
    path.write_text(json.dumps(spec))
    return path


def test_plan_refuses_what_the_folder_s_rule_refuses(
    tmp_path: Path, teacher: str, method_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = sweep_file(tmp_path / "bad.yaml", teacher, {"heavy_ball_momentum": 0.5})
    with pytest.raises(SystemExit) as exited:
        main(["plan", str(bad)])
    assert exited.value.code == 2
    assert "option heavy_ball_momentum is only for optimizer 'heavy_ball'" in capsys.readouterr().err
    out_of_range = sweep_file(tmp_path / "range.yaml", teacher, {"optimizer": "heavy_ball", "heavy_ball_momentum": 1})
    with pytest.raises(SystemExit) as exited:
        main(["plan", str(out_of_range)])
    assert exited.value.code == 2
    assert "heavy_ball_momentum=1 is invalid; allowed: a number in [0, 1)" in capsys.readouterr().err


def test_the_memory_estimate_asks_the_folder(tmp_path: Path, teacher: str, method_folder: Path) -> None:
    sweep = load_sweep(sweep_file(tmp_path / "s.yaml", teacher, {"optimizer": "heavy_ball"}))
    [trial] = [planned.trial for planned in sweep.trials]
    plain = Trial(**{**trial.to_dict(), "options": dict(NOT_MEANT_TO_BE_ACCURATE)})
    params = student_shape(trial.student).param_count()
    extra = estimate_trial_memory_gb(trial) - estimate_trial_memory_gb(plain)
    assert extra * GIB == pytest.approx(params * 4 + 7 * (16 + 4))


def test_run_checkpoint_resume_and_the_method_list_find_the_folder(
    tmp_path: Path,
    teacher: str,
    method_folder: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kdgrid.core.training.train import run_job

    path = sweep_file(tmp_path / "s.yaml", teacher, {"optimizer": "heavy_ball", "heavy_ball_momentum": 0.8})
    store = tmp_path / "store"
    outcome = run_sweep(path, store, RunOptions(executor_settings={"local_progress": False}, preflight=False))
    assert outcome.ok and outcome.done_now == 1
    [row] = read_table(store, ["status", "options_json"]).to_pylist()
    assert row["status"] == "done" and json.loads(row["options_json"])["optimizer"] == "heavy_ball"

    [trial] = [planned.trial for planned in load_sweep(path).trials]
    [straight] = run_job([trial], device="cpu")
    with preempted_in_epoch(monkeypatch, 1):
        run_job([trial], device="cpu", checkpoint_dir=tmp_path / "ckpt")
    state = torch.load(tmp_path / "ckpt" / f"{trial.trial_id}.pt", weights_only=False)
    buffers = [s["momentum_buffer"] for s in state["optimizer"]["state"].values()]
    assert buffers and all(b is not None for b in buffers)  # the folder's optimizer state is checkpointed
    [resumed] = run_job([trial], device="cpu", checkpoint_dir=tmp_path / "ckpt")
    assert resumed.extra["resumed_from_epoch"] == 1
    assert resumed.curve == straight.curve and resumed.scores == straight.scores

    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(["methods", "--json"])
    assert exited.value.code in (0, None)
    listed = {entry["name"]: entry for entry in json.loads(capsys.readouterr().out)}
    assert listed["heavy_ball"]["options"] == ["heavy_ball_momentum"]
    assert {"ctkd", "dot", "lad", "reaugkd"} <= set(listed)
