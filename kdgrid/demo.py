"""The offline demo study, end to end (`kdgrid demo`, README command 1).

Every step is the same code path a user takes by hand, and every step skips what is already done:
1. `kdgrid assets fetch`: the offline teacher and the text corpora (polarity, uncertainty);
2. `kdgrid teacher finetune polarity`: the MiniLM teacher fine-tuned on polarity (cached by content hash);
3. `kdgrid resume demo` (`kdgrid.sweep_run.run_sweep`): the 52 trials of the demo sweep shipped with kdgrid
   (``sweeps/demo.yaml``), with the local executor (done trials never rerun);
4. `kdgrid tables demo` and `kdgrid figures`: the demo's table in the terminal, its figures under the store.
A second run trains nothing and prints the same table.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from kdgrid import assets
from kdgrid.analysis.figures import write_store_figures
from kdgrid.analysis.tables_report import demo_table
from kdgrid.bundled_sweeps import bundled_sweep
from kdgrid.core.teacher.finetune import finetune_teacher
from kdgrid.errors import ConfigError
from kdgrid.markup import plain
from kdgrid.sweep_run import RunOptions, SweepRun, run_sweep

DEMO_SWEEP = "demo"
DEMO_TASK = "polarity"
# Attempts per trial: a trial that failed once is retried by the next `kdgrid demo`, not forever.
DEMO_MAX_ATTEMPTS = 2


def demo_sweep_path() -> Path:
    """The demo sweep shipped with kdgrid (`kdgrid.bundled_sweeps`).

    Raises:
        ConfigError: it is not installed (a checkout without the ``kdgrid/sweeps`` link).
    """
    path = bundled_sweep(DEMO_SWEEP)
    if path is None:
        raise ConfigError(
            f"the demo sweep {DEMO_SWEEP}.yaml is not installed with kdgrid; pass --sweep sweeps/demo.yaml"
        )
    return path


def run_demo(store: Path = Path("results"), *, sweep: Path | None = None, workers: int = 0) -> SweepRun:
    """Run every missing step of the demo and print its table; figures go to ``<store>/figures``.

    Returns:
        The run of the demo sweep: a trial that failed is in its ``failed_now`` (the table is printed all the
        same; `kdgrid demo` then exits 1).
    """
    console = Console()
    started = time.time()
    sweep = sweep or demo_sweep_path()

    console.rule("[bold]1/4 offline assets")
    located = assets.fetch_all()
    console.print(f"teacher {plain(located['teacher'])}\npolarity {plain(located['polarity'])}")

    console.rule("[bold]2/4 the MiniLM teacher fine-tuned on polarity (cached)")
    with console.status("fine-tuning all-MiniLM-L6-v2 on polarity (about 3 minutes on 2 cores, once)"):
        teacher = finetune_teacher(DEMO_TASK, "minilm-l6", log=console.print)
    scores = teacher.dev_scores["validation"]
    console.print(
        f"teacher dev accuracy {scores['accuracy']:.4f} "
        f"(majority class {teacher.info['majority_baseline']['accuracy']:.4f}); {teacher.path}"
    )

    console.rule(f"[bold]3/4 {sweep.name}: the study, one teacher pass shared per job (local executor)")
    options = RunOptions(
        executor_settings={"local_workers": workers} if workers else {}, max_attempts=DEMO_MAX_ATTEMPTS
    )
    # `out`, not `print`: a progress line holds "[study]", which rich would read as markup.
    outcome = run_sweep(sweep, store, options, log=lambda line: console.out(line, highlight=False))

    console.rule("[bold]4/4 the demo table")
    console.print(demo_table(store))
    figures = write_store_figures(store, store / "figures")
    console.print(f"{len(figures)} figure files in {plain(store / 'figures')}")
    console.print(f"demo finished in {time.time() - started:.0f} s; rerun it and nothing is trained again.")
    return outcome
