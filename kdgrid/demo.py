"""The offline demo study, end to end (`kdgrid demo`, README command 1).

Every step is the same code path a user takes by hand, and every step skips what is already done:
1. `kdgrid assets fetch`: the offline teacher and the polarity corpus;
2. `kdgrid teacher finetune polarity`: the MiniLM teacher fine-tuned on polarity (cached by content hash);
3. `kdgrid resume sweeps/demo.yaml`: the 52 trials of the demo, with the local executor (done trials never rerun);
4. `kdgrid tables demo` and `kdgrid figures`: the demo's table in the terminal, its figures under the store.
A second run trains nothing and prints the same table.
"""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.console import Console

from kdgrid.errors import ConfigError

DEMO_SWEEP = "demo.yaml"
DEMO_TASK = "polarity"


def demo_sweep_path() -> Path:
    """``sweeps/demo.yaml`` of the working directory, else of the checkout kdgrid is installed from."""
    for root in (Path.cwd(), Path(__file__).resolve().parents[1]):
        candidate = root / "sweeps" / DEMO_SWEEP
        if candidate.is_file():
            return candidate
    raise ConfigError(
        f"sweeps/{DEMO_SWEEP} not found in {Path.cwd()} nor beside the kdgrid package; "
        "run `kdgrid demo` from a kdgrid checkout"
    )


def run_demo(store: Path = Path("results"), *, sweep: Path | None = None, workers: int = 0) -> None:
    """Run every missing step of the demo and print its table; figures go to ``<store>/figures``."""
    from kdgrid import assets
    from kdgrid.commands.sweep import resume
    from kdgrid.core.teacher import finetune_teacher

    console = Console()
    started = time.time()
    sweep = sweep or demo_sweep_path()

    console.rule("[bold]1/4 offline assets")
    located = assets.fetch_all()
    console.print(f"teacher {located['teacher']}\npolarity {located['polarity']}")

    console.rule("[bold]2/4 the MiniLM teacher fine-tuned on polarity (cached)")
    with console.status("fine-tuning all-MiniLM-L6-v2 on polarity (about 3 minutes on 2 cores, once)"):
        teacher = finetune_teacher(DEMO_TASK, "minilm-l6", log=console.print)
    scores = teacher.dev_scores["validation"]
    console.print(
        f"teacher dev accuracy {scores['accuracy']:.4f} "
        f"(majority class {teacher.info['majority_baseline']['accuracy']:.4f}); {teacher.path}"
    )

    console.rule(f"[bold]3/4 {sweep.name}: the study, one teacher pass shared per job (local executor)")
    failed: typer.Exit | None = None
    settings = [f"local_workers={workers}"] if workers else None
    try:
        resume(sweep, store=store, settings=settings, max_attempts=2)
    except typer.Exit as exit_:  # a trial of this run failed: show the table all the same, then exit non-zero
        failed = exit_

    console.rule("[bold]4/4 the demo table")
    from analysis.figures import write_store_figures
    from analysis.tables_report import demo_table

    console.print(demo_table(store))
    figures = write_store_figures(store, store / "figures")
    console.print(f"{len(figures)} figure files in {store / 'figures'}")
    console.print(f"demo finished in {time.time() - started:.0f} s; rerun it and nothing is trained again.")
    if failed is not None:
        raise failed
