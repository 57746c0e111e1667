"""The fixture's cache is laid out as `huggingface_hub` lays it out, covers every Hub id kdgrid names, and is
deterministic."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import huggingface_hub

from kdgrid.core.data.glue import GLUE_DATASET, GLUE_TASKS
from kdgrid.core.model.shapes import TEACHERS, student_shape, turc_hub_name
from tests.hub.hub_cache import GLUE, GLUE_REPO, build_hub_cache, git_blob_sha1, paper_models

SWEEP_STUDENTS = ("bert-tiny", "bert-mini", "bert-small")  # the students the paper's sweeps initialise


def test_every_hub_id_kdgrid_names_has_a_fixture_repo() -> None:
    named = {spec.hub_name for table in TEACHERS.values() for spec in table.values()}
    named |= {turc_hub_name(student_shape(name)) for name in SWEEP_STUDENTS}
    assert len(named) == 19  # 8 BERT-base + 8 BERT-large teachers, 3 compact BERTs
    assert named <= {model.repo_id for model in paper_models()}


def test_glue_configs_match_kdgrids_task_specs() -> None:
    assert GLUE_DATASET == GLUE_REPO
    assert set(GLUE) == set(GLUE_TASKS)
    for name, task in GLUE_TASKS.items():
        config = GLUE[name]
        assert config.text_columns == task.text_keys, name
        assert (config.label_names is None) == (task.num_labels == 1), name
        assert config.label_names is None or len(config.label_names) == task.num_labels, name
        assert set(task.split_names) <= set(config.splits), name


def test_repos_are_laid_out_as_huggingface_hub_downloads_them(small_hub: Path) -> None:
    folders = sorted((small_hub / "hub").iterdir())
    assert [f.name for f in folders] == sorted(
        [
            "datasets--nyu-mll--glue",
            "models--google--bert_uncased_L-2_H-128_A-2",
            "models--ishan--bert-base-uncased-mnli",
            "models--textattack--bert-base-uncased-MRPC",
            "models--textattack--bert-base-uncased-STS-B",
        ]
    )
    for folder in folders:
        commit = (folder / "refs" / "main").read_text()
        assert len(commit) == 40 and int(commit, 16) >= 0
        assert [p.name for p in (folder / "snapshots").iterdir()] == [commit]
        files = [p for p in (folder / "snapshots" / commit).rglob("*") if not p.is_dir()]
        assert files
        for path in files:
            assert path.is_symlink() and not os.path.isabs(os.readlink(path))
            blob = path.resolve()
            assert blob.parent == (folder / "blobs").resolve()
            data = blob.read_bytes()
            lfs = path.suffix in (".bin", ".parquet", ".safetensors")
            assert blob.name == (hashlib.sha256(data).hexdigest() if lfs else git_blob_sha1(data)), path


def test_models_ship_pytorch_model_bin_and_only_the_compact_berts_safetensors(small_hub: Path) -> None:
    """As on the Hub: the 2020 teachers have only ``pytorch_model.bin``; Turc et al.'s compact BERTs have
    ``model.safetensors`` beside it on their main branch."""
    for folder in (small_hub / "hub").glob("models--*"):
        names = {p.name for p in (folder / "snapshots").glob("*/*")}
        assert {"config.json", "pytorch_model.bin", "vocab.txt"} <= names
        compact = folder.name.startswith("models--google--bert_uncased")
        assert ("model.safetensors" in names) == compact, folder.name


def test_scan_cache_dir_accepts_the_cache(small_hub: Path) -> None:
    info = huggingface_hub.scan_cache_dir(small_hub / "hub")
    assert info.warnings == []
    assert {(repo.repo_id, repo.repo_type) for repo in info.repos} == {
        ("nyu-mll/glue", "dataset"),
        ("google/bert_uncased_L-2_H-128_A-2", "model"),
        ("ishan/bert-base-uncased-mnli", "model"),
        ("textattack/bert-base-uncased-MRPC", "model"),
        ("textattack/bert-base-uncased-STS-B", "model"),
    }
    for repo in info.repos:
        assert [sorted(revision.refs) for revision in repo.revisions] == [["main"]]
        assert repo.size_on_disk > 0


def test_the_build_is_deterministic(tmp_path: Path) -> None:
    def build(root: Path) -> dict[str, bytes]:
        build_hub_cache(root, repo_ids=["textattack/bert-base-uncased-RTE"], glue_configs=["rte"])
        hub = root / "hub"
        return {str(p.relative_to(hub)): p.read_bytes() for p in sorted(hub.rglob("*")) if p.is_file()}

    first, second = build(tmp_path / "a"), build(tmp_path / "b")
    assert first.keys() == second.keys() and first == second
    assert any(name.endswith("refs/main") for name in first)
