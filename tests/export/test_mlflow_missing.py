"""Without the `mlflow` extra: the CLI stays light and `kdgrid export mlflow` says how to install it (exit 2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.export.store_testing import write_tiny_store


def test_without_mlflow_the_export_names_the_extra_and_the_pip_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kdgrid.cli import main

    monkeypatch.setitem(sys.modules, "mlflow", None)  # `import mlflow` raises ImportError
    store = write_tiny_store(tmp_path / "store")
    with pytest.raises(SystemExit) as exit_:
        main(["export", "mlflow", "--store", str(store), "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "needs MLflow, which is not installed" in err and "Traceback" not in err
    assert "`mlflow` extra: pip install 'kdgrid[mlflow]' (from a checkout: pip install -e '.[mlflow]')" in err
    assert not (tmp_path / "m.db").exists()


def test_the_cli_does_not_import_mlflow() -> None:
    code = "import sys, kdgrid.cli; print('mlflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_help_names_the_extra() -> None:
    from typer.testing import CliRunner

    from kdgrid.cli import app

    result = CliRunner().invoke(app, ["export", "mlflow", "--help"], env={"COLUMNS": "300"})
    assert result.exit_code == 0 and "pip install 'kdgrid[mlflow]'" in result.output
