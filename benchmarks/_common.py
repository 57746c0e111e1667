"""Helpers shared by the benchmark scripts: teachers, fixed-width batches, peak memory, worker subprocesses.

Every measured configuration runs in a fresh Python subprocess (`run_worker`), so the peak resident memory one
configuration reaches (``ru_maxrss``) never leaks into the next one's figure. A worker prints one JSON object on
its last stdout line; the parent collects it.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
from _machine import ROOT
from _machine import machine as torch_free_machine

# The benchmark teachers have random classifier heads (they time steps, not accuracy): their trials say so, and
# the teacher gate (`kdgrid.core.teacher_gate`) is skipped for them.
from kdgrid.core.models import bert_config
from kdgrid.core.teacher_options import NOT_MEANT_TO_BE_ACCURATE  # noqa: F401 (re-exported to the benchmarks)

BERT_BASE = "bert-base"
MINILM = "minilm"
TEACHERS = (MINILM, BERT_BASE)
RESULT_PREFIX = "BENCH-RESULT "


def bench_cache() -> Path:
    """Where the benchmarks keep their generated teachers (under the kdgrid cache)."""
    from kdgrid.assets import cache_dir

    path = cache_dir() / "bench"
    path.mkdir(parents=True, exist_ok=True)
    return path


def teacher_path(name: str) -> str:
    """A local teacher directory for ``minilm`` (the offline MiniLM, 6 x 384, with a fresh 2-way head) or
    ``bert-base`` (randomly initialised, 12 x 768, 12 heads, FFN 3072, eager attention; seed 0), both with the
    MiniLM tokenizer. Written once, then reused."""
    from kdgrid.assets import teacher_dir

    if name == MINILM:
        return str(teacher_dir())
    if name != BERT_BASE:
        raise ValueError(f"unknown benchmark teacher {name!r}; known: {', '.join(TEACHERS)}")
    path = bench_cache() / "bert-base-random"
    if not (path / "config.json").is_file() or not any(path.glob("*.safetensors")):
        from transformers import AutoTokenizer, BertForSequenceClassification

        from kdgrid.core.shapes import StudentShape

        shape = StudentShape(layers=12, width=768, heads=12, ffn=3072)
        with torch.random.fork_rng():
            torch.manual_seed(0)
            BertForSequenceClassification(bert_config(shape, 2)).save_pretrained(path)
        AutoTokenizer.from_pretrained(teacher_dir()).save_pretrained(path)
    return str(path)


def pad_batch(batch: dict[str, torch.Tensor], width: int) -> dict[str, torch.Tensor]:
    """Pad (or truncate) a batch's ``[B, L]`` tensors to exactly ``width`` columns (pad id 0, mask 0)."""
    out = dict(batch)
    for key in ("input_ids", "attention_mask", "token_type_ids"):
        if key not in batch:
            continue
        tensor = batch[key][:, :width]
        if tensor.shape[1] < width:
            tensor = torch.nn.functional.pad(tensor, (0, width - tensor.shape[1]), value=0)
        out[key] = tensor.contiguous()
    return out


def fix_batch_width(width: int) -> None:
    """Make every `kdgrid.core.data.train_batches` call (the core imports it at call time) return batches of
    exactly ``width`` tokens, so each configuration computes on identical shapes."""
    import kdgrid.core.data as data

    original: Callable[..., Any] = data.train_batches

    def fixed(*args: Any, **kwargs: Any) -> list[dict[str, torch.Tensor]]:
        return [pad_batch(b, width) for b in original(*args, **kwargs)]

    data.train_batches = fixed  # type: ignore[assignment]


def trim_dev_sets(examples: int) -> None:
    """Make every `kdgrid.core.data.tokenize_task` call keep only the first ``examples`` of each dev set.

    For benchmarks that time training steps only: the end-of-epoch evaluation of each student, and of a teacher
    without kdgrid's ``teacher.json`` (evaluated once per job), still run through the real code, on one batch
    instead of 1,000 sentences (which costs a BERT-base-shaped teacher a minute on one thread)."""
    import dataclasses

    import kdgrid.core.data as data

    original: Callable[..., Any] = data.tokenize_task

    def trimmed(*args: Any, **kwargs: Any) -> Any:
        tokenized = original(*args, **kwargs)
        for name in tokenized.task.dev_sets:
            split = tokenized[name]
            end = int(split.offsets[min(examples, len(split))])
            tokenized[name] = dataclasses.replace(
                split,
                input_ids=split.input_ids[:end],
                token_type_ids=split.token_type_ids[:end],
                offsets=split.offsets[: min(examples, len(split)) + 1],
                labels=split.labels[:examples],
            )
        return tokenized

    data.tokenize_task = trimmed  # type: ignore[assignment]


def peak_rss_mb() -> float:
    """This process's peak resident set size in MiB (Linux reports ``ru_maxrss`` in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def memory_figures() -> dict[str, float]:
    figures = {"peak_rss_mb": round(peak_rss_mb(), 1)}
    if torch.cuda.is_available():
        figures["cuda_peak_allocated_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return figures


def emit(result: dict[str, Any]) -> None:
    """A worker's answer: one JSON line the parent recognises."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def run_worker(script: Path, args: Iterable[str], *, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``script --worker ...`` in a fresh interpreter and return the JSON it emitted (raises with its
    stderr when it fails)."""
    command = [sys.executable, str(script), *args]
    started = time.perf_counter()
    done = subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, **(env or {})}, cwd=ROOT
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(
            f"worker {' '.join(command[1:])} failed (exit {done.returncode}):\n{done.stderr[-4000:]}"
        )
    result = json.loads(lines[-1][len(RESULT_PREFIX) :])
    result["process_wall_s"] = round(time.perf_counter() - started, 2)
    return result


def mean_step(times: list[float]) -> float:
    """Mean of per-step seconds, leaving out the first (warm-up: allocator, lazy init) when there are more."""
    kept = times[1:] if len(times) > 1 else times
    return sum(kept) / len(kept)


def write_json(path: str | None, payload: dict[str, Any]) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")


def machine() -> dict[str, Any]:
    """What the figures were measured on (`_machine.machine`), with torch's version and the GPU."""
    return {
        **torch_free_machine(),
        "torch": torch.__version__,
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }
