"""The report in a real browser: a small real sweep (the demo's grid in miniature, through the real core, with
`kdgrid run --report`) and one failure row, then every page opened in headless Chromium (Debian's package):
a screenshot, no console message (the pages log nothing, so any line is an error), every local file a page
refers to present, and the pages showing what the store holds (after the scripts ran: the DOM is dumped).

Chromium missing: skipped on a workstation, a failure in CI (``CI`` set): `.ci/run` installs it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np
import pytest

from kdgrid.core.teacher.options import NOT_MEANT_TO_BE_ACCURATE
from kdgrid.result import TrialResult
from kdgrid.store import read_store, write_result
from kdgrid.store.predictions import read_predictions
from kdgrid.store.write import failure_result
from kdgrid.trial import Trial

pytestmark = pytest.mark.slow

TASK = "synthetic-single-binary-n96-d32"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
FAILURE_MESSAGE = "CUDA out of memory <in the browser test>"


def chromium() -> str:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI"):
        pytest.fail("Chromium is not installed; CI must install it (`.ci/run`: apt-get install -y chromium)")
    pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")


def open_page(
    browser: str, path: Path, *, query: str = "", fragment: str = "", screenshot: Path | None = None
) -> tuple[str, list[str]]:
    """(the DOM after the page's scripts ran, the console lines Chromium logged) of the page at ``path``
    (``query``: after ``?``; ``fragment``: after ``#``, where the explore and pivot pages keep their view)."""
    url = path.resolve().as_uri() + (f"?{query}" if query else "") + (f"#{fragment}" if fragment else "")
    common = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
              "--enable-logging=stderr", "--v=0", "--window-size=1400,1000"]  # fmt: skip
    dumped = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    console = [line for line in dumped.stderr.splitlines() if ":CONSOLE" in line]
    if screenshot is not None:
        shot = subprocess.run([*common, f"--screenshot={screenshot}", url], capture_output=True, timeout=120)
        assert shot.returncode == 0 and screenshot.stat().st_size > 10_000, shot.stderr[-2000:]
    return dumped.stdout, console


def local_references(dom: str, page: Path) -> list[Path]:
    """The local files a page refers to (stylesheets, scripts, images, links), resolved from its folder."""
    found = []
    for ref in re.findall(r'(?:href|src)="([^"#?]+)', dom):
        if urlparse(ref).scheme in ("http", "https"):
            raise AssertionError(f"{page.name} refers to the network: {ref}")
        found.append((page.parent / unquote(ref)).resolve())
    return found


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory, teacher: str) -> tuple[Path, dict[str, str]]:
    from kdgrid import cli

    root = tmp_path_factory.mktemp("browser")
    store, out = root / "store", root / "report"
    sweep = root / "browser-demo.yaml"
    sweep.write_text(json.dumps({
        "name": "browser-demo",
        "fixed": {"task": TASK, "teacher": teacher, "student": "w32-l2-h2-f64", "init": "random",
                  "batch_size": 16, "max_length": 24, "epochs": 2, "lr": 2e-3,
                  "options": NOT_MEANT_TO_BE_ACCURATE},
        "studies": {"demo": {"axes": {"knowledge": ["cos", "value_relation"], "strategy": ["First", "Last"]},
                             "include": [{"knowledge": []}]}},
    }))  # fmt: skip
    args = ["run", str(sweep), "--store", str(store), "--set", "local_progress=false", "--report", str(out)]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(args)
    assert exit_info.value.code in (0, None)
    assert (out / "index.html").is_file()  # written by `run --report`
    broken = Trial(task=TASK, teacher=teacher, student="w32-l2-h2-f64", knowledge=["gram"], strategy="Last")
    write_result(store, failure_result(broken, error_type="OutOfMemoryError", message=FAILURE_MESSAGE),
                 sweep="browser-demo", study="demo")  # fmt: skip
    stuck = write_degenerate_copy(store)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["report", "--store", str(store), "--out", str(out)])
    assert exit_info.value.code in (0, None)
    rows = read_store(store)
    flagged = rows[
        (rows["status"] == "done")
        & rows["degenerate_json"].map(lambda t: isinstance(t, str) and bool(json.loads(t)))
    ]
    return out, {"failed": broken.trial_id, "degenerate": stuck, "flagged": sorted(flagged["trial_id"])}


def write_degenerate_copy(store: Path) -> str:
    """A done row of a new trial (``mmd``, ``Last``) whose student predicts one class on every dev example, on
    the very examples the sweep's trials were scored on: a degenerate trial the tables place in their grid."""
    rows = read_store(store)
    source = rows[rows["status"] == "done"].iloc[0]
    [predictions] = read_predictions(store, [source["row_id"]]).values()
    constant = {name: replace(dev, student=np.zeros_like(dev.student)) for name, dev in predictions.items()}
    config = {k: v for k, v in json.loads(source["trial_json"]).items() if k != "v"}
    trial = Trial.from_dict({**config, "knowledge": ["mmd"], "strategy": "Last"})
    scores = {name: {"accuracy": float(np.mean(dev.gold == 0))} for name, dev in constant.items()}
    result = TrialResult(trial=trial, status="done", scores=scores, last_scores=scores, best_epoch=1,
                         curve=[{"epoch": 1, "scores": scores, "loss_terms": {"soft": 0.7}}], predictions=constant,
                         wall_time_s=1.0, device="cpu")  # fmt: skip
    write_result(store, result, sweep="browser-demo", study="demo")
    return trial.trial_id


def test_every_page_loads_without_console_messages_and_shows_the_store(report, tmp_path: Path) -> None:
    browser = chromium()
    out, ids = report
    trial_pages = sorted((out / "trials").glob("*.html"))
    assert len(trial_pages) == 7  # 5 done trials, the degenerate one and the failed one
    done_page = next(p for p in trial_pages if p.stem not in (ids["failed"], ids["degenerate"]))
    flagged = ids[
        "flagged"
    ]  # the done trials whose rows record reasons (ours, and any tiny student that was stuck)
    assert ids["degenerate"] in flagged
    pages = {
        "overview": out / "index.html",
        "tables": out / "tables.html",
        "figures": out / "figures.html",
        "trials": out / "trials.html",
        "failures": out / "failures.html",
        "trial": done_page,
        "failed trial": out / "trials" / f"{ids['failed']}.html",
        "degenerate trial": out / "trials" / f"{ids['degenerate']}.html",
    }
    doms = {}
    for name, path in pages.items():
        shot = tmp_path / f"{name.replace(' ', '-')}.png"
        dom, console = open_page(browser, path, screenshot=shot if name == "overview" else None)
        assert console == [], f"{name}: {console}"
        missing = [ref for ref in local_references(dom, path) if not ref.exists()]
        assert missing == [], f"{name} refers to missing files: {missing}"
        doms[name] = dom

    overview = doms["overview"]
    assert re.search(r"<td>browser-demo</td><td>demo</td>.*?<td>6</td><td>1</td><td>0</td>", overview)
    assert "Cost ledger" in overview and "5.0×" in overview  # 5 students shared every teacher forward
    # the overview leads with the findings, and counts the degenerate trial
    assert overview.index("<h2>Findings</h2>") < overview.index("Sweeps and studies")
    card = f'<div class="big degenerate">{len(flagged)}</div><div class="label">done but degenerate'
    assert card in overview and "Degenerate: the number is not evidence (" in overview
    # every table number links to its trial's page (the pages exist: checked above with every local reference)
    tables = doms["tables"]
    assert tables.count('href="trials/') == 6 and f'href="trials/{ids["degenerate"]}.html"' in tables
    # the degenerate trial flagged on its page and on the failures page
    assert "Degenerate student" in doms["degenerate trial"]
    assert f"Degenerate students · {len(flagged)} trial(s)" in doms["failures"]
    assert all(trial_id in doms["failures"] for trial_id in flagged)
    assert 'id="table-demo"' in doms["tables"] and "<th>value_relation</th>" in doms["tables"]
    assert re.search(r'<img src="figures/[^"]+\.png"', doms["figures"])
    assert (
        "S1←T1" in doms["trial"] or "S2←T3" in doms["trial"] or "none (no feature knowledge)" in doms["trial"]
    )
    assert doms["trial"].count("<svg") >= 2  # loss terms and dev metrics, drawn inline
    assert "OutOfMemoryError" in doms["failures"] and "kdgrid resume browser-demo.yaml" in doms["failures"]
    assert "CUDA out of memory &lt;in the browser test&gt;" in doms["failed trial"]
    # the list was drawn by its script: 7 trials, a link per trial page, each degenerate one flagged
    assert "7 of 7 trials" in doms["trials"] and doms["trials"].count('href="trials/') == 7
    assert doms["trials"].count('<td class="degenerate">degenerate</td>') == len(flagged)


def test_the_trial_list_filters_in_the_browser(report) -> None:
    browser = chromium()
    out, ids = report
    dom, console = open_page(browser, out / "trials.html", query="q=state:failed")
    assert console == []
    assert "1 of 7 trials" in dom and f'href="trials/{ids["failed"]}.html"' in dom
