"""The scripts of the report's explore and pivot pages (`kdgrid.report.explore`), written here: no library, no
network. Both read the page's JSON blob of configurations (`kdgrid.report.configurations`: the intervals, tests
and marks computed in Python at build time) and only arrange, filter and colour them; every value goes into the
DOM as text (``textContent``), never as HTML.

State lives in the URL's fragment (``#sweep=NAME&...``), so a view is a link: ``explore.js`` keeps ``color``,
``ref`` and each brush (``b.AXIS=LOW..HIGH`` for a number axis and the score, ``b.AXIS=~A|B`` for the values kept
of a categorical axis); ``pivot.js`` keeps ``rows``, ``cols``, ``ref``, ``measure`` and each filter
(``f.AXIS=VALUE``). For the benchmark each page marks its last filter's and its first draw's time
(``data-filter-ms``, ``data-ready-ms``, from ``performance.now()``) on its count element.
"""

from __future__ import annotations

COMMON_JS = """\
"use strict";
window.kdgrid = (function () {
  const blob = JSON.parse(document.getElementById("config-data").textContent);
  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }
  function fixed(value, digits) { return value === null || value === undefined ? "-" : value.toFixed(digits); }
  function shown(value) { return value === "" ? "(none)" : value; }
  function options(select, items, chosen) {
    select.textContent = "";
    for (const [value, label] of items) {
      const option = el("option", label);
      option.value = value;
      if (value === chosen) option.selected = true;
      select.appendChild(option);
    }
  }
  function hashState() { return new URLSearchParams(window.location.hash.slice(1)); }
  function setHash(params) { history.replaceState(null, "", "#" + params.toString()); }
  function trialsLink(ids, limit) {
    return ids.length && ids.length <= limit ? "trials.html?ids=" + ids.join(",") : null;
  }
  const MARK_TEXT = { ref: " ref", up: " ▲", down: " ▼", "": "" };
  return { blob, el, fixed, shown, options, hashState, setHash, trialsLink, MARK_TEXT };
})();
"""

EXPLORE_JS = """\
"use strict";
(function () {
  const K = window.kdgrid, sweeps = K.blob.sweeps;
  const $ = (id) => document.getElementById(id);
  const canvas = $("plot"), ctx = canvas.getContext("2d"), count = $("count");
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#bcbd22", "#7f7f7f"];
  const MARK_COLOURS = { ref: "#000000", up: "#1a7f37", down: "#c0362c", "": "#9aa4ae" };
  const MAX_OPEN = 300, LIST_ROWS = 200, TOP = 34, BOTTOM = 40, SIDE = 70;
  let sweep = null, dims = [], n = 0, keep = new Uint8Array(0), state = null, drag = null;

  function readState() {
    const p = K.hashState(), brush = {};
    for (const [key, value] of p.entries()) {
      if (!key.startsWith("b.")) continue;
      if (value.startsWith("~")) brush[key.slice(2)] = { values: value.slice(1).split("|") };
      else {
        const [lo, hi] = value.split("..").map(Number);
        if (!Number.isNaN(lo) && !Number.isNaN(hi)) brush[key.slice(2)] = { lo: Math.min(lo, hi), hi: Math.max(lo, hi) };
      }
    }
    return { sweep: p.get("sweep") || "", color: p.get("color") || "", ref: p.get("ref") || "", brush };
  }
  function writeState() {
    const p = new URLSearchParams();
    p.set("sweep", sweep.name);
    if (state.color) p.set("color", state.color);
    if (state.ref) p.set("ref", state.ref);
    for (const [name, b] of Object.entries(state.brush)) p.set("b." + name, b.values ? "~" + b.values.join("|") : b.lo + ".." + b.hi);
    K.setHash(p);
  }

  // One dimension per axis, then the score: each configuration's position in [0, 1] (NaN: no value), once.
  function buildDims() {
    const c = sweep.configs;
    n = c.mean.length;
    dims = sweep.axes.map((axis, a) => {
      const labels = axis.values, pos = new Float32Array(n), numbers = labels.map((v) => (v === "" ? NaN : Number(v)));
      let scale = null;
      if (axis.type !== "categorical") {
        const f = axis.type === "log" ? Math.log10 : (x) => x;
        const finite = numbers.filter((x) => !Number.isNaN(x)).map(f);
        const lo = Math.min(...finite), hi = Math.max(...finite);
        scale = { f, lo, hi, value: (p) => (axis.type === "log" ? Math.pow(10, lo + p * (hi - lo)) : lo + p * (hi - lo)) };
      }
      const at = labels.map((label, i) => {
        if (scale === null) return labels.length === 1 ? 0.5 : i / (labels.length - 1);
        if (Number.isNaN(numbers[i])) return -0.06;
        return scale.hi === scale.lo ? 0.5 : (scale.f(numbers[i]) - scale.lo) / (scale.hi - scale.lo);
      });
      for (let i = 0; i < n; i++) pos[i] = at[c.axes[i][a]];
      return { name: axis.name, type: axis.type, labels, numbers, at, scale, pos, index: a };
    });
    // a loop, not Math.min(...values): 30,000 configurations are more arguments than a call takes
    let lo = Infinity, hi = -Infinity;
    for (let i = 0; i < n; i++) for (const v of [c.mean[i], c.low[i], c.high[i]]) if (v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    if (hi === lo) { lo -= 0.01; hi += 0.01; }
    const score = { name: "score", type: "numeric", scale: { f: (x) => x, lo, hi, value: (p) => lo + p * (hi - lo) }, pos: new Float32Array(n) };
    for (let i = 0; i < n; i++) score.pos[i] = (c.mean[i] - lo) / (hi - lo);
    score.low = (i) => (c.low[i] === null ? NaN : (c.low[i] - lo) / (hi - lo));
    score.high = (i) => (c.high[i] === null ? NaN : (c.high[i] - lo) / (hi - lo));
    dims.push(score);
  }

  function passes(dim, i, b) {
    if (b.values) return b.values.includes(dim.labels[sweep.configs.axes[i][dim.index]]);
    const value = dim.name === "score" ? sweep.configs.mean[i] : dim.numbers[sweep.configs.axes[i][dim.index]];
    return value >= b.lo - 1e-12 && value <= b.hi + 1e-12;
  }
  function applyFilter() {
    const started = performance.now();
    const active = dims.filter((d) => state.brush[d.name]);
    keep = new Uint8Array(n);
    for (let i = 0; i < n; i++) keep[i] = active.every((d) => passes(d, i, state.brush[d.name])) ? 1 : 0;
    draw();
    list();
    count.dataset.filterMs = (performance.now() - started).toFixed(1);
  }

  function reference() { return sweep.references.find((r) => r.label === state.ref) || null; }
  function colourOf() {
    const ref = reference();
    if (state.color === "mark" && ref) return (i) => MARK_COLOURS[ref.mark[i]];
    const dim = dims.find((d) => d.name === state.color && d.name !== "score");
    if (dim) return (i) => PALETTE[sweep.configs.axes[i][dim.index] % PALETTE.length];
    return () => PALETTE[0];
  }

  function x(d) { return SIDE + (d * (canvas.width - 2 * SIDE)) / Math.max(1, dims.length - 1); }
  function y(p) { return TOP + (1 - p) * (canvas.height - TOP - BOTTOM); }

  function draw() {
    const started = performance.now();
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    const colour = colourOf(), groups = new Map(), brushed = Object.keys(state.brush).length > 0;
    ctx.lineWidth = 1;
    ctx.strokeStyle = "rgba(160, 168, 176, 0.25)";
    ctx.beginPath();
    for (let i = 0; i < n; i++) {
      if (keep[i]) { const c = colour(i); if (!groups.has(c)) groups.set(c, []); groups.get(c).push(i); continue; }
      dims.forEach((d, j) => { const p = d.pos[i]; if (j === 0) ctx.moveTo(x(j), y(p)); else ctx.lineTo(x(j), y(p)); });
    }
    if (brushed) ctx.stroke();
    const alpha = n > 2000 ? 0.35 : 0.8, score = dims[dims.length - 1], sx = x(dims.length - 1);
    for (const [c, members] of groups) {
      ctx.strokeStyle = c;
      ctx.globalAlpha = alpha;
      ctx.beginPath();
      for (const i of members) dims.forEach((d, j) => { const p = d.pos[i]; if (j === 0) ctx.moveTo(x(j), y(p)); else ctx.lineTo(x(j), y(p)); });
      ctx.stroke();
      ctx.globalAlpha = 1;
      ctx.lineWidth = 2;
      ctx.beginPath();
      for (const i of members) {
        const lo = score.low(i), hi = score.high(i);
        if (!Number.isNaN(lo) && !Number.isNaN(hi)) { ctx.moveTo(sx + 4, y(lo)); ctx.lineTo(sx + 4, y(hi)); }
      }
      ctx.stroke();
      ctx.lineWidth = 1;
    }
    ctx.fillStyle = "#1b1f24";
    ctx.font = "12px system-ui, sans-serif";
    dims.forEach((d, j) => {
      ctx.strokeStyle = "#5b636e";
      ctx.beginPath(); ctx.moveTo(x(j), y(0)); ctx.lineTo(x(j), y(1)); ctx.stroke();
      ctx.textAlign = "center";
      ctx.fillText(d.name + (d.type === "log" ? " (log)" : ""), x(j), TOP - 18);
      ctx.textAlign = "left";
      if (d.scale === null) {
        if (d.labels.length <= 30) d.labels.forEach((label, i) => ctx.fillText(K.shown(label), x(j) + 5, y(d.at[i]) + 4));
      } else {
        const fmt = (v) => (Math.abs(v) >= 0.01 && Math.abs(v) < 1e4 ? String(Number(v.toPrecision(4))) : v.toExponential(1));
        ctx.fillText(fmt(d.scale.value(0)), x(j) + 5, y(0) + 4);
        ctx.fillText(fmt(d.scale.value(1)), x(j) + 5, y(1) + 4);
      }
      const b = state.brush[d.name];
      if (b) {
        const ps = b.values ? b.values.map((v) => d.at[d.labels.indexOf(v)]).filter((p) => p !== undefined) : [d.scale.f(b.lo), d.scale.f(b.hi)].map((v) => (v - d.scale.f(d.scale.value(0))) / (d.scale.f(d.scale.value(1)) - d.scale.f(d.scale.value(0))));
        if (ps.length) {
          ctx.fillStyle = "rgba(11, 92, 173, 0.18)";
          const top = y(Math.min(1.02, Math.max(...ps) + 0.01)), bottom = y(Math.max(-0.08, Math.min(...ps) - 0.01));
          ctx.fillRect(x(j) - 9, top, 18, bottom - top);
          ctx.fillStyle = "#1b1f24";
        }
      }
    });
    if (drag) { ctx.fillStyle = "rgba(11, 92, 173, 0.3)"; ctx.fillRect(x(drag.dim) - 9, Math.min(drag.y0, drag.y1), 18, Math.abs(drag.y1 - drag.y0)); }
    canvas.dataset.drawMs = (performance.now() - started).toFixed(1);
  }

  function list() {
    const c = sweep.configs, ref = reference();
    const chosen = [];
    for (let i = 0; i < n; i++) if (keep[i]) chosen.push(i);
    chosen.sort((a, b) => c.mean[b] - c.mean[a]);
    const trials = chosen.reduce((total, i) => total + c.trials[i].length, 0);
    count.textContent = chosen.length + " of " + n + " configurations · " + trials + " trials";
    count.dataset.configurations = String(chosen.length);
    count.dataset.trials = String(trials);
    const ids = chosen.flatMap((i) => c.trials[i]);
    const open = $("open"), link = K.trialsLink(ids, MAX_OPEN);
    open.textContent = link ? "open these " + ids.length + " trials" : "narrow the selection to at most " + MAX_OPEN + " trials to open them";
    if (link) open.href = link; else open.removeAttribute("href");
    const head = $("selection").tHead, body = K.el("tbody");
    head.textContent = "";
    const hr = K.el("tr");
    [...sweep.axes.map((a) => a.name), ...(sweep.places.length > 1 ? ["task · dev set · metric"] : []), "mean", "95% interval", "seeds", "mark", "trials"].forEach((h) => hr.appendChild(K.el("th", h)));
    head.appendChild(hr);
    for (const i of chosen.slice(0, LIST_ROWS)) {
      const tr = K.el("tr");
      sweep.axes.forEach((axis, a) => tr.appendChild(K.el("td", K.shown(axis.values[c.axes[i][a]]))));
      if (sweep.places.length > 1) tr.appendChild(K.el("td", sweep.places[c.place[i]]));
      tr.appendChild(K.el("td", K.fixed(c.mean[i], 4), "num"));
      tr.appendChild(K.el("td", c.low[i] === null ? "" : "[" + K.fixed(c.low[i], 4) + ", " + K.fixed(c.high[i], 4) + "]", "unc"));
      tr.appendChild(K.el("td", c.n[i], "num"));
      tr.appendChild(K.el("td", ref ? K.MARK_TEXT[ref.mark[i]] : ""));
      const td = K.el("td");
      c.trials[i].slice(0, 6).forEach((id) => { const a = K.el("a", id.slice(0, 8)); a.href = "trials/" + id + ".html"; td.appendChild(a); td.appendChild(document.createTextNode(" ")); });
      if (c.trials[i].length > 6) td.appendChild(document.createTextNode("+" + (c.trials[i].length - 6)));
      tr.appendChild(td);
      body.appendChild(tr);
    }
    $("selection").replaceChild(body, $("selection").tBodies[0]);
    $("more").textContent = chosen.length > LIST_ROWS ? "the first " + LIST_ROWS + " of " + chosen.length + " by mean" : "";
  }

  function csv() {
    const c = sweep.configs, ref = reference();
    const quote = (v) => { const s = v === null || v === undefined ? "" : String(v); return /[",\\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s; };
    const lines = [["sweep", ...sweep.axes.map((a) => a.name), "task_dev_set_metric", "mean", "std", "n_seeds", "ci_low", "ci_high", "uncertainty", "reference", "mark", "p_adjusted", "trial_ids"].map(quote).join(",")];
    for (let i = 0; i < n; i++) {
      if (!keep[i]) continue;
      lines.push([sweep.name, ...sweep.axes.map((a, j) => a.values[c.axes[i][j]]), sweep.places[c.place[i]], c.mean[i], c.std[i], c.n[i], c.low[i], c.high[i], c.level[i],
        ref ? ref.label : "", ref ? ref.mark[i] : "", ref ? ref.p[i] : "", c.trials[i].join(" ")].map(quote).join(","));
    }
    const a = K.el("a");
    a.href = URL.createObjectURL(new Blob([lines.join("\\n") + "\\n"], { type: "text/csv" }));
    a.download = sweep.name + "-selection.csv";
    document.body.appendChild(a); a.click(); a.remove();
  }

  function near(event) {
    const r = canvas.getBoundingClientRect(), px = ((event.clientX - r.left) * canvas.width) / r.width, py = ((event.clientY - r.top) * canvas.height) / r.height;
    let best = -1;
    dims.forEach((d, j) => { if (Math.abs(px - x(j)) < 14) best = j; });
    return { dim: best, y: py };
  }
  canvas.addEventListener("mousedown", (event) => { const at = near(event); if (at.dim >= 0) drag = { dim: at.dim, y0: at.y, y1: at.y }; });
  canvas.addEventListener("mousemove", (event) => { if (drag) { drag.y1 = near(event).y; draw(); } });
  window.addEventListener("mouseup", () => {
    if (!drag) return;
    const d = dims[drag.dim], span = canvas.height - TOP - BOTTOM;
    const p0 = 1 - (Math.min(drag.y0, drag.y1) - TOP) / span, p1 = 1 - (Math.max(drag.y0, drag.y1) - TOP) / span;
    if (Math.abs(drag.y1 - drag.y0) < 3) delete state.brush[d.name];
    else if (d.scale === null) state.brush[d.name] = { values: d.labels.filter((_, i) => d.at[i] <= p0 + 0.02 && d.at[i] >= p1 - 0.02) };
    else state.brush[d.name] = { lo: d.scale.value(Math.max(0, p1)), hi: d.scale.value(Math.min(1, p0)) };
    drag = null;
    writeState();
    applyFilter();
  });

  function choose(name) {
    sweep = sweeps.find((s) => s.name === name) || sweeps[0];
    buildDims();
    K.options($("sweep"), sweeps.map((s) => [s.name, s.name]), sweep.name);
    K.options($("color"), [["", "one colour"], ...sweep.axes.map((a) => [a.name, a.name]), ...(sweep.references.length ? [["mark", "the reference's marks"]] : [])], state.color);
    K.options($("reference"), [["", "no reference"], ...sweep.references.map((r) => [r.label, r.label])], state.ref);
    $("note").textContent = sweep.reference_note;
    for (const name of Object.keys(state.brush)) if (!dims.some((d) => d.name === name)) delete state.brush[name];
    applyFilter();
    legend();
  }
  function legend() {
    const box = $("legend"), ref = reference();
    box.textContent = "";
    const dim = dims.find((d) => d.name === state.color && d.name !== "score");
    const items = state.color === "mark" && ref ? [["ref", "reference"], ["up", "better beyond noise"], ["down", "worse beyond noise"], ["", "not different"]].map(([k, t]) => [MARK_COLOURS[k], t])
      : dim ? dim.labels.map((label, i) => [PALETTE[i % PALETTE.length], K.shown(label)]) : [];
    for (const [c, text] of items.slice(0, 40)) {
      const key = K.el("span", null, "key"), swatch = K.el("span", null, "swatch");
      swatch.style.background = c;
      key.appendChild(swatch); key.appendChild(document.createTextNode(text)); box.appendChild(key);
    }
  }

  if (!sweeps.length) { count.textContent = "no sweep with done trials"; return; }
  state = readState();
  $("sweep").addEventListener("change", (e) => { state = { sweep: e.target.value, color: "", ref: "", brush: {} }; choose(e.target.value); writeState(); });
  $("color").addEventListener("change", (e) => { state.color = e.target.value; writeState(); draw(); legend(); });
  $("reference").addEventListener("change", (e) => { state.ref = e.target.value; writeState(); draw(); list(); legend(); });
  $("clear").addEventListener("click", () => { state.brush = {}; writeState(); applyFilter(); });
  $("csv").addEventListener("click", csv);
  choose(state.sweep);
  count.dataset.readyMs = performance.now().toFixed(1);
})();
"""

PIVOT_JS = """\
"use strict";
(function () {
  const K = window.kdgrid, sweeps = K.blob.sweeps;
  const $ = (id) => document.getElementById(id);
  const count = $("pivot-count"), MAX_BLOCKS = 60, MAX_OPEN = 300;
  const MEASURES = [["mean", "mean and 95% interval"], ["std", "standard deviation over seeds"], ["n", "seeds"]];
  let sweep = null, state = null;

  function readState() {
    const p = K.hashState(), filters = {};
    for (const [key, value] of p.entries()) if (key.startsWith("f.")) filters[key.slice(2)] = value;
    return { sweep: p.get("sweep") || "", rows: p.get("rows"), cols: p.get("cols"), ref: p.get("ref") || "", measure: p.get("measure") || "mean", filters };
  }
  function writeState() {
    const p = new URLSearchParams();
    p.set("sweep", sweep.name); p.set("rows", state.rows); p.set("cols", state.cols);
    if (state.ref) p.set("ref", state.ref);
    if (state.measure !== "mean") p.set("measure", state.measure);
    for (const [name, value] of Object.entries(state.filters)) if (value !== null && value !== undefined) p.set("f." + name, value);
    K.setHash(p);
  }

  function controls() {
    const names = sweep.axes.map((a) => a.name);
    if (!names.includes(state.rows)) state.rows = names[0] || "";
    if (state.cols !== "" && (!names.includes(state.cols) || state.cols === state.rows)) state.cols = names.find((a) => a !== state.rows) || "";
    K.options($("sweep"), sweeps.map((s) => [s.name, s.name]), sweep.name);
    K.options($("rows"), names.map((a) => [a, a]), state.rows);
    K.options($("cols"), [["", "(none)"], ...names.filter((a) => a !== state.rows).map((a) => [a, a])], state.cols);
    K.options($("measure"), MEASURES, state.measure);
    K.options($("reference"), [["", "no reference"], ...sweep.references.map((r) => [r.label, r.label])], state.ref);
    const box = $("filters");
    box.textContent = "";
    const others = [...sweep.axes.filter((a) => a.name !== state.rows && a.name !== state.cols), ...(sweep.places.length > 1 ? [{ name: "place", values: sweep.places }] : [])];
    for (const axis of others) {
      const label = K.el("label", (axis.name === "place" ? "task · dev set · metric" : axis.name) + " "), select = K.el("select");
      select.dataset.axis = axis.name;
      const chosen = state.filters[axis.name];
      K.options(select, [["\\u0000", "each (blocks)"], ...axis.values.map((v) => [v, K.shown(v)])], chosen === undefined ? "\\u0000" : chosen);
      select.addEventListener("change", () => { if (select.value === "\\u0000") delete state.filters[axis.name]; else state.filters[axis.name] = select.value; writeState(); render(); });
      label.appendChild(select); box.appendChild(label); box.appendChild(document.createTextNode(" "));
    }
    for (const name of Object.keys(state.filters)) if (!others.some((a) => a.name === name)) delete state.filters[name];
    $("note").textContent = sweep.reference_note;
  }

  function single() {
    // a sweep whose trials differ in their seeds only: its one configuration per dev set, no layout to choose
    const c = sweep.configs, out = $("pivot"), table = K.el("table", null, "pivot"), body = K.el("tbody");
    out.textContent = "";
    for (let i = 0; i < c.mean.length; i++) {
      const tr = K.el("tr");
      tr.appendChild(K.el("th", sweep.places[c.place[i]]));
      const td = K.el("td", K.fixed(c.mean[i], 4), "num");
      if (c.low[i] !== null) td.appendChild(K.el("div", "[" + K.fixed(c.low[i], 4) + ", " + K.fixed(c.high[i], 4) + "]", "unc"));
      tr.appendChild(td);
      body.appendChild(tr);
    }
    table.appendChild(body);
    out.appendChild(table);
    const trials = c.trials.reduce((total, ids) => total + ids.length, 0);
    count.textContent = c.mean.length + " block(s) · " + c.mean.length + " cell(s) · " + trials + " trials";
    Object.assign(count.dataset, { blocks: String(c.mean.length), cells: String(c.mean.length), trials: String(trials) });
    $("command").textContent = "kdgrid tables --sweep " + sweep.name;
  }

  function render() {
    if (!sweep.axes.length) { single(); return; }
    const started = performance.now();
    const c = sweep.configs, axes = sweep.axes, names = axes.map((a) => a.name);
    const ri = names.indexOf(state.rows), ci = state.cols ? names.indexOf(state.cols) : -1;
    const others = names.map((_, a) => a).filter((a) => a !== ri && a !== ci);
    const ref = sweep.references.find((r) => r.label === state.ref) || null;
    const blocks = new Map();
    let cells = 0, trials = 0;
    for (let i = 0; i < c.mean.length; i++) {
      let ok = true;
      for (const a of others) { const f = state.filters[names[a]]; if (f !== undefined && axes[a].values[c.axes[i][a]] !== f) { ok = false; break; } }
      if (!ok) continue;
      const place = sweep.places[c.place[i]];
      if (state.filters.place !== undefined && place !== state.filters.place) continue;
      const key = [place, ...others.filter((a) => state.filters[names[a]] === undefined).map((a) => names[a] + "=" + K.shown(axes[a].values[c.axes[i][a]]))].join(" · ");
      if (!blocks.has(key)) blocks.set(key, { cells: new Map(), order: [place, ...others.map((a) => c.axes[i][a])] });
      blocks.get(key).cells.set(c.axes[i][ri] + "," + (ci >= 0 ? c.axes[i][ci] : 0), i);
      cells += 1;
      trials += c.trials[i].length;
    }
    const keys = [...blocks.keys()].sort((a, b) => {
      const x = blocks.get(a).order, y = blocks.get(b).order;
      for (let j = 0; j < x.length; j++) if (x[j] !== y[j]) return x[j] < y[j] ? -1 : 1;
      return 0;
    });
    const out = $("pivot");
    out.textContent = "";
    for (const key of keys.slice(0, MAX_BLOCKS)) out.appendChild(block(key, blocks.get(key).cells, ri, ci, ref));
    count.textContent = blocks.size + " block(s) · " + cells + " cell(s) · " + trials + " trials" + (blocks.size > MAX_BLOCKS ? " (the first " + MAX_BLOCKS + " blocks shown: choose values above)" : "");
    count.dataset.blocks = String(blocks.size);
    count.dataset.cells = String(cells);
    count.dataset.trials = String(trials);
    const cmd = "kdgrid tables --sweep " + sweep.name + " --rows " + state.rows + (state.cols ? " --cols " + state.cols : " --cols ''") + (ref ? " --reference " + ref.label : "");
    $("command").textContent = cmd;
    $("test-note").textContent = ref ? "▲/▼: better/worse than the cell with " + ref.label + " of its slice (every other axis held) beyond noise, Holm-adjusted p <= 0.05 per slice; seed-level (t over seeds) where both ran two or more seeds, else run-to-run; as " + cmd : "";
    count.dataset.filterMs = (performance.now() - started).toFixed(1);
  }

  function block(title, cells, ri, ci, ref) {
    const c = sweep.configs, axes = sweep.axes, wrap = K.el("div");
    wrap.appendChild(K.el("h3", title));
    const rowValues = axes[ri].values.map((_, r) => r).filter((r) => [...cells.keys()].some((k) => k.startsWith(r + ",")));
    const colValues = ci >= 0 ? axes[ci].values.map((_, k) => k).filter((k) => [...cells.keys()].some((key) => key.endsWith("," + k))) : [0];
    const table = K.el("table", null, "pivot"), head = K.el("tr");
    head.appendChild(K.el("th", axes[ri].name + (ci >= 0 ? " \\\\ " + axes[ci].name : "")));
    for (const k of colValues) head.appendChild(K.el("th", ci >= 0 ? K.shown(axes[ci].values[k]) : sweep.places.length ? "score" : ""));
    const thead = K.el("thead"); thead.appendChild(head); table.appendChild(thead);
    const body = K.el("tbody");
    for (const r of rowValues) {
      const tr = K.el("tr");
      tr.appendChild(K.el("th", K.shown(axes[ri].values[r])));
      for (const k of colValues) {
        const i = cells.get(r + "," + k), td = K.el("td", null, "num");
        if (i === undefined) { td.textContent = "-"; td.classList.add("missing"); tr.appendChild(td); continue; }
        const mark = ref ? ref.mark[i] : "";
        const text = state.measure === "n" ? String(c.n[i]) : state.measure === "std" ? K.fixed(c.std[i], 4) : K.fixed(c.mean[i], 4) + K.MARK_TEXT[mark];
        const link = K.trialsLink(c.trials[i], MAX_OPEN), main = link ? K.el("a", text) : K.el("span", text);
        if (link) main.href = link;
        if (mark === "up" || mark === "down") td.classList.add("sig");
        if (c.degenerate[i]) main.textContent += " †";
        td.appendChild(main);
        if (state.measure === "mean" && c.low[i] !== null) td.appendChild(K.el("div", "[" + K.fixed(c.low[i], 4) + ", " + K.fixed(c.high[i], 4) + "]", "unc"));
        td.title = c.n[i] + " seed(s), " + (c.level[i] || "no interval") + (ref && ref.p[i] !== null ? ", adjusted p " + ref.p[i] : "");
        tr.appendChild(td);
      }
      body.appendChild(tr);
    }
    table.appendChild(body);
    wrap.appendChild(table);
    return wrap;
  }

  function choose(name) {
    sweep = sweeps.find((s) => s.name === name) || sweeps[0];
    if (state.cols === null) state.cols = (sweep.axes[1] || { name: "" }).name;
    if (state.rows === null) state.rows = (sweep.axes[0] || { name: "" }).name;
    if (!sweep.references.some((r) => r.label === state.ref)) state.ref = "";
    controls();
    render();
  }

  if (!sweeps.length) { count.textContent = "no sweep with done trials"; return; }
  state = readState();
  $("sweep").addEventListener("change", (e) => { state = { sweep: e.target.value, rows: null, cols: null, ref: "", measure: state.measure, filters: {} }; choose(e.target.value); writeState(); });
  $("rows").addEventListener("change", (e) => { state.rows = e.target.value; if (state.cols === state.rows) state.cols = ""; controls(); writeState(); render(); });
  $("cols").addEventListener("change", (e) => { state.cols = e.target.value; controls(); writeState(); render(); });
  $("measure").addEventListener("change", (e) => { state.measure = e.target.value; writeState(); render(); });
  $("reference").addEventListener("change", (e) => { state.ref = e.target.value; writeState(); render(); });
  choose(state.sweep);
  count.dataset.readyMs = performance.now().toFixed(1);
})();
"""

EXPLORE_CSS = """\
canvas#plot { border: 1px solid var(--line); cursor: crosshair; max-width: 100%; }
.controls label { margin-right: 12px; white-space: nowrap; }
table.pivot td { min-width: 90px; }
#legend { margin: 4px 0 8px; }
"""

ASSETS: dict[str, str] = {"explore-common.js": COMMON_JS, "explore.js": EXPLORE_JS, "pivot.js": PIVOT_JS}
