"""A trial page shows what its learned methods ended with: a learnable strategy's weights over the teacher's
layers as a student-layer x teacher-layer table, and a learned temperature with where it started."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from kdgrid.cli import app
from kdgrid.report.learned import mapping_section, temperature_section
from kdgrid.store import write_result
from tests.report.store_testing import demo_trial, done_result


def test_the_sections_lay_out_the_recorded_numbers() -> None:
    html = mapping_section({"method": "LAD", "weights": [[0.25, 0.75], [0.1, 0.9]]})
    assert "Learned layer mapping (LAD)" in html
    rows = re.findall(r"<tr>(.*?)</tr>", html)
    assert rows[0] == "<th>student layer</th><th>T1</th><th>T2</th>"
    assert rows[1:] == ["<td>S1</td><td>0.250</td><td>0.750</td>", "<td>S2</td><td>0.100</td><td>0.900</td>"]
    alp = mapping_section({"method": "ALP-KD", "weights": [[0.5, 0.5], []], "examples": [8, 0]})
    assert "<td>S2</td></tr>" in alp and "examples" in alp  # a layer never trained: an empty row
    assert mapping_section({}) == mapping_section(None) == temperature_section({}) == ""
    assert mapping_section({"weights": "<b>"}).count("<table") == 0  # not numbers: no table
    temperature = temperature_section(
        {"method": "CTKD", "temperature": 3.25, "start": 4.0, "range": [1.0, 21.0]}
    )
    assert "Learned temperature (CTKD)" in temperature and "3.2500" in temperature and "4.0000" in temperature


def test_a_trial_page_shows_its_learned_weights_and_temperature(tmp_path: Path) -> None:
    store, out = tmp_path / "store", tmp_path / "report"
    learned = demo_trial(["hidden_mse"], "LAD")
    result = done_result(learned, 0.8, 60.0)
    result.extra["mapping"] = {"method": "LAD", "weights": [[0.125, 0.375, 0.5]]}
    result.extra["learned_temperature"] = {"method": "CTKD", "temperature": 2.5, "start": 4.0}
    write_result(store, result, sweep="learned", study="learned")
    plain = demo_trial(["hidden_mse"], "Last-1")
    write_result(store, done_result(plain, 0.7, 60.0), sweep="learned", study="learned")
    outcome = CliRunner().invoke(
        app, ["report", "--store", str(store), "--out", str(out)], catch_exceptions=False
    )
    assert outcome.exit_code == 0, outcome.output
    page = (out / "trials" / f"{learned.trial_id}.html").read_text()
    assert "<td>S1</td><td>0.125</td><td>0.375</td><td>0.500</td>" in page
    assert "Learned temperature (CTKD)" in page and "2.5000" in page
    other = (out / "trials" / f"{plain.trial_id}.html").read_text()
    assert "Learned layer mapping" not in other and "Learned temperature" not in other
