"""How long reading a results store takes: N rows as per-trial files (cold, then with the read cache, then
with new files arriving as during a run), then after `compact`.

    .venv/bin/python benchmarks/store_read.py [--quick | --smoke] [--json PATH] [--rows 26000] [--store DIR]

Rows are realistic (MNLI-shaped scores, a 3-epoch curve, loss terms) and written with `write_result`, as workers
write them (one Parquet file each, fsync'd: 26,000 take ~4 min on 2 cores; ``--store DIR`` keeps them for the
next run). The store is copied to a temporary folder and every measurement runs there, each read in a fresh
process (its own peak RSS, pyarrow's thread pools set to ``--threads``):

- ``names``: trial ids and statuses (what a job checks before running): file names only, no file opened;
- ``status``: the columns `kdgrid status` / `run` read (`kdgrid.grid.state`): failed rows and a 1/16 sample
  of done rows opened, the rest from names; ``cold`` without a read cache, ``warm`` with one;
- ``all columns``: `read_store`, as `kdgrid tables` reads it (with the flattened score columns); ``cold``: no
  read cache (every file decoded; the read fills the cache), ``warm``: the cache of the cold read,
  ``+ arrivals``: the same after ``--arrivals`` new files were written (a reader during a run);
- ``compact`` (its inputs from the read cache), then ``all columns`` of the compacted store.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from kdgrid.result import TrialResult
from kdgrid.store import write_result
from kdgrid.trial import Trial

KNOWLEDGE = ("attention_mse_sum", "hidden_mse", "mmd", "gram", "value_relation")
RESULT_PREFIX = "BENCH-RESULT "  # as `_common.RESULT_PREFIX` (not imported here: it imports torch)
MODES = ("names", "status", "all")


def result(index: int) -> TrialResult:
    trial = Trial(
        task="mnli", teacher="bert-base", student="bert-mini", knowledge=(KNOWLEDGE[index % 5],),
        strategy="Last-1", seed=index,
    )  # fmt: skip
    scores = {
        "validation_matched": {"accuracy": 0.7 + index % 100 / 1000},
        "validation_mismatched": {"accuracy": 0.7},
    }
    curve = [
        {"epoch": e, "scores": scores, "loss_terms": {"soft": 1.0 / e, "hard": 0.5 / e}} for e in (1, 2, 3)
    ]
    return TrialResult(
        trial=trial, status="done", scores=scores, last_scores=scores, best_epoch=3, curve=curve,
        loss_terms={"soft": 0.3, "hard": 0.2, f"{trial.knowledge[0]}@4-12": 0.05}, layer_pairs=[(4, 12)],
        wall_time_s=600.0, device="cuda:0", started_at="2026-01-01T00:00:00+00:00", ended_at="2026-01-01T00:10:00+00:00",
    )  # fmt: skip


def write_range(store: str, start: int, stop: int) -> None:
    for index in range(start, stop):
        write_result(store, result(index), sweep="bench", study="main")


def write_rows(store: Path, start: int, stop: int, writers: int) -> float:
    """Write rows ``start..stop`` with ``writers`` processes; returns the seconds it took."""
    started = time.perf_counter()
    bounds = [start + (stop - start) * w // writers for w in range(writers + 1)]
    with multiprocessing.get_context("spawn").Pool(writers) as pool:
        pool.starmap(write_range, [(str(store), a, b) for a, b in itertools.pairwise(bounds)])
    return time.perf_counter() - started


def peak_rss_mb() -> float:
    """This process's peak resident set size in MiB: ``VmHWM``, of this program alone (``ru_maxrss`` would
    also count the parent's pages this process had before ``exec``)."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(mode: str, store: str, threads: int) -> None:
    """One measured read (or compaction) in this fresh process; prints its figures as one JSON line."""
    import pyarrow as pa

    if threads:
        pa.set_cpu_count(threads)
        pa.set_io_thread_count(threads)
    from kdgrid.store import compact, layout, read_store, read_table

    started = time.perf_counter()
    if mode == "names":
        rows = read_table(store, ["trial_id", "status"]).num_rows
    elif mode == "status":
        from kdgrid.grid.state import STATE_COLUMNS, _open_for_state

        loose = len(layout.visible_files(layout.rows_dir(Path(store))))
        opener = _open_for_state(loose)
        rows = len(read_store(store, STATE_COLUMNS, flatten_scores=False, open_row_file=opener))
    elif mode == "all":
        rows = len(read_store(store))
    elif mode == "compact":
        rows = compact(store).rows
    else:
        raise ValueError(f"unknown mode {mode!r}; known: {', '.join((*MODES, 'compact'))}")
    seconds = time.perf_counter() - started
    peak = peak_rss_mb()
    print(RESULT_PREFIX + json.dumps({"s": round(seconds, 3), "rows": rows, "peak_rss_mb": round(peak, 1)}))


def measure(label: str, mode: str, store: Path, threads: int, figures: dict[str, Any]) -> dict[str, Any]:
    from _common import run_worker

    got = run_worker(Path(__file__), ["--worker", mode, "--store", str(store), "--threads", str(threads)])
    got.pop("process_wall_s", None)
    figures[label] = got
    print(
        f"  {label}: {got['s']:.2f} s ({got['rows']:,} rows, peak RSS {got['peak_rss_mb']:.0f} MiB)",
        flush=True,
    )
    return got


def print_table(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    config = report["config"]
    table = Table(
        title=f"store_read: {config['rows']:,} rows as per-trial files, pyarrow threads {config['threads'] or 'default'}"
    )
    for column in ("read", "seconds", "rows", "peak RSS (MiB)", "vs all columns, cold"):
        table.add_column(column, justify="right")
    cold = report["reads"]["all columns, cold"]["s"]
    for label, figures in report["reads"].items():
        ratio = f"{cold / figures['s']:.1f}x" if label.startswith("all columns") else ""
        table.add_row(
            label, f"{figures['s']:.2f}", f"{figures['rows']:,}", f"{figures['peak_rss_mb']:.0f}", ratio
        )
    Console(width=140).print(table)
    print(f"writing {config['rows']:,} rows ({config['writers']} writers, fsync each): {report['write_s']}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="2,000 rows, 50 arrivals")
    parser.add_argument("--smoke", action="store_true", help="200 rows, 10 arrivals (tests)")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--rows", type=int, default=26_000)
    parser.add_argument("--arrivals", type=int, default=260, help="files written between two warm reads")
    parser.add_argument(
        "--store", type=Path, default=None, help="per-trial files to reuse (copied, never changed)"
    )
    parser.add_argument("--writers", type=int, default=multiprocessing.cpu_count())
    parser.add_argument("--threads", type=int, default=1, help="pyarrow threads (0: pyarrow default)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, str(args.store), args.threads)
        return
    if args.smoke:
        args.rows, args.arrivals = 200, 10
    elif args.quick:
        args.rows, args.arrivals = 2_000, 50
    from _common import machine, write_json

    from kdgrid.store import layout

    config = {"rows": args.rows, "arrivals": args.arrivals, "threads": args.threads, "writers": args.writers}
    report: dict[str, Any] = {"config": config, "machine": machine(), "reads": {}}
    with tempfile.TemporaryDirectory() as tmp:
        source = args.store or Path(tmp) / "source"
        have = len(layout.visible_names(layout.rows_dir(source)))
        if have not in (0, args.rows):
            raise SystemExit(f"--store {source} holds {have:,} per-trial files, not --rows {args.rows:,}")
        report["write_s"] = "reused" if have else round(write_rows(source, 0, args.rows, args.writers), 1)
        store = Path(tmp) / "store"
        shutil.copytree(layout.rows_dir(source), layout.rows_dir(store))  # only rows/: no cache, no parts
        reads = report["reads"]
        print(f"{args.rows:,} per-trial files in {store}", flush=True)
        measure("names only", "names", store, args.threads, reads)
        measure("status, cold", "status", store, args.threads, reads)
        measure("all columns, cold", "all", store, args.threads, reads)
        measure("all columns, warm", "all", store, args.threads, reads)
        measure("status, warm", "status", store, args.threads, reads)
        write_rows(store, args.rows, args.rows + args.arrivals, args.writers)
        measure(f"all columns, warm + {args.arrivals} arrivals", "all", store, args.threads, reads)
        measure("compact", "compact", store, args.threads, reads)
        measure("all columns, compacted", "all", store, args.threads, reads)
    later = ("arrivals", "compact")  # the reads (and the compaction) after the arrivals were written
    for label, figures in reads.items():  # every read saw every row exactly once
        expected = args.rows + (args.arrivals if any(word in label for word in later) else 0)
        assert figures["rows"] == expected, (label, figures["rows"], expected)
    cold = reads["all columns, cold"]["s"]
    report["cold_over_warm"] = round(cold / reads["all columns, warm"]["s"], 1)
    report["cold_over_warm_with_arrivals"] = round(
        cold / reads[f"all columns, warm + {args.arrivals} arrivals"]["s"], 1
    )
    print_table(report)
    write_json(args.json, report)


if __name__ == "__main__":
    main()
