"""`kdgrid prefetch SWEEP...`: download every model, tokenizer and dataset the sweeps need into the Hugging Face
cache (`kdgrid.prefetch`), with a progress bar and sizes; ``--check`` lists what is missing without the network.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from kdgrid.markup import plain

if TYPE_CHECKING:
    from kdgrid.prefetch import Download, HubClient, HubItem

# kdgrid.prefetch (and with it torch, through kdgrid.sweep_run and the core) is imported inside the command, so
# that `kdgrid --help` stays fast (see kdgrid/commands/sweep.py).

SweepsArg = Annotated[
    list[Path],
    typer.Argument(
        help="Sweep files (sweeps/*.yaml), or names of sweeps shipped with kdgrid (e.g. table5_single_match).",
        show_default=False,
    ),
]
CheckOpt = Annotated[
    bool,
    typer.Option(
        "--check",
        help="Only list what is missing from the caches (no network); exit status 1 if anything is.",
    ),
]


def _needs(sweeps: list[Path]) -> tuple[list[str], list[HubItem]]:
    """The sweeps' names and what their trials need from the Hub."""
    from kdgrid.prefetch import sweep_needs
    from kdgrid.sweep_plan import load_named_sweep

    loaded = [load_named_sweep(sweep) for sweep in sweeps]
    return [s.name for s in loaded], sweep_needs(p.trial for s in loaded for p in s.trials)


def _print_items(console: Console, items: list[HubItem], missing: list[HubItem], title: str) -> None:
    table = Table(title=title)
    table.add_column("kind")
    table.add_column("Hub id", no_wrap=True)
    table.add_column("what")
    table.add_column("needed by")
    table.add_column("cached")
    gone = set(missing)
    for item in items:
        what = item.config if item.kind == "dataset" else ("weights + tokenizer" if item.tokenizer else "weights")
        users = ", ".join(item.used_by[:3]) + (f" (+{len(item.used_by) - 3})" if len(item.used_by) > 3 else "")
        cached = "[red]missing[/]" if item in gone else "[green]yes[/]"
        table.add_row(item.kind, item.repo_id, what, users, cached)
    console.print(table)


def _download_all(console: Console, plan: list[Download], client: HubClient) -> None:
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

    from kdgrid.prefetch import fetch

    known = sum(d.size or 0 for d in plan)
    with Progress(
        TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeElapsedColumn(), console=console
    ) as progress:
        overall = progress.add_task(f"{len(plan)} item(s)", total=known or None)
        for download in plan:
            progress.update(overall, description=download.item.label)
            fetch(download, client)
            progress.advance(overall, download.size or 0)
        progress.update(overall, description=f"{len(plan)} item(s) downloaded")


def prefetch(sweeps: SweepsArg, check: CheckOpt = False) -> None:
    """Download every model, tokenizer and dataset the sweeps need into the Hugging Face cache (HF_HOME): the
    Hub teachers of their tasks, the checkpoints `pretrain` and `preload` students start from, and the GLUE
    configs. Once everything is there, `kdgrid run` runs its workers offline (HF_HUB_OFFLINE=1,
    HF_DATASETS_OFFLINE=1) instead of letting every job ask the Hub. --check lists what is missing without the
    network (exit status 1 if anything is).

    Example: kdgrid prefetch table5_single_match, then kdgrid prefetch table5_single_match --check"""
    from kdgrid.errors import KdgridError
    from kdgrid.prefetch import (
        format_size,
        hub_client,
        missing_items,
        plan_downloads,
        refuse_offline,
    )

    console = Console()
    names, items = _needs(sweeps)
    missing = missing_items(items)
    what = plain(", ".join(names))  # sweep names are user text: never markup
    if not items:
        console.print(f"{what}: nothing to fetch from the Hub (local or generated tasks and teachers)")
        return
    if check:
        _print_items(console, items, missing, f"what {what} needs from the Hub")
        console.print(f"{len(items) - len(missing)} of {len(items)} item(s) cached, {len(missing)} missing")
        if missing:
            command = plain(" ".join(names))
            console.print(f"fetch them with `kdgrid prefetch {command}` while online", highlight=False)
            raise typer.Exit(1)
        return
    if not missing:
        console.print(f"{what}: all {len(items)} item(s) are already in the cache")
        return
    refuse_offline()
    client = hub_client()
    plan = plan_downloads(missing, client)
    total = None if any(d.size is None for d in plan) else sum(d.size or 0 for d in plan)
    for download in plan:
        console.print(
            f"  {plain(download.item.label)}: {len(download.files)} file(s), {format_size(download.size)}",
            highlight=False,
        )
    console.print(f"downloading {len(plan)} of {len(items)} item(s), {format_size(total)} in all")
    _download_all(console, plan, client)
    still = missing_items(items)
    if still:
        raise KdgridError(
            "downloaded, but the cache still lacks: " + "; ".join(i.label for i in still)
            + " (is HF_HOME / HF_HUB_CACHE / HF_DATASETS_CACHE the same for this command and the workers?)"
        )
    console.print(f"{what}: all {len(items)} item(s) are in the cache; `kdgrid run` will run its workers offline")


def register(app: typer.Typer) -> None:
    app.command()(prefetch)
