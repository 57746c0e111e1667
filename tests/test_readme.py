"""The README stays a front door, and what it and docs/ say about the code stays true.

- README.md is at most `MAX_README_LINES` lines; everything else lives in docs/.
- Every docs/ page or image the README (or a docs/ page) names exists.
- The row schema version the docs state is `kdgrid.store.schema.SCHEMA_VERSION`.
- docs/design.md's module list ("Where things live") has one line for every package of `kdgrid` (and `tools`),
  and names no file that does not exist; every module has a docstring (where the details live).
- README command 1 (`make demo`) installs kdgrid without the test, benchmark and MLflow extras, and command 2
  (`make test`, what `.ci/run` runs) installs them and runs every test, slow ones included, in two worker
  processes (read from `make --dry-run`, nothing is executed).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kdgrid.store.schema import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 300

# A path into docs/ as the README writes it, in a Markdown link or in backticks: docs/sweeps.md,
# docs/images/report-overview.png (an anchor after `#` is not part of the path).
DOCS_PATH = re.compile(r"\bdocs/[\w./-]*\w")
# A Markdown link target relative to a docs/ page: [running.md](running.md), [x](images/y.png#z).
RELATIVE_LINK = re.compile(r"\]\((?!https?://|#|/)([^)#\s]+)(?:#[^)]*)?\)")
# How the docs state the row schema's version: "schema version 2", "row schema (version 2)",
# "`SCHEMA_VERSION = 2`".
SCHEMA_STATEMENT = re.compile(r"schema \(?version (\d+)|SCHEMA_VERSION = (\d+)", re.IGNORECASE)


def _stated_versions(text: str) -> list[int]:
    return [int(a or b) for a, b in SCHEMA_STATEMENT.findall(text)]


def test_readme_is_a_front_door() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, (
        f"README.md has {len(lines)} lines (at most {MAX_README_LINES}): move details to docs/"
    )


def test_every_docs_path_the_readme_names_exists() -> None:
    named = sorted(set(DOCS_PATH.findall(README.read_text(encoding="utf-8"))))
    assert "docs/sweeps.md" in named and "docs/design.md" in named  # the index of docs/ is there
    missing = [path for path in named if not (ROOT / path).exists()]
    assert not missing, f"README.md names docs/ paths that do not exist: {missing}"


def test_every_relative_link_of_a_docs_page_exists() -> None:
    missing = []
    for page in sorted(DOCS.glob("*.md")):
        for target in RELATIVE_LINK.findall(page.read_text(encoding="utf-8")):
            if not (page.parent / target).exists():
                missing.append(f"{page.name} -> {target}")
    assert not missing, f"docs/ links to files that do not exist: {missing}"


def test_the_pattern_finds_a_missing_link() -> None:
    # The link checks above are only worth something if they see links: a made-up page with one good and one
    # broken link gives exactly the broken one.
    text = "see [sweeps](sweeps.md), [gone](no_such_page.md#anchor) and [web](https://example.org/x.md)"
    targets = RELATIVE_LINK.findall(text)
    assert targets == ["sweeps.md", "no_such_page.md"]
    assert [t for t in targets if not (DOCS / t).exists()] == ["no_such_page.md"]


@pytest.mark.parametrize("page", ["README.md", "docs/design.md"])
def test_the_schema_version_the_docs_state_is_the_codes(page: str) -> None:
    versions = _stated_versions((ROOT / page).read_text(encoding="utf-8"))
    assert versions, f"{page} does not state the row schema version"
    assert set(versions) == {SCHEMA_VERSION}, (
        f"{page} states row schema version(s) {sorted(set(versions))}; the code's is {SCHEMA_VERSION} "
        "(kdgrid.store.schema.SCHEMA_VERSION)"
    )


def test_schema_statements_are_recognised() -> None:
    text = "Rows are schema version 2; the row schema (version 3); `SCHEMA_VERSION = 4`"
    assert _stated_versions(text) == [2, 3, 4]
    assert _stated_versions("rows from a newer schema version are refused") == []


def _dry_run(target: str) -> list[str]:
    """The commands ``make TARGET`` would run in a fresh checkout (a virtual environment that does not exist
    yet), without running any."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    # Under ``make test`` (as CI runs it) the parent make's MAKEFLAGS/MAKELEVEL would make this one print
    # "Entering/Leaving directory" lines among the commands; the dry run must see what a user's shell sees.
    user_shell = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"}}
    done = subprocess.run(
        [
            "make",
            "--dry-run",
            "--always-make",
            "--no-print-directory",
            target,
            "VENV=/nonexistent-kdgrid-venv",
        ],
        cwd=ROOT,
        env=user_shell,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.splitlines()


def _pip_installs(commands: list[str]) -> list[str]:
    return [line for line in commands if " -m pip install " in line]


def test_make_demo_installs_only_what_the_demo_needs() -> None:
    commands = _dry_run("demo")
    installs = _pip_installs(commands)
    assert installs, commands
    for line in installs:
        assert "-c constraints.txt" in line, line  # torch pinned to its CPU build
        assert "[" not in line, f"make demo installs extras: {line}"
    assert any(line.endswith(" -e .") for line in installs), installs
    assert commands[-1].endswith("kdgrid demo")


def test_make_test_installs_the_test_extras_and_ci_runs_it() -> None:
    installs = _pip_installs(_dry_run("test"))
    assert any("dev" in line and "-c constraints.txt" in line for line in installs), installs
    readme = README.read_text(encoding="utf-8")
    assert re.search(r"^make demo +# 1\.", readme, re.MULTILINE)
    assert re.search(r"^make test +# 2\.", readme, re.MULTILINE)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^make test$", ci, re.MULTILINE), ".ci/run must run README command 2 exactly"


def test_make_test_runs_every_test_in_two_worker_processes() -> None:
    """CI's time on 2 cores holds with the suite split between two pytest-xdist workers (docs/testing.md)."""
    [run] = [line for line in _dry_run("test") if " -m pytest " in line]
    assert '-m "slow or not slow"' in run, run  # the slow tests run in CI too
    assert re.search(r" -n 2\b", run), run


DESIGN = DOCS / "design.md"
OUTSIDE = "### Outside the package"
# A path a row of the module list names in backticks: a folder (`slurm_profiles/`), a file (`expand.py`,
# `recipes/*.yaml`); not a name of code (`Trial`) or a command (`run --make-checkpoints`).
NAMED_PATH = re.compile(r"^[\w*./-]+(/|\.(py|yaml|csv|md|sh))$")


def _where_things_live(text: str) -> list[tuple[str, list[str]]]:
    """Each row of docs/design.md's "Where things live" tables as (its folder, the paths it names): the first
    cell names the row's package (below the repository root outside the package, below `kdgrid/` else; `kdgrid/`
    itself is the root of the package); the other paths are read relative to that folder."""
    section = text.split("## Where things live", 1)[1].split("\n## ", 1)[0]
    rows: list[tuple[str, list[str]]] = []
    base = "kdgrid/"
    for line in section.splitlines():
        if line.startswith("### "):
            base = "" if line.startswith(OUTSIDE) else "kdgrid/"
        if not line.startswith("| `"):
            continue
        first, rest = line.split(" | ", 1)
        head = re.findall(r"`([^`]+)`", first)[0]
        folder = head if head == "kdgrid/" or not base else base + head
        named = [token for token in re.findall(r"`([^`]+)`", rest) if NAMED_PATH.match(token)]
        rows.append((folder, named))
    return rows


# A built-in method's folder: named by docs/methods.md's table (`test_the_docs_list_every_built_in_method_once`),
# not by design.md's module list, so that a new method is its folder, its tests and that one row.
METHOD_FOLDER = re.compile(r"^kdgrid/core/methods/[^/]+/")


def _packages() -> list[str]:
    """Every package of kdgrid, as `kdgrid/grid/`, and `tools/`; a method's folder (`METHOD_FOLDER`) aside."""
    found = [
        path.parent.relative_to(ROOT).as_posix() + "/" for path in (ROOT / "kdgrid").rglob("__init__.py")
    ]
    return sorted([*(f for f in found if not METHOD_FOLDER.match(f)), "tools/"])


def _exists(folder: str, named: str) -> bool:
    """Whether a path a row names is there: below the row's folder, the package or the repository root."""
    for base in (
        ROOT / folder[: folder.rfind("/") + 1],
        ROOT / "kdgrid",
        ROOT,
    ):  # `sweeps/*.yaml`: in sweeps/
        if any(base.glob(named)) if "*" in named else (base / named).exists():
            return True
    return False


def test_the_module_list_is_one_line_per_package() -> None:
    listed = [folder for folder, _ in _where_things_live(DESIGN.read_text(encoding="utf-8"))]
    repeated = sorted({folder for folder in listed if listed.count(folder) > 1})
    assert not repeated, f"docs/design.md, 'Where things live', lists a package twice: {repeated}"
    missing = [package for package in _packages() if package not in listed]
    assert not missing, f"docs/design.md, 'Where things live', has no line for the package(s): {missing}"
    modules = [folder for folder in listed if folder.endswith(".py")]
    assert not modules, f"docs/design.md, 'Where things live', lists modules, not packages: {modules}"


def test_every_module_has_a_docstring() -> None:
    # What a module holds is said in its docstring, not in docs/design.md, so it cannot drift from the code.
    missing = []
    for package in ("kdgrid", "tools"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if not ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))):
                missing.append(path.relative_to(ROOT).as_posix())
    assert not missing, f"modules without a docstring saying what is in them: {missing}"


def test_the_module_list_names_only_files_that_exist() -> None:
    rows = _where_things_live(DESIGN.read_text(encoding="utf-8"))
    named = {(folder, path) for folder, paths in rows for path in paths}
    assert ("kdgrid/grid/", "expand.py") in named and (
        "kdgrid/analysis/",
        "tidy.py",
    ) in named  # rows are read
    stale = [f"{folder}: {path}" for folder, path in sorted(named) if not _exists(folder, path)]
    folders = [folder for folder, _ in rows if not _exists("", folder.rstrip("/"))]
    assert not stale + folders, (
        f"docs/design.md, 'Where things live', names files that do not exist: {stale + folders}"
    )


def test_the_module_list_reader_sees_packages_and_stale_names() -> None:
    # The checks above are only worth something if the reader finds rows: a made-up list with one package, one
    # file that exists, one that does not and a name of code gives exactly those.
    text = (
        "## Where things live\n\n### `kdgrid/` (the package)\n\n| package | what |\n| --- | --- |\n"
        "| `grid/` | `expand.py`, `gone.py`, `load_sweep`, `run --smoke` |\n\n"
        f"{OUTSIDE}\n\n| folder | what |\n| --- | --- |\n| `tools/` | `transcribe_paper.py` |\n\n## Next\n"
    )
    rows = _where_things_live(text)
    assert rows == [("kdgrid/grid/", ["expand.py", "gone.py"]), ("tools/", ["transcribe_paper.py"])]
    assert [path for folder, paths in rows for path in paths if not _exists(folder, path)] == ["gone.py"]


def test_the_docs_list_every_built_in_method_once() -> None:
    # docs/methods.md's table is the docs' list of methods: one row per built-in folder, none for a method that
    # is gone.
    from kdgrid.core.methods import BUILTIN_METHODS

    text = (ROOT / "docs" / "methods.md").read_text(encoding="utf-8")
    table = text[text.index("| method (folder) |") :].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `([a-z_]+)` \|", table, flags=re.M)
    assert sorted(rows) == sorted(BUILTIN_METHODS)
    folders = sorted(p.parent.name for p in (ROOT / "kdgrid" / "core" / "methods").glob("*/spec.py"))
    assert folders == sorted(BUILTIN_METHODS)
