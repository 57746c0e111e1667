"""The `kdgrid` command line: one Typer app; each area's commands live in `kdgrid.commands.<area>`.

Errors a user can act on (`KdgridError`) are printed as one message, without a traceback, with exit status 2.
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from kdgrid.commands import analysis, assets, core, prefetch, store, sweep
from kdgrid.errors import KdgridError

app = typer.Typer(
    name="kdgrid",
    help=(
        "Knowledge-distillation grids on transformers: write a grid as a sweep file, run it on local CPUs/GPUs,"
        " Ray Tune or SLURM, keep every result in a Parquet store, resume what is missing, and regenerate the"
        " tables of 'Knowledge Distillation of Transformer-based Language Models Revisited'."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode="rich",
)

for area in (sweep, prefetch, core, analysis, store, assets):
    area.register(app)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    try:
        app(args=argv, prog_name="kdgrid")
    except KdgridError as error:
        Console(stderr=True).print(f"[bold red]error:[/] {error}", highlight=False, soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
