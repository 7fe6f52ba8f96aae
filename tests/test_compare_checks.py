"""The before/after comparison of table checks reports exactly the cells that changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark.errors import ConfigError
from benchmark.tables.compare_checks import compare_checks, load_checks, main


def _write(folder: Path, target: str, cells: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{target}.json").write_text(json.dumps({"target": target, "cells": cells}))


def _cell(key: str, verdict: str = "PASS", mean: float | None = 1.0, reason: str = "") -> dict:
    return {"key": key, "verdict": verdict, "ours_mean": mean, "ours_std": None, "reason": reason}


def test_identical_folders_agree_and_each_kind_of_change_is_reported(tmp_path: Path, capsys) -> None:
    cells = [_cell("p/t#a"), _cell("p/t#b", "NOT RUN", None, "no data")]
    _write(tmp_path / "before", "t", cells)
    _write(tmp_path / "same", "t", cells)
    assert main([str(tmp_path / "before"), str(tmp_path / "same")]) == 0
    assert "0 of 2 cells differ" in capsys.readouterr().out

    _write(tmp_path / "after", "t", [_cell("p/t#a", "FAIL", 1.5), _cell("p/t#c")])
    changes = compare_checks(load_checks(tmp_path / "before"), load_checks(tmp_path / "after"))
    assert [(c.key, c.before is None, c.after is None) for c in changes] == [
        ("p/t#a", False, False),
        ("p/t#b", False, True),
        ("p/t#c", True, False),
    ]
    assert "verdict: 'PASS' -> 'FAIL'" in changes[0].describe(["verdict", "ours_mean"])
    assert main([str(tmp_path / "before"), str(tmp_path / "after")]) == 1


def test_a_missing_or_bad_folder_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a folder of checks"):
        load_checks(tmp_path / "nope")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "t.json").write_text("{")
    with pytest.raises(ConfigError, match="not a checks file"):
        load_checks(tmp_path / "bad")
