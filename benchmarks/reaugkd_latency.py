"""ReAugKD's latency claim (Zhang et al., ACL 2023: "< 3% latency overhead" with approximate kNN): the student's
inference with and without retrieval, at two knowledge-base sizes, side by side in one run.

    .venv/bin/python benchmarks/reaugkd_latency.py [--quick | --smoke] [--json PATH]

For each dev batch (random token ids, batch ``--batch-size`` x ``--length`` tokens) the student's forward pass is
timed, then, on the same batch's [CLS] vectors, the retrieval against each knowledge base: normalisation, the
k-neighbour search (HNSW through faiss, then the exact search) and the mix with the soft labels
(`kdgrid.core.methods.reaugkd.retrieval.retrieval_mix`). Everything runs in this process, batch after batch, so the
student alone and with retrieval are measured on the same machine under the same load. The knowledge bases hold
random unit vectors in the student's width with random soft labels (search cost depends on the size and width,
not on what the vectors mean; uniform random vectors are HNSW's hard case). Reported per base size: ms per batch
and per example of the student alone, of each search + mix, the overhead (retrieval / student), the HNSW
index's build time and its recall of the exact neighbours.

Defaults: the paper's student shape (6 layers, 768 wide), batch 32 x 128 tokens, k = 10, bases of 10,000 and
100,000 entries (between RTE's 2.5k and QQP's 364k training examples); ``--quick``: a 4-layer 256-wide student,
5 batches, bases of 2,000 and 20,000; ``--smoke``: a tiny student, 2 batches, bases of 200 and 2,000.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import BertForSequenceClassification

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, write_json

from kdgrid.core.methods.reaugkd.knowledge_base import (
    KBIdentity,
    build_knowledge_base,
    normalize_rows,
    recall_at_k,
)
from kdgrid.core.methods.reaugkd.retrieval import retrieval_mix
from kdgrid.core.model.models import bert_config
from kdgrid.core.model.shapes import student_shape

MODES = {
    "full": {"student": "w768-l6-h12-f3072", "batches": 10, "sizes": (10_000, 100_000)},
    "quick": {"student": "w256-l4-h4-f1024", "batches": 5, "sizes": (2_000, 20_000)},
    "smoke": {"student": "w32-l2-h2-f64", "batches": 2, "sizes": (200, 2_000)},
}
CLASSES = 2


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _ms(seconds: list[float]) -> float:
    return round(1000 * statistics.median(seconds), 4)


def run(mode: str, batch_size: int, length: int, k: int, seed: int, device: str = "cpu") -> dict[str, Any]:
    settings = MODES[mode]
    shape = student_shape(settings["student"])
    torch.manual_seed(seed)
    model = BertForSequenceClassification(bert_config(shape, CLASSES)).eval().to(device)
    on = torch.device(device)
    rng = np.random.default_rng(seed)
    bases = {}
    for size in settings["sizes"]:
        identity = KBIdentity(
            teacher="bench", head="bench", task="bench", train_split=str(size), tokenizer="bench"
        )
        kb, build_s = build_knowledge_base(
            rng.standard_normal((size, shape.width)).astype(np.float32),
            rng.dirichlet(np.ones(CLASSES), size).astype(np.float32),
            identity,
        )
        bases[size] = (kb, build_s)
    forward: list[float] = []
    searches: dict[tuple[int, str], list[float]] = {(s, how): [] for s in bases for how in ("hnsw", "exact")}
    recalls: dict[int, list[float]] = {s: [] for s in bases}
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for index in range(settings["batches"] + 1):  # the first batch warms up and is not counted
            ids = torch.randint(1000, 20000, (batch_size, length), generator=generator).to(on)
            inputs = {
                "input_ids": ids,
                "attention_mask": torch.ones_like(ids),
                "token_type_ids": torch.zeros_like(ids),
            }
            _sync(on)
            started = time.perf_counter()
            out = model(**inputs, output_hidden_states=True)
            probs = torch.softmax(out.logits.float(), dim=-1).cpu().numpy()  # retrieval runs on the CPU
            sentence = out.hidden_states[-1][:, 0].float().cpu().numpy()
            student_s = time.perf_counter() - started
            found: dict[int, dict[str, np.ndarray]] = {s: {} for s in bases}
            for size, (kb, _) in bases.items():
                for how in ("hnsw", "exact"):
                    started = time.perf_counter()
                    queries = normalize_rows(sentence)
                    sims, ids_found = kb.search(queries, k, exact=how == "exact")
                    retrieval_mix(probs, sims, kb.soft_labels[ids_found], 0.5, 0.07)
                    elapsed = time.perf_counter() - started
                    found[size][how] = ids_found
                    if index > 0:
                        searches[(size, how)].append(elapsed)
                if index > 0:
                    recalls[size].append(recall_at_k(found[size]["hnsw"], found[size]["exact"]))
            if index > 0:
                forward.append(student_s)
    student_ms = _ms(forward)
    report: dict[str, Any] = {
        "config": {
            "mode": mode,
            "student": settings["student"],
            "batch_size": batch_size,
            "length": length,
            "k": k,
            "batches": settings["batches"],
            "sizes": list(settings["sizes"]),
            "threads": torch.get_num_threads(),
            "device": device,
        },
        "student_ms_per_batch": student_ms,
        "student_ms_per_example": round(student_ms / batch_size, 5),
        "bases": {},
        "machine": machine(),
    }
    for size, (_kb, build_s) in bases.items():
        entry: dict[str, Any] = {
            "index_build_s": round(build_s, 4),
            "recall_at_k": statistics.mean(recalls[size]),
        }
        for how in ("hnsw", "exact"):
            ms = _ms(searches[(size, how)])
            entry[how] = {
                "retrieval_ms_per_batch": ms,
                "retrieval_ms_per_example": round(ms / batch_size, 5),
                "with_retrieval_ms_per_batch": round(student_ms + ms, 4),
                "overhead": round(ms / student_ms, 5),
            }
        report["bases"][str(size)] = entry
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true")
    size.add_argument("--smoke", action="store_true")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--length", type=int, default=None)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--device", default="cpu", help="where the student runs (cpu, cuda); retrieval: the CPU"
    )
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    batch_size = args.batch_size or (4 if args.smoke else 32)
    length = args.length or (16 if args.smoke else 128)
    report = run(mode, batch_size, length, args.k, args.seed, args.device)
    print(
        f"student {report['config']['student']}, batch {batch_size} x {length} tokens, k = {args.k}: "
        f"{report['student_ms_per_batch']:.2f} ms per batch alone"
    )
    print("base size | HNSW ms/batch (overhead) | exact ms/batch (overhead) | HNSW recall | HNSW build s")
    for size_name, entry in report["bases"].items():
        print(
            f"{int(size_name):>9,} | {entry['hnsw']['retrieval_ms_per_batch']:.3f} ({entry['hnsw']['overhead']:.2%}) | "
            f"{entry['exact']['retrieval_ms_per_batch']:.3f} ({entry['exact']['overhead']:.2%}) | "
            f"{entry['recall_at_k']:.3f} | {entry['index_build_s']:.2f}"
        )
    write_json(args.json, report)


if __name__ == "__main__":
    main()
