"""`kdgrid teacher ...` and `kdgrid trial`: the distillation core from the command line.

The core's training modules are imported inside the commands that run them: they load torch and transformers
(about 3.5 s), which `kdgrid --help` and every other command would otherwise pay.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kdgrid.errors import ConfigError
from kdgrid.trial import Trial

teacher_app = typer.Typer(
    help="Fine-tune and inspect task teachers (cached by content hash).", no_args_is_help=True
)


@teacher_app.command()
def finetune(
    task: Annotated[
        str, typer.Argument(help="A GLUE task (sst2, mnli, ...) or a local task (polarity, uncertainty).")
    ],
    base: Annotated[
        str, typer.Option(help="Base weights: a Hub name, a local directory or minilm-l6.")
    ] = "minilm-l6",
    epochs: Annotated[int, typer.Option(help="Training epochs.", min=1, max=1000)] = 3,
    lr: Annotated[float, typer.Option(help="Peak learning rate (AdamW, linear warm-up and decay).")] = 5e-5,
    batch_size: Annotated[int, typer.Option(help="Examples per batch.", min=1, max=65_536)] = 32,
    max_length: Annotated[
        int, typer.Option(help="Tokens per example, specials included.", min=8, max=512)
    ] = 128,
    max_train_samples: Annotated[
        int | None, typer.Option(help="Train on this many examples only (quick runs).", min=1, max=10**9)
    ] = None,
    seed: Annotated[
        int,
        typer.Option(help="Seeds the head's initialisation, dropout and data order.", min=0, max=2**32 - 1),
    ] = 0,
    min_margin: Annotated[
        float, typer.Option(help="The dev score must beat the majority class by more than this.")
    ] = 0.0,
    force: Annotated[bool, typer.Option(help="Fine-tune again even if the teacher is cached.")] = False,
) -> None:
    """Fine-tune a teacher on a task, evaluate it and cache it, so every trial reuses it.

    Trials naming the teacher `minilm-l6` use the teacher made with the default recipe; a teacher made with
    another recipe is used by naming its printed directory as the trial's teacher.

    Example: kdgrid teacher finetune sst2 --base bert-base-uncased --epochs 3
    """
    from kdgrid.core.teacher.finetune import (  # torch: see the module docstring
        TeacherRecipe,
        finetune_teacher,
    )

    console = Console(stderr=True)
    recipe = TeacherRecipe(
        lr=lr,
        epochs=epochs,
        batch_size=batch_size,
        max_length=max_length,
        seed=seed,
        max_train_samples=max_train_samples,
        min_margin=min_margin,
    )
    record = finetune_teacher(
        task, base, recipe, force=force, log=lambda m: console.print(m, markup=False, highlight=False)
    )
    typer.echo(json.dumps({"path": str(record.path), **record.info}, indent=1, sort_keys=True))


ORDERS_SHOWN = 6  # rows of the order table (MNLI: all 6)


@teacher_app.command()
def check(
    teacher: Annotated[
        str, typer.Argument(help="A Hub name (cached, or fetched), a local directory or minilm-l6.")
    ],
    task: Annotated[str, typer.Option(help="The classification task whose first dev set scores it.")],
    max_length: Annotated[
        int, typer.Option(help="Tokens per example, specials included.")
    ] = Trial.max_length,
    device: Annotated[str, typer.Option(help="auto (the GPU if any), cpu or cuda.")] = "auto",
) -> None:
    """Find the class order a teacher was trained with: every order of the task's labels scored on its dev set.

    Prints each order's accuracy, the order that fits and the line that declares it in a sweep file; exit
    status 1 when no order fits (an untrained teacher, or a dev sample too small to tell the best orders apart).

    Example: kdgrid teacher check ishan/bert-base-uncased-mnli --task mnli
    """
    from kdgrid.core.teacher.check import (  # torch: see the module docstring
        check_teacher_orders,
        verdict_lines,
    )

    result = check_teacher_orders(teacher, task, max_length=max_length, device=device)
    table = Table(title=f"{result.teacher} on {result.task} ({result.examples} {result.dev_set} examples)")
    table.add_column("teacher outputs read as")
    table.add_column("accuracy", justify="right")
    for order, accuracy in result.accuracies[:ORDERS_SHOWN]:
        mark = " (kdgrid's reading)" if order == result.resolved.order else ""
        table.add_row(Text(f"{result.resolved.labels_of(order)}{mark}"), f"{accuracy:.3f}")
    table.caption = f"majority class {result.majority:.3f}; the gate needs > {result.needed:.3f}"
    Console().print(table)
    for line in verdict_lines(result):
        typer.echo(line)
    if not result.fits:
        raise typer.Exit(1)


def read_trials(path: Path) -> list[Trial]:
    """Trials from a YAML/JSON file: one mapping, a list of mappings, or ``{"trials": [...]}``.

    Read, canonicalised and checked as a sweep file's trials are (`kdgrid.grid.expand.trial_from_settings`), so a
    trial run here has the id it has in a sweep; every problem of every trial is reported at once.
    """
    if not path.is_file():
        raise ConfigError(f"trial config {path} does not exist")
    from kdgrid.grid.expand import raise_problems, trial_from_settings  # here: `kdgrid --help` stays light
    from kdgrid.grid.spec import Problems, load_yaml

    problems = Problems()
    data = load_yaml(path, problems)  # the sweep files' reader: YAML (a superset of JSON), strict keys
    raise_problems(problems, path)
    if isinstance(data, dict) and "trials" in data:
        data = data["trials"]
    items = data if isinstance(data, list) else [data]
    trials = [
        trial_from_settings(item, problems, str(path), f"trial {index}") for index, item in enumerate(items)
    ]
    raise_problems(problems, path)
    if not trials:
        raise ConfigError(f"{path}: no trials")
    return [trial for trial in trials if trial is not None]


def result_row(result: Any) -> dict[str, Any]:
    """A `TrialResult` as a JSON-ready mapping (the trial's fields under ``trial``, plus its id)."""
    row = {f.name: getattr(result, f.name) for f in dataclasses.fields(result) if f.name != "trial"}
    row["layer_pairs"] = [list(pair) for pair in result.layer_pairs]
    return {"trial_id": result.trial.trial_id, "trial": result.trial.to_dict(), **row}


def _table(results: list[Any]) -> Any:
    table = Table(title="trial results")
    for column in ("trial", "student", "knowledge", "strategy", "status", "best", "last", "epoch", "seconds"):
        table.add_column(column, overflow="fold")
    for result in results:
        trial = result.trial

        def first(scores: dict[str, dict[str, float]]) -> str:
            if not scores:
                return "-"
            dev = next(iter(scores.values()))
            return ", ".join(f"{k}={v:.4f}" for k, v in dev.items())

        status = result.status if result.status == "done" else f"failed: {result.error_message}"
        cells = (
            trial.trial_id,
            trial.student,
            "+".join(trial.knowledge) or "-",
            trial.strategy or "-",
            status,
            first(result.scores),
            first(result.last_scores),
            str(result.best_epoch or "-"),
            f"{result.wall_time_s:.1f}" if result.wall_time_s is not None else "-",
        )
        table.add_row(*(Text(cell) for cell in cells))  # Text: an error message is never markup
    return table


def trial(
    config: Annotated[
        Path, typer.Argument(help="A YAML or JSON trial config (or a list of them: a small group).")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the result rows as JSON lines.")] = False,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "auto",
    checkpoint_dir: Annotated[
        Path | None, typer.Option(help="Save end-of-epoch checkpoints here; a rerun resumes from them.")
    ] = None,
    save_student: Annotated[
        Path | None, typer.Option(help="Save each finished student here, in <dir>/<trial id>/.")
    ] = None,
) -> None:
    """Run one trial (or a small group sharing one teacher pass) and print its result row.

    Example: kdgrid trial my-trial.yaml --device cpu --json"""
    from kdgrid.core.model.added_parts import save_deployed  # torch: see the module docstring
    from kdgrid.core.teacher.gate import TeacherGateRefused
    from kdgrid.core.training.train import run_job
    from kdgrid.preflight.jobs import check_job

    trials = read_trials(config)  # the static tier: trial files are checked as sweep files are
    check_job(trials)  # the local tier: the job against this machine

    def save(trial: Any, model: Any) -> None:
        if save_student is not None:
            save_deployed(model, save_student / trial.trial_id)

    results = run_job(trials, device=device, checkpoint_dir=checkpoint_dir, on_model=save)
    if as_json:
        for result in results:
            typer.echo(json.dumps(result_row(result), default=str, sort_keys=True))
    else:
        Console().print(_table(results))
    refused = next((r for r in results if r.error_type == TeacherGateRefused.__name__), None)
    if refused is not None:  # the teacher is unusable as configured: a user error, exit status 2
        raise TeacherGateRefused(refused.error_message or "", refused.extra.get("teacher_gate", {}))
    if any(r.status == "failed" for r in results):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(teacher_app, name="teacher")
    app.command()(trial)
