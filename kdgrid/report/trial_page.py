"""One trial's page (``trials/<trial_id>.html``): the diagnosis of its curves (`kdgrid.diagnosis`), configuration,
layer pairs (a learned mapping's instead, where the trial learns one), its step-level curves (each loss term
unweighted and weighted, the total, the learning rate, the gradient norm, the gradient cosine and a learned
mapping over the optimizer steps: `kdgrid.core.training.step_curves`), per-epoch curves of each loss term and of the dev
metrics (inline SVG), the weights (auto weights as calibrated), what its learned methods ended with (a
learnable strategy's weights over the teacher's layers, a learned temperature: `kdgrid.report.learned`),
provenance, every attempt, and for a failed trial its error and traceback.

The page shows the trial's deciding row (`kdgrid.report.gather.deciding_rows`) and lists every attempt; its
content depends only on the trial's rows, so `--watch` rewrites it only when a row of the trial arrives
(`trial_fingerprints`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from kdgrid.core.methods.projectors.overfit import EXTRA_KEY as OVERFIT_KEY
from kdgrid.diagnosis import FLAGS
from kdgrid.report.gather import ReportData, parse_json
from kdgrid.report.html import definition_list, esc, is_null, number, page, table, text_of
from kdgrid.report.labels import (
    degenerate_badge,
    degenerate_reasons,
    knowledge_text,
    real_text,
    score_text,
    settings_rows,
    trial_title,
)
from kdgrid.report.learned import mapping_section, temperature_section
from kdgrid.report.svg import line_chart
from kdgrid.store.step_curves import row_diagnosis

TRIALS_DIR = "trials"
# A trial id that may name a file as it is (kdgrid's ids are 16 hex digits); the trial list's script reads the
# same pattern from its data, so links and files agree.
TRIAL_PAGE_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"

_CONFIG_KEYS = ("task", "teacher", "student", "init", "init_from", "knowledge", "strategy", "beta", "soft_weight",
                "temperature", "alpha", "lr", "batch_size", "max_length", "epochs", "warmup_ratio",
                "weight_decay", "seed", "projection", "relation_heads", "max_train_samples")  # fmt: skip
_PROVENANCE_KEYS = ("device", "host", "pid", "started_at", "ended_at", "written_at", "wall_time_s", "git_commit",
                    "kdgrid_version", "schema_version", "row_id")  # fmt: skip


def trial_page_name(trial_id: str) -> str | None:
    """``trials/<trial_id>.html``, or None for an id that cannot name a file safely (it gets no page)."""
    return f"{TRIALS_DIR}/{trial_id}.html" if re.fullmatch(TRIAL_PAGE_PATTERN, trial_id) else None


def trial_fingerprints(data: ReportData) -> dict[str, str]:
    """trial id -> what its page depends on: its rows' ids, sorted (a new attempt changes it)."""
    joined = data.rows.groupby("trial_id", sort=False)["row_id"].agg(
        lambda ids: ",".join(sorted(map(str, ids)))
    )
    return {str(k): v for k, v in joined.items()}


def _value(value: Any) -> str:
    if is_null(value):
        return '<span class="muted">-</span>'
    if not isinstance(value, str) and hasattr(value, "__len__"):
        return esc(", ".join(map(str, value)) or "(none)")
    return esc(real_text(value))


def _config_value(row: dict[str, Any], key: str) -> str:
    """A configuration value as the sweep file would spell it: ``beta`` ``auto`` when calibrated, the knowledge
    or the baseline by name."""
    if key == "beta" and row.get("beta_auto") is True:
        return "auto"
    if key == "knowledge":
        return esc(knowledge_text(row.get("knowledge"), row.get("soft_weight")))
    return _value(row.get(key))


def _settings_table(text: Any, headers: tuple[str, str]) -> str:
    """A JSON object column (weights, loss terms) as a two-column table, numbers to 4 significant digits;
    anything else (a list, nested values) as indented JSON."""
    value = parse_json(text, None)
    if value in (None, {}, []):
        return '<p class="muted">none recorded</p>'
    if isinstance(value, dict) and all(not isinstance(v, (dict, list)) for v in value.values()):
        return table(list(headers), settings_rows(value), cls="settings")
    return _pretty_json(text)


def _pretty_json(text: Any) -> str:
    value = parse_json(text, None)
    if value in (None, {}, []):
        return '<p class="muted">none recorded</p>'
    return f"<pre>{esc(json.dumps(value, indent=2, sort_keys=True))}</pre>"


def curve_charts(curve: Any) -> str:
    """Charts of a row's ``curve_json``: one of the loss terms (each term a line), one per dev set of its
    metrics."""
    if not isinstance(curve, list) or not curve:
        return '<p class="muted">no epoch finished</p>'
    epochs = [entry for entry in curve if isinstance(entry, dict) and "epoch" in entry]
    terms: dict[str, list[tuple[float, float]]] = {}
    metrics: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for entry in epochs:
        epoch = entry["epoch"]
        for term, value in (entry.get("loss_terms") or {}).items():
            if isinstance(value, (int, float)):
                terms.setdefault(str(term), []).append((epoch, value))
        for dev_set, scores in (entry.get("scores") or {}).items():
            for metric, value in (scores or {}).items():
                if isinstance(value, (int, float)):
                    metrics.setdefault(str(dev_set), {}).setdefault(str(metric), []).append((epoch, value))
    loss_series = sorted(terms.items())
    title = "loss terms (unweighted mean per epoch), one line each"
    charts = [line_chart(loss_series, title=title + ", log axis", log_y=True, y_label="loss")]
    linear = line_chart(loss_series, title=title + ", linear axis", y_label="loss")
    if charts[0] and linear:
        charts.append(f"<details><summary>the loss terms on a linear axis</summary>{linear}</details>")
    charts += [
        line_chart(sorted(series.items()), title=f"dev metrics · {dev_set}", y_label="score")
        for dev_set, series in metrics.items()
    ]
    drawn = "".join(chart for chart in charts if chart)
    return drawn or '<p class="muted">the curve holds no numbers</p>'


def _series(steps: list[Any], values: Any) -> list[tuple[float, float]]:
    if not isinstance(values, list):
        return []
    return [(float(x), float(y)) for x, y in zip(steps, values, strict=False) if isinstance(y, (int, float))]


def step_charts(curves: Any) -> str:
    """Charts of a row's step curves (`kdgrid.core.training.step_curves`): the loss terms unweighted (log axis), weighted
    with the total (what the optimiser saw), the learning rate, the gradient norm, the gradient cosine where
    logged, and a learned gate's largest weight per student layer against uniform. Empty when none recorded."""
    if not isinstance(curves, dict) or not curves.get("steps"):
        return ""
    steps = list(curves["steps"])
    every = curves.get("every")
    terms = curves.get("terms") or {}
    weighted = curves.get("weighted") or {}
    charts = [
        line_chart(sorted((n, _series(steps, v)) for n, v in terms.items()), log_y=True, x_label="step",
                   y_label="loss (unweighted)", title="loss terms, unweighted: each term's mean since the last point"),
        line_chart([("total", _series(steps, curves.get("total"))),
                    *sorted((n, _series(steps, v)) for n, v in weighted.items())], log_y=True, x_label="step",
                   y_label="weighted loss", title="loss terms, weighted (weight x mean), and their total"),
        line_chart([("learning rate", _series(steps, curves.get("lr")))], x_label="step", y_label="learning rate",
                   title="learning rate"),
        line_chart([("gradient norm", _series(steps, curves.get("grad_norm")))], x_label="step", log_y=True,
                   y_label="gradient norm", title="gradient L2 norm before clipping"),
        line_chart([("cosine", _series(steps, curves.get("cosine")))], x_label="step", y_label="cosine",
                   title="task/distillation gradient cosine (mean of the sampled batches)"),
    ]  # fmt: skip
    mapping = curves.get("mapping") or {}
    snapshots = [v.get("weights") for v in mapping.get("values", []) if isinstance(v, dict)]
    if snapshots and all(isinstance(w, list) and w and all(isinstance(r, list) and r for r in w) for w in snapshots):
        at = list(mapping.get("steps", []))
        rows = len(snapshots[-1])
        lines = [
            (f"S{i + 1}: largest weight", [(float(x), max(w[i])) for x, w in zip(at, snapshots, strict=False)
                                             if i < len(w)])
            for i in range(rows)
        ]  # fmt: skip
        width = len(snapshots[-1][0])
        lines.append((f"uniform 1/{width}", [(float(at[0]), 1 / width), (float(at[-1]), 1 / width)]))
        charts.append(line_chart(lines, x_label="step", y_label="gate weight",
                                 title="learned mapping: each student layer's largest weight over time"))  # fmt: skip
    drawn = "".join(chart for chart in charts if chart)
    return f'<p class="muted">a point every {esc(text_of(every))} optimizer steps</p>' + drawn if drawn else ""


def diagnosis_section(row: dict[str, Any]) -> str:
    """The diagnosis of the row's curves: one warning per flag with its evidence, or a line saying none."""
    flags = row_diagnosis(row)
    if not flags:
        return '<p class="muted">diagnosis: no failure mode flagged</p>'
    return "".join(
        f'<div class="warning"><b>{esc(flag["flag"].replace("_", " "))}</b> '
        f'({esc(FLAGS.get(flag["flag"], ""))}): {esc(flag["evidence"])}.</div>'
        for flag in flags
    )


def _attempts(data: ReportData, trial_id: str) -> str:
    lines = [
        [esc(row["row_id"]), f'<span class="state-{esc(row["status"])}">{esc(row["status"])}</span>',
         esc(text_of(row["written_at"])), esc(text_of(row["host"])), number(row["wall_time_s"], 1),
         esc(text_of(row["error_type"]))]
        for row in data.attempts(trial_id)
    ]  # fmt: skip
    return table(["row", "status", "written", "host", "wall s", "error"], lines)


def _learned(row: dict[str, Any]) -> list[str]:
    """What the trial's learned methods ended with (a learnable strategy's weights, a learned temperature)."""
    extra = parse_json(row.get("extra_json"), {})
    if not isinstance(extra, dict):
        return []
    sections = [mapping_section(extra.get("mapping")), temperature_section(extra.get("learned_temperature"))]
    return [section for section in sections if section]


def _learns_its_mapping(row: dict[str, Any]) -> bool:
    extra = parse_json(row.get("extra_json"), {})
    return isinstance(extra, dict) and ("mapping" in extra or "mapping_params" in extra)


def trial_page(data: ReportData, trial_id: str, step_curves: dict[str, Any] | None = None) -> str:
    """The page of ``trial_id`` (a trial with at least one row), links relative to ``trials/``; ``step_curves``:
    its deciding row's (`kdgrid.store.step_curves.read_step_curves`), None when it recorded none."""
    row = data.record(trial_id)
    state = str(row["state"])
    config = [(key, _config_value(row, key)) for key in _CONFIG_KEYS if key in row]
    config.append(("options", _value(row.get("options_json"))))
    shape = [(key, _value(row.get(key))) for key in ("student_layers", "student_width", "student_heads",
             "student_ffn", "student_params", "student_flops")]  # fmt: skip
    pairs = parse_json(row.get("layer_pairs_json"), [])
    pair_text = (
        esc(", ".join(f"S{p[0]}←T{p[1]}" for p in pairs if isinstance(p, list) and len(p) == 2))
        if pairs
        else '<span class="muted">none (no feature knowledge)</span>'
    )
    if _learns_its_mapping(row):  # its targets mix every teacher layer: no fixed pair to list
        students = sorted({p[0] for p in pairs if isinstance(p, list) and len(p) == 2})
        pair_text = esc(
            "learned: each of student layers " + ", ".join(f"S{s}" for s in students)
            + " learns from a learned combination of every teacher layer (below, the learned layer mapping)"
        )
    scores = parse_json(row.get("scores_json"), {})
    score_rows = [
        [esc(dev), esc(metric), score_text(value)]
        for dev, metrics in (scores.items() if isinstance(scores, dict) else [])
        for metric, value in (metrics.items() if isinstance(metrics, dict) else [])
    ]
    reasons = degenerate_reasons(row)
    sections = [
        f'<p>state <b class="state-{esc(state)}">{esc(state)}</b>{degenerate_badge(reasons)} · trial '
        f"<code>{esc(trial_id)}</code> · sweep {esc(text_of(row.get('sweep')))} · study "
        f'{esc(text_of(row.get("study")))} · {int(row["attempts"])} attempt(s) · <a href="../trials.html">all trials</a></p>',
    ]
    if reasons:
        sections.append(
            '<div class="warning"><b>Degenerate student</b>: its number is not evidence of anything ('
            + esc("; ".join(reasons))
            + ").</div>"
        )
    overfit = parse_json(row.get("extra_json"), {})
    overfit = overfit.get(OVERFIT_KEY) if isinstance(overfit, dict) else None
    if isinstance(overfit, str):
        sections.append(f'<div class="warning"><b>Projector overfitting</b>: {esc(overfit)}.</div>')
    sections.append(diagnosis_section(row))
    if state == "failed":
        sections.append(
            f"<h2>Error</h2><p><b>{esc(text_of(row.get('error_type')))}</b>: "
            f"{esc(text_of(row.get('error_message')))}</p><h3>Traceback</h3>"
            f'<pre class="traceback">{esc(text_of(row.get("traceback")) or "(none recorded)")}</pre>'
        )
    if score_rows:
        sections.append(
            f"<h2>Scores at the best epoch ({esc(text_of(row.get('best_epoch')))})</h2>"
            + table(["dev set", "metric", "value"], score_rows)
        )
    sections += [
        *(["<h2>Step curves</h2>" + step_charts(step_curves)] if step_charts(step_curves) else []),
        "<h2>Curves per epoch</h2>" + curve_charts(parse_json(row.get("curve_json"), [])),
        "<h2>Configuration</h2>" + definition_list(config),
        "<h2>Student and layer pairs</h2>" + definition_list([*shape, ("layer pairs", pair_text)]),
        "<h2>Weights</h2>" + _settings_table(row.get("weights_json"), ("term", "weight")),
        *_learned(row),
        "<h2>Loss terms (last epoch)</h2>" + _settings_table(row.get("loss_terms_json"), ("term", "value")),
        "<h2>Provenance</h2>"
        + definition_list([(key, _value(row.get(key))) for key in _PROVENANCE_KEYS if key in row])
        + "<h3>Package versions</h3>"
        + _pretty_json(row.get("package_versions_json")),
        "<h2>Recorded extras</h2>" + _pretty_json(row.get("extra_json")),
        "<h2>Attempts</h2>" + _attempts(data, trial_id),
        "<h2>Canonical configuration</h2>" + _pretty_json(row.get("trial_json")),
    ]
    return page(trial_title(row), "\n".join(sections), depth=1, current="trials.html")
