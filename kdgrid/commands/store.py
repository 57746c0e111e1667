"""`kdgrid store ...`: maintenance of the Parquet results store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kdgrid.errors import ConfigError

# The store modules import pyarrow (about 0.3 s): imported inside the commands so that `kdgrid --help` stays fast.

store_app = typer.Typer(help="Maintain the results store (one Parquet file per trial).", no_args_is_help=True)

STORE_OPTION = typer.Option("--store", help="The results store.")


def _existing_store(store: Path) -> Path:
    if not store.is_dir():
        raise ConfigError(f"--store {store}: no such store directory")
    return store


@store_app.command()
def compact(
    store: Annotated[Path, STORE_OPTION] = Path("results"),
    target_rows: Annotated[int, typer.Option(help="Rows per merged file (at least 1).")] = 100_000,
) -> None:
    """Merge the store's many small per-trial files into a few large ones without losing a row: a file is
    deleted only after its rows are written, synced and read back from a merged file. Safe while trials are
    running and writing, and safe to interrupt: run it again to finish."""
    from kdgrid.store.compact import check_target_rows
    from kdgrid.store.compact import compact as compact_store

    check_target_rows(target_rows, name="--target-rows")
    report = compact_store(_existing_store(store), target_rows=target_rows)
    typer.echo(
        f"{store}: merged {report.files_merged} file(s) holding {report.rows} row(s) into "
        f"{report.parts_written} part(s); removed {report.stale_tmp_removed} stale temporary file(s)"
    )


@store_app.command()
def forget(
    trial_ids: Annotated[list[str] | None, typer.Argument(help="Ids of the trials to forget.")] = None,
    sweep: Annotated[
        str | None,
        typer.Option(
            help="Forget every trial with a row of this sweep (with trial ids: they must be of it)."
        ),
    ] = None,
    store: Annotated[Path, STORE_OPTION] = Path("results"),
) -> None:
    """Remove every row of some trials, loose or compacted, so that `kdgrid resume` trains them again. Every
    other row stays; the forgotten rows are kept in <store>/_forgotten/ (move that file into <store>/compacted/
    to undo). Forget trials that are not running."""
    from kdgrid.store.forget import forget as forget_trials

    report = forget_trials(_existing_store(store), trial_ids or (), sweep=sweep)
    typer.echo(
        f"{store}: forgot {len(report.trials)} trial(s), {report.rows} row(s) ({report.loose_files} loose "
        f"file(s), {report.parts_rewritten} compacted part(s) rewritten); the rows are kept in {report.kept_in}"
    )


def register(app: typer.Typer) -> None:
    app.add_typer(store_app, name="store")
