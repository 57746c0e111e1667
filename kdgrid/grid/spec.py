"""Reading a sweep file: YAML to a `SweepSpec`, every structural problem collected (never the first one only).

A sweep file (the reference: docs/sweeps.md) has these top-level keys:

``name``         the sweep's name (default: the file name without suffix)
``description``  free text
``extends``      a file (or list of files), relative to this one, whose ``fixed`` and ``overrides`` come first
``fixed``        settings every trial shares: Trial fields (``task``, ``student``, ``temperature``, ...)
``axes``         Trial field -> list of values; the grid is their cross product
``overrides``    list of ``{when: {field: value-or-list}, set: {field: value}}`` applied to each grid point
``include``      list of extra trials (settings merged over ``fixed``; not crossed with ``axes``)
``exclude``      list of ``{field: value-or-list}``: grid points matching every field are dropped
``studies``      name -> a sub-grid with its own ``description/fixed/axes/overrides/include/exclude``; the
                 top-level ``fixed``, ``axes``, ``overrides`` and ``exclude`` apply to every study
``seeds``        N >= 1: every trial becomes N student seeds (seed, seed + 1, ..., seed + N - 1) sharing the data
                 order of the first (``data_seed``), so they train in one job on identical batches
                 (`kdgrid.grid.expand.seed_variants`, docs/seeds.md); not with a ``seed`` axis
``table``        the table its trials are laid out in: one of `kdgrid.paper.TABLES` (``5``, ``"demo"``); recorded
                 in the store with the sweep's membership (`kdgrid.store.membership`). Not part of any trial
``preset``       the name of a recipe every method declares for itself (``paper``: each method's paper recipe),
                 set on the trials that use the method where the study leaves a field unset
                 (`kdgrid.grid.presets`); a study may name its own. Its values become the trials' own
``plugins``      list of module names imported (`kdgrid.plugins.load_plugins`) as the file is read, before any
                 name is checked: the modules that register the sweep's own knowledge functions, strategies or
                 options; the executors hand them to every job's process. Not part of any trial (nor its id)

YAML's silent "last duplicate key wins" is refused: a key written twice is an error. So is a document that
would expand, through aliases, to more than `MAX_YAML_NODES` nodes (an "alias bomb" of a few lines would
otherwise take minutes and gigabytes before anything could refuse it) or that refers to itself.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kdgrid.grid.presets import PRESET_KEY, preset_problem, protected_keys
from kdgrid.paper import TABLES
from kdgrid.plugins import load_plugins
from kdgrid.suggest import did_you_mean
from kdgrid.trial import Trial

SEEDS_KEY = "seeds"
PLUGINS_KEY = "plugins"
TABLE_KEY = "table"
TOP_KEYS = (
    "name",
    "description",
    "extends",
    "fixed",
    "axes",
    "overrides",
    "include",
    "exclude",
    "studies",
    SEEDS_KEY,
    PLUGINS_KEY,
    TABLE_KEY,
    PRESET_KEY,
)
STUDY_KEYS = ("description", "fixed", "axes", "overrides", "include", "exclude", PRESET_KEY)
OVERRIDE_KEYS = ("when", "set")
FRAGMENT_KEYS = ("description", "fixed", "overrides")  # what an `extends` file may hold
TRIAL_FIELDS: tuple[str, ...] = Trial.field_names()
DEFAULT_STUDY = "main"


class Problems:
    """Every problem found in one sweep, each as ``<file>: <key path>: <message>``."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.reported_options: set[str] = set()  # unknown option names already refused where written
        self._per_trial: dict[str, list[Any]] = {}  # a trial problem's text -> [its index in items, trials]

    def add(self, source: str, where: str, message: str) -> None:
        text = f"{source}: {where}: {message}" if where else f"{source}: {message}"
        if text not in self.items:
            self.items.append(text)

    def add_for_trial(self, source: str, where: str, trial: str, message: str) -> None:
        """A problem of one trial (``trial``: its settings in words), stated once however many trials share it:
        ``<file>: <where>: <message> (N trials, e.g. trial {...})``."""
        key = f"{source}: {where}: {message}"
        if key not in self._per_trial:
            self._per_trial[key] = [len(self.items), 0]
            self.items.append("")
        entry = self._per_trial[key]
        entry[1] += 1
        count = "1 trial" if entry[1] == 1 else f"{entry[1]:,} trials"
        self.items[entry[0]] = f"{key} ({count}, e.g. trial {trial})" if entry[1] > 1 else f"{source}: {where}: trial {trial}: {message}"

    def __bool__(self) -> bool:
        return bool(self.items)


class _StrictLoader(yaml.SafeLoader):
    """A SafeLoader that records keys written twice in one mapping instead of keeping the last silently."""

    duplicates: list[str]


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            loader.duplicates.append(f"key {key!r} is written twice (line {key_node.start_mark.line + 1})")
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)

# YAML 1.1 (PyYAML) reads `1e-3` as the string "1e-3": its floats need a dot. Sweep files are full of learning
# rates written that way, so scientific notation without a dot is a float here, as in YAML 1.2 and JSON.
SCIENTIFIC_FLOAT = re.compile(r"^[-+]?[0-9]+(?:\.[0-9]*)?[eE][-+]?[0-9]+$")
_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", SCIENTIFIC_FLOAT, list("-+0123456789"))


# The most nodes a YAML document may hold once its aliases are expanded: far above any sweep or trial file
# (the paper's biggest sweep has a few hundred), far below what takes a noticeable time to build.
MAX_YAML_NODES = 1_000_000


# What a document nested deeper than Python's recursion limit (about a thousand levels) is told.
TOO_DEEP = "the document nests lists or mappings too deeply to read (no sweep needs more than a few levels)"


class YamlTooLarge(ValueError):
    """A YAML document that expands (through aliases) to too many nodes, or refers to itself."""


def expanded_size(root: yaml.Node) -> int:
    """How many nodes ``root`` holds once every alias is expanded, computed on the composed node graph (where an
    alias is one shared node), without expanding anything.

    Raises:
        YamlTooLarge: more than `MAX_YAML_NODES`, or a node that contains itself through an alias.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            if sizes[key] > MAX_YAML_NODES:
                raise YamlTooLarge(
                    f"the document expands (through its aliases) to more than {MAX_YAML_NODES:,} nodes "
                    f"(at line {node.start_mark.line + 1}); write it without aliases that multiply"
                )
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise YamlTooLarge(
                f"an alias at line {node.start_mark.line + 1} refers to a node that contains it"
            )
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [item for pair in node.value for item in pair]
    return []


def yaml_error_message(error: yaml.YAMLError) -> str:
    """A YAML error on one line: where (line and column, 1-based) and what, with the parser's context."""
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        text = f"line {mark.line + 1}, column {mark.column + 1}: {error.problem}"
        if error.context:
            context_mark = error.context_mark
            where = (
                f" at line {context_mark.line + 1}, column {context_mark.column + 1}" if context_mark else ""
            )
            text += f" ({error.context}{where})"
        return " ".join(text.split())
    return " ".join(str(error).split())


def load_yaml(path: Path, problems: Problems) -> Any:
    """Parse a YAML file; unreadable or binary files, syntax errors, duplicate keys and documents too large once
    expanded become problems."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        problems.add(str(path), "", f"not a UTF-8 text file ({error.reason} at byte {error.start})")
        return None
    except OSError as error:
        problems.add(str(path), "", f"cannot read the file ({error.strerror or error})")
        return None
    loader: _StrictLoader | None = None
    try:
        # the loader reads the whole text at once: a character YAML forbids (a NUL byte) is refused here
        loader = _StrictLoader(text)
        loader.duplicates = []
        node = loader.get_single_node()
        if node is None:
            return None
        expanded_size(node)
        data = loader.construct_document(node)
    except yaml.YAMLError as error:
        problems.add(str(path), "", f"not valid YAML: {yaml_error_message(error)}")
        return None
    except YamlTooLarge as error:
        problems.add(str(path), "", f"refused: {error}")
        return None
    except RecursionError:  # PyYAML composes nested collections recursively
        problems.add(str(path), "", f"refused: {TOO_DEEP}")
        return None
    finally:
        if loader is not None:
            loader.dispose()
    for duplicate in loader.duplicates:
        problems.add(str(path), "", duplicate)
    return data


@dataclass
class Located:
    """A value and where it was written (file and key path), so a later check can name its origin."""

    value: Any
    source: str
    where: str


@dataclass
class Override:
    when: dict[str, Located]
    set: dict[str, Located]
    source: str
    where: str


@dataclass
class StudySpec:
    """One sub-grid, with the top-level settings already merged in."""

    name: str
    description: str = ""
    fixed: dict[str, Located] = field(default_factory=dict)
    axes: dict[str, Located] = field(default_factory=dict)  # each value a non-empty list
    overrides: list[Override] = field(default_factory=list)
    include: list[dict[str, Located]] = field(default_factory=list)
    exclude: list[dict[str, Located]] = field(default_factory=list)
    include_where: list[str] = field(default_factory=list)
    preset: Located | None = None  # ``preset: NAME`` (the study's, else the top level's), checked
    protected: frozenset[str] = frozenset()  # what the study itself writes, which a preset leaves alone


@dataclass
class SweepSpec:
    """A parsed sweep. ``seeds``: the student seeds per trial (the ``seeds`` key; None when not written);
    ``table``: the table it declares (the ``table`` key as text, ``"5"``; None when not written)."""

    name: str
    path: Path
    description: str
    studies: list[StudySpec]
    seeds: int | None = None
    plugins: tuple[str, ...] = ()
    table: str | None = None


def _table(data: Mapping[str, Any], source: str, problems: Problems) -> str | None:
    """The ``table`` key as the table's name (``5`` -> ``"5"``), None when absent or not one of `TABLES`."""
    if TABLE_KEY not in data:
        return None
    value = data[TABLE_KEY]
    name = str(value).strip() if isinstance(value, (int, str)) and not isinstance(value, bool) else None
    if name in TABLES:
        return name
    problems.add(
        source,
        TABLE_KEY,
        f"must be one of {', '.join(TABLES)} (the table this sweep's trials are laid out in), got {value!r}",
    )
    return None


MAX_NAME_CHARS = 100
"""The longest sweep or study name: names become file names in the store (memberships), and a file name holds
at most 255 bytes once escaped."""


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a sweep or a study (None when it can): empty, longer than `MAX_NAME_CHARS`, a
    control, format or line-separator character, or ``.`` / ``..`` (other characters, ``/`` included, are
    escaped where a name becomes a file name: `kdgrid.store.membership`)."""
    if not name.strip():
        return f"must be a non-empty name, got {name!r}"
    if len(name) > MAX_NAME_CHARS:
        return f"is {len(name)} characters long; allowed: at most {MAX_NAME_CHARS}"
    bad = sorted({c for c in name if unicodedata.category(c)[0] in "CZ" and c != " "})
    if bad:
        shown = ", ".join(repr(c) for c in bad)
        return f"{name!r} holds {shown}; allowed: letters, digits, spaces and punctuation"
    if name in (".", ".."):
        return f"{name!r} is not a name; allowed: letters, digits, spaces and punctuation"
    return None


def _seeds(data: Mapping[str, Any], source: str, problems: Problems) -> int | None:
    """The ``seeds`` key's count: an integer >= 1 (a bool or a float is refused), None when absent or invalid."""
    if SEEDS_KEY not in data:
        return None
    value = data[SEEDS_KEY]
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    problems.add(
        source,
        SEEDS_KEY,
        f"must be an integer >= 1 (how many student seeds each trial gets: seed, seed + 1, ...), got {value!r}",
    )
    return None


def _plugins(value: Any, source: str, problems: Problems) -> tuple[str, ...]:
    """The ``plugins`` list, each module imported now (so the names it registers are known to the checks that
    follow).

    Raises:
        PluginError: a module that cannot be imported (one message: the rest of the file would only add unknown
            names).
    """
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(name, str) and name.strip() for name in value):
        problems.add(source, PLUGINS_KEY, f"must be a list of module names, got {value!r}")
        return ()
    modules = tuple(name.strip() for name in value)
    load_plugins(modules, source=f"the sweep file {source}")
    return modules


def _preset(data: Mapping[str, Any], source: str, where: str, problems: Problems) -> Located | None:
    """The ``preset`` key of a level (None when not written, or refused: reported)."""
    if PRESET_KEY not in data:
        return None
    at = _join(where, PRESET_KEY)
    problem = preset_problem(data[PRESET_KEY])
    if problem is not None:
        problems.add(source, at, problem)
        return None
    return Located(data[PRESET_KEY], source, at)


def _raw(settings: dict[str, Located]) -> dict[str, Any]:
    return {key: located.value for key, located in settings.items()}


def _check_seed_axis(seeds: int | None, studies: list[StudySpec], source: str, problems: Problems) -> None:
    """``seeds`` derives the seeds from each trial's ``seed``: a ``seed`` axis would give two lists of seeds."""
    if seeds is None:
        return
    for study in studies:
        if "seed" in study.axes:
            problems.add(
                source,
                SEEDS_KEY,
                f"cannot be combined with a list of seeds ({study.axes['seed'].where}); either list the seeds "
                "on the axis (each seed then draws its own data order, one job each), or write the first seed "
                "in fixed.seed and keep `seeds: N`",
            )
            return


def _check_keys(
    data: Mapping[str, Any], allowed: tuple[str, ...], source: str, where: str, problems: Problems, what: str
) -> None:
    for key in data:
        if key not in allowed:
            problems.add(
                source,
                _join(where, str(key)),
                f"unknown {what} key {key!r}; allowed: {', '.join(allowed)}{did_you_mean(str(key), allowed)}",
            )


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _mapping(value: Any, source: str, where: str, problems: Problems) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.add(source, where, f"must be a mapping, got {type(value).__name__}")
        return {}
    return dict(value)


def _settings(value: Any, source: str, where: str, problems: Problems) -> dict[str, Located]:
    """A mapping of Trial fields (``fixed``, ``set``, an ``include`` entry, a ``when`` / ``exclude`` rule)."""
    out: dict[str, Located] = {}
    for key, item in _mapping(value, source, where, problems).items():
        if key not in TRIAL_FIELDS:
            problems.add(
                source,
                _join(where, str(key)),
                f"unknown trial field {key!r}; allowed: {', '.join(TRIAL_FIELDS)}"
                f"{did_you_mean(str(key), TRIAL_FIELDS)}",
            )
            continue
        if key == "options":
            _check_option_names(item, source, _join(where, key), problems)
        out[key] = Located(item, source, _join(where, key))
    return out


def _check_option_names(value: Any, source: str, where: str, problems: Problems) -> None:
    """Refuse, where they are written, the option names that are neither options nor ``{knowledge}.{variant}``
    (``value``: an options mapping, or an axis' list of them); each trial's other option problems (values,
    variants) are found when the trials are built. `Problems.reported_options` keeps the trial checks from
    stating the same name again, once per trial."""
    from kdgrid.core.options import OPTIONS, unknown_option_message

    mappings = value if isinstance(value, list) else [value]
    for index, mapping in enumerate(mappings):
        if not isinstance(mapping, Mapping):
            continue
        at = f"{where}[{index}]" if isinstance(value, list) else where
        for name in mapping:
            if isinstance(name, str) and name not in OPTIONS and "." not in name:
                problems.add(source, _join(at, name), unknown_option_message(name))
                problems.reported_options.add(name)


def _axes(value: Any, source: str, where: str, problems: Problems) -> dict[str, Located]:
    axes = _settings(value, source, where, problems)
    for key, located in list(axes.items()):
        values = located.value
        if not isinstance(values, list):
            problems.add(source, located.where, f"an axis must be a list of values, got {values!r}")
            del axes[key]
        elif not values:
            problems.add(
                source, located.where, "empty axis: list at least one value (or move the key to `fixed`)"
            )
            del axes[key]
        else:
            seen: list[Any] = []
            for item in values:
                frozen_item = frozen(item)
                if frozen_item in seen:
                    problems.add(source, located.where, f"value {item!r} is listed twice on this axis")
                seen.append(frozen_item)
    return axes


def frozen(value: Any) -> Any:
    """A YAML value made hashable, equal values alike: lists as tuples, mappings as sorted ``(key, value)``
    pairs, recursively (to find a value written twice on an axis, or among a rule's candidates)."""
    if isinstance(value, list):
        return tuple(frozen(v) for v in value)
    if isinstance(value, Mapping):
        return tuple(sorted((k, frozen(v)) for k, v in value.items()))
    return value


def _overrides(value: Any, source: str, where: str, problems: Problems) -> list[Override]:
    if value is None:
        return []
    if not isinstance(value, list):
        problems.add(source, where, "must be a list of {when: ..., set: ...}")
        return []
    out = []
    for index, item in enumerate(value):
        here = f"{where}[{index}]"
        entry = _mapping(item, source, here, problems)
        _check_keys(entry, OVERRIDE_KEYS, source, here, problems, "override")
        if "set" not in entry:
            problems.add(source, here, "an override needs `set` (and usually `when`)")
        when = _settings(entry.get("when"), source, _join(here, "when"), problems)
        settings = _settings(entry.get("set"), source, _join(here, "set"), problems)
        out.append(Override(when, settings, source, here))
    return out


def _rules(value: Any, source: str, where: str, problems: Problems) -> list[dict[str, Located]]:
    if value is None:
        return []
    if not isinstance(value, list):
        problems.add(source, where, "must be a list of mappings of trial fields")
        return []
    rules = []
    for index, item in enumerate(value):
        rule = _settings(item, source, f"{where}[{index}]", problems)
        if not rule and isinstance(item, Mapping) and not item:
            problems.add(source, f"{where}[{index}]", "an empty rule would match every trial")
        rules.append(rule)
    return rules


def _check_axis_fixed_clash(
    fixed: dict[str, Located], axes: dict[str, Located], source: str, problems: Problems
) -> None:
    for key in axes:
        if key in fixed:
            problems.add(
                source,
                axes[key].where,
                f"{key!r} is both an axis and a fixed setting ({fixed[key].where}); keep one",
            )


def layer_settings(under: dict[str, Located], over: dict[str, Located]) -> dict[str, Located]:
    """Set ``over``'s settings on ``under`` (in place; returned): each field replaces the one beneath, except
    ``options`` mappings, which merge option by option (a later value of the same option wins), as overrides
    and ``include`` entries merge them. So options fixed in an ``extends`` file, at the top level and in a study
    all reach the study's trials; a value that is not a mapping replaces (and is refused where it is checked)."""
    for key, located in over.items():
        beneath = under.get(key)
        if key == "options" and beneath is not None and _both_mappings(beneath.value, located.value):
            located = Located({**beneath.value, **located.value}, located.source, located.where)
        under[key] = located
    return under


def _both_mappings(first: Any, second: Any) -> bool:
    return isinstance(first, dict) and isinstance(second, dict)


def _unswept(fixed: dict[str, Located], axes: dict[str, Located]) -> dict[str, Located]:
    """The fixed settings a level's axes leave in place: a swept field replaces the fixed one, except
    ``options``, which each axis value merges into (`kdgrid.grid.expand.set_fields`)."""
    return {k: v for k, v in fixed.items() if k not in axes or k == "options"}


def _load_fragment(
    path: Path, problems: Problems, chain: tuple[Path, ...]
) -> tuple[dict[str, Located], list[Override]]:
    """The ``fixed`` and ``overrides`` of an ``extends`` file (which may extend others)."""
    source = str(path)
    if path.resolve() in chain:
        problems.add(source, "extends", "files extend each other in a cycle")
        return {}, []
    data = _mapping(load_yaml(path, problems), source, "", problems)
    _check_keys(data, ("extends", *FRAGMENT_KEYS), source, "", problems, "extends-file")
    fixed, overrides = _extends(data.get("extends"), path, problems, (*chain, path.resolve()))
    layer_settings(fixed, _settings(data.get("fixed"), source, "fixed", problems))
    overrides.extend(_overrides(data.get("overrides"), source, "overrides", problems))
    return fixed, overrides


def _extends(
    value: Any, path: Path, problems: Problems, chain: tuple[Path, ...]
) -> tuple[dict[str, Located], list[Override]]:
    if value is None:
        return {}, []
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        problems.add(str(path), "extends", "must be a file name or a list of file names")
        return {}, []
    fixed: dict[str, Located] = {}
    overrides: list[Override] = []
    for name in names:
        base = (path.parent / name).resolve()
        if not base.is_file():
            problems.add(str(path), "extends", f"file {name!r} not found (looked at {base})")
            continue
        more_fixed, more_overrides = _load_fragment(base, problems, chain)
        layer_settings(fixed, more_fixed)
        overrides.extend(more_overrides)
    return fixed, overrides


def parse_sweep(path: Path | str, problems: Problems) -> SweepSpec | None:
    """Parse and structurally check a sweep file; problems are collected, not raised."""
    path = Path(path)
    source = str(path)
    data = load_yaml(path, problems)
    if data is None and problems:
        return None
    if not isinstance(data, Mapping):
        problems.add(source, "", "a sweep file must be a mapping with keys like fixed, axes, studies")
        return None
    _check_keys(data, TOP_KEYS, source, "", problems, "top-level")
    plugins = _plugins(data.get(PLUGINS_KEY), source, problems)
    name = data.get("name", path.stem)
    if not isinstance(name, str) or not name:
        problems.add(source, "name", f"must be a non-empty string, got {name!r}")
        name = path.stem
    elif (why := name_problem(name)) is not None:
        problems.add(source, "name", why)
    base_fixed, base_overrides = _extends(data.get("extends"), path, problems, (path.resolve(),))
    own_fixed = _settings(data.get("fixed"), source, "fixed", problems)
    top_axes = _axes(data.get("axes"), source, "axes", problems)
    _check_axis_fixed_clash(own_fixed, top_axes, source, problems)
    # What an `extends` file fixes, this file may sweep or fix differently.
    top_fixed = layer_settings(_unswept(base_fixed, top_axes), own_fixed)
    top_overrides = base_overrides + _overrides(data.get("overrides"), source, "overrides", problems)
    top_exclude = _rules(data.get("exclude"), source, "exclude", problems)
    top_preset = _preset(data, source, "", problems)
    # What a preset may not replace: any axis and any override's `set` (the study's own fixed is added below).
    top_protected = protected_keys([_raw(top_axes), *(_raw(o.set) for o in top_overrides)])
    studies_data = _mapping(data.get("studies"), source, "studies", problems)
    studies: list[StudySpec] = []
    if not studies_data:
        include = _rules(data.get("include"), source, "include", problems)
        studies.append(
            StudySpec(
                name=DEFAULT_STUDY,
                description=str(data.get("description", "")),
                fixed=top_fixed,
                axes=top_axes,
                overrides=top_overrides,
                include=include,
                exclude=top_exclude,
                include_where=[f"include[{i}]" for i in range(len(include))],
                preset=top_preset,
                protected=frozenset(top_protected),
            )
        )
    elif "include" in data:
        problems.add(source, "include", "with `studies`, put `include` inside the study it belongs to")
    for study_name, study_data in studies_data.items():
        where = f"studies.{study_name}"
        if (why := name_problem(str(study_name))) is not None:
            problems.add(source, where, f"the study name {why}")
        body = _mapping(study_data, source, where, problems)
        _check_keys(body, STUDY_KEYS, source, where, problems, "study")
        own_fixed = _settings(body.get("fixed"), source, f"{where}.fixed", problems)
        own_axes = _axes(body.get("axes"), source, f"{where}.axes", problems)
        _check_axis_fixed_clash(own_fixed, own_axes, source, problems)
        # A study may sweep what the top level fixes, and fix what the top level sweeps.
        fixed = layer_settings(_unswept(top_fixed, own_axes), own_fixed)
        axes = {**{k: v for k, v in top_axes.items() if k not in own_fixed}, **own_axes}
        include = _rules(body.get("include"), source, f"{where}.include", problems)
        study_overrides = _overrides(body.get("overrides"), source, f"{where}.overrides", problems)
        study_preset = _preset(body, source, where, problems)
        protected = top_protected | protected_keys(
            [_raw(own_fixed), _raw(own_axes), *(_raw(o.set) for o in study_overrides)]
        )
        studies.append(
            StudySpec(
                name=str(study_name),
                description=str(body.get("description", "")),
                fixed=fixed,
                axes=axes,
                overrides=top_overrides + study_overrides,
                include=include,
                exclude=top_exclude + _rules(body.get("exclude"), source, f"{where}.exclude", problems),
                include_where=[f"{where}.include[{i}]" for i in range(len(include))],
                preset=study_preset if PRESET_KEY in body else top_preset,
                protected=frozenset(protected),
            )
        )
    seeds = _seeds(data, source, problems)
    _check_seed_axis(seeds, studies, source, problems)
    return SweepSpec(
        name=name,
        path=path,
        description=str(data.get("description", "")),
        studies=studies,
        seeds=seeds,
        plugins=plugins,
        table=_table(data, source, problems),
    )
