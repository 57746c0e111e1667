"""Training: a 2-process gloo run equals a single-process run of the same global batch; a resumed run equals an
uninterrupted one; the refusals (global batch, another recipe's work folder, an unmatched student, an empty
corpus) come before anything is written."""

from __future__ import annotations

import json
import os
import shlex
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from safetensors.torch import load_file

from kdgrid.cli import main
from kdgrid.core.job.init import build_student
from kdgrid.core.model.shapes import VOCAB_SIZE, ResolvedTeacher, StudentShape, student_shape
from kdgrid.core.pretrained import artifacts
from kdgrid.core.pretrained.recipe import PretrainRecipe
from kdgrid.errors import ConfigError
from kdgrid.pretrain import step_checkpoint
from kdgrid.pretrain.loss import plan_distillation, relation_heads
from kdgrid.pretrain.train import RunSettings, run_pretrain
from kdgrid.trial import Trial


def _recipe(corpus: str, **changes: object) -> PretrainRecipe:
    fields: dict[str, object] = {
        "student": "w16-l2-h2-f32",
        "corpus": corpus,
        "steps": 3,
        "global_batch": 8,
        "block_length": 16,
        "lr": 1e-3,
        "warmup_ratio": 0.0,
        "dropout": 0.0,
        **changes,
    }
    return PretrainRecipe.from_dict(fields)


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return load_file(path / "model.safetensors")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ddp_worker(rank: int, world_size: int, port: int, recipe: PretrainRecipe, micro_batch: int) -> None:
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
    run_pretrain(recipe, RunSettings(micro_batch=micro_batch, device="cpu", progress=False))


def _run_two_processes(recipe: PretrainRecipe, micro_batch: int) -> None:
    # fork: the children inherit the imported torch and transformers, so the test pays no second start-up
    mp.start_processes(
        _ddp_worker, args=(2, _free_port(), recipe, micro_batch), nprocs=2, start_method="fork"
    )


@pytest.mark.parametrize("distil", [False, True], ids=["pretrain", "general_distillation"])
def test_two_processes_equal_one(
    corpus: str, cache: Callable[[str], Path], tiny_teacher: str, distil: bool
) -> None:
    changes = {"teacher": tiny_teacher, "knowledge": ("hidden_mse", "value_relation"), "strategy": "Last-1"}
    recipe = _recipe(corpus, **(changes if distil else {}))
    cache("single")
    single = run_pretrain(recipe, RunSettings(micro_batch=2, device="cpu", progress=False))
    assert single.finished and single.steps_done == 3
    if distil:
        assert {"hidden_mse@2-2", "value_relation@2-2", "mlm"} == set(single.history[0])
    cache("ddp")
    _run_two_processes(recipe, micro_batch=4)
    assert artifacts.exists(recipe)
    info = artifacts.read_manifest(artifacts.artifact_dir(recipe))
    assert info is not None and info["world_size"] == 2
    one, two = _weights(single.path), _weights(artifacts.artifact_dir(recipe))
    assert one.keys() == two.keys()
    for name in one:
        torch.testing.assert_close(two[name], one[name], rtol=1e-5, atol=1e-5, msg=name)
    if distil:
        _loads_as_general_distillation_init(single.path, recipe, tiny_teacher)


def _loads_as_general_distillation_init(path: Path, recipe: PretrainRecipe, teacher: str) -> None:
    """The artifact is what `init: general_distillation` loads: the encoder's weights, and the run's manifest
    copied into the trial's facts."""
    shape = student_shape(recipe.student)
    trial = Trial(
        task="polarity",
        teacher=teacher,
        student=recipe.student,
        init="general_distillation",
        init_from=str(path),
    )
    resolved = ResolvedTeacher(teacher, StudentShape(2, 32, 2, 64), True)
    model, info = build_student(trial, shape, 2, resolved, vocab_size=VOCAB_SIZE)
    saved = _weights(path)
    for name, value in model.bert.encoder.state_dict().items():
        assert torch.equal(value, saved[f"bert.encoder.{name}"]), name
    facts = info["general_distillation"]
    assert isinstance(facts, dict) and facts["key"] == recipe.key and facts["steps"] == recipe.steps


def test_resume_equals_an_uninterrupted_run(corpus: str, cache: Callable[[str], Path]) -> None:
    recipe = _recipe(corpus, steps=4, dropout=0.1)  # dropout: the random state must resume too
    cache("whole")
    whole = run_pretrain(recipe, RunSettings(micro_batch=4, progress=False))
    cache("resumed")
    first = run_pretrain(
        recipe, RunSettings(micro_batch=4, progress=False, stop_after=2, checkpoint_every=100)
    )
    assert not first.finished and first.path is None and first.steps_done == 2
    assert [step for step, _ in step_checkpoint.checkpoints(artifacts.work_dir(recipe))] == [2]
    assert not artifacts.exists(recipe)
    second = run_pretrain(recipe, RunSettings(micro_batch=4, progress=False))
    assert second.finished and second.steps_done == 4
    assert [h["mlm"] for h in first.history + second.history] == pytest.approx(
        [h["mlm"] for h in whole.history]
    )
    one, two = _weights(whole.path), _weights(second.path)
    for name in one:
        torch.testing.assert_close(two[name], one[name], rtol=1e-5, atol=1e-6, msg=name)
    assert not artifacts.work_dir(recipe).exists()  # step checkpoints removed once published
    again = run_pretrain(recipe, RunSettings(progress=False))  # the artifact exists: nothing trains
    assert again.finished and again.history == []


def test_default_relation_heads_divide_both_widths() -> None:
    recipe = PretrainRecipe(student="w30-l2-h3-f60", teacher="minilm-l6", corpus="generated")
    teacher = StudentShape(layers=2, width=32, heads=2, ffn=64)
    assert relation_heads(recipe, student_shape("w30-l2-h3-f60"), teacher) == 2
    assert (
        relation_heads(recipe, student_shape("bert-tiny"), StudentShape(6, 384, 12, 1536)) == 2
    )  # its heads
    assert relation_heads(recipe, student_shape("w160-l4"), StudentShape(12, 768, 12, 3072)) == 4  # 5 heads
    plan = plan_distillation(recipe, student_shape("w30-l2-h3-f60"), teacher)
    assert plan.trial.relation_heads == 2
    explicit = PretrainRecipe(
        student="w30-l2-h3-f60", teacher="minilm-l6", corpus="generated", relation_heads=1
    )
    assert relation_heads(explicit, student_shape("w30-l2-h3-f60"), teacher) == 1


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def test_a_work_folder_of_another_recipe_is_refused(corpus: str, tmp_path: Path) -> None:
    work = tmp_path / "work"
    mine = _recipe(corpus, steps=4)
    run_pretrain(mine, RunSettings(micro_batch=4, progress=False, stop_after=1, work_dir=work))
    before = _files(work)
    with pytest.raises(ConfigError, match=r"belongs to pretrain recipe .* Nothing was overwritten"):
        run_pretrain(_recipe(corpus, steps=5), RunSettings(micro_batch=4, progress=False, work_dir=work))
    assert _files(work) == before


def test_a_global_batch_the_processes_do_not_divide_is_refused(
    corpus: str, cache: Callable[[str], Path]
) -> None:
    with pytest.raises(
        ConfigError, match="global batch 8 is not a multiple of 1 process\\(es\\) x micro-batch 3"
    ):
        run_pretrain(_recipe(corpus), RunSettings(micro_batch=3, progress=False))
    assert not (cache("cache") / "pretrained").exists()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"student": "w16-l3-h2-f32", "strategy": "Dilatation"}, "strategy 'Dilatation'"),
        ({"student": "w30-l2-h3-f60", "relation_heads": 3}, "relation_heads=3 must divide .* 32"),
        ({"knowledge": ("hidden_mse",), "projection": "none"}, "needs a projection"),
    ],
)
def test_a_student_the_teacher_cannot_be_matched_to_is_refused(
    corpus: str, tiny_teacher: str, changes: dict[str, object], message: str
) -> None:
    recipe = _recipe(corpus, teacher=tiny_teacher, **changes)
    with pytest.raises(ConfigError, match=f"general distillation of w.* from {tiny_teacher}.*{message}"):
        run_pretrain(recipe, RunSettings(micro_batch=4, progress=False))


@pytest.mark.parametrize(
    ("text", "message"), [("\n  \n\n", "is empty"), ("two words", "fewer than one block")]
)
def test_an_empty_or_tiny_corpus_is_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "small.txt"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        run_pretrain(_recipe(str(path)), RunSettings(micro_batch=4, progress=False))


def test_cli_refusals_exit_2(corpus: str, capsys: pytest.CaptureFixture[str]) -> None:
    base = [
        "pretrain",
        "--student",
        "w16-l2-h2-f32",
        "--corpus",
        corpus,
        "--global-batch",
        "8",
        "--no-progress",
    ]
    for extra, message in (
        (["--micro-batch", "3"], "not a multiple"),
        (["--corpus", "/no/such/corpus"], "is not a file or folder"),
    ):
        with pytest.raises(SystemExit) as stop:
            main([*base, *extra])
        assert stop.value.code == 2
        assert message in capsys.readouterr().err


def test_cli_dry_run_prints_the_key(corpus: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["pretrain", "--student", "bert-tiny", "--corpus", corpus, "--steps", "5", "--dry-run"])
    assert stop.value.code == 0
    shown = json.loads(capsys.readouterr().out)
    recipe = PretrainRecipe(student="bert-tiny", corpus=corpus, steps=5)
    assert shown["key"] == recipe.key and shown["exists"] is False
    assert shown["path"] == str(artifacts.artifact_dir(recipe))


@pytest.mark.slow
def test_cli_under_torchrun_equals_one_process(corpus: str, tiny_teacher: str, tmp_path: Path) -> None:
    """`kdgrid pretrain --nproc-per-node 2` (torchrun, 2 gloo processes) makes the checkpoint one process makes."""
    import subprocess
    import sys

    args = [
        "--student",
        "w16-l2-h2-f32",
        "--teacher",
        tiny_teacher,
        "--corpus",
        corpus,
        "--steps",
        "3",
        "--global-batch",
        "8",
        "--block-length",
        "16",
        "--lr",
        "1e-3",
        "--micro-batch",
        "2",
        "--no-progress",
        "--device",
        "cpu",
    ]
    recipe_file = tmp_path / "recipe.yaml"
    recipe_file.write_text("dropout: 0.0\nwarmup_ratio: 0.0\n")
    outputs = {}
    for name, extra in (("one", []), ("two", ["--nproc-per-node", "2"])):
        env = {**os.environ, "KDGRID_CACHE": str(tmp_path / name)}
        done = subprocess.run(
            [sys.executable, "-m", "kdgrid.cli", "pretrain", "--recipe", str(recipe_file), *args, *extra],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        outputs[name] = json.loads(done.stdout.strip().splitlines()[-1])
    assert outputs["one"]["key"] == outputs["two"]["key"] and outputs["two"]["finished"]
    one, two = _weights(Path(outputs["one"]["path"])), _weights(Path(outputs["two"]["path"]))
    for name in one:
        torch.testing.assert_close(two[name], one[name], rtol=1e-5, atol=1e-5, msg=name)
    # A refusal comes before torchrun starts: one message, exit status 2.
    env = {**os.environ, "KDGRID_CACHE": str(tmp_path / "refused")}
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "kdgrid.cli",
            "pretrain",
            *args,
            "--micro-batch",
            "3",
            "--nproc-per-node",
            "2",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert refused.returncode == 2 and "not a multiple of 2 process(es) x micro-batch 3" in refused.stderr


def test_a_recipes_command_makes_that_recipe(corpus: str, capsys: pytest.CaptureFixture[str]) -> None:
    recipes = [
        PretrainRecipe(student="bert-tiny", corpus=corpus),
        PretrainRecipe(
            student="w144-l8",
            teacher="minilm-l6",
            corpus=corpus,
            knowledge=("hidden_mse", "value_relation"),
            strategy="Last-1",
            relation_heads=2,
            options={"hidden_mse.unused": 1},
            steps=2000,
            global_batch=32,
            dropout=0.0,
            mlm_probability=0.2,
            seed=3,
        ),
    ]
    for recipe in recipes:
        words = shlex.split(recipe.command())
        assert words[:2] == ["kdgrid", "pretrain"]
        with pytest.raises(SystemExit):
            main([*words[1:], "--dry-run"])
        shown = json.loads(capsys.readouterr().out)
        assert shown["key"] == recipe.key and PretrainRecipe.from_dict(shown["recipe"]) == recipe


def test_set_fields_are_checked(corpus: str, capsys: pytest.CaptureFixture[str]) -> None:
    for item, message in (("dropout", "write FIELD=VALUE"), ("epochs=3", "unknown pretrain recipe key")):
        with pytest.raises(SystemExit) as stop:
            main(["pretrain", "--student", "bert-tiny", "--corpus", corpus, "--set", item, "--dry-run"])
        assert stop.value.code == 2 and message in capsys.readouterr().err
