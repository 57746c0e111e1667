"""`kdgrid tables` and `kdgrid figures`: the paper's tables and figures from the results store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kdgrid.commands.common import not_yet

StoreOpt = Annotated[Path, typer.Option("--store", help="The results store.")]


def tables(
    table: Annotated[str, typer.Argument(help="Which table: 1-8, demo, or all.")] = "all",
    store: StoreOpt = Path("results"),
    fmt: Annotated[str, typer.Option("--format", help="terminal, markdown, latex or csv.")] = "terminal",
    compare: Annotated[
        str | None, typer.Option(help="Put the published numbers beside ours: `paper`.")
    ] = None,
) -> None:
    """Regenerate the paper's tables from the store (best value per block in bold)."""
    raise not_yet("tables", "analysis issue")


def figures(
    store: StoreOpt = Path("results"),
    out: Annotated[Path, typer.Option(help="Folder for the PNG and PDF files.")] = Path("results/figures"),
) -> None:
    """Heat maps of knowledge x strategy, temperature x hard-label weight, score vs size, ours vs published."""
    raise not_yet("figures", "analysis issue")


def register(app: typer.Typer) -> None:
    app.command()(tables)
    app.command()(figures)
