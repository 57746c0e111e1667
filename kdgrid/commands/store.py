"""`kdgrid store ...`: maintenance of the Parquet results store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kdgrid.commands.common import not_yet

store_app = typer.Typer(help="Maintain the results store (one Parquet file per trial).", no_args_is_help=True)


@store_app.command()
def compact(
    store: Annotated[Path, typer.Option("--store", help="The results store.")] = Path("results"),
) -> None:
    """Merge the store's many small per-trial files into a few large ones without losing a row."""
    raise not_yet("store compact", "sweeps issue")


def register(app: typer.Typer) -> None:
    app.add_typer(store_app, name="store")
