"""issue 23: nothing committed holds an absolute path of the machine that wrote it, and the writers of
committed text (the results pages, the HTML report) write this machine's folders as symbols."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE_FIXTURE = ROOT / "tests" / "data" / "site" / "results"
# Spelled in pieces, so that this file does not hold what it looks for.
_KINDS = ("work", "root", "home", "tmp")


def _machine_prefixes() -> list[str]:
    """Absolute folder prefixes that must not appear in a tracked file: the usual machine roots, this checkout,
    the home folder and the configured data / weights folders."""
    out = {"/" + k + "/" for k in _KINDS}
    for value in (str(ROOT), os.environ.get("HOME"), os.environ.get("FLB_DATA_ROOT"),
                  os.environ.get("FLB_WEIGHTS_DIR")):  # fmt: skip
        if value and os.path.isabs(value) and len(value.rstrip("/")) > 1:
            out.add(value.rstrip("/") + "/")
    return sorted(out)


def _tracked_text_files() -> list[Path]:
    try:
        names = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True, timeout=60
        ).stdout.decode().split("\0")
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout: no tracked files to scan")
    return [ROOT / n for n in names if n and (ROOT / n).is_file()]


def test_no_tracked_text_file_holds_an_absolute_machine_path() -> None:
    """Every tracked text file, every line: no absolute path of this machine kind (the data root, the torch hub
    cache, the papers' folder, the checkout ...). Failures name file:line."""
    pattern = re.compile(
        r"(?<![\w.~$/-])(" + "|".join(re.escape(p) for p in _machine_prefixes()) + ")"
    )
    found = []
    for path in _tracked_text_files():
        data = path.read_bytes()
        if b"\0" in data:
            continue  # binary (PNG assets)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            if m := pattern.search(line):
                found.append(f"{path.relative_to(ROOT)}:{lineno}: ...{line[max(0, m.start() - 30):m.end() + 40]}...")
    assert not found, "absolute machine paths in committed files:\n" + "\n".join(found[:40])


def test_results_pages_and_site_write_machine_folders_as_symbols(tmp_path, monkeypatch, tree_guard) -> None:
    """The writers of committed text: a NOT RUN reason quoting the data root and the torch hub cache is written
    as ``$FLB_DATA_ROOT/...`` and ``$TORCH_HOME/...`` on the results page and in the HTML report; nothing
    else in the inputs changes."""
    from benchmark.report import Stamp, page_texts
    from benchmark.report_guard import write_together
    from benchmark.site.build import build_site

    data_root, torch_home = tmp_path / "machine" / "data", tmp_path / "machine" / "torch"
    monkeypatch.setenv("FLB_DATA_ROOT", str(data_root))
    monkeypatch.setenv("TORCH_HOME", str(torch_home))
    reason = (f"dataset files absent: cub200: expected images.txt under {data_root}/CUB_200_2011; no weights for "
              f"vit_b_16: not in the torch hub cache ({torch_home}/hub/checkpoints)")  # fmt: skip
    cell = {"key": "fedcof/table3#x", "cell": "x", "row": ["CUB"], "column": ["ViT"], "metric": "accuracy",
            "printed": "1.0", "verdict": "NOT RUN", "reason": reason}  # fmt: skip
    report = {"target": "fedcof_table3", "tier": "ci", "cells": [cell]}
    results = tmp_path / "results"
    shutil.copytree(SITE_FIXTURE, results)
    (results / "checks" / "fedcof_table3.json").write_text(json.dumps(report))
    guard = tree_guard(results)

    pages = tmp_path / "pages"
    write_together(page_texts([report], pages, Stamp("now", "m", "abc", "x")))  # as `flb report --readme`
    page = (pages / "fedcof_table3.md").read_text()
    assert "under $FLB_DATA_ROOT/CUB_200_2011;" in page and "($TORCH_HOME/hub/checkpoints)" in page
    site = build_site(results, tmp_path / "site", stamp=Stamp("now", "m", "abc", "flb site"))
    html = (site / "fedcof.html").read_text()
    assert "$FLB_DATA_ROOT/CUB_200_2011" in html and "$TORCH_HOME/hub/checkpoints" in html
    for text in [page, html, *(p.read_text() for p in pages.glob("*.md"))]:
        assert str(tmp_path) not in text
    guard.check()
