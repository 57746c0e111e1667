"""`kdgrid sweeps`' listing is remembered per content of the sweep files and of the code: the second listing
reads the cache, and a changed key computes it again."""

from __future__ import annotations

from pathlib import Path

import pytest

from kdgrid import sweep_listing


def test_the_listing_is_computed_once_per_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path))
    monkeypatch.setattr(sweep_listing, "compute_listing", lambda: [{"name": "demo", "trials": 52}])
    first = sweep_listing.sweep_listing()
    assert first == [{"name": "demo", "trials": 52}]
    assert len(list((tmp_path / sweep_listing.LISTING_DIR).glob("*.json"))) == 1

    def must_not_run() -> list:
        raise AssertionError("the cached listing should have been read")

    monkeypatch.setattr(sweep_listing, "compute_listing", must_not_run)
    assert sweep_listing.sweep_listing() == first
    monkeypatch.setattr(sweep_listing, "listing_key", lambda: "another-code-version")
    monkeypatch.setattr(sweep_listing, "compute_listing", lambda: [{"name": "demo", "trials": 53}])
    assert sweep_listing.sweep_listing() == [{"name": "demo", "trials": 53}]


def test_the_key_follows_the_sweep_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "sweeps"
    folder.mkdir()
    (folder / "a.yaml").write_text("name: a\n")
    monkeypatch.setattr(sweep_listing, "BUNDLED_SWEEPS_DIR", folder)
    before = sweep_listing.listing_key()
    (folder / "a.yaml").write_text("name: a  # edited\n")
    assert sweep_listing.listing_key() != before
