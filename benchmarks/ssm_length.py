"""SSM against Transformer students at inference, as the sequence grows: time and memory of one forward pass at
lengths 64 ... 2,048, the two side by side, and their ratios.

    .venv/bin/python benchmarks/ssm_length.py [--quick | --smoke] [--device cpu|cuda] [--json PATH]

The students: the SSM student of MiniLM-L6's shape (``ssm-l6-h384-a12``: 6 bidirectional SSD blocks, 12 mixing
heads, state 32, the scan in chunks of 64 tokens; `kdgrid.core.model.ssm`) and the BERT of the same shape
(``w384-l6-h12-f1536``, eager attention as kdgrid builds its students on the CPU), both randomly initialised, in
eval mode without gradients, their position embeddings extended to the longest length (BERT's are 512 long).
Each (student, length) runs in a fresh process (`_common.run_worker`): a warm-up pass, then ``--repeats`` timed
passes of one batch of random token ids, all real (no padding); each time is reported as the median and the
fastest of the passes, and the time ratio is that of the fastest (the least disturbed pass on a shared machine;
the ratio of the medians is beside it), and the median CPU time of the passes (this process's, one thread: on a
shared machine the steadier figure). Memory: the peak growth of the process's resident set over its size
before the first pass (the peak, ``VmHWM``, reset through ``/proc/self/clear_refs``; Linux counts resident pages
in batches, so figures under a megabyte are noise; on CUDA the allocator's peak over what the model holds).
Ratios are SSM / Transformer: below 1 the SSM is cheaper. The crossover is the first length from which the SSM
stays faster (by CPU time, by wall time, and for memory).

Defaults: batch 1, lengths 64, 128, 256, 512, 1,024, 2,048, 3 timed passes; ``--quick``: 64, 256, 1,024, 2,048
and 2 passes; ``--smoke``: one-layer, 32-wide students at 64 and 128 tokens, 1 pass.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from _common import machine, run_worker, write_json

MODES: dict[str, dict[str, Any]] = {
    "full": {"students": ("ssm-l6-h384-a12", "w384-l6-h12-f1536"), "lengths": (64, 128, 256, 512, 1024, 2048),
             "repeats": 3},
    "quick": {"students": ("ssm-l6-h384-a12", "w384-l6-h12-f1536"), "lengths": (64, 256, 1024, 2048),
              "repeats": 2},
    "smoke": {"students": ("ssm-l1-h32-a2", "w32-l1-h2-f64"), "lengths": (64, 128), "repeats": 1},
}  # fmt: skip
KINDS = ("ssm", "transformer")
VOCAB = 30522


def _status_kb(field: str) -> int:
    """A ``/proc/self/status`` figure in KiB (``VmRSS``, ``VmHWM``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _reset_peak() -> bool:
    """Reset the process's peak resident set (``VmHWM``) to its current size; False where the kernel refuses."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def build(student: str, length: int) -> torch.nn.Module:
    from kdgrid.core.model.shapes import SSMShape, student_shape

    shape = student_shape(student)
    positions = max(length, 512)
    torch.manual_seed(0)
    if isinstance(shape, SSMShape):
        from kdgrid.core.model.ssm.model import SSMConfig, SSMForSequenceClassification

        return SSMForSequenceClassification(SSMConfig(shape, 2, VOCAB, max_positions=positions))
    from transformers import BertForSequenceClassification

    from kdgrid.core.model.models import bert_config

    config = bert_config(shape, 2)
    config.max_position_embeddings = positions
    return BertForSequenceClassification(config)


def worker(student: str, length: int, batch: int, repeats: int, device: str) -> dict[str, Any]:
    on = torch.device(device)
    model = build(student, length).eval().to(on)
    ids = torch.randint(1000, 20000, (batch, length), generator=torch.Generator().manual_seed(0)).to(on)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    cuda = on.type == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(on)

    times: list[float] = []
    cpu_times: list[float] = []
    with torch.no_grad():
        # The peak is taken from before the warm-up pass: the allocator keeps what a pass freed, so the passes
        # after the first would reuse it and show no growth.
        if cuda:
            held = torch.cuda.memory_allocated(on)
            torch.cuda.reset_peak_memory_stats(on)
        reset = _reset_peak()
        before_kb = _status_kb("VmRSS")
        model(**inputs)  # warm-up: lazy initialisation, the allocator's first requests
        sync()
        for _ in range(repeats):
            started, cpu_started = time.perf_counter(), time.process_time()
            model(**inputs)
            sync()
            times.append(time.perf_counter() - started)
            cpu_times.append(time.process_time() - cpu_started)
    if cuda:
        memory_mb = (torch.cuda.max_memory_allocated(on) - held) / 2**20
    else:
        memory_mb = (_status_kb("VmHWM") - before_kb) / 1024 if reset else float("nan")
    return {
        "student": student,
        "length": length,
        "ms": round(1000 * statistics.median(times), 3),
        "min_ms": round(1000 * min(times), 3),
        "cpu_ms": round(1000 * statistics.median(cpu_times), 3),
        "memory_mb": round(memory_mb, 2),
        "params": sum(p.numel() for p in model.parameters()),
        "threads": torch.get_num_threads(),
    }


def run(mode: str, batch: int, device: str, threads: int, repeats: int | None) -> dict[str, Any]:
    settings = MODES[mode]
    repeats = repeats or settings["repeats"]
    rows: dict[str, dict[str, dict[str, Any]]] = {kind: {} for kind in KINDS}
    for length in settings["lengths"]:
        for kind, student in zip(KINDS, settings["students"], strict=True):
            args = ["--worker", student, "--length", str(length), "--batch-size", str(batch),
                    "--repeats", str(repeats), "--device", device, "--threads", str(threads)]  # fmt: skip
            rows[kind][str(length)] = run_worker(Path(__file__), args)
    return {
        "config": {"mode": mode, "students": dict(zip(KINDS, settings["students"], strict=True)), "batch": batch,
                   "lengths": list(settings["lengths"]), "repeats": repeats, "device": device, "threads": threads},
        "rows": rows,
        **summary(rows),
        "machine": machine(),
    }  # fmt: skip


def crossover(ratios: dict[str, float]) -> int | None:
    """The first length from which every ratio is below 1 (the SSM cheaper from there on), or None."""
    lengths = sorted(ratios, key=int)  # numerically: a JSON file written with sorted keys orders them as text
    return next((int(n) for i, n in enumerate(lengths) if all(ratios[m] < 1 for m in lengths[i:])), None)


def summary(rows: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """The ratios SSM / Transformer per length and the crossovers, from the measured rows."""
    ratios = {
        length: {
            "time": round(rows["ssm"][length]["min_ms"] / rows["transformer"][length]["min_ms"], 4),
            "time_median": round(rows["ssm"][length]["ms"] / rows["transformer"][length]["ms"], 4),
            "cpu_time": round(rows["ssm"][length]["cpu_ms"] / rows["transformer"][length]["cpu_ms"], 4),
            "memory": round(rows["ssm"][length]["memory_mb"] / rows["transformer"][length]["memory_mb"], 4)
            if rows["transformer"][length]["memory_mb"] > 0
            else None,
        }
        for length in sorted(rows["ssm"], key=int)
    }
    return {
        "ratios": ratios,
        "cpu_time_crossover_length": crossover({n: r["cpu_time"] for n, r in ratios.items()}),
        "time_crossover_length": crossover({n: r["time"] for n, r in ratios.items()}),
        "memory_crossover_length": crossover(
            {n: math.inf if r["memory"] is None else r["memory"] for n, r in ratios.items()}
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true")
    size.add_argument("--smoke", action="store_true")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per measured process")
    parser.add_argument("--json", default=None)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--length", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.worker:
        from _common import emit

        emit(worker(args.worker, args.length, args.batch_size, args.repeats or 1, args.device))
        return
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    report = run(mode, args.batch_size, args.device, args.threads, args.repeats)
    config = report["config"]
    print(f"{config['students']['ssm']} vs {config['students']['transformer']}, batch {config['batch']}, "
          f"{config['device']}, {config['threads']} thread(s), median of {config['repeats']}; "
          f"load {report['machine']['load_1min']} on {report['machine']['cpus']} CPUs")  # fmt: skip
    print("length | SSM ms (fastest) | Transformer ms (fastest) | time SSM/T | CPU time SSM/T | SSM MB | "
          "Transformer MB | memory SSM/T")
    for length, ratio in sorted(report["ratios"].items(), key=lambda item: int(item[0])):
        ssm, transformer = report["rows"]["ssm"][length], report["rows"]["transformer"][length]
        memory = "n/a" if ratio["memory"] is None else f"{ratio['memory']:.2f}"
        print(f"{int(length):>6,} | {ssm['min_ms']:>16.1f} | {transformer['min_ms']:>24.1f} | {ratio['time']:>10.2f} | "
              f"{ratio['cpu_time']:>14.2f} | "
              f"{ssm['memory_mb']:>6.1f} | {transformer['memory_mb']:>14.1f} | {memory:>12}")  # fmt: skip
    print(f"crossovers (the SSM cheaper from this length on): CPU time {report['cpu_time_crossover_length']}, "
          f"wall time {report['time_crossover_length']}, memory {report['memory_crossover_length']}")
    write_json(args.json, report)


if __name__ == "__main__":
    main()
