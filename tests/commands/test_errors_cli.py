"""The fault suite of user errors: each case goes through the real command line (`kdgrid.cli.main`) and must
give exit status 2, one plain-text message with the facts needed to fix it (no traceback), and leave the store
as it was (a store that did not exist is not created)."""

from __future__ import annotations

import io
import json
import shutil
import time
from contextlib import redirect_stderr
from pathlib import Path

import pytest
import yaml

from kdgrid.cli import main
from kdgrid.core.data import load_splits
from kdgrid.core.trial_rules import MIN_TEMPERATURE
from kdgrid.errors import ConfigError
from kdgrid.grid.spec import MAX_YAML_NODES, Problems, load_yaml

BASE = {"task": "rte", "teacher": "bert-base", "student": "bert-tiny"}
# a student of the teacher's width, its layers copied, matched on hidden states: no term is projected
SAME_WIDTHS = {
    "teacher": "minilm-l6",
    "student": "w384-l2-h12-f1536",
    "init": "preload",
    "knowledge": "hidden_mse",
    "strategy": "Last-1",
}
BINARY = bytes(range(128, 256)) * 4  # not UTF-8 from its first byte


def kdgrid(*args: object) -> tuple[int | str | None, str]:
    """Run ``kdgrid ARGS`` in this process: (exit status, stderr)."""
    err = io.StringIO()
    code: int | str | None = 0
    with redirect_stderr(err):
        try:
            main([str(a) for a in args])
        except SystemExit as exit_:
            code = exit_.code
    return code, err.getvalue()


def snapshot(path: Path) -> list[tuple[str, int]] | None:
    """Every file under ``path`` with its size (None when ``path`` does not exist): what "unchanged" compares."""
    if not path.exists():
        return None
    if path.is_file():
        return [(path.name, path.stat().st_size)]
    return sorted((str(p.relative_to(path)), p.stat().st_size) for p in path.rglob("*"))


def refused(*args: object, store: Path, facts: list[str]) -> str:
    """Run the command, assert the refusal (status 2, one message naming ``facts``, no traceback, the store
    untouched) and return the message."""
    before = snapshot(store)
    code, err = kdgrid(*args, "--store", store)
    assert code == 2, err
    assert err.startswith("error: ") and err.count("error:") == 1, err
    assert "Traceback" not in err, err
    for fact in facts:
        assert fact in err, (fact, err)
    assert snapshot(store) == before
    return err


def sweep_file(tmp_path: Path, name: str = "sweep.yaml", **fixed: object) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"name": "faults", "fixed": {**BASE, **fixed}}))  # JSON is YAML
    return path


# --------------------------------------------------------------------------------------- files kdgrid reads


@pytest.mark.parametrize("command", ["plan", "run", "status"])
def test_a_binary_sweep_file_is_one_message(tmp_path: Path, command: str) -> None:
    sweep = tmp_path / "sweep.yaml"
    sweep.write_bytes(BINARY)
    refused(command, sweep, store=tmp_path / "store", facts=[str(sweep), "not a UTF-8 text file"])


def test_a_binary_trial_file_is_one_message(tmp_path: Path) -> None:
    config = tmp_path / "trial.yaml"
    config.write_bytes(BINARY)
    code, err = kdgrid("trial", config)
    assert code == 2 and err.count("error:") == 1 and "Traceback" not in err
    assert str(config) in err and "not a UTF-8 text file" in err


def local_task(
    tmp_path: Path,
    train: str | bytes = "text,label\ngood,1\nbad,0\n",
    dev: str = "text,label\nfine,1\n",
    **spec,
) -> Path:
    """A local task spec (CSV files beside it) with the given file contents; returns the spec's path."""
    folder = tmp_path / "task"
    folder.mkdir(exist_ok=True)
    for name, content in (("train.csv", train), ("dev.csv", dev)):
        (folder / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    path = folder / "task.yaml"
    fields = {
        "name": "faulty",
        "files": {"train": "train.csv", "validation": "dev.csv"},
        "text_columns": ["text"],
    }
    path.write_text(json.dumps({**fields, "type": "classification", "num_labels": 2, **spec}))
    return path


def test_a_binary_task_spec_and_a_binary_data_file_are_one_message(tmp_path: Path) -> None:
    spec = tmp_path / "binary-spec.yaml"
    spec.write_bytes(BINARY)
    refused("plan", sweep_file(tmp_path, task=str(spec)), store=tmp_path / "s", facts=[str(spec), "UTF-8"])
    task = local_task(tmp_path, train=BINARY)
    sweep = sweep_file(tmp_path, "data.yaml", task=str(task))
    refused("plan", sweep, store=tmp_path / "s", facts=["train.csv", "cannot be read as csv"])


@pytest.mark.parametrize(
    ("train", "dev", "facts"),
    [
        ("text,label\n", "text,label\nfine,1\n", ["split 'train'", "no examples"]),
        ("text,label\n\n\n", "text,label\nfine,1\n", ["split 'train'", "no examples"]),
        ("text,label\ngood,1\n", "text,label\n", ["split 'validation'", "no examples"]),
        ("text,label\ngood,1\nodd,7\n", "text,label\nfine,1\n", ["label '7'", "0..1"]),
    ],
    ids=["header-only-train", "blank-lines-train", "empty-dev", "label-out-of-range"],
)
@pytest.mark.parametrize("command", ["plan", "run"])
def test_local_task_data_that_cannot_train_is_refused_by_plan_and_run(
    tmp_path: Path, command: str, train: str, dev: str, facts: list[str]
) -> None:
    sweep = sweep_file(tmp_path, task=str(local_task(tmp_path, train, dev)), init="random")
    refused(command, sweep, store=tmp_path / "store", facts=[*facts, "faulty"])


def test_empty_training_data_is_an_error_never_a_trial(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no examples"):
        load_splits(local_task(tmp_path, train="text,label\n"))
    with pytest.raises(ConfigError, match="positive integer"):
        load_splits("synthetic-single-binary-n0")


# ------------------------------------------------------------------------------------ the store and options


@pytest.mark.parametrize("command", ["plan", "status", "run"])
def test_a_store_that_is_a_file_is_one_message(tmp_path: Path, command: str) -> None:
    store = tmp_path / "results"
    store.write_text("not a store")
    refused(command, sweep_file(tmp_path), store=store, facts=[str(store), "not a directory"])


def test_a_store_whose_rows_folder_is_a_file_is_one_message(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "rows").write_text("")
    refused("run", sweep_file(tmp_path), store=store, facts=["rows"])


@pytest.mark.parametrize(
    ("args", "facts"),
    [
        (["plan", "--max-group-size", "-1"], ["--max-group-size", "-1"]),
        (["run", "--max-group-size", "-1"], ["--max-group-size", "-1"]),
        (["resume", "--max-attempts", "-1"], ["--max-attempts", "-1"]),
    ],
)
def test_negative_limits_are_refused(tmp_path: Path, args: list[str], facts: list[str]) -> None:
    command, *options = args
    refused(command, sweep_file(tmp_path), *options, store=tmp_path / "store", facts=facts)


# ----------------------------------------------------------------------------------------------- YAML itself


def alias_bomb(path: Path) -> Path:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_an_alias_bomb_is_refused_in_well_under_a_second(tmp_path: Path) -> None:
    bomb = alias_bomb(tmp_path / "bomb.yaml")
    problems = Problems()
    start = time.perf_counter()
    assert load_yaml(bomb, problems) is None
    assert time.perf_counter() - start < 0.5
    assert f"more than {MAX_YAML_NODES:,} nodes" in problems.items[0]
    refused("plan", bomb, store=tmp_path / "store", facts=[str(bomb), "aliases"])


def test_a_self_referring_alias_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text("fixed: &loop {task: rte, more: [*loop]}\n")
    refused("plan", path, store=tmp_path / "store", facts=[str(path), "refers to a node that contains it"])


def test_a_yaml_syntax_error_keeps_its_diagnosis_and_file_name(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: broken\nfixed: {task: rte, teacher: bert-base\n")
    err = refused(
        "plan", path, store=tmp_path / "store", facts=[str(path), "line 3, column 1", "expected ','"]
    )
    assert "while parsing a flow mapping at line 2" in err


def test_markup_in_a_message_is_printed_literally(tmp_path: Path) -> None:
    sweep = sweep_file(tmp_path, student="[bold]x[/]y[/")
    refused("plan", sweep, store=tmp_path / "store", facts=["[bold]x[/]y[/"])


# --------------------------------------------------------------------- what plan checks, as run does, at once


@pytest.mark.parametrize(
    ("setting", "facts"),
    [
        ({"lr": 0.0}, ["lr=0.0"]),
        ({"lr": float("inf")}, ["lr=inf"]),
        ({"temperature": 0.0}, ["temperature=0.0", f">= {MIN_TEMPERATURE:g}"]),
        ({"temperature": 1e-30}, ["temperature=1e-30"]),
        ({"temperature": float("inf")}, ["temperature=inf"]),
        ({"temperature": float("nan")}, ["temperature=nan"]),
        ({"alpha": -0.1}, ["alpha=-0.1"]),
        ({"alpha": float("inf")}, ["alpha=inf"]),
        ({"warmup_ratio": 1.0}, ["warmup_ratio=1.0", "[0, 1)"]),
        ({"max_length": 1000}, ["max_length=1000", "512"]),
        ({"options": {"soft_t2": "banana"}}, ["soft_t2='banana'", "true or false"]),
        ({"options": {"sfot_t2": True}}, ["unknown option 'sfot_t2'", "soft_t2", "max_grad_norm"]),
        ({"options": {"max_grad_norm": -1}}, ["max_grad_norm=-1"]),
        (
            {"knowledge": "pkd", "strategy": "Last", "options": {"pkd.scale": "huge"}},
            ["pkd.scale='huge'", "sum, mean"],
        ),
        ({"options": {"pkd.scale": "mean"}}, ["'pkd.scale'", "does not use"]),
        # nothing projected (no knowledge term; or a student of the teacher's width): the trainer's terms rule
        ({"projection": "mlp"}, ["projection 'mlp' is never used", "leave it unset"]),
        ({**SAME_WIDTHS, "projection": "ensemble"}, ["projection 'ensemble' is never used", "same widths"]),
    ],
    ids=lambda value: json.dumps(value) if isinstance(value, dict) else None,
)
@pytest.mark.parametrize("command", ["plan", "run"])
def test_values_run_would_refuse_are_refused_by_plan(
    tmp_path: Path, command: str, setting: dict, facts: list[str]
) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"name": "faults", "fixed": {**BASE, **setting}}))  # YAML: .inf, .nan
    refused(command, path, store=tmp_path / "store", facts=facts)


def test_axis_values_equal_after_normalisation_are_refused_naming_both_spellings(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(
        json.dumps({"fixed": {**BASE, "knowledge": "hidden_mse"}, "axes": {"strategy": ["Last-1", "last-1"]}})
    )
    refused("plan", path, store=tmp_path / "store", facts=["'last-1' is the same value as 'Last-1'"])


def test_a_local_teacher_config_is_checked_against_the_task_and_max_length(
    tmp_path: Path, tiny_teacher: str
) -> None:
    three_classes = sweep_file(
        tmp_path, "labels.yaml", task="synthetic-single-3class", teacher=tiny_teacher, init="random"
    )
    refused("plan", three_classes, store=tmp_path / "store", facts=[tiny_teacher, "2 outputs", "needs 3"])
    teacher = shutil.copytree(tiny_teacher, tmp_path / "short-teacher")
    config = json.loads((teacher / "config.json").read_text())
    (teacher / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 64}))
    short = sweep_file(
        tmp_path, "short.yaml", task="synthetic-single-binary", teacher=str(teacher), init="random"
    )
    refused("plan", short, store=tmp_path / "store", facts=["max_length=128", "64 position embeddings"])


def test_a_run_refused_by_the_pre_flight_creates_no_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path / "empty-cache"))  # no fine-tuned teacher here
    sweep = sweep_file(tmp_path, task="synthetic-single-binary", teacher="minilm-l6", init="random")
    refused("run", sweep, store=tmp_path / "store", facts=["pre-flight", "minilm-l6"])


@pytest.mark.parametrize("args", [["tables", "all"], ["figures"]])
def test_tables_and_figures_refuse_a_store_that_is_a_file(tmp_path: Path, args: list[str]) -> None:
    store = tmp_path / "results"
    store.write_text("not a store")
    refused(*args, store=store, facts=[str(store), "not a directory"])
