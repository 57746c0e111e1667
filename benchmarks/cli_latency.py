"""How long `kdgrid --help`, `kdgrid sweeps`, `kdgrid plan` and `kdgrid status` take from a fresh process, and what
importing torch and transformers alone costs (the part of a command's time a light command path should not pay).

    .venv/bin/python benchmarks/cli_latency.py [--sweep table5_single_match] [--repeats 3] [--json PATH]
        [--baseline DIR] [--only TEXT]

Each figure is the wall time of a fresh ``python -m kdgrid.cli ...`` (or ``python -c "import torch"``)
subprocess, the median of ``--repeats`` runs, against an empty store in a temporary folder (``status`` of a store
without rows reads no Parquet file; its time is the command's own). After each command the script also records
whether torch and transformers were imported (``-X importtime`` on one more run), so a figure can be read as
"imports" or "work". The machine's load is recorded beside the figures: on a busy shared machine they vary.

The commands run as an installed kdgrid runs: with Python's compiled-bytecode cache (``PYTHONDONTWRITEBYTECODE`` is
removed from their environment, else every start compiles each module from source again) and after one untimed
warm-up run of each command in each checkout (which writes that cache and ``kdgrid sweeps``' listing); ``--smoke``
skips the warm-up.

``--baseline DIR``: another checkout of kdgrid (e.g. ``git worktree add /tmp/before main``) timed in the same run
with the same interpreter, each repeat of a command run there and here in turn, so that a changing load falls on
both columns alike ("before" and "after" side by side). Its kdgrid is the one imported: a fresh process puts its
working directory first on ``sys.path``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _machine import ROOT, machine
from rich.console import Console
from rich.table import Table

HEAVY = ("torch", "transformers")
# an installed kdgrid starts from compiled bytecode: a shell that turns the cache off would time compilation
ENVIRONMENT = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def _run(argv: list[str], cwd: Path) -> float:
    """Wall seconds of ``argv`` in a fresh process in ``cwd`` (it must exit 0)."""
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=ENVIRONMENT)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(
            f"{' '.join(argv)} (in {cwd}) exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        )
    return seconds


def _summary(seconds: list[float]) -> dict[str, Any]:
    return {
        "median_s": round(statistics.median(seconds), 3),
        "min_s": round(min(seconds), 3),
        "runs": len(seconds),
    }


def timed(
    argv: list[str], repeats: int, baseline: Path | None = None, *, warm_up: bool = True
) -> dict[str, Any]:
    """Median / min wall seconds of ``argv`` run ``repeats`` times in fresh processes (each must exit 0); with
    ``baseline``, also in that checkout, in turn with each run here (its figures under ``baseline``). ``warm_up``:
    one untimed run in each checkout first (see the module)."""
    if warm_up:
        for cwd in (ROOT, *([baseline] if baseline is not None else [])):
            _run(argv, cwd)
    here, there = [], []
    for _ in range(repeats):
        if baseline is not None:
            there.append(_run(argv, baseline))
        here.append(_run(argv, ROOT))
    return {**_summary(here), **({"baseline": _summary(there)} if baseline is not None else {})}


def heavy_imports(argv: list[str]) -> dict[str, bool]:
    """Which of `HEAVY` the command ``argv`` (``python ...``) imports, from ``-X importtime``'s report."""
    done = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]], cwd=ROOT, capture_output=True, text=True, env=ENVIRONMENT
    )
    names = {
        line.rsplit("|", 1)[-1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    return {name: name in names for name in HEAVY}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", default="table5_single_match", help="a bundled sweep name or a sweep file")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--smoke", action="store_true", help="one run each, for the benchmarks' smoke test")
    parser.add_argument("--baseline", type=Path, help="another kdgrid checkout, timed side by side (before)")
    parser.add_argument("--only", default=None, help="time only the commands whose name contains this text")
    args = parser.parse_args()
    repeats = 1 if args.smoke else args.repeats
    python = sys.executable
    with tempfile.TemporaryDirectory() as folder:
        store = str(Path(folder) / "store")
        commands = {
            "python (interpreter start)": [python, "-c", "pass"],
            "import torch": [python, "-c", "import torch"],
            "import transformers": [python, "-c", "import transformers"],
            "import kdgrid.cli": [python, "-c", "import kdgrid.cli"],
            "kdgrid --help": [python, "-m", "kdgrid.cli", "--help"],
            "kdgrid sweeps": [python, "-m", "kdgrid.cli", "sweeps"],
            f"kdgrid plan {args.sweep}": [python, "-m", "kdgrid.cli", "plan", args.sweep, "--store", store],
            f"kdgrid status {args.sweep}": [
                python,
                "-m",
                "kdgrid.cli",
                "status",
                args.sweep,
                "--store",
                store,
            ],
        }
        if args.only:
            commands = {name: argv for name, argv in commands.items() if args.only in name}
        figures = {}
        for name, argv in commands.items():
            figures[name] = timed(argv, repeats, args.baseline, warm_up=not args.smoke)
            if name.startswith(("kdgrid", "import kdgrid")):
                figures[name]["imports"] = heavy_imports(argv)
    table = Table(title=f"wall time of a fresh process ({repeats} run(s), median)")
    table.add_column("command")
    if args.baseline is not None:
        table.add_column("baseline median s", justify="right")
    table.add_column("median s", justify="right")
    table.add_column("min s", justify="right")
    table.add_column("imports torch / transformers")
    for name, figure in figures.items():
        imports = figure.get("imports")
        shown = "" if imports is None else " / ".join("yes" if imports[h] else "no" for h in HEAVY)
        before = [f"{figure['baseline']['median_s']:.2f}"] if args.baseline is not None else []
        table.add_row(name, *before, f"{figure['median_s']:.2f}", f"{figure['min_s']:.2f}", shown)
    Console(width=110).print(table)  # a log or a pipe keeps whole rows
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "machine": machine(),
                    "sweep": args.sweep,
                    "baseline": None if args.baseline is None else str(args.baseline),
                    "figures": figures,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
