"""Verified downloads (``flb data fetch``, :mod:`benchmark.data.download`) and the workflow's fetch step,
without the internet: a local HTTP server on 127.0.0.1 serves small archives in the datasets' real
layouts, with their checksums standing in for the official ones; planning runs with the network
monkeypatched reachable or not."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
import zipfile
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy.io import savemat

from benchmark import cli
from benchmark import workflow as wf
from benchmark.data import download, folders
from benchmark.data.download import DataSource, Remote
from benchmark.data.registry import load_dataset
from benchmark.tables import availability

ROOT = Path(__file__).resolve().parents[1]


def _jpeg(color: tuple[int, int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (6, 4), color).save(buf, format="JPEG")
    return buf.getvalue()


class _Handler(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep pytest's output clean
        pass


@pytest.fixture
def server(tmp_path):
    """``(folder served, base URL, paths requested)`` of an HTTP server on 127.0.0.1 (ephemeral port)."""
    www = tmp_path / "www"
    www.mkdir()
    requests: list[str] = []

    class Handler(_Handler):
        def do_GET(self) -> None:
            requests.append(self.path)
            super().do_GET()

    srv = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(www)))
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield www, f"http://127.0.0.1:{srv.server_address[1]}/", requests
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def online(monkeypatch):
    """Downloads allowed in this test (conftest sets FLB_OFFLINE=1 for all others)."""
    monkeypatch.delenv("FLB_OFFLINE", raising=False)


def eurosat_zip() -> bytes:
    """EuroSAT.zip in the real layout (``2750/<Class>/<Class>_<n>.jpg``), two images per class."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for c, cls in enumerate(folders.EUROSAT_CLASSES):
            for n in (1, 2):
                zf.writestr(f"2750/{cls}/{cls}_{n}.jpg", _jpeg((20 * c, 10 * n, 0)))
    return buf.getvalue()


def serve_eurosat(monkeypatch, server, official_md5: str | None = None) -> bytes:
    """Serve EuroSAT.zip; its md5 (or ``official_md5``) stands in for the official one."""
    www, base, _ = server
    data = eurosat_zip()
    (www / "EuroSAT.zip").write_bytes(data)
    md5 = official_md5 or hashlib.md5(data).hexdigest()
    remote = Remote(base + "EuroSAT.zip", md5, "md5", folders.EUROSAT_FOLDER, True, "test stand-in")
    monkeypatch.setitem(download.SOURCES, "eurosat", DataSource(folders.EUROSAT_FOLDER, (remote,)))
    return data


def fetch_cli(capsys, *args: str) -> tuple[int, str]:
    """``flb data fetch *args``: its exit code and what it printed (stdout then stderr)."""
    rc = cli.main(["data", "fetch", *args])
    out = capsys.readouterr()
    return rc, out.out + out.err


def serve_remote(monkeypatch, server, source: str, filename: str, body: bytes, checksum: str) -> None:
    """Serve ``body`` as ``filename`` and point the first remote of ``download.SOURCES[source]`` at it, with
    ``checksum`` standing in for the official one (the other fields of the source stay)."""
    www, base, _ = server
    (www / filename).write_bytes(body)
    src = download.SOURCES[source]
    remote = dataclasses.replace(src.remotes[0], url=base + filename, checksum=checksum)
    monkeypatch.setitem(download.SOURCES, source, dataclasses.replace(src, remotes=(remote,)))


@dataclasses.dataclass
class FakeRemote:
    """``flb data fetch`` against the test's HTTP server (:func:`server`), each file served by :func:`serve_remote`
    under its ``digest`` (``md5``, ``sha256``) in place of the official one."""

    monkeypatch: pytest.MonkeyPatch
    server: tuple
    capsys: pytest.CaptureFixture

    def fetch(self, root: Path, source: str, filename: str, body: bytes, digest: str, top: str) -> str:
        """Fetch ``source`` into ``root`` with ``body`` served as ``filename``: it succeeds, requests that file
        alone and leaves ``top`` alone in ``root`` (no staging folder); what it printed."""
        checksum = hashlib.new(digest, body).hexdigest()
        serve_remote(self.monkeypatch, self.server, source, filename, body, checksum)
        rc, out = fetch_cli(self.capsys, source, "--data-root", str(root))
        assert rc == 0, out
        assert self.server[2] == [f"/{filename}"] and sorted(p.name for p in root.iterdir()) == [top]
        return out

    def fetch_cut_off(self, root: Path, source: str, filename: str, good: bytes, digest: str) -> str:
        """Fetch ``source`` into ``root`` when the transfer of ``filename`` (``good``) is cut off halfway: it
        fails (exit 2) naming the file and writes nothing; what it printed."""
        cut, checksum = good[: len(good) // 2], hashlib.new(digest, good).hexdigest()
        serve_remote(self.monkeypatch, self.server, source, filename, cut, checksum)
        rc, out = fetch_cli(self.capsys, source, "--data-root", str(root))
        assert rc == 2 and filename in out and "nothing was written" in out, out
        assert list(root.iterdir()) == []
        return out


@pytest.fixture
def fake_remote(monkeypatch, server, capsys) -> FakeRemote:
    return FakeRemote(monkeypatch, server, capsys)


# ------------------------------------------------------------------------------------ flb data fetch


def test_fetch_downloads_verifies_extracts_and_the_loader_loads(
    tmp_path, monkeypatch, server, online, capsys
):
    serve_eurosat(monkeypatch, server)
    root, marker = tmp_path / "data", tmp_path / "results" / "data" / "eurosat.json"
    rc, out = fetch_cli(capsys, "eurosat", "--data-root", str(root), "--marker", str(marker))
    assert rc == 0, out
    assert "verified" in out and "downloaded" in out
    d = load_dataset("eurosat", "all", root, download=False)
    assert len(d) == 20 and d.class_names == folders.EUROSAT_CLASSES
    assert d.labels.tolist() == [c for c in range(10) for _ in (1, 2)]
    rec = json.loads(marker.read_text())
    assert rec["downloaded"] is True and rec["splits"]["all"] == {"checksum": d.checksum, "samples": 20}
    assert rec["sources"][0]["md5"] == download.SOURCES["eurosat"].remotes[0].checksum
    assert sorted(p.name for p in root.iterdir()) == ["eurosat"]  # no staging folder left behind
    # A second fetch finds the data, verifies it and downloads nothing.
    rc, out = fetch_cli(capsys, "eurosat", "--data-root", str(root))
    assert rc == 0 and "nothing downloaded" in out and server[2] == ["/EuroSAT.zip"]


def test_corrupted_download_is_rejected_and_nothing_is_written(tmp_path, monkeypatch, server, online, capsys):
    serve_eurosat(monkeypatch, server, official_md5="0" * 32)  # the file served is not the official one
    root = tmp_path / "data"
    marker = tmp_path / "m.json"
    rc, out = fetch_cli(capsys, "eurosat", "--data-root", str(root), "--marker", str(marker))
    assert rc == 2
    assert "md5 mismatch" in out and "EuroSAT.zip" in out and "nothing was written" in out
    assert out.count("\n") == 2  # the progress line and the one-line error
    assert list(root.iterdir()) == [] and not marker.exists()
    with pytest.raises(Exception, match="eurosat"):
        load_dataset("eurosat", "all", root, download=False)


def _flowers_files(tmp_path: Path) -> dict[str, bytes]:
    """102flowers.tgz (``jpg/image_0000N.jpg``), imagelabels.mat and setid.mat as served upstream."""
    src = tmp_path / "flowers-src"
    (src / "jpg").mkdir(parents=True)
    for i in range(1, 5):
        (src / "jpg" / f"image_{i:05d}.jpg").write_bytes(_jpeg((40 * i, 0, 0)))
    savemat(src / "imagelabels.mat", {"labels": np.array([[1, 2, 2, 3]], dtype=np.uint8)})
    savemat(src / "setid.mat", {k: np.array([v], dtype=np.uint16) for k, v in
                                {"trnid": [1, 2], "valid": [3], "tstid": [3, 4]}.items()})  # fmt: skip
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        tf.add(src / "jpg", arcname="jpg")
    return {
        "102flowers.tgz": buf.getvalue(),
        "imagelabels.mat": (src / "imagelabels.mat").read_bytes(),
        "setid.mat": (src / "setid.mat").read_bytes(),
    }


def test_manifest_vouched_file_is_never_overwritten(tmp_path, monkeypatch, server, online, capsys):
    www, base, _ = server
    files = _flowers_files(tmp_path)
    remotes = []
    for name, data in files.items():
        (www / name).write_bytes(data)
        remotes.append(Remote(base + name, hashlib.md5(data).hexdigest(), "md5", folders.FLOWERS_FOLDER,
                              name.endswith(".tgz"), "test stand-in"))  # fmt: skip
        if name.endswith(".mat"):  # the loader checks the official md5 of the .mat files it reads
            monkeypatch.setitem(folders.FLOWERS_MD5, name, hashlib.md5(data).hexdigest())
    monkeypatch.setitem(download.SOURCES, "flowers102", DataSource(folders.FLOWERS_FOLDER, tuple(remotes)))
    # A local rebuild of imagelabels.mat (same labels, other bytes), vouched for by the root manifest.
    root = tmp_path / "data"
    local = root / "flowers-102" / "imagelabels.mat"
    local.parent.mkdir(parents=True)
    savemat(local, {"labels": np.array([[1, 2, 2, 3]], dtype=np.uint8), "note": "local rebuild"})
    assert local.read_bytes() != files["imagelabels.mat"]
    manifest = f"{hashlib.sha256(local.read_bytes()).hexdigest()}  flowers-102/imagelabels.mat\n"
    (root / "MANIFEST.sha256").write_text(manifest)
    before = local.read_bytes()

    rc, out = fetch_cli(capsys, "flowers102", "--data-root", str(root))
    assert rc == 0, out
    assert "kept flowers-102/imagelabels.mat" in out
    assert local.read_bytes() == before and (root / "MANIFEST.sha256").read_text() == manifest
    assert (root / "flowers-102" / "setid.mat").read_bytes() == files["setid.mat"]
    te = load_dataset("flowers102", "test", root, download=False)
    assert [p.name for p in te.paths] == ["image_00003.jpg", "image_00004.jpg"] and te.labels.tolist() == [
        1,
        2,
    ]


def test_datasets_without_public_download_say_where_to_get_them(tmp_path, online, capsys):
    rc, out = fetch_cli(capsys, "stanford_cars", "--data-root", str(tmp_path))
    assert rc == 2 and "no public download" in out and "dead" in out and "Kaggle" in out
    rc, out = fetch_cli(capsys, "inat_user_120k", "--data-root", str(tmp_path))
    assert rc == 2 and "inaturalist-user-120k.zip" in out
    assert list(tmp_path.iterdir()) == []


def test_offline_fetch_is_refused_without_touching_the_network(tmp_path, monkeypatch, server, capsys):
    serve_eurosat(monkeypatch, server)
    assert os.environ.get("FLB_OFFLINE") == "1"
    rc, out = fetch_cli(capsys, "eurosat", "--data-root", str(tmp_path))
    assert rc == 2 and "FLB_OFFLINE" in out and f"flb data fetch eurosat --data-root {tmp_path}" in out
    assert server[2] == []


def test_data_list_shows_each_state(tmp_path, monkeypatch, server, online, capsys):
    serve_eurosat(monkeypatch, server)
    download.fetch_files("eurosat", tmp_path, log=lambda _: None)
    assert cli.main(["data", "list", "--data-root", str(tmp_path)]) == 0
    lines = {ln.split()[0]: ln for ln in capsys.readouterr().out.splitlines()}
    assert "present" in lines["eurosat"] and "verified (all 20)" in lines["eurosat"]
    assert (
        "downloadable" in lines["cifar10"]
        and f"flb data fetch cifar10 --data-root {tmp_path}" in lines["cifar10"]
    )
    assert "no_download" in lines["stanford_cars"] and "no_download" in lines["inat_user_120k"]


# ------------------------------------------------------------------------------- torchvision weights


def _serve_checkpoint(monkeypatch, server, body: bytes, prefix: str) -> Path:
    """Serve ``body`` as torchvision's ``squeezenet1_1-<prefix>.pth``; return where the hub keeps it."""
    from benchmark.models import backbones

    www, base, _ = server
    name = f"squeezenet1_1-{prefix}.pth"
    (www / name).write_bytes(body)
    spec = dataclasses.replace(backbones.backbone_spec("squeezenet1_1"), torchvision_url=base + name)
    monkeypatch.setattr(backbones, "backbone_spec", lambda model: spec)
    return Path(os.environ["TORCH_HOME"]) / "hub" / "checkpoints" / name


def test_fetch_weights_verifies_the_sha256_prefix(tmp_path, monkeypatch, server, online, capsys):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    body = b"not really a checkpoint, but bytes with a known sha256"
    dest = _serve_checkpoint(monkeypatch, server, body, hashlib.sha256(body).hexdigest()[:8])
    marker = tmp_path / "w.json"
    rc, out = fetch_cli(capsys, "--weights", "squeezenet1_1", "--marker", str(marker))
    assert rc == 0, out
    assert (
        dest.read_bytes() == body
        and json.loads(marker.read_text())["sha256"] == hashlib.sha256(body).hexdigest()
    )

    bad = _serve_checkpoint(monkeypatch, server, body, "deadbeef")
    rc, out = fetch_cli(capsys, "--weights", "squeezenet1_1")
    assert rc == 2 and "sha256 mismatch" in out and "deadbeef" in out
    assert sorted(p.name for p in bad.parent.iterdir()) == [dest.name]  # nothing half-written


# --------------------------------------------------------------------------------- planning and DAG


@pytest.fixture
def fresh_availability():
    """Planning caches emptied before and after (the test changes the network state and data roots)."""
    availability.clear_caches()
    yield
    availability.clear_caches()


def _plans(target: str, root: Path, network: bool, monkeypatch) -> list:
    from benchmark.tables.plan import plan_target

    monkeypatch.setattr(availability, "online", lambda: network)
    cfg = wf.load_config(overrides={"data_root": str(root)})
    return [p for p in plan_target(target, cfg) if p.dataset == "cifar10"]


def test_offline_cell_is_not_run_with_the_command_that_gets_the_data(
    tmp_path, monkeypatch, fresh_availability
):
    plans = _plans("table3", tmp_path, False, monkeypatch)
    assert plans and all(p.status == "not_run" for p in plans)
    assert all(f"`flb data fetch cifar10 --data-root {tmp_path}`" in p.reason for p in plans)
    assert all("FLB_DATA_ROOT" in p.reason and "data_root" in p.reason for p in plans)


def test_reachable_network_plans_a_fetch_job_instead(tmp_path, monkeypatch, fresh_availability):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))  # no checkpoint cached here
    (tmp_path / "data").mkdir()  # an empty data root (a named one must exist: benchmark.paths.check_locations)
    plans = _plans("table3", tmp_path / "data", True, monkeypatch)
    trained = [p for p in plans if p.runner == "fl_train"]  # full-model training: planned only with device=cuda
    assert trained and all("needs a GPU" in p.reason for p in trained)
    assert all(p.status == "planned" and p.jobs for p in plans if p.runner != "fl_train")
    monkeypatch.chdir(tmp_path)
    cfg = {"data_root": str(tmp_path / "data")}
    assert wf.fetch_inputs(cfg, "cifar10") == ["results/data/cifar10.json"]
    assert wf.fetch_inputs(cfg, "cifar10", "squeezenet1_1", "torchvision") == [
        "results/data/cifar10.json",
        "results/data/weights/squeezenet1_1.json",
    ]
    assert wf.fetch_inputs(cfg, "cifar10", "squeezenet1_1", "substitute") == ["results/data/cifar10.json"]


def test_the_answer_follows_the_data_root_the_environment_names_at_each_call(real_data_root, tmp_path, monkeypatch):
    """The root left to ``$FLB_DATA_ROOT`` (``root=None``) is resolved at each call: a process that planned with
    one folder is not answered for it after the variable names another (a test that planned with the default
    ``./data`` made every later plan in its process NOT RUN, 2026-12-06); likewise a relative root after a chdir."""
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("FLB_DATA_ROOT", str(empty))
    assert availability.dataset_missing("cifar10") is not None
    monkeypatch.setenv("FLB_DATA_ROOT", str(real_data_root))
    assert availability.dataset_missing("cifar10") is None
    monkeypatch.delenv("FLB_DATA_ROOT")
    monkeypatch.chdir(tmp_path)
    assert availability.dataset_missing("cifar10") is not None  # ./data is absent here
    (tmp_path / "data").symlink_to(real_data_root)
    assert availability.dataset_missing("cifar10") is not None  # the same folder: remembered, as before
    availability.clear_caches()
    assert availability.dataset_missing("cifar10") is None
    (tmp_path / "data").unlink()
    availability.clear_caches()  # the files are gone: the split sizes are forgotten too
    assert availability.dataset_missing("cifar10") is not None


def test_present_data_needs_no_fetch(real_data_root, monkeypatch, fresh_availability, tmp_path):
    monkeypatch.setattr(availability, "online", lambda: True)
    monkeypatch.chdir(tmp_path)
    assert wf.fetch_inputs({"data_root": str(real_data_root)}, "cifar10") == []


def _dry_run_smoke(tmp_path: Path, env: dict[str, str]) -> str:
    (tmp_path / "empty").mkdir(exist_ok=True)
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "smoke", "-s", str(ROOT / "workflow" / "Snakefile"),
         "--directory", str(tmp_path), "--config", f"data_root={tmp_path / 'empty'}"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout


def test_snakemake_dag_fetches_absent_data_before_extracting(tmp_path) -> None:
    out = _dry_run_smoke(tmp_path, {"FLB_OFFLINE": "0", "FLB_ONLINE": "1"})
    assert "rule fetch_data:" in out and "output: results/data/cifar10.json" in out
    extract = out[out.index("rule extract:") :].split("\n\n", 1)[0]
    assert "input: results/data/cifar10.json" in extract
    offline = _dry_run_smoke(tmp_path, {"FLB_OFFLINE": "1"})
    assert "fetch_data" not in offline
