"""`init_from` checkpoints: relative paths mean the working directory, trial ids keep the path as written, and
`plan` / `run` name every missing checkpoint in one message before any teacher is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from kdgrid.cli import main
from kdgrid.core.model import models, shapes
from kdgrid.errors import ConfigError
from kdgrid.grid import load_sweep
from kdgrid.preflight.local import check_init_checkpoints, missing_init_checkpoints
from kdgrid.trial import Trial
from tests.teachers import TINY_TEACHER_SHAPE, save_random_teacher

SWEEP = """name: gd
fixed: {task: mrpc, teacher: bert-base, init: general_distillation, init_from: "gd/{student}", epochs: 1}
axes:
  student: [bert-tiny, bert-mini, bert-small]
"""


def _sweep(folder: Path) -> Path:
    path = folder / "sweeps" / "gd.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(SWEEP)
    return path


def _refuse_teacher_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a teacher was read before the checkpoints were checked")

    monkeypatch.setattr(shapes, "fetch_config", refuse)
    monkeypatch.setattr(models, "load_pretrained_bert", refuse)


def test_relative_paths_keep_the_trial_id_and_resolve_against_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep = load_sweep(_sweep(tmp_path))
    trials = [p.trial for p in sweep.trials]
    assert [t.init_from for t in trials] == ["gd/bert-tiny", "gd/bert-mini", "gd/bert-small"]
    written = Trial(
        "mrpc", "bert-base", "bert-tiny", init="general_distillation", init_from="gd/bert-tiny", epochs=1
    )
    assert trials[0].trial_id == written.trial_id  # the path as written, never where it points
    monkeypatch.chdir(tmp_path)
    assert missing_init_checkpoints(trials) == ["gd/bert-tiny", "gd/bert-mini", "gd/bert-small"]
    (tmp_path / "gd" / "bert-mini").mkdir(parents=True)
    assert missing_init_checkpoints(trials) == ["gd/bert-tiny", "gd/bert-small"]
    monkeypatch.chdir(tmp_path / "sweeps")  # not the sweep file's folder: the working directory
    assert len(missing_init_checkpoints(trials)) == 3
    with pytest.raises(
        ConfigError, match=rf"3 init_from checkpoint\(s\) missing .*{tmp_path / 'sweeps'}\): gd/"
    ):
        check_init_checkpoints(trials)


def test_hub_ids_are_not_taken_for_missing_directories() -> None:
    trials = [
        Trial(
            "mrpc", "bert-base", "bert-tiny", init="pretrain", init_from="google/bert_uncased_L-2_H-128_A-2"
        ),
        Trial("mrpc", "bert-base", "bert-tiny", init="pretrain", init_from="./here/pre"),
        Trial("mrpc", "bert-base", "w768-l2", init="preload", init_from="~/no/such/donor"),
        Trial("mrpc", "bert-base", "bert-tiny", init="general_distillation", init_from="org/gd"),
        Trial("mrpc", "bert-base", "bert-tiny", init="random"),
    ]
    assert missing_init_checkpoints(trials) == ["./here/pre", "~/no/such/donor", "org/gd"]


@pytest.mark.parametrize("command", ["plan", "run"])
def test_plan_and_run_name_every_missing_checkpoint_in_one_message(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = _sweep(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gd" / "bert-mini").mkdir(parents=True)
    _refuse_teacher_reads(monkeypatch)
    store = tmp_path / "store"
    with pytest.raises(SystemExit) as exit_info:
        main([command, str(sweep), "--store", str(store)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "Traceback" not in err
    assert "2 init_from checkpoint(s) missing" in err and "gd/bert-tiny, gd/bert-small" in err
    assert not list(store.rglob("*.parquet"))


def test_a_teacher_directory_with_the_wrong_label_count_is_refused_by_plan(tmp_path: Path) -> None:
    teacher = save_random_teacher(tmp_path / "three", TINY_TEACHER_SHAPE, num_labels=3)
    sweep = tmp_path / "s.yaml"
    sweep.write_text(
        f"name: s\nfixed: {{task: mrpc, teacher: {teacher}, init: random}}\naxes: {{student: [bert-tiny]}}\n"
    )
    with pytest.raises(ConfigError, match=rf"teacher {teacher} has 3 outputs .*task mrpc needs 2"):
        load_sweep(sweep)
