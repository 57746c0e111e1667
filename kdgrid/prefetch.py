"""What a sweep needs from the Hugging Face Hub, whether this machine's caches hold it, and downloading it.

`sweep_needs(trials)` is pure (no network, no cache): the model repos (each trial's Hub teacher with its tokenizer,
the Hub checkpoint a ``pretrain`` or ``preload`` student starts from) and the GLUE configs (``nyu-mll/glue``) the
trials name, as `HubItem`s. `missing_items` looks for them in the caches without the network: a model in the Hub
cache (`huggingface_hub.try_to_load_from_cache`: ``config.json``, its weights, its vocabulary for a teacher), a
dataset in the ``datasets`` cache (the folder ``load_dataset`` prepares, with the splits kdgrid reads). Offline,
``datasets`` reads only that folder, never the Hub cache's snapshot, so `download` runs ``load_dataset`` once
online to prepare it. `download` fetches what is missing through a `HubClient` (its functions are the only calls
to the network, so a test passes recording ones).

Once `missing_items` finds nothing, workers can run with `kdgrid.launch.environment.OFFLINE_ENVIRONMENT`
(`kdgrid.sweep_run` sets it for the executors): thousands of jobs then read the cache instead of each asking the
Hub.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Literal

import huggingface_hub
from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

from kdgrid.core.data import get_task
from kdgrid.core.model.shapes import TEACHERS, student_shape, turc_hub_name
from kdgrid.core.model.teacher_cache import MINILM_ALIAS
from kdgrid.core.pretrained.recipe_names import INIT_RECIPE
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.launch.environment import OFFLINE_ENVIRONMENT
from kdgrid.trial import Trial

# What `transformers` reads of a BERT repo. Weights: safetensors where the repo has them (transformers prefers
# them), else the PyTorch pickle; a sharded checkpoint is an index file plus the shards it names.
CONFIG_FILE = "config.json"
SINGLE_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
WEIGHT_INDEX_FILES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
VOCABULARY_FILES = ("tokenizer.json", "vocab.txt")  # a BERT tokenizer is built from either
TOKENIZER_EXTRA_FILES = ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")

_HUB_ID = re.compile(r"[\w.-]+/[\w.-]+")
_TRUE = ("1", "true", "yes", "on")


class HubUnavailableError(KdgridError):
    """A download was asked for where the Hub cannot be reached (offline mode, no network, unknown repo)."""


@dataclass(frozen=True, order=True)
class HubItem:
    """One thing a sweep needs from the Hub.

    Attributes:
        kind: ``model`` (a model repo) or ``dataset`` (one config of a dataset repo).
        repo_id: the Hub id (``textattack/bert-base-uncased-MRPC``, ``nyu-mll/glue``).
        config: a dataset's config (``mrpc``); ``None`` for a model.
        tokenizer: a model whose tokenizer is needed too (a teacher's: students share its vocabulary).
        splits: a dataset's splits that kdgrid reads (``train`` and the task's dev sets).
        used_by: what needs it (``teacher of mrpc``, ``init of bert-tiny``, ``task mrpc``), sorted.
    """

    kind: Literal["model", "dataset"]
    repo_id: str
    config: str | None = None
    tokenizer: bool = False
    splits: tuple[str, ...] = ()
    used_by: tuple[str, ...] = field(default=(), compare=False)

    @property
    def label(self) -> str:
        if self.kind == "dataset":
            return f"dataset {self.repo_id} ({self.config})"
        return f"model {self.repo_id}" + (" (+ tokenizer)" if self.tokenizer else "")


def offline_switches(environ: Mapping[str, str] | None = None) -> list[str]:
    """The variables of the environment that forbid the Hub (``HF_HUB_OFFLINE``, ``HF_DATASETS_OFFLINE``,
    ``TRANSFORMERS_OFFLINE`` set to 1 / true / yes / on)."""
    env = os.environ if environ is None else environ
    names = (*OFFLINE_ENVIRONMENT, "TRANSFORMERS_OFFLINE")
    return [name for name in names if env.get(name, "").strip().lower() in _TRUE]


def _hub_id(source: str | None) -> str | None:
    """``source`` if it names a Hub repo (``owner/name``, not a directory of this machine), else None (a local
    directory, present or not: `kdgrid plan` and the pre-flight report a missing one)."""
    if not source or source.startswith((".", "/", "~")) or Path(source).expanduser().is_dir():
        return None
    return source if _HUB_ID.fullmatch(source) else None


def teacher_hub_id(teacher: str, task: str) -> str | None:
    """The Hub repo of a trial's teacher, or None for a teacher that is not downloaded from the Hub (the MiniLM
    alias, a local directory). Aliases resolve as `kdgrid.core.model.shapes.resolve_teacher` resolves them.

    Raises:
        ConfigError: an alias (``bert-base``) without a teacher for ``task``.
    """
    if teacher == MINILM_ALIAS:
        return None
    if teacher in TEACHERS:
        table = TEACHERS[teacher]
        if task not in table:
            raise ConfigError(f"no {teacher} teacher for task {task!r}; the paper's cover {', '.join(table)}")
        return table[task].hub_name
    return _hub_id(teacher)


def init_hub_id(trial: Trial) -> str | None:
    """The Hub repo a student starts from, or None (``random``; ``init_recipe``, a local artifact;
    ``general_distillation``, always a local directory; ``preload`` from its teacher, already needed as the teacher). The defaults are those of
    `kdgrid.core.job.init.init_source`: ``pretrain`` without ``init_from`` is Turc et al.'s compact BERT."""
    if trial.init == "pretrain" and trial.option(INIT_RECIPE) is None:  # a recipe's checkpoint is local
        if trial.init_from:
            return _hub_id(trial.init_from)

        return turc_hub_name(student_shape(trial.student))
    if trial.init == "preload":
        return _hub_id(trial.init_from)
    return None


def trial_needs(trial: Trial) -> list[HubItem]:
    """What one trial needs from the Hub (see `sweep_needs`)."""
    items: list[HubItem] = []
    teacher = teacher_hub_id(trial.teacher, trial.task)
    if teacher:
        items.append(HubItem("model", teacher, tokenizer=True, used_by=(f"teacher of {trial.task}",)))
    init = init_hub_id(trial)
    if init:
        items.append(HubItem("model", init, used_by=(f"init of {trial.student}",)))
    task = get_task(trial.task)
    if task.source == "glue":
        items.append(
            HubItem(
                "dataset",
                str(task.param("dataset")),
                config=str(task.param("config", task.name)),
                splits=tuple(task.split_names),
                used_by=(f"task {task.name}",),
            )
        )
    return items


def sweep_needs(trials: Iterable[Trial]) -> list[HubItem]:
    """Every model repo and dataset config ``trials`` need from the Hub, each once (a repo needed as a teacher
    and as an init source needs its tokenizer), models first, then by id. Pure: no network, no cache."""
    merged: dict[tuple[str, str, str | None], HubItem] = {}
    for trial in trials:
        for item in trial_needs(trial):
            key = (item.kind, item.repo_id, item.config)
            seen = merged.get(key)
            if seen is None:
                merged[key] = item
                continue
            merged[key] = replace(
                seen,
                tokenizer=seen.tokenizer or item.tokenizer,
                splits=tuple(sorted(set(seen.splits) | set(item.splits))),
                used_by=tuple(sorted(set(seen.used_by) | set(item.used_by))),
            )
    return sorted(merged.values(), key=lambda i: (i.kind != "model", i.repo_id, i.config or ""))


# ------------------------------------------------------------------------------------------- the caches, offline


def _cached(repo_id: str, filename: str, repo_type: str = "model") -> Path | None:
    found = huggingface_hub.try_to_load_from_cache(repo_id, filename, repo_type=repo_type)
    return Path(found) if isinstance(found, str) else None  # None or _CACHED_NO_EXIST: not there


def _weights_cached(repo_id: str) -> bool:
    if any(_cached(repo_id, name) for name in SINGLE_WEIGHT_FILES):
        return True
    for index_name in WEIGHT_INDEX_FILES:
        index = _cached(repo_id, index_name)
        if index is not None:
            shards = set(json.loads(index.read_text()).get("weight_map", {}).values())
            return bool(shards) and all(_cached(repo_id, shard) for shard in shards)
    return False


def model_cached(item: HubItem) -> bool:
    """``config.json``, the weights and (for a teacher) a vocabulary of ``item`` are in the Hub cache."""
    return (
        _cached(item.repo_id, CONFIG_FILE) is not None
        and _weights_cached(item.repo_id)
        and (not item.tokenizer or any(_cached(item.repo_id, name) for name in VOCABULARY_FILES))
    )


def datasets_cache_dir() -> Path:
    """The folder ``datasets`` prepares datasets into (``HF_DATASETS_CACHE``, as the library read it)."""
    import datasets  # about 1 s; needed only where datasets are checked or loaded

    return Path(datasets.config.HF_DATASETS_CACHE)


def dataset_cached(item: HubItem, cache_dir: Path | None = None) -> bool:
    """A prepared copy of ``item``'s config with every split it needs is in the ``datasets`` cache: what
    ``load_dataset(repo_id, config)`` leaves under ``<cache>/<owner>___<name>/<config>/<version>/<hash>/``
    (``dataset_info.json`` and one or more Arrow files per split), and what it reads in offline mode."""
    folder = (cache_dir or datasets_cache_dir()) / item.repo_id.replace("/", "___") / str(item.config)
    for info_file in folder.glob("*/*/dataset_info.json"):
        splits = json.loads(info_file.read_text()).get("splits") or {}
        arrow = {p.name for p in info_file.parent.glob("*.arrow")}
        if all(
            split in splits and any(n.endswith(f"-{split}.arrow") or f"-{split}-" in n for n in arrow)
            for split in item.splits
        ):
            return True
    return False


def missing_items(items: Sequence[HubItem]) -> list[HubItem]:
    """The items not in this machine's caches (see `model_cached`, `dataset_cached`). Never uses the network."""
    cache_dir = datasets_cache_dir() if any(i.kind == "dataset" for i in items) else None
    return [
        item
        for item in items
        if not (model_cached(item) if item.kind == "model" else dataset_cached(item, cache_dir))
    ]


def missing_message(missing: Sequence[HubItem], sweeps: Sequence[str], *, limit: int = 8) -> str:
    """One message naming what is missing (the first ``limit``) and the command that fetches it."""
    shown = "; ".join(item.label for item in missing[:limit])
    more = f"; and {len(missing) - limit} more" if len(missing) > limit else ""
    return (
        f"{len(missing)} item(s) the sweep needs are not in the Hugging Face cache: {shown}{more}. "
        f"Run `kdgrid prefetch {' '.join(sweeps)}` while online (or pass --online to let every job fetch them)"
    )


# ----------------------------------------------------------------------------------------------- downloading


@dataclass(frozen=True)
class HubClient:
    """The network calls of `download`, each a plain function (a test passes recording ones).

    Attributes:
        list_files: ``(repo_id, repo_type) -> {path: size in bytes or None}`` of the repo's main revision.
        snapshot: ``(repo_id, allow_patterns) -> folder``: download those files into the Hub cache.
        load_dataset: ``(repo_id, config) -> None``: prepare a dataset config in the ``datasets`` cache.
    """

    list_files: Callable[[str, str], dict[str, int | None]]
    snapshot: Callable[[str, list[str]], Any]
    load_dataset: Callable[[str, str], Any]


def _list_files(repo_id: str, repo_type: str) -> dict[str, int | None]:
    api = huggingface_hub.HfApi()
    info = (api.model_info if repo_type == "model" else api.dataset_info)(repo_id, files_metadata=True)
    return {sibling.rfilename: sibling.size for sibling in info.siblings or []}


def _snapshot(repo_id: str, allow_patterns: list[str]) -> str:
    return huggingface_hub.snapshot_download(repo_id, allow_patterns=allow_patterns)


def _load_dataset(repo_id: str, config: str) -> None:
    import datasets

    datasets.load_dataset(repo_id, config)


def hub_client() -> HubClient:
    """The client that talks to the Hub: `huggingface_hub` and `datasets`."""
    return HubClient(list_files=_list_files, snapshot=_snapshot, load_dataset=_load_dataset)


@dataclass(frozen=True)
class Download:
    """One item to fetch: the files chosen and their total size (bytes; None where the Hub gave no size)."""

    item: HubItem
    files: tuple[str, ...]
    size: int | None


def model_files(item: HubItem, repo_files: Mapping[str, int | None]) -> list[str]:
    """The files of a model repo that `transformers` needs: ``config.json``, one set of weights (safetensors
    where the repo has them), and for a teacher the tokenizer's files.

    Raises:
        HubUnavailableError: the repo lacks a config, weights or (for a teacher) a vocabulary.
    """
    def refuse(what: str) -> HubUnavailableError:
        return HubUnavailableError(f"model {item.repo_id} on the Hub has no {what} (files: {sorted(repo_files)})")

    if CONFIG_FILE not in repo_files:
        raise refuse(CONFIG_FILE)
    weights = next(([name] for name in SINGLE_WEIGHT_FILES if name in repo_files), None)
    if weights is None:
        index = next((name for name in WEIGHT_INDEX_FILES if name in repo_files), None)
        if index is None:
            raise refuse(f"weights ({', '.join(SINGLE_WEIGHT_FILES + WEIGHT_INDEX_FILES)})")
        stem = index.removesuffix(".index.json").rsplit(".", 1)
        shard = re.compile(rf"{re.escape(stem[0])}-\d+-of-\d+\.{re.escape(stem[1])}")
        weights = [index, *sorted(name for name in repo_files if shard.fullmatch(name))]
    files = [CONFIG_FILE, *weights]
    if item.tokenizer:
        vocabulary = [name for name in VOCABULARY_FILES if name in repo_files]
        if not vocabulary:
            raise refuse(f"tokenizer vocabulary ({' or '.join(VOCABULARY_FILES)})")
        files += vocabulary + [name for name in TOKENIZER_EXTRA_FILES if name in repo_files]
    return files


def _total(files: Iterable[str], sizes: Mapping[str, int | None]) -> int | None:
    values = [sizes.get(name) for name in files]
    return None if any(v is None for v in values) else sum(v or 0 for v in values)


def _ask(call: Callable[[], Any], item: HubItem) -> Any:
    """``call()`` with the Hub's refusals turned into one message naming ``item``."""
    try:
        return call()
    except (RepositoryNotFoundError, GatedRepoError) as error:
        raise HubUnavailableError(
            f"{item.label} ({', '.join(item.used_by)}): the Hub has no such repo, or it is private or gated "
            f"({type(error).__name__}); check the id, or log in with `hf auth login`"
        ) from None
    except OSError as error:  # connection errors of the HTTP client are OSErrors too
        raise HubUnavailableError(
            f"{item.label}: cannot reach the Hugging Face Hub ({type(error).__name__}: {str(error)[:200]})"
        ) from None


def plan_downloads(items: Sequence[HubItem], client: HubClient) -> list[Download]:
    """The files each item needs and their sizes, asking the Hub for the repo listings (one call per repo).
    A dataset config is the repo's files under ``<config>/``."""
    listings: dict[tuple[str, str], dict[str, int | None]] = {}
    plan = []
    for item in items:
        key = (item.repo_id, item.kind)
        if key not in listings:
            listings[key] = _ask(partial(client.list_files, item.repo_id, item.kind), item)
        files = listings[key]
        if item.kind == "model":
            chosen = model_files(item, files)
        else:
            chosen = sorted(name for name in files if name.startswith(f"{item.config}/"))
            if not chosen:
                raise HubUnavailableError(f"{item.label}: the repo has no files under {item.config}/")
        plan.append(Download(item, tuple(chosen), _total(chosen, files)))
    return plan


def fetch(download: Download, client: HubClient) -> None:
    """Download one planned item: a model's files into the Hub cache, a dataset config prepared by
    ``load_dataset`` (which also leaves its files in the Hub cache)."""
    item = download.item
    if item.kind == "model":
        _ask(partial(client.snapshot, item.repo_id, list(download.files)), item)
    else:
        _ask(partial(client.load_dataset, item.repo_id, str(item.config)), item)


def refuse_offline(environ: Mapping[str, str] | None = None) -> None:
    """Downloading is impossible in offline mode: one message saying so (`HubUnavailableError`)."""
    switches = offline_switches(environ)
    if switches:
        raise HubUnavailableError(
            f"offline mode is on ({', '.join(f'{n}=1' for n in switches)}): `kdgrid prefetch` downloads from the "
            "Hub; unset it, or use `kdgrid prefetch --check` to list what is missing"
        )


def format_size(size: int | None) -> str:
    """``438.0 MB`` (decimal units, as the Hub shows sizes); ``?`` when unknown."""
    if size is None:
        return "?"
    value = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"
