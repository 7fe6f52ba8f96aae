"""tools/gpu_share_bench.py starts K copies of one job together, gives each its own folder, records every copy's
return code and wall time and the aggregate gain K x wall(1) / wall(K); a failing copy stops it with a non-zero
status and a record that says so. Timing is not asserted (a CPU under load): the arithmetic is, on its own."""

from __future__ import annotations

import json
import sys

from tool_scripts import heavy_imports, load_tool

share = load_tool("gpu_share_bench")

JOB = [sys.executable, "-c", "import pathlib, sys; pathlib.Path(sys.argv[1], 'done').write_text('x')", "{out}"]


def test_the_gain_is_k_times_the_single_wall_over_the_batch_wall() -> None:
    assert share.gain(10.0, share.Batch(2, 10.0, (10.0, 10.0), (0, 0))) == 2.0  # perfect overlap
    assert share.gain(10.0, share.Batch(4, 40.0, (40.0,) * 4, (0,) * 4)) == 1.0  # one after another


def test_copies_run_in_their_own_folders_and_are_recorded(tmp_path) -> None:
    assert share.main(["--out", str(tmp_path), "--copies", "2,3", "--", *JOB]) == 0
    doc = json.loads((tmp_path / "gpu_share_bench.json").read_text())
    assert [r["copies"] for r in doc["results"]] == [1, 2, 3]  # 1 always runs first: the baseline
    for r in doc["results"]:
        assert r["ok"] and r["returncodes"] == [0] * r["copies"] and len(r["copy_wall_s"]) == r["copies"]
        assert r["gain"] > 0 and r["wall_s"] >= max(r["copy_wall_s"]) - 1e-6
        for i in range(r["copies"]):
            assert (tmp_path / f"copies-{r['copies']}" / f"copy-{i}" / "done").read_text() == "x"
    assert doc["results"][0]["gain"] == 1.0 and "{out}" in doc["command"] and doc["machine"] and doc["git_commit"]


def test_a_failing_copy_stops_it_and_says_so(tmp_path, capsys) -> None:
    fail = [sys.executable, "-c", "raise SystemExit(3)"]
    assert share.main(["--out", str(tmp_path), "--copies", "2", "--", *fail]) == 1
    doc = json.loads((tmp_path / "gpu_share_bench.json").read_text())
    assert [(r["copies"], r["ok"], r["returncodes"], r["gain"]) for r in doc["results"]] == [(1, False, [3], None)]
    assert "a copy failed" in capsys.readouterr().err


def test_gpu_share_bench_imports_only_what_a_gpu_machine_has() -> None:
    assert heavy_imports("gpu_share_bench") == []
