"""Tiny random BERT teachers saved as local directories, for tests that need a teacher but not a trained one.

A teacher here is a `BertForSequenceClassification` of a small `StudentShape`, initialised with seed 0 (so every
test gets the same weights), saved with the offline MiniLM's tokenizer beside it: the core loads it by path like
any fine-tuned teacher. Such a teacher is at chance level, so the teacher gate (`kdgrid.core.teacher.gate`) would
refuse it: trials that use one only to exercise the machinery say so with `kdgrid.core.teacher.options.NOT_MEANT_TO_BE_ACCURATE`.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoTokenizer, BertForSequenceClassification

from kdgrid.assets import teacher_dir
from kdgrid.core.model.models import bert_config
from kdgrid.core.model.shapes import StudentShape

SMALL_TEACHER_SHAPE = StudentShape(layers=3, width=64, heads=4, ffn=128)
TINY_TEACHER_SHAPE = StudentShape(layers=2, width=32, heads=2, ffn=64)

# The trial options of a trial whose teacher is random on purpose: the teacher gate is skipped (rows record it).


def save_random_teacher(path: Path, shape: StudentShape, num_labels: int = 2) -> str:
    """Write a random BERT of ``shape`` (seed 0; the global RNG is left as it was) and the MiniLM tokenizer to
    ``path``; return ``path`` as a string, as a trial's ``teacher`` field takes it."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        BertForSequenceClassification(bert_config(shape, num_labels)).save_pretrained(path)
    AutoTokenizer.from_pretrained(teacher_dir()).save_pretrained(path)
    return str(path)
