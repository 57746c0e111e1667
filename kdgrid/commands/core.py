"""`kdgrid teacher ...` and `kdgrid trial`: the distillation core from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kdgrid.commands.common import not_yet

teacher_app = typer.Typer(
    help="Fine-tune and inspect task teachers (cached by content hash).", no_args_is_help=True
)


@teacher_app.command()
def finetune(
    task: Annotated[str, typer.Argument(help="A GLUE task (sst2, mnli, ...) or a local task (polarity).")],
    base: Annotated[
        str, typer.Option(help="Base weights: a Hub name, a local directory or minilm-l6.")
    ] = "minilm-l6",
) -> None:
    """Fine-tune a teacher on a task, evaluate it and cache it, so every trial reuses it."""
    raise not_yet("teacher finetune", "distillation core issue")


def trial(
    config: Annotated[
        Path, typer.Argument(help="A YAML or JSON trial config (or a list of them: a small group).")
    ],
) -> None:
    """Run one trial (or a small group sharing one teacher pass) and print its result row."""
    raise not_yet("trial", "distillation core issue")


def register(app: typer.Typer) -> None:
    app.add_typer(teacher_app, name="teacher")
    app.command()(trial)
