"""What each sweep needs from the Hub (exact ids, no network), and the download plan with the Hub's calls replaced
by recording functions."""

from __future__ import annotations

from pathlib import Path

import httpx2  # the HTTP client huggingface_hub builds its errors from
import pytest
from huggingface_hub.errors import RepositoryNotFoundError

from kdgrid.prefetch import (
    HubClient,
    HubItem,
    HubUnavailableError,
    fetch,
    plan_downloads,
    refuse_offline,
    sweep_needs,
)
from kdgrid.sweep_run import load_named_sweep
from kdgrid.trial import Trial

TASKS = ("cola", "mnli", "mrpc", "qnli", "qqp", "rte", "sst2", "stsb")
BASE = {
    "cola": "textattack/bert-base-uncased-CoLA",
    "mnli": "ishan/bert-base-uncased-mnli",
    "mrpc": "textattack/bert-base-uncased-MRPC",
    "qnli": "textattack/bert-base-uncased-QNLI",
    "qqp": "textattack/bert-base-uncased-QQP",
    "rte": "textattack/bert-base-uncased-RTE",
    "sst2": "textattack/bert-base-uncased-SST-2",
    "stsb": "textattack/bert-base-uncased-STS-B",
}
LARGE = {task: f"yoshitomo-matsubara/bert-large-uncased-{task}" for task in TASKS}
TINY, MINI, SMALL = (
    "google/bert_uncased_L-2_H-128_A-2",
    "google/bert_uncased_L-4_H-256_A-4",
    "google/bert_uncased_L-4_H-512_A-8",
)


def needs_of(sweep: str) -> tuple[set[str], set[str], set[str]]:
    """(teachers with tokenizers, models without, GLUE configs) a bundled sweep needs."""
    items = sweep_needs(p.trial for p in load_named_sweep(sweep).trials)
    assert all(i.repo_id == "nyu-mll/glue" for i in items if i.kind == "dataset")
    return (
        {i.repo_id for i in items if i.kind == "model" and i.tokenizer},
        {i.repo_id for i in items if i.kind == "model" and not i.tokenizer},
        {str(i.config) for i in items if i.kind == "dataset"},
    )


@pytest.mark.parametrize(
    ("sweep", "teachers", "inits", "tasks"),
    [
        # preload starts from the teacher itself; general distillation from local directories
        ("table1_init", set(BASE.values()), {TINY, MINI, SMALL}, set(TASKS)),
        ("table2_width_depth", set(BASE.values()), set(), set(TASKS)),
        ("table3_teacher", set(BASE.values()) | set(LARGE.values()), {TINY, MINI, SMALL}, set(TASKS)),
        ("table4_temperature", set(BASE.values()), {MINI}, set(TASKS)),
        ("table5_single_match", set(BASE.values()), {TINY, MINI, SMALL}, set(TASKS)),
        ("table6_double_match", set(BASE.values()), {TINY, MINI, SMALL}, set(TASKS)),
        ("table7_best_practice", {BASE[t] for t in TASKS if t != "cola"}, {MINI}, set(TASKS) - {"cola"}),
        ("table8_weighted", set(BASE.values()), {TINY, MINI, SMALL}, set(TASKS)),
        ("demo", set(), set(), set()),  # the offline MiniLM teacher on polarity: nothing from the Hub
    ],
)
def test_each_paper_sweep_needs_exactly_these_hub_items(
    sweep: str, teachers: set[str], inits: set[str], tasks: set[str]
) -> None:
    assert needs_of(sweep) == (teachers, inits, tasks)


def test_needs_are_merged_and_glue_items_name_the_splits_kdgrid_reads(tmp_path: Path) -> None:
    trials = [
        Trial(task="mnli", teacher="bert-base", student="bert-tiny"),
        Trial(task="mnli", teacher="bert-base", student="bert-mini", seed=1),
        # a Hub teacher also named as a preload source is needed once, with its tokenizer
        Trial(task="mnli", teacher="org/teacher", student="w768-l2-h12-f3072", init="preload", init_from="org/teacher"),
        Trial(task="synthetic-single-binary", teacher=str(tmp_path), student="bert-tiny", init="random"),
    ]
    items = sweep_needs(trials)
    assert [(i.kind, i.repo_id, i.tokenizer) for i in items] == [
        ("model", TINY, False),
        ("model", MINI, False),
        ("model", "ishan/bert-base-uncased-mnli", True),
        ("model", "org/teacher", True),
        ("dataset", "nyu-mll/glue", False),
    ]
    glue = items[-1]
    assert glue.config == "mnli" and glue.splits == ("train", "validation_matched", "validation_mismatched")
    assert items[3].used_by == ("init of w768-l2-h12-f3072", "teacher of mnli")


class RecordingHub:
    """A `HubClient` whose functions record their calls and answer from fixed listings."""

    def __init__(self, listings: dict[str, dict[str, int | None]]) -> None:
        self.listings = listings
        self.calls: list[tuple] = []

    def list_files(self, repo_id: str, repo_type: str) -> dict[str, int | None]:
        self.calls.append(("list", repo_id, repo_type))
        if repo_id not in self.listings:
            raise RepositoryNotFoundError(f"404 {repo_id}", response=httpx2.Response(404, request=httpx2.Request("GET", "https://hf.co")))
        return self.listings[repo_id]

    def snapshot(self, repo_id: str, allow_patterns: list[str]) -> str:
        self.calls.append(("snapshot", repo_id, tuple(allow_patterns)))
        return "/cache/" + repo_id

    def load_dataset(self, repo_id: str, config: str) -> None:
        self.calls.append(("load_dataset", repo_id, config))

    def client(self) -> HubClient:
        return HubClient(list_files=self.list_files, snapshot=self.snapshot, load_dataset=self.load_dataset)


LISTINGS: dict[str, dict[str, int | None]] = {
    # a 2020 repo: the PyTorch pickle only, a vocabulary and tokenizer config (and files nobody needs)
    BASE["mrpc"]: {"config.json": 600, "pytorch_model.bin": 438_000_000, "vocab.txt": 232_000,
                   "tokenizer_config.json": 50, "special_tokens_map.json": 112, "tf_model.h5": 500_000_000,
                   "README.md": 1_000},
    # safetensors beside the pickle: only the safetensors are fetched; an init source needs no tokenizer
    TINY: {"config.json": 400, "model.safetensors": 17_500_000, "pytorch_model.bin": 17_700_000, "vocab.txt": 232_000},
    "nyu-mll/glue": {"README.md": 30_000, "mrpc/train-00000-of-00001.parquet": 650_000,
                     "mrpc/validation-00000-of-00001.parquet": 75_000, "mrpc/test-00000-of-00001.parquet": 300_000,
                     "mnli/train-00000-of-00001.parquet": 52_000_000},
}  # fmt: skip


def test_the_download_plan_fetches_only_what_transformers_and_datasets_read() -> None:
    hub = RecordingHub(LISTINGS)
    items = sweep_needs([Trial(task="mrpc", teacher="bert-base", student="bert-tiny")])
    plan = plan_downloads(items, hub.client())
    assert [(d.item.repo_id, d.files, d.size) for d in plan] == [
        (TINY, ("config.json", "model.safetensors"), 17_500_400),
        (BASE["mrpc"], ("config.json", "pytorch_model.bin", "vocab.txt", "tokenizer_config.json",
                        "special_tokens_map.json"), 438_232_762),
        ("nyu-mll/glue", ("mrpc/test-00000-of-00001.parquet", "mrpc/train-00000-of-00001.parquet",
                          "mrpc/validation-00000-of-00001.parquet"), 1_025_000),
    ]  # fmt: skip
    for download in plan:
        fetch(download, hub.client())
    assert hub.calls == [
        ("list", TINY, "model"),
        ("list", BASE["mrpc"], "model"),
        ("list", "nyu-mll/glue", "dataset"),
        ("snapshot", TINY, ("config.json", "model.safetensors")),
        ("snapshot", BASE["mrpc"], plan[1].files),
        ("load_dataset", "nyu-mll/glue", "mrpc"),  # prepares the datasets cache that offline mode reads
    ]


def test_a_sharded_checkpoint_is_fetched_with_its_index_and_every_shard() -> None:
    listing = {"config.json": 1, "model.safetensors.index.json": 2, "model-00001-of-00002.safetensors": 3,
               "model-00002-of-00002.safetensors": 4, "vocab.txt": 5}  # fmt: skip
    hub = RecordingHub({"org/big": listing})
    (download,) = plan_downloads([HubItem("model", "org/big", tokenizer=True)], hub.client())
    assert download.files == ("config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
                              "model-00002-of-00002.safetensors", "vocab.txt")  # fmt: skip
    assert download.size == 15


def test_an_unknown_hub_id_or_a_repo_without_weights_is_one_clear_error() -> None:
    hub = RecordingHub({"org/no-weights": {"config.json": 1, "vocab.txt": 2}})
    with pytest.raises(HubUnavailableError, match=r"org/typo.*no such repo.*hf auth login"):
        plan_downloads([HubItem("model", "org/typo", used_by=("teacher of rte",))], hub.client())
    with pytest.raises(HubUnavailableError, match="org/no-weights on the Hub has no weights"):
        plan_downloads([HubItem("model", "org/no-weights")], hub.client())
    assert [call[0] for call in hub.calls] == ["list", "list"]  # nothing downloaded


def test_offline_mode_refuses_to_download() -> None:
    with pytest.raises(HubUnavailableError, match=r"offline mode is on \(HF_DATASETS_OFFLINE=1\).*--check"):
        refuse_offline({"HF_DATASETS_OFFLINE": "1"})
    refuse_offline({"HF_HUB_OFFLINE": "0"})  # off: nothing to refuse
