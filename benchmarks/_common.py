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
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from _machine import ROOT
from _machine import machine as torch_free_machine

# The benchmark teachers have random classifier heads (they time steps, not accuracy): their trials say so, and
# the teacher gate (`kdgrid.core.teacher.gate`) is skipped for them.
from kdgrid.core.model.models import bert_config
from kdgrid.core.model.teacher_cache import TeacherRecipe, TeacherRecord
from kdgrid.core.options import MAX_DEV_SAMPLES
from kdgrid.core.teacher.finetune import finetune_teacher
from kdgrid.core.teacher.options import NOT_MEANT_TO_BE_ACCURATE

BERT_BASE = "bert-base"
MINILM = "minilm"
TINY = "tiny"
TEACHERS = (MINILM, BERT_BASE)
RESULT_PREFIX = "BENCH-RESULT "


def bench_cache() -> Path:
    """Where the benchmarks keep their generated teachers (under the kdgrid cache)."""
    from kdgrid.assets import cache_dir

    path = cache_dir() / "bench"
    path.mkdir(parents=True, exist_ok=True)
    return path


# The random teachers' shapes (layers, width, heads, FFN), each written once under the bench cache.
RANDOM_TEACHERS = {BERT_BASE: (12, 768, 12, 3072), TINY: (4, 64, 2, 128)}


def teacher_path(name: str) -> str:
    """A local teacher directory for ``minilm`` (the offline MiniLM, 6 x 384, with a fresh 2-way head),
    ``bert-base`` (randomly initialised, 12 x 768, 12 heads, FFN 3072; seed 0) or ``tiny`` (random, 4 x 64, 2
    heads, FFN 128: the smoke runs' teacher, which only shows that the code runs), all with the MiniLM tokenizer.
    Written once, then reused."""
    from kdgrid.assets import teacher_dir

    if name == MINILM:
        return str(teacher_dir())
    if name not in RANDOM_TEACHERS:
        raise ValueError(
            f"unknown benchmark teacher {name!r}; known: {', '.join((MINILM, *RANDOM_TEACHERS))}"
        )
    path = bench_cache() / f"{name}-random"
    if not (path / "config.json").is_file() or not any(path.glob("*.safetensors")):
        from transformers import AutoTokenizer, BertForSequenceClassification

        from kdgrid.core.model.shapes import StudentShape

        layers, width, heads, ffn = RANDOM_TEACHERS[name]
        shape = StudentShape(layers=layers, width=width, heads=heads, ffn=ffn)
        with torch.random.fork_rng():
            torch.manual_seed(0)
            BertForSequenceClassification(bert_config(shape, 2)).save_pretrained(path)
        AutoTokenizer.from_pretrained(teacher_dir()).save_pretrained(path)
    return str(path)


def finetuned_tiny_teacher(task: str, max_length: int) -> TeacherRecord:
    """The ``tiny`` teacher fine-tuned by kdgrid on ``task`` (lr 1e-3, 4 epochs, batch 32, ``max_length``
    tokens), cached in the kdgrid cache ``KDGRID_CACHE`` names: the teacher of the benchmarks that need one that
    learned its task (accurate enough to pass the teacher gate), not one that only times steps."""
    recipe = TeacherRecipe(lr=1e-3, epochs=4, batch_size=32, max_length=max_length)
    return finetune_teacher(task, base=teacher_path(TINY), recipe=recipe)


def bench_options(dev_examples: int) -> dict[str, Any]:
    """The options of a benchmark trial that times training: its teacher is not meant to be accurate (random
    head: the teacher gate is skipped), and every dev set is scored on its first ``dev_examples`` examples only
    (the core's ``max_dev_samples``). The end-of-epoch evaluation, of each student and once per job of the
    teacher, is not timed but runs; on 1,000 sentences it costs a BERT-base-shaped teacher a minute on one
    thread, per job."""
    return {**NOT_MEANT_TO_BE_ACCURATE, MAX_DEV_SAMPLES: dev_examples}


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


_FIXED_BATCHES = [0]  # training batches served at the fixed width since `fix_batch_width` (this process)


def fix_batch_width(width: int) -> None:
    """Make every training batch of this process exactly ``width`` tokens wide (`pad_batch`), so each
    configuration computes on identical shapes.

    Patched on the class the core's `train_batches` returns (`kdgrid.core.data.batching.TrainBatches`), not on a
    module attribute: a module that imported ``train_batches`` by name still gets the fixed batches (a patch of
    ``kdgrid.core.data.train_batches`` silently stopped applying once the core imported it at the top of its
    modules). `require_fixed_batches` checks that training really drew them."""
    from kdgrid.core.data.batching import TrainBatches

    original_getitem = TrainBatches.__getitem__
    original_iter = TrainBatches.__iter__

    def fixed(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        _FIXED_BATCHES[0] += 1
        return pad_batch(batch, width)

    def getitem(self: TrainBatches, index: Any) -> Any:
        out = original_getitem(self, index)
        return [fixed(b) for b in out] if isinstance(out, list) else fixed(out)

    def iterate(self: TrainBatches) -> Any:
        for batch in original_iter(self):
            yield fixed(batch)

    TrainBatches.__getitem__ = getitem  # type: ignore[method-assign,assignment]
    TrainBatches.__iter__ = iterate  # type: ignore[method-assign]


def fixed_batches_served() -> int:
    """The number of training batches served at the fixed width so far in this process."""
    return _FIXED_BATCHES[0]


def require_fixed_batches(since: int = 0) -> int:
    """The number of fixed-width training batches served since ``since`` (an earlier `fixed_batches_served`;
    0: since `fix_batch_width`); raises when none was (the figures would be of other shapes than the benchmark
    says)."""
    served = _FIXED_BATCHES[0] - since
    if served <= 0:
        raise RuntimeError(
            "no training batch went through fix_batch_width: the core no longer draws its batches "
            "from kdgrid.core.data.batching.TrainBatches; fix the benchmark before reading its figures"
        )
    return served


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
