"""From a parsed sweep to validated, canonical, de-duplicated trials.

Per study: the cross product of the axes over ``fixed``; then each ``override`` whose ``when`` matches sets its
values (in file order; ``extends`` files first); ``options`` are merged option by option, never replaced, wherever
they are set again (``extends`` files, the top level, a study, an axis value, an override, an ``include`` entry);
``{field}`` in a string value is replaced by that field's value (e.g. ``init_from: gd/{student}``); a trial
without knowledge has no strategy (so a baseline crossed with the strategies is one trial); ``exclude`` rules drop grid points; ``include`` entries are added. With ``seeds: N``
each trial becomes N student seeds sharing one data order (`seed_variants`). A trial that two studies (or two
grid points) produce is kept once, under the first study.

Every problem of every kind is collected and raised together as one `ConfigError`.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kdgrid.core.trial_rules import combination_problems, trial_problems, value_problems
from kdgrid.errors import ConfigError
from kdgrid.grid.limits import DEFAULT_MAX_TRIALS
from kdgrid.grid.presets import as_settings, preset_values, protected_keys
from kdgrid.grid.spec import SEEDS_KEY, Located, Override, Problems, StudySpec, SweepSpec, parse_sweep
from kdgrid.grid.stages import Reference, is_reference, resolve_references
from kdgrid.grid.values import InvalidValue, drop_unused_fields, normalize, rule_candidates
from kdgrid.store import layout
from kdgrid.store.claims import CLAIMS_DIR
from kdgrid.store.membership import MEMBERSHIPS_DIR
from kdgrid.store.run_ledger import RUNS_DIR
from kdgrid.trial import DATA_SEED, REQUIRED_FIELDS, Trial

MAX_LISTED_PROBLEMS = 60
_TEMPLATE = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class PlannedTrial:
    """A trial and the study of the sweep it belongs to."""

    trial: Trial
    study: str


@dataclass
class Sweep:
    """A validated sweep: its unique trials, in a stable order (study, then grid order).

    Attributes:
        grid_points: trials the file describes before de-duplication (what a paper's table counts as cells,
            times ``seeds``).
        repeated: grid points that were the same trial as an earlier one and were merged.
        seeds: the sweep's ``seeds: N`` (student seeds per cell, sharing one data order), None when not set.
        table: the table the sweep file declares (its ``table:`` key: ``"5"``, ``"demo"``), None when none.
        presets: per study, what its preset (``preset: paper``, `kdgrid.grid.presets`) set on its trials:
            ``{study: {"preset": name, "set": {field or "options.NAME": value}}}``; studies it set nothing on
            are absent.
    """

    name: str
    path: Path
    description: str
    trials: list[PlannedTrial]
    studies: list[str]
    grid_points: int
    repeated: int
    seeds: int | None = None
    table: str | None = None
    presets: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

    def study_of(self) -> dict[str, str]:
        return {p.trial.trial_id: p.study for p in self.trials}


class _Normalizer:
    """Canonicalises located values, recording each invalid one once with where it was written."""

    def __init__(self, problems: Problems) -> None:
        self.problems = problems

    def value(self, field: str, located: Located, where: str | None = None) -> tuple[bool, Any]:
        try:
            return True, normalize(field, located.value)
        except InvalidValue as error:
            self.problems.add(located.source, where or located.where, str(error))
            return False, None

    def settings(self, settings: dict[str, Located]) -> tuple[dict[str, Any], set[str]]:
        good: dict[str, Any] = {}
        bad: set[str] = set()
        for field, located in settings.items():
            ok, value = self.value(field, located)
            if ok:
                good[field] = value
            else:
                bad.add(field)
        return good, bad

    def rule(self, rule: dict[str, Located]) -> dict[str, list[Any]] | None:
        out: dict[str, list[Any]] = {}
        for field, located in rule.items():
            try:
                out[field] = rule_candidates(field, located.value)
            except InvalidValue as error:
                self.problems.add(located.source, located.where, str(error))
                return None
        return out


def _matches(rule: dict[str, list[Any]], config: dict[str, Any]) -> bool:
    return all(config.get(field, _DEFAULTS.get(field)) in candidates for field, candidates in rule.items())


_DEFAULT_TRIAL = Trial("task", "teacher", "student")
_DEFAULTS: dict[str, Any] = {name: getattr(_DEFAULT_TRIAL, name) for name in Trial.field_names()}


def _fill_templates(config: dict[str, Any]) -> None:
    for field, value in config.items():
        if isinstance(value, str) and "{" in value:
            config[field] = _TEMPLATE.sub(
                lambda m: str(config.get(m.group(1), _DEFAULTS.get(m.group(1), m.group(0)))), value
            )


class _StudyExpander:
    def __init__(self, study: StudySpec, normalizer: _Normalizer, problems: Problems, source: str) -> None:
        self.study = study
        self.normalizer = normalizer
        self.problems = problems
        self.source = source
        self.fixed, self.bad = normalizer.settings(study.fixed)
        self.axes: list[tuple[str, list[Any]]] = []
        for field, located in study.axes.items():
            values: list[Any] = []
            spelling: dict[Any, Any] = {}  # canonical value -> how it was first written
            for index, raw in enumerate(located.value):
                ok, value = normalizer.value(field, Located(raw, located.source, f"{located.where}[{index}]"))
                if ok and value in spelling:
                    if raw == spelling[value]:
                        continue  # written twice alike: `kdgrid.grid.spec` reports it
                    problems.add(
                        located.source,
                        f"{located.where}[{index}]",
                        f"{raw!r} is the same value as {spelling[value]!r} on this axis (both are {value!r})",
                    )
                elif ok:
                    spelling[value] = raw
                    values.append(value)
            if values:
                self.axes.append((field, values))
            else:
                self.bad.add(field)
        self.overrides: list[tuple[dict[str, list[Any]], dict[str, Any]]] = []
        for override in study.overrides:
            compiled = self._override(override)
            if compiled is not None:
                self.overrides.append(compiled)
        self.excludes = [r for r in (normalizer.rule(rule) for rule in study.exclude) if r is not None]
        self.missing_reported: set[str] = set()
        self.preset_set: dict[str, Any] = {}  # what the study's preset set on its trials: key -> value

    def _preset(self, trial: Trial | None, config: dict[str, Any], protected: set[str]) -> Trial | None:
        """``trial`` with the study's preset applied (`kdgrid.grid.presets`): its values set where the study
        leaves them unset, canonicalised as the file's own are, and the trial rebuilt; ``trial`` when none."""
        if trial is None or self.study.preset is None:
            return trial
        raw = preset_values(trial, self.study.preset.value, protected)
        if not raw:
            return trial
        located = {k: Located(v, self.study.preset.source, self.study.preset.where) for k, v in
                   as_settings(raw).items()}  # fmt: skip
        settings, bad = self.normalizer.settings(located)
        if bad:
            return None
        self.preset_set.update(raw)
        config = {name: getattr(trial, name) for name in Trial.field_names()}
        set_fields(config, settings)
        drop_unused_fields(config)
        return Trial(**config)

    def _override(self, override: Override) -> tuple[dict[str, list[Any]], dict[str, Any]] | None:
        when = self.normalizer.rule(override.when)
        settings, bad = self.normalizer.settings(override.set)
        self.bad |= bad
        return None if when is None else (when, settings)

    def _finish(self, config: dict[str, Any], where: str) -> Trial | None:
        """The trial of one grid point: matching overrides set their values, templates are filled, then
        `build_trial` (each missing field reported once per study)."""
        for when, settings in self.overrides:
            if _matches(when, config):
                set_fields(config, settings)
        _fill_templates(config)
        return build_trial(
            config,
            self.bad,
            self.problems,
            self.source,
            where,
            hint=SWEEP_HINT,
            reported=self.missing_reported,
        )

    def grid(self) -> Iterable[tuple[Trial | None, str, bool]]:
        """(trial or None, where, is_include) for each grid point, excluded points skipped."""
        fields = [f for f, _ in self.axes]
        # where a grid point's problem is reported: its study, or the top level's axes (its fixed part without them)
        where = f"studies.{self.study.name}" if self.study.name != "main" else "axes" if self.axes else "fixed"
        # No axes: the grid is the one point `fixed` describes, unless the study lists its trials in `include`.
        points = [] if not self.axes and self.study.include else itertools.product(*(v for _, v in self.axes))
        for point in points:
            config = dict(self.fixed)
            set_fields(config, dict(zip(fields, point, strict=True)))
            trial = self._preset(self._finish(config, where), config, set(self.study.protected))
            if trial is None:
                yield None, where, False
                continue
            if self.excludes and any(_matches(rule, config) for rule in self.excludes):
                continue
            yield trial, where, False
        for entry, entry_where in zip(self.study.include, self.study.include_where, strict=True):
            settings, bad = self.normalizer.settings(entry)
            if bad:
                continue
            config = dict(self.fixed)
            set_fields(config, settings)
            protected = set(self.study.protected) | protected_keys([{k: v.value for k, v in entry.items()}])
            yield self._preset(self._finish(config, entry_where), config, protected), entry_where, True


def set_fields(config: dict[str, Any], settings: dict[str, Any]) -> None:
    """Apply canonical ``settings`` over ``config`` in place: each field is replaced, except ``options``, which
    is merged option by option (an override setting ``teacher_label_order`` keeps an ``init_recipe`` set before
    it; a later value of the same option wins). Options are canonical sorted ``(name, value)`` pairs."""
    for field, value in settings.items():
        if field == "options" and config.get("options"):
            value = tuple(sorted({**dict(config["options"]), **dict(value)}.items()))
        config[field] = value


# Where a missing required field is set, by the kind of file that lacks it (the rest of the message is one text).
SWEEP_HINT = "set it in fixed or axes"
TRIAL_FILE_HINT = "set it in the trial"


def build_trial(
    config: dict[str, Any],
    refused: set[str],
    problems: Problems,
    source: str,
    where: str,
    *,
    hint: str,
    reported: set[str] | None = None,
) -> Trial | None:
    """The one way canonical settings become a `Trial`, for sweep files and trial files alike.

    ``config``: field -> canonical value (`normalize` applied, as `_Normalizer.settings` does); ``refused``: the
    fields whose value was refused (already reported where it was written, so not reported again as missing).
    Unused fields are dropped (`drop_unused_fields`); each required field without a value is reported under
    ``where`` as "no value for required field 'F' (``hint``)" (``hint`` says where it is set: `SWEEP_HINT`,
    `TRIAL_FILE_HINT`), once per field in ``reported`` when given. None when a required field has no value or a
    refused one; a trial built without a refused optional field is still returned, so that its other problems
    are found too (`report_trial_problems` skips those that only follow from the refusal).
    """
    drop_unused_fields(config)
    missing = [f for f in REQUIRED_FIELDS if f not in config and f not in refused]
    for field in missing:
        if reported is None or field not in reported:
            if reported is not None:
                reported.add(field)
            problems.add(source, where, f"no value for required field {field!r} ({hint})")
    if missing or any(f in refused for f in REQUIRED_FIELDS if f not in config):
        return None
    return Trial(**config)


def report_trial_problems(
    trial: Trial, messages: Iterable[str], refused: set[str], problems: Problems, source: str, where: str
) -> None:
    """Add a trial's problems (`kdgrid.core.trial_rules.trial_problems` or parts of it) under ``where: trial
    {its settings}``, leaving out those that only follow from a refused value reported where it was written
    (a knowledge that "needs a `strategy`" when the strategy written was refused)."""
    for message in messages:
        if "strategy" in refused and "needs a `strategy`" in message:
            continue
        if any(message.startswith(f"unknown option {name!r}") for name in problems.reported_options):
            continue  # refused where it is written (`kdgrid.grid.spec`), not again per trial
        problems.add_for_trial(source, where, _describe(trial), message)


def trial_from_settings(settings: Any, problems: Problems, source: str, where: str) -> Trial | None:
    """One trial from a mapping of field -> value as written (an entry of a trial file): each value
    canonicalised as a sweep file's are (`_Normalizer`, located at ``where: FIELD``), then `build_trial` and
    `kdgrid.core.trial_rules.trial_problems`, as a sweep's grid point. Every problem is added to ``problems``
    under ``where``; None when there is any."""
    if not isinstance(settings, dict):
        problems.add(source, where, "not a mapping of trial fields")
        return None
    allowed = Trial.field_names()
    located: dict[str, Located] = {}
    unknown: set[str] = set()
    for field, value in settings.items():
        if field in allowed:
            located[field] = Located(value, source, f"{where}: {field}")
        else:
            problems.add(source, where, f"unknown key {field!r}; allowed: {', '.join(allowed)}")
            unknown.add(field)
    config, refused = _Normalizer(problems).settings(located)
    trial = build_trial(config, refused, problems, source, where, hint=TRIAL_FILE_HINT)
    if trial is None:
        return None
    messages = trial_problems(trial)
    report_trial_problems(trial, messages, refused, problems, source, where)
    return None if messages or refused or unknown else trial


def _describe(trial: Trial) -> str:
    parts = [
        f"task={trial.task}",
        f"teacher={trial.teacher}",
        f"student={trial.student}",
        f"init={trial.init}",
    ]
    if trial.knowledge:
        parts += [f"knowledge={'+'.join(trial.knowledge)}", f"strategy={trial.strategy}"]
    return "{" + ", ".join(parts) + "}"


def seed_variants(trial: Trial, seeds: int | None) -> list[Trial]:
    """The trials ``seeds: N`` makes of ``trial``: student seeds ``trial.seed``, ..., ``trial.seed + N - 1``, each
    with ``data_seed`` = ``trial.seed``, so all N draw the same data order and share one job (a paired design:
    docs/seeds.md). Without ``seeds``, ``[trial]``: its id and data order are as they always were."""
    if seeds is None:
        return [trial]
    options = {**dict(trial.options), DATA_SEED: trial.seed}
    return [dataclasses.replace(trial, seed=trial.seed + i, options=options) for i in range(seeds)]


def _combination_key(trial: Trial) -> tuple[Any, ...]:
    return (
        trial.task,
        trial.teacher,
        trial.student,
        trial.init,
        bool(trial.init_from),
        bool(trial.knowledge),
        trial.strategy,
        trial.relation_heads,
    )


def store_problems(store_dir: Path, *, create: bool = False) -> list[str]:
    """Why results could not be written to ``store_dir`` (empty when they can).

    Probes by writing (and removing) a hidden file, since permission bits say nothing for root. Without
    ``create`` a store that does not exist yet is probed at its nearest existing parent, which is left as is.
    """
    target = Path(store_dir)
    probe = target
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if create and probe != target:
        try:
            target.mkdir(parents=True, exist_ok=True)
            probe = target
        except OSError as error:
            return [f"store {target} cannot be created ({error.strerror or error})"]
    if not probe.is_dir():
        return [f"store {target}: {probe} is not a directory"]
    try:
        with tempfile.NamedTemporaryFile(dir=probe, prefix=".kdgrid-write-probe-"):
            pass
    except OSError as error:
        what = "the store directory" if probe == target else f"{probe} (where the store would be created)"
        return [f"store {target}: {what} is not writable ({error.strerror or error})"]
    return _subfolder_problems(target) if probe == target else []


# Every folder kdgrid writes into inside a store: each must be a writable folder, or not exist yet.
STORE_SUBFOLDERS = (
    layout.ROWS_DIR, layout.COMPACTED_DIR, layout.CHECKPOINTS_DIR, layout.READ_CACHE_DIR, CLAIMS_DIR,
    MEMBERSHIPS_DIR, RUNS_DIR,
)  # fmt: skip


def _subfolder_problems(store: Path) -> list[str]:
    """The store's subfolders kdgrid writes into that are files or not writable: one line naming them all (a
    store refused up front, not every trial failing on it later)."""
    bad = []
    for name in STORE_SUBFOLDERS:
        folder = store / name
        if not os.path.lexists(folder):
            continue
        if not folder.is_dir():
            bad.append(f"{name} is a file, not a folder")
            continue
        try:
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".kdgrid-write-probe-"):
                pass
        except OSError as error:
            bad.append(f"{name}/ is not writable ({error.strerror or error})")
    if not bad:
        return []
    return [f"store {store}: " + "; ".join(bad) + " (move it aside or fix its permissions, then run again)"]


def grid_size(spec: SweepSpec) -> int:
    """How many grid points the sweep's studies make before de-duplication: per study the product of its axes'
    lengths (plus its ``include`` entries), times ``seeds``; counted without expanding anything."""
    total = 0
    for study in spec.studies:
        points = math.prod(len(located.value) for located in study.axes.values()) if study.axes else 1
        if not study.axes and study.include:
            points = 0
        total += (points + len(study.include)) * (spec.seeds or 1)
    return total


def expand(spec: SweepSpec, problems: Problems, *, max_trials: int = DEFAULT_MAX_TRIALS) -> Sweep:
    """The sweep's trials; problems are collected into ``problems``. A sweep of more than ``max_trials`` grid
    points (`grid_size`) is refused before anything is expanded."""
    source = str(spec.path)
    size = grid_size(spec)
    if size > max_trials:
        problems.add(source, "", f"the sweep expands to {size:,} grid points, above the limit of {max_trials:,} "
                     "(`--max-trials N` raises it)")  # fmt: skip
        return Sweep(name=spec.name, path=spec.path, description=spec.description, trials=[],
                     studies=[s.name for s in spec.studies], grid_points=0, repeated=0, seeds=spec.seeds)  # fmt: skip
    normalizer = _Normalizer(problems)
    seen: dict[str, str] = {}
    trials: list[PlannedTrial] = []
    grid_points = 0
    checked: dict[tuple[Any, ...], list[str]] = {}
    references: list[Reference] = []
    presets: dict[str, dict[str, Any]] = {}
    for study in spec.studies:
        expander = _StudyExpander(study, normalizer, problems, source)
        for point, where, _ in expander.grid():
            if point is None:
                continue
            if is_reference(
                point
            ):  # a teacher assistant's dependant: made once its assistants are (stages.py)
                references.append(Reference(point, study.name, where))
                continue
            if spec.seeds is not None and point.option(DATA_SEED) is not None:
                problems.add(
                    source,
                    SEEDS_KEY,
                    f"sets each trial's options.{DATA_SEED} (to its first seed); remove {DATA_SEED} from the "
                    f"options of {where}, or drop `seeds` and list the seeds yourself",
                )
                continue
            for trial in seed_variants(point, spec.seeds):
                grid_points += 1
                key = _combination_key(trial)
                if key not in checked:
                    checked[key] = combination_problems(trial)
                messages = value_problems(trial) + checked[key]  # values per trial: they are not in the key
                if messages:  # each message stated once, with the trials it affects counted
                    report_trial_problems(trial, messages, expander.bad, problems, source, where)
                    continue
                trial_id = trial.trial_id
                if trial_id in seen:
                    continue
                seen[trial_id] = study.name
                trials.append(PlannedTrial(trial, study.name))
        preset = study.preset
        if expander.preset_set and preset is not None:
            presets[study.name] = {"preset": preset.value, "set": dict(sorted(expander.preset_set.items()))}
        elif preset is not None and preset.where.startswith("studies."):
            problems.add(
                source,
                preset.where,
                f"preset {preset.value!r} sets nothing here: no trial of the study uses a method with a "
                f"{preset.value!r} preset, or the study writes every value it would set "
                "(`kdgrid methods` lists the presets); remove it",
            )
    top = [study.preset for study in spec.studies if study.preset and not study.preset.where.startswith("studies.")]
    if top and not presets:
        problems.add(
            source,
            top[0].where,
            f"preset {top[0].value!r} sets nothing: no trial of the sweep uses a method with a {top[0].value!r} "
            "preset, or the studies write every value it would set (`kdgrid methods` lists the "
            "presets); remove it",
        )
    if references:
        chained = resolve_references(
            references, [(p.trial, p.study) for p in trials], studies=[s.name for s in spec.studies],
            seeds=spec.seeds, add_problem=lambda where, message: problems.add(source, where, message),
            trial_problems=trial_problems, seed_variants=seed_variants,
        )  # fmt: skip
        grid_points += len(chained)
        trials += [PlannedTrial(trial, study) for trial, study in chained]
    return Sweep(
        name=spec.name,
        path=spec.path,
        description=spec.description,
        trials=trials,
        studies=[s.name for s in spec.studies],
        grid_points=grid_points,
        repeated=grid_points - len(trials),
        seeds=spec.seeds,
        table=spec.table,
        presets=presets,
    )


def raise_problems(problems: Problems, path: Path | str) -> None:
    if not problems:
        return
    items = problems.items
    shown = items[:MAX_LISTED_PROBLEMS]
    more = f"\n  ... and {len(items) - len(shown)} more" if len(items) > len(shown) else ""
    raise ConfigError(f"{path}: {len(items)} problem(s):\n  " + "\n  ".join(shown) + more)


def load_sweep(
    path: Path | str, *, store_dir: Path | str | None = None, max_trials: int = DEFAULT_MAX_TRIALS
) -> Sweep:
    """Parse, validate and expand a sweep file; with ``store_dir``, also check the store can be written;
    ``max_trials``: the most grid points it may have (`expand`).

    Raises:
        ConfigError: every problem found (unknown keys or names, empty or repeated axes, impossible
            combinations, a store that cannot be written), each naming the file, the key and what is allowed.
    """
    problems = Problems()
    spec = parse_sweep(path, problems)
    sweep = None
    if spec is not None:
        sweep = expand(spec, problems, max_trials=max_trials)
        if not sweep.trials and not problems:
            problems.add(str(path), "", "the sweep has no trials (every grid point was excluded)")
    if store_dir is not None:
        for message in store_problems(Path(store_dir)):
            problems.add(str(path), "--store", message)
    raise_problems(problems, path)
    assert sweep is not None
    return sweep
