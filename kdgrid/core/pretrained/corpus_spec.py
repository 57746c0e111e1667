"""Which text a pre-training run reads: a corpus named by one string, and its identity (part of a recipe's key).

The spellings (`parse_corpus`):

==================  =================================================================================
``wikibooks``       the paper's corpus: English Wikipedia and BookCorpus from the Hub (`HUB_PRESETS`;
                    docs/pretrain.md says which datasets and why)
``hub:NAME[:CONFIG]``  one Hub dataset's ``train`` split, its ``text`` column (``hub:wikimedia/wikipedia:20231101.en``)
``polarity``        offline: the sentences of the polarity corpus's training split (`kdgrid.assets`)
``generated``       offline: generated sentences of real vocabulary words (deterministic, no download)
``vocabulary``      offline: sentences of whole words drawn uniformly from the tokenizer vocabulary's words, so
                    that every word of the vocabulary is read (deterministic, no download)
``A+B[+...]``       the documents of A, then of B, ...: any of these spellings joined (``polarity+vocabulary``)
anything else       a local UTF-8 text file, or a folder of ``*.txt`` files (read recursively, sorted);
                    one document per blank-line-separated paragraph
==================  =================================================================================

A local corpus is identified by its spelling (part of the recipe) and its files' bytes (SHA-256): editing a file
changes the recipe's key, so a checkpoint never silently stands for text it was not trained on. Nothing here imports `datasets` or torch.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from kdgrid.errors import ConfigError
from kdgrid.file_digest import file_sha256

CORPUS_FORMAT_VERSION = (
    1  # bump when the reading of a corpus (splitting, cleaning) changes: keys change with it
)

# The Hub datasets of the ``wikibooks`` preset: (dataset, config, text column), read in this order.
HUB_PRESETS: dict[str, tuple[tuple[str, str | None, str], ...]] = {
    "wikibooks": (
        ("wikimedia/wikipedia", "20231101.en", "text"),
        ("bookcorpus/bookcorpus", None, "text"),
    ),
}
OFFLINE_CORPORA = ("polarity", "generated", "vocabulary")
JOIN = "+"  # joins corpus spellings: the documents of each, in order
HUB_PREFIX = "hub:"
TEXT_SUFFIX = ".txt"


@dataclass(frozen=True)
class CorpusSpec:
    """A parsed corpus: ``kind`` is ``hub`` (``sources`` lists (dataset, config, column)), ``polarity``,
    ``generated``, ``vocabulary``, ``local`` (``path``: a file or a folder) or ``joined`` (``parts``: the
    corpora joined, in order). ``name`` is the spelling it was given."""

    name: str
    kind: str
    sources: tuple[tuple[str, str | None, str], ...] = ()
    path: Path | None = None
    parts: tuple[CorpusSpec, ...] = ()

    def files(self) -> list[Path]:
        """A local corpus's text files, sorted (empty for the other kinds)."""
        if self.kind != "local" or self.path is None:
            return []
        if self.path.is_file():
            return [self.path]
        return sorted(p for p in self.path.rglob(f"*{TEXT_SUFFIX}") if p.is_file())

    def identity(self) -> str:
        """What the recipe's key hashes for this corpus besides its spelling: the Hub sources, the offline
        corpus's name, or the SHA-256 of a local corpus's files (names relative to its folder, and bytes)."""
        if self.kind == "hub":
            return "hub:" + ";".join(f"{d}:{c or ''}:{col}" for d, c, col in self.sources)
        if self.kind == "joined":
            return "joined:" + "|".join(part.identity() for part in self.parts)
        if self.kind != "local":
            return self.kind
        digest = hashlib.sha256()
        assert self.path is not None
        for file in self.files():
            relative = "" if self.path.is_file() else file.relative_to(self.path).as_posix()
            digest.update(f"{relative}:{file_sha256(file)}\n".encode())
        return f"local:{digest.hexdigest()}"


def parse_corpus(name: str) -> CorpusSpec:
    """The corpus a spelling names; `ConfigError` for an empty name, a malformed ``hub:`` name, or a local path
    that does not exist or holds no text file."""
    text = name.strip()
    if not text:
        raise ConfigError(
            f"the corpus is empty; name one: wikibooks, hub:NAME[:CONFIG], {', '.join(OFFLINE_CORPORA)}, a path, "
            f"or several joined with {JOIN!r}"
        )
    if text in HUB_PRESETS:
        return CorpusSpec(text, "hub", sources=HUB_PRESETS[text])
    if text in OFFLINE_CORPORA:
        return CorpusSpec(text, text)
    if text.startswith(HUB_PREFIX):
        parts = text[len(HUB_PREFIX) :].split(":")
        if not parts[0] or len(parts) > 2 or (len(parts) == 2 and not parts[1]):
            raise ConfigError(f"corpus {name!r}: write a Hub dataset as hub:NAME or hub:NAME:CONFIG")
        return CorpusSpec(text, "hub", sources=((parts[0], parts[1] if len(parts) == 2 else None, "text"),))
    path = Path(text).expanduser()
    if JOIN in text and not path.exists():
        parts = text.split(JOIN)
        if not all(part.strip() for part in parts):
            raise ConfigError(f"corpus {name!r}: an empty corpus between {JOIN!r} (write A{JOIN}B)")
        return CorpusSpec(text, "joined", parts=tuple(parse_corpus(part) for part in parts))
    if not path.exists():
        raise ConfigError(
            f"corpus {name!r} is not a file or folder ({path.absolute()}) nor one of: "
            f"{', '.join([*HUB_PRESETS, *OFFLINE_CORPORA])}, hub:NAME[:CONFIG], or several joined with {JOIN!r}"
        )
    spec = CorpusSpec(text, "local", path=path.resolve())
    if not spec.files():
        raise ConfigError(f"corpus {name!r}: the folder {path.absolute()} holds no *{TEXT_SUFFIX} file")
    return spec
