"""How long planning a paper-sized sweep takes: ~30,000 trials expanded, validated, hashed and grouped into jobs.

    .venv/bin/python benchmarks/plan_big.py

The sweep: 8 GLUE tasks x 3 students x 41 knowledge settings (Table 5's 10 singles and Table 6's 31 pairs) x
5 strategies x 6 seeds = 29,520 trials, with the paper's per-task temperature and alpha (`extends`).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import yaml

from kdgrid.paper import PAPER_STRATEGIES, PAPER_STUDENTS

SWEEPS = Path(__file__).resolve().parents[1] / "sweeps"


def big_sweep(folder: Path) -> Path:
    """Write the benchmark sweep next to a copy of the paper's defaults; returns its path."""
    single = yaml.safe_load((SWEEPS / "table5_single_match.yaml").read_text())["axes"]["knowledge"]
    pairs = yaml.safe_load((SWEEPS / "table6_double_match.yaml").read_text())["axes"]["knowledge"]
    (folder / "_paper_defaults.yaml").write_text((SWEEPS / "_paper_defaults.yaml").read_text())
    spec = {
        "name": "big",
        "extends": "_paper_defaults.yaml",
        "axes": {
            "task": ["cola", "mrpc", "stsb", "rte", "qqp", "mnli", "sst2", "qnli"],
            "student": list(PAPER_STUDENTS),
            "knowledge": [[k] for k in single] + pairs,
            "strategy": list(PAPER_STRATEGIES),
            "seed": [0, 1, 2, 3, 4, 5],
        },
    }
    path = folder / "big.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def main() -> None:
    started = time.perf_counter()
    from kdgrid.grid import load_sweep, plan_jobs

    imported = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        path = big_sweep(Path(tmp))
        started = time.perf_counter()
        sweep = load_sweep(path)
        loaded = time.perf_counter() - started
        started = time.perf_counter()
        jobs = plan_jobs([p.trial for p in sweep.trials], max_group_size=25)
        planned = time.perf_counter() - started
    print(f"trials: {len(sweep.trials):,}, jobs: {len(jobs):,}")
    print(f"import kdgrid.grid: {imported:.2f} s (registries, torch, load on first validation)")
    print(f"load + validate + expand + hash: {loaded:.2f} s")
    print(f"plan into jobs: {planned:.2f} s")


if __name__ == "__main__":
    main()
