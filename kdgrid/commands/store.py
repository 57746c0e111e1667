"""`kdgrid store ...`: maintenance of the Parquet results store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

store_app = typer.Typer(help="Maintain the results store (one Parquet file per trial).", no_args_is_help=True)


@store_app.command()
def compact(
    store: Annotated[Path, typer.Option("--store", help="The results store.")] = Path("results"),
    target_rows: Annotated[int, typer.Option(help="Rows per merged file.")] = 100_000,
) -> None:
    """Merge the store's many small per-trial files into a few large ones without losing a row. Safe while
    trials are running and writing, and safe to interrupt: run it again to finish."""
    from kdgrid.errors import ConfigError
    from kdgrid.store import compact as compact_store

    if not store.is_dir():
        raise ConfigError(f"--store {store}: no such store directory")
    report = compact_store(store, target_rows=target_rows)
    typer.echo(
        f"{store}: merged {report.files_merged} file(s) holding {report.rows} row(s) into "
        f"{report.parts_written} part(s); removed {report.stale_tmp_removed} stale temporary file(s)"
    )


def register(app: typer.Typer) -> None:
    app.add_typer(store_app, name="store")
