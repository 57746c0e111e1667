"""A trained student saved whole, so that another trial can load it as its teacher (a teacher assistant:
Mirzadeh et al., AAAI 2020; `kdgrid.core.model.trained_teacher`).

The student is saved at the end of its training (its last epoch's weights, not the best epoch's: choosing by the
dev set would let the dev set into the dependant's teacher) as ``save_pretrained`` writes it (config and
``model.safetensors``, float32; what a method added for training only, a dual head's distillation head, left out
by `kdgrid.core.model.added_parts.save_deployed`, so the task head is the classifier the dependant loads), with its
teacher's tokenizer beside it (students share the teacher's vocabulary, so the dependant tokenizes as the
assistant did) and a manifest naming the trial and the weights' SHA-256. Its classifier outputs are in the task's
label order, as every student's are. The folder is written under a hidden temporary name and renamed whole, so a
reader sees a complete student or none.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from kdgrid.core.model.added_parts import save_deployed
from kdgrid.core.model.models import load_tokenizer
from kdgrid.core.model.shapes import ResolvedTeacher
from kdgrid.core.model.trained_teacher import MANIFEST_FILE, WEIGHTS_FILE
from kdgrid.file_digest import file_sha256


def save_student(model: Any, trial_id: str, teacher: ResolvedTeacher, directory: Path) -> str:
    """Save ``model`` (trial ``trial_id``'s trained student) with ``teacher``'s tokenizer to ``directory``,
    replacing an earlier attempt's; return the SHA-256 of its weights file."""
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    temporary = directory.parent / f".{directory.name}.tmp-{uuid.uuid4().hex}"
    try:
        save_deployed(model, temporary, safe_serialization=True)
        load_tokenizer(teacher).save_pretrained(temporary)
        sha256 = file_sha256(temporary / WEIGHTS_FILE)
        manifest = {"trial_id": trial_id, "weights_file": WEIGHTS_FILE, "weights_sha256": sha256}
        (temporary / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1) + "\n")
        if directory.exists():  # an earlier attempt's student: this trial's done row will name the new one
            shutil.rmtree(directory)
        os.replace(temporary, directory)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return sha256
