"""A trial's trained student as another trial's teacher (a teacher assistant: Mirzadeh et al., "Improved
Knowledge Distillation via Teacher Assistant", AAAI 2020), without torch.

A dependant's ``teacher`` is ``trial:<assistant id>`` (`kdgrid.trial.trained_teacher`). What that names is known
in two ways, each declared here by the layer that knows it:

- **planned** (`declare_planned`): while a sweep is expanded, the assistant's student shape and task, so the
  trial rules, the memory estimate and the cost see the dependant's teacher before the assistant has trained
  (`kdgrid.grid.stages`);
- **trained** (`declare_trained`): in the process that runs a dependant's job, the directory the assistant's
  student was saved to and the SHA-256 of its weights that the assistant's done row recorded
  (`kdgrid.launch.assistant_worker`). `trained_source` checks the file's hash against it before anything loads,
  so a dependant never learns from other weights than the row that says it is done.

The registries are per process and keyed by trial id, a content hash: two sweeps in one process never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kdgrid.errors import KdgridError
from kdgrid.file_digest import file_sha256

WEIGHTS_FILE = "model.safetensors"  # what `save_pretrained` writes; its hash is the row's record
MANIFEST_FILE = "kdgrid_student.json"  # the trial id and weights hash beside them, for people and `store check`
WEIGHTS_SHA256 = "student_weights_sha256"  # the assistant's row: ``extra`` key of its saved weights' hash
TEACHER_TRIAL = "teacher_trial_id"  # a dependant's row: the assistant whose student taught it
TEACHER_SHA256 = "teacher_weights_sha256"  # a dependant's row: the hash of the weights that taught it


@dataclass(frozen=True)
class PlannedAssistant:
    """An assistant as a sweep plans it: its student's shape (a `kdgrid.core.model.shapes` shape, kept as the
    planner declared it and read back by `kdgrid.core.model.shapes.resolve_teacher`; typed ``Any`` here, since
    the shapes module imports this one) and its task."""

    shape: Any
    task: str


@dataclass(frozen=True)
class TrainedAssistant:
    """An assistant's saved student: its directory and the weights' SHA-256 its done row recorded."""

    directory: Path
    sha256: str


_PLANNED: dict[str, PlannedAssistant] = {}
_TRAINED: dict[str, TrainedAssistant] = {}


def declare_planned(trial_id: str, shape: Any, task: str) -> None:
    """Say what trial ``trial_id`` will train (its student's shape, its task), for planning its dependants."""
    _PLANNED[trial_id] = PlannedAssistant(shape, task)


def declare_trained(trial_id: str, directory: Path, sha256: str) -> None:
    """Say where trial ``trial_id``'s trained student is and the hash its done row recorded."""
    _TRAINED[trial_id] = TrainedAssistant(Path(directory), sha256)


def planned(trial_id: str) -> PlannedAssistant | None:
    return _PLANNED.get(trial_id)


def trained(trial_id: str) -> TrainedAssistant | None:
    return _TRAINED.get(trial_id)


def trained_source(trial_id: str) -> Path | None:
    """The directory of trial ``trial_id``'s trained student, its weights checked against the hash its done row
    recorded; None when this process was told of no trained student of that trial.

    Raises:
        KdgridError: the weights are missing or are not the ones the row recorded (naming the trial and both
            hashes).
    """
    saved = _TRAINED.get(trial_id)
    if saved is None:
        return None
    weights = saved.directory / WEIGHTS_FILE
    if not weights.is_file():
        raise KdgridError(
            f"assistant trial {trial_id}: its trained student is missing ({weights}); `kdgrid store forget "
            f"{trial_id}` and run again to train it anew"
        )
    found = file_sha256(weights)
    if found != saved.sha256:
        raise KdgridError(
            f"assistant trial {trial_id}: its saved weights have SHA-256 {found[:16]}, not the {saved.sha256[:16]} "
            f"its done row recorded ({weights}); `kdgrid store forget {trial_id}` and run again"
        )
    return saved.directory


def unknown_message(trial_id: str) -> str:
    """Why a ``trial:<id>`` teacher cannot be resolved in this process."""
    return (
        f"teacher trial:{trial_id}: trial {trial_id} is not a trial of this sweep (a teacher assistant must be "
        "trained by the same sweep), and no trained student of it was found in the store"
    )
