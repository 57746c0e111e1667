"""How long reading a whole store takes: N rows as per-trial files, then after `compact`.

    .venv/bin/python benchmarks/store_read.py [--rows 30000] [--store DIR]

Rows are realistic (MNLI-shaped scores, a 3-epoch curve, loss terms) and written with `write_result`, as workers
write them. Prints the seconds to write, to read the loose files, to compact, and to read the compacted store.
Reading per-trial files costs 1-3 ms each (a Parquet footer per file), which is why `kdgrid run` compacts at the
end and `kdgrid status` reads only file names for done trials. Measured on the shared 2-core development machine
(load ~4) with 26,255 rows: names only 0.4 s; every column of the per-trial files 72 s; compact 70 s; every column
after compaction 0.42 s (0.13 s without the flattened score columns). Writing 30,000 rows with fsync takes minutes;
``--rows 3000`` gives the per-file figures quickly.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import tempfile
import time
from pathlib import Path

from kdgrid.result import TrialResult
from kdgrid.store import compact, read_store, write_result
from kdgrid.trial import Trial

KNOWLEDGE = ("attention_mse_sum", "hidden_mse", "mmd", "gram", "value_relation")


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--store", type=Path, default=None, help="default: a temporary folder")
    parser.add_argument("--writers", type=int, default=multiprocessing.cpu_count())
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = args.store or Path(tmp) / "store"
        started = time.perf_counter()
        bounds = [args.rows * w // args.writers for w in range(args.writers + 1)]
        with multiprocessing.get_context("spawn").Pool(args.writers) as pool:
            pool.starmap(write_range, [(str(store), a, b) for a, b in itertools.pairwise(bounds)])
        wrote = time.perf_counter() - started

        started = time.perf_counter()
        loose = read_store(store)
        read_loose = time.perf_counter() - started

        started = time.perf_counter()
        compact(store)
        compacted = time.perf_counter() - started

        started = time.perf_counter()
        frame = read_store(store)
        read_compacted = time.perf_counter() - started
        assert len(loose) == len(frame) == args.rows, (len(loose), len(frame))
        print(f"rows: {args.rows:,} ({len(frame.columns)} columns)")
        print(f"write ({args.writers} writers, one file per row): {wrote:.1f} s")
        print(f"read_store, {args.rows:,} per-trial files: {read_loose:.1f} s")
        print(f"compact: {compacted:.1f} s")
        print(f"read_store after compact: {read_compacted:.2f} s")


if __name__ == "__main__":
    main()
