"""Checkpoints named by recipe (trial option ``init_recipe``): how a trial completes a recipe, what `kdgrid plan`
lists (present vs missing, with the command that makes each), and the refusals (`kdgrid run` with a checkpoint
not made, unknown recipes, recipes that do not fit the trial)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import torch
from transformers import BertForMaskedLM, BertForSequenceClassification

from kdgrid.cli import main
from kdgrid.core.job.init import build_student, check_init
from kdgrid.core.model import shapes
from kdgrid.core.model.models import bert_config
from kdgrid.core.model.shapes import ResolvedTeacher, StudentShape, student_shape
from kdgrid.core.pretrained import artifacts
from kdgrid.core.pretrained.needed import (
    general_distillation_teacher,
    recipe_for_trial,
)
from kdgrid.core.pretrained.recipe import PretrainRecipe
from kdgrid.core.pretrained.recipe_names import RECIPES_DIR, bundled_recipe_names
from kdgrid.errors import ConfigError
from kdgrid.grid import load_sweep
from kdgrid.preflight.local import check_init_checkpoints
from kdgrid.trial import Trial

SWEEP = """name: gd
fixed: {task: mrpc, teacher: bert-base, init: general_distillation, options: {init_recipe: offline}, epochs: 1}
axes:
  student: [bert-tiny, bert-mini]
"""


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Artifacts go to a fresh kdgrid cache, never the user's."""
    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def gd_trial(student: str = "bert-tiny", teacher: str = "bert-base", **options: object) -> Trial:
    return Trial(
        "mrpc",
        teacher,
        student,
        init="general_distillation",
        options={"init_recipe": "offline", **options},  # type: ignore[arg-type]
    )


def fake_artifact(recipe: PretrainRecipe) -> Path:
    """A finished checkpoint of ``recipe`` as `artifacts.publish` leaves it (a random BERT of its shape)."""
    torch.manual_seed(0)
    model = BertForMaskedLM(bert_config(student_shape(recipe.student), 2))
    return artifacts.publish(recipe, model.save_pretrained, steps_done=recipe.steps)


def succeeds(argv: list[str]) -> None:
    """``kdgrid ARGV`` in this process, which must succeed."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 0


def test_bundled_recipes_and_how_a_trial_completes_one() -> None:
    assert {"offline", "paper"} <= set(bundled_recipe_names())
    use = recipe_for_trial(gd_trial())
    assert use is not None and use.path == RECIPES_DIR / "offline.yaml"
    assert use.recipe.student == "w128-l2-h2-f512" and use.recipe.teacher == "bert-base-uncased"
    assert use.recipe.objective == "general_distillation" and use.recipe.corpus == "polarity+vocabulary"
    # every task's fine-tuned paper teacher shares its family's pre-trained base: one checkpoint per shape
    assert general_distillation_teacher("textattack/bert-base-uncased-MRPC") == "bert-base-uncased"
    assert general_distillation_teacher("bert-large") == "bert-large-uncased"
    assert general_distillation_teacher("minilm-l6") == "minilm-l6"
    sst2 = Trial("sst2", "textattack/bert-base-uncased-SST-2", "bert-tiny", init="general_distillation",
                 options={"init_recipe": "offline"})  # fmt: skip
    assert recipe_for_trial(sst2).recipe.key == use.recipe.key  # type: ignore[union-attr]
    # init pretrain: the same file without a teacher is plain masked-LM pre-training (another key)
    pre = Trial("mrpc", "bert-base", "bert-tiny", init="pretrain", options={"init_recipe": "offline"})
    plain = recipe_for_trial(pre)
    assert plain is not None and plain.recipe.teacher is None and plain.recipe.objective == "pretrain"
    assert plain.recipe.mlm_weight == 1.0 and not plain.recipe.knowledge  # masked LM alone, whatever the file
    assert plain.recipe.key != use.recipe.key
    assert recipe_for_trial(Trial("mrpc", "bert-base", "bert-tiny", init="pretrain")) is None


def test_the_command_plan_prints_makes_the_same_recipe(capsys: pytest.CaptureFixture[str]) -> None:
    for student in ("bert-mini", "w170-l5"):  # w170-l5 has 5 heads: the recipe sets 2 relation heads
        use = recipe_for_trial(gd_trial(student))
        assert use is not None
        words = shlex.split(use.recipe.command())
        assert words[:2] == ["kdgrid", "pretrain"]
        # the real command, reading the same file: the same key and folder
        succeeds([*words[1:], "--dry-run"])
        said = json.loads(capsys.readouterr().out)
        assert (said["key"], said["path"], said["exists"]) == (
            use.recipe.key,
            str(artifacts.artifact_dir(use.recipe)),
            False,
        )


@pytest.mark.parametrize(
    ("trial", "message"),
    [
        (gd_trial(init_recipe="no-such-recipe"), r"names no recipe; allowed: offline, paper, or the path"),
        (gd_trial(init_recipe=""), r"names no recipe; allowed: offline, paper"),
        (
            Trial("mrpc", "bert-base", "bert-tiny", init="random", options={"init_recipe": "offline"}),
            r"init_recipe goes with init general_distillation or pretrain, not init 'random'",
        ),
        (
            Trial(
                "mrpc",
                "bert-base",
                "bert-tiny",
                init="general_distillation",
                init_from="gd",
                options={"init_recipe": "offline"},
            ),
            r"both name the checkpoint; keep one",
        ),
    ],
)
def test_recipes_that_cannot_apply_are_refused(trial: Trial, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        recipe_for_trial(trial)


def test_a_recipe_file_may_not_name_the_student(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("corpus: generated\nsteps: 5\nstudent: bert-mini\n")
    with pytest.raises(ConfigError, match=r"sets \['student'\], which a sweep's trial gives"):
        recipe_for_trial(gd_trial(init_recipe=str(path)))
    path.write_text("corpus: generated\nsteps: 5\nteacher: minilm-l6\n")
    pre = Trial("mrpc", "bert-base", "bert-tiny", init="pretrain", options={"init_recipe": str(path)})
    with pytest.raises(ConfigError, match=r"names teacher 'minilm-l6': a general-distillation recipe"):
        recipe_for_trial(pre)
    use = recipe_for_trial(gd_trial(init_recipe=str(path)))  # a file's own teacher wins over the trial's
    assert (
        use is not None
        and use.recipe.teacher == "minilm-l6"
        and "--teacher minilm-l6" in use.recipe.command()
    )


def test_an_unknown_recipe_is_refused_by_plan_with_the_names_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tmp_path / "gd.yaml"
    sweep.write_text(SWEEP.replace("init_recipe: offline", "init_recipe: papr"))
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", str(sweep), "--store", str(tmp_path / "store")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "init_recipe='papr' names no recipe; allowed: offline, paper" in err and "Traceback" not in err


def test_plan_lists_present_and_missing_checkpoints_with_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tmp_path / "gd.yaml"
    sweep.write_text(SWEEP)
    tiny, mini = (recipe_for_trial(p.trial) for p in load_sweep(sweep).trials)
    assert tiny is not None and mini is not None
    made = fake_artifact(tiny.recipe)
    succeeds(["plan", str(sweep), "--store", str(tmp_path / "store")])
    out = capsys.readouterr().out
    assert "pre-training checkpoints (init_recipe): 1 present, 1 to make" in out
    assert (
        f"present  general_distillation of w128-l2-h2-f512 from bert-base-uncased (recipe offline, key {tiny.recipe.key}): {made}"
        in out
    )
    assert (
        f"missing  general_distillation of w256-l4-h4-f1024 from bert-base-uncased (recipe offline, key {mini.recipe.key}), for 1 trial(s)"
        in out
    )
    assert mini.recipe.command() in out
    assert "  or: kdgrid run --make-checkpoints makes the missing ones first, one job each" in out
    succeeds(["plan", str(sweep), "--store", str(tmp_path / "store"), "--json"])
    listed = json.loads(capsys.readouterr().out)["pretrain_checkpoints"]
    assert [(c["student"], c["present"], c["path"]) for c in listed] == [
        ("w128-l2-h2-f512", True, str(made)),
        ("w256-l4-h4-f1024", False, str(artifacts.artifact_dir(mini.recipe))),
    ]
    assert listed[1]["command"] == mini.recipe.command()


def test_run_refuses_while_a_checkpoint_is_missing_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tmp_path / "gd.yaml"
    sweep.write_text(SWEEP)
    tiny, mini = (recipe_for_trial(p.trial) for p in load_sweep(sweep).trials)
    fake_artifact(tiny.recipe)  # type: ignore[union-attr]

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a teacher was read before the checkpoints were checked")

    monkeypatch.setattr(shapes, "fetch_config", refuse)
    store = tmp_path / "store"
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(sweep), "--store", str(store)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "1 pre-training checkpoint(s) of init_recipe missing" in err
    assert "w256-l4-h4-f1024" in err and "w128-l2-h2-f512" not in err
    assert mini.recipe.command().replace(" ", "") in err.replace(" ", "").replace("\n", "")  # type: ignore[arg-type]
    assert "or run again with --make-checkpoints: makes the missing ones first" in " ".join(err.split())
    assert not store.exists()
    trials = [p.trial for p in load_sweep(sweep).trials]
    fake_artifact(mini.recipe)  # type: ignore[union-attr]
    check_init_checkpoints(trials)  # both made: nothing to refuse


def test_build_student_starts_from_the_recipe_artifact_and_records_its_key(tmp_path: Path) -> None:
    shape = StudentShape(layers=2, width=32, heads=2, ffn=64)
    torch.manual_seed(3)
    teacher_model = BertForSequenceClassification(bert_config(StudentShape(4, 32, 2, 64), 2, vocab_size=200))
    teacher_model.save_pretrained(tmp_path / "teacher")
    resolved = ResolvedTeacher(str(tmp_path / "teacher"), StudentShape(4, 32, 2, 64), True)
    trial = Trial("mrpc", str(tmp_path / "teacher"), shape.name, init="general_distillation",
                  options={"init_recipe": "offline"})  # fmt: skip
    use = recipe_for_trial(trial)
    assert use is not None and use.recipe.teacher == str(tmp_path / "teacher")
    with pytest.raises(
        ConfigError,
        match=rf"recipe 'offline' .*key {use.recipe.key}\) is not made yet; make it with: kdgrid pretrain",
    ):
        check_init(trial, shape, resolved)
    source = BertForMaskedLM(bert_config(shape, 2, vocab_size=200))
    made = artifacts.publish(use.recipe, source.save_pretrained, steps_done=use.recipe.steps)
    model, info = build_student(trial, shape, 2, resolved, teacher_model)
    assert info["init_source"] == str(made)
    assert info["init_recipe"] == {"name": "offline", "key": use.recipe.key}
    assert info["general_distillation"]["key"] == use.recipe.key  # type: ignore[index]
    assert torch.equal(
        model.bert.encoder.layer[1].output.dense.weight, source.bert.encoder.layer[1].output.dense.weight
    )
