"""The paper's sweeps (Tables 1-8, ``sweeps/table*.yaml``) sliced to a few trials on tiny subsets, for running
through the Hub-shaped fixture, and the cells of each table those trials fill.

A slice is the sweep file itself with fewer values on its axes (each a subset of the file's own values), its
overrides and studies untouched, and `QUICK` settings added to ``fixed`` (one epoch on 16 examples): written
beside a copy of ``_paper_defaults.yaml`` under the sweep's own name, so `kdgrid.sweep_run.run_sweep` runs it and
`analysis` lays its rows out in the sweep's table. Together the slices use all 8 GLUE tasks and both teachers.

Three things differ from the paper's files, because of the fixture:
- Table 1's pre-load students copy whole teacher layers, so their width is the teacher's: 768 in the sweep, the
  fixture's BERT-base width here (`PRELOAD_STUDENTS`).
- Tables 1 and 2 start ``general_distillation`` trials from the checkpoint of the ``paper`` pre-training recipe
  (``init_recipe``) of each student: `write_general_distillation_checkpoints` publishes a random BERT of each such
  student's shape as that recipe's artifact in kdgrid's (temporary) cache, a stand-in for the real-scale
  ``kdgrid pretrain`` run (a hand-made ``init_from`` folder gets the same stand-in, relative to the working
  directory).
- MNLI with the BERT-base teacher declares the legacy class order (`MNLI_BASE_ORDER`), as the teacher gate's
  message tells a user to.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import yaml
from transformers import BertForPreTraining

from kdgrid.core.model.models import bert_config
from kdgrid.core.model.shapes import student_shape
from kdgrid.core.pretrained import artifacts
from kdgrid.core.pretrained.artifacts import GENERAL_DISTILLATION_INFO
from kdgrid.core.pretrained.needed import recipe_for_trial
from kdgrid.grid import Sweep
from kdgrid.grid.spec import Problems, load_yaml
from tests.hub.hub_cache import BASE_TEACHER_SHAPE

SWEEPS_DIR = Path(__file__).resolve().parents[2] / "sweeps"
DEFAULTS_FILE = "_paper_defaults.yaml"
QUICK = {"epochs": 1, "max_train_samples": 16, "batch_size": 8, "max_length": 32}
# The fixture's ishan MNLI teacher has the legacy class order (unconfirmed for the real one): the teacher gate
# refuses it until the order is declared, as a user does after reading the gate's message.
MNLI_BASE_ORDER = {
    "when": {"task": "mnli", "teacher": "bert-base"},
    "set": {"options": {"teacher_label_order": ["contradiction", "entailment", "neutral"]}},
}


def _preload_student(layers: int) -> str:
    shape = BASE_TEACHER_SHAPE
    return f"w{shape['width']}-l{layers}-h{shape['heads']}-f{shape['ffn']}"


# The sweep's pre-load student (BERT-base's width) -> the same depth at the fixture BERT-base's width.
PRELOAD_STUDENTS = {
    "w768-l2-h12-f3072": _preload_student(2),
    "w768-l4-h12-f3072": _preload_student(4),
}


@dataclass(frozen=True)
class Cell:
    """A cell of a laid-out table (`kdgrid.analysis.tables.Block.cell`): block title, row label, column label and
    group."""

    block: str
    row: str
    column: str
    group: str = ""


@dataclass(frozen=True)
class Slice:
    """How one paper sweep is sliced and which cells of its table its trials fill.

    Attributes:
        file: the sweep file under ``sweeps/``.
        table: the table it produces (``kdgrid tables N``).
        axes: axis -> the values kept (each one of the file's own).
        study_axes: study -> axis -> the values kept, for a sweep of several studies.
        cells: cells of the table that the slice's done trials fill.
    """

    file: str
    table: str
    axes: dict[str, list[Any]]
    cells: tuple[Cell, ...]
    study_axes: dict[str, dict[str, list[Any]]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return Path(self.file).stem


def _grid(blocks: list[str], rows: list[str], columns: list[tuple[str, str]]) -> tuple[Cell, ...]:
    return tuple(Cell(b, r, c, g) for b in blocks for r in rows for c, g in columns)


MNLI_ROWS = ["MNLI-m", "MNLI-mm"]
SLICES: dict[str, Slice] = {
    s.name: s
    for s in (
        Slice(
            "table1_init.yaml",
            "1",
            {"task": ["cola", "mnli"], "student": ["bert-tiny"]},
            _grid(
                [""],
                ["CoLA", *MNLI_ROWS],
                [
                    ("Random", "bert-tiny"),
                    ("Pre-train", "bert-tiny"),
                    ("General Distillation", "bert-tiny"),
                    ("Pre-load", PRELOAD_STUDENTS["w768-l2-h12-f3072"]),
                ],
            ),
        ),
        Slice(
            "table2_width_depth.yaml",
            "2",
            {"task": ["sst2"]},
            (
                Cell("#para ≈ 6.2M", "w176-l2", "SST-2"),
                Cell("#para ≈ 6.2M", "w176-l2", "latency (ms)"),
                Cell("flops = 2G", "w170-l5", "SST-2"),
            ),
            study_axes={"fixed_params": {"student": ["w176-l2"]}, "fixed_flops": {"student": ["w170-l5"]}},
        ),
        Slice(
            "table3_teacher.yaml",
            "3",
            {"task": ["stsb", "rte"], "student": ["bert-tiny"]},
            _grid(
                [""],
                ["STS-B", "RTE"],
                [(t, g) for g in ("teacher", "bert-tiny") for t in ("bert-base", "bert-large")],
            ),
        ),
        Slice(
            "table4_temperature.yaml",
            "4",
            {"task": ["mrpc"], "temperature": [1, 8], "alpha": [0.1, 5]},
            _grid(["MRPC"], ["0.1", "5"], [("1", ""), ("8", "")]),
        ),
        Slice(
            "table5_single_match.yaml",
            "5",
            {
                "task": ["qqp"],
                "student": ["bert-tiny"],
                "knowledge": ["attention_ce_mean", "hidden_mse"],
                "strategy": ["Last", "First-1"],
            },
            _grid(["QQP · bert-tiny"], ["attention_ce_mean", "hidden_mse"], [("Last", ""), ("First-1", "")]),
        ),
        Slice(
            "table6_double_match.yaml",
            "6",
            {
                "task": ["rte"],
                "student": ["bert-tiny"],
                "knowledge": [["attention_ce_mean", "cos"], ["gram", "key_relation"]],
                "strategy": ["Dilatation"],
            },
            _grid(["RTE · bert-tiny"], ["attention_ce_mean,cos", "gram,key_relation"], [("Dilatation", "")]),
        ),
        Slice(
            "table7_best_practice.yaml",
            "7",
            {
                "task": ["qnli"],
                "knowledge": [["query_relation"], ["attention_ce_mean", "value_relation"]],
                "strategy": ["Last-1"],
                "lr": [1.0e-4],
            },
            _grid([""], ["ours (bert-mini)", "bert-base (teacher)"], [("QNLI", "")]),
        ),
        Slice(
            "table8_weighted.yaml",
            "8",
            {"task": ["stsb"], "student": ["bert-tiny"], "knowledge": ["pkd", "mmd"], "strategy": ["Last-1"]},
            _grid(["STS-B · bert-tiny"], ["pkd", "mmd"], [("Last-1", "")]),
        ),
    )
}


def _keep(axes: dict[str, Any], kept: dict[str, list[Any]], where: str) -> None:
    for axis, values in kept.items():
        assert all(v in axes[axis] for v in values), f"{where}: {values} not all among {axes[axis]}"
        axes[axis] = values


def write_sliced_sweep(piece: Slice, folder: Path) -> Path:
    """Write ``piece``'s sliced sweep file (and the defaults it extends) into ``folder``; returns its path."""
    problems = Problems()
    data = load_yaml(SWEEPS_DIR / piece.file, problems)
    assert not problems, problems.items
    _keep(data["axes"], piece.axes, piece.file)
    for study, kept in piece.study_axes.items():
        _keep(data["studies"][study]["axes"], kept, f"{piece.file}: study {study}")
    data["fixed"] = {**data.get("fixed", {}), **QUICK}
    for override in data.get("overrides", []):
        student = override["set"].get("student")
        if student in PRELOAD_STUDENTS:
            override["set"]["student"] = PRELOAD_STUDENTS[student]
    data["overrides"] = [*data.get("overrides", []), MNLI_BASE_ORDER]
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SWEEPS_DIR / DEFAULTS_FILE, folder / DEFAULTS_FILE)
    path = folder / piece.file
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


def write_general_distillation_checkpoints(sweep: Sweep, working_dir: Path) -> list[Path]:
    """For every ``general_distillation`` trial of ``sweep``, a random BERT of its student's shape
    (``save_pretrained`` of `BertForPreTraining`, as a general-distillation run leaves it): published as the
    artifact of its ``init_recipe`` in ``$KDGRID_CACHE``, or saved where its ``init_from`` points, relative to
    ``working_dir``, with a `GENERAL_DISTILLATION_INFO` note; returns the folders."""
    folders = []
    for planned in sweep.trials:
        trial = planned.trial
        use = recipe_for_trial(trial)
        if trial.init != "general_distillation" or (trial.init_from is None and use is None):
            continue
        folder = artifacts.artifact_dir(use.recipe) if use is not None else working_dir / trial.init_from
        if folder.is_dir():
            continue
        torch.manual_seed(len(folders))
        model = BertForPreTraining(bert_config(student_shape(trial.student), num_labels=2))
        if use is not None:
            artifacts.publish(
                use.recipe, model.save_pretrained, steps_done=0, made_by="tests.hub.paper_sweeps"
            )
        else:
            model.save_pretrained(folder)
            (folder / GENERAL_DISTILLATION_INFO).write_text(json.dumps({"made_by": "tests.hub.paper_sweeps"}))
        folders.append(folder)
    return folders
