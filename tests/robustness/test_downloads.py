"""Downloads and data / weights locations under faults and misuse (issue 23, item 6 and the new-user findings).

Every server here is a real one on 127.0.0.1 (a raw socket in a thread: it can stall, drop the connection
mid-body, serve corrupt bytes or answer 500 / 404); nothing reaches further. The download settings are the
documented environment variables (``FLB_FETCH_*``), set short so that each test takes a second or two.
"""

from __future__ import annotations

import hashlib
import io
import os
import socket
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from PIL import Image

from benchmark import cli
from benchmark import workflow as wf
from benchmark.data import download, folders
from benchmark.data.download import DataSource, Remote
from benchmark.data.registry import load_dataset
from benchmark.errors import ConfigError
from benchmark.tables import availability

ROOT = Path(__file__).resolve().parents[2]
#: What a refused or faulty download must never change in the checkout.
CHECKOUT = (ROOT / "README.md", ROOT / "docs" / "results", ROOT / "expected")


# ------------------------------------------------------------------------------------ local servers


@dataclass
class Request:
    path: str
    range: str | None


@dataclass
class Server:
    """A raw HTTP server on 127.0.0.1: ``respond(server, request, conn)`` answers each connection."""

    respond: Callable[[Server, Request, socket.socket], None]
    requests: list[Request] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/{path.lstrip('/')}"

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            t = threading.Thread(target=self._handle, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head and (chunk := conn.recv(4096)):
                head += chunk
            lines = head.decode("latin-1").split("\r\n")
            headers = dict(ln.split(": ", 1) for ln in lines[1:] if ": " in ln)
            req = Request(lines[0].split(" ")[1], headers.get("Range"))
            self.requests.append(req)
            try:
                self.respond(self, req, conn)
            except OSError:  # the client gave up (a timeout): nothing to answer
                pass

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
        for t in self.threads:
            t.join(timeout=5)


def answer(conn: socket.socket, status: str, body: bytes = b"", **headers: str) -> None:
    head = [f"HTTP/1.1 {status}", f"Content-Length: {headers.pop('length', len(body))}", "Connection: close"]
    head += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)


@pytest.fixture
def serve():
    """``serve(respond) -> Server``; every server is closed (its stalled connections released) at the end."""
    servers: list[Server] = []

    def start(respond: Callable[[Server, Request, socket.socket], None]) -> Server:
        servers.append(Server(respond))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


@pytest.fixture
def fast_fetch(monkeypatch):
    """Downloads allowed (conftest sets FLB_OFFLINE=1), short timeouts, two attempts, a short back-off."""
    monkeypatch.delenv("FLB_OFFLINE", raising=False)
    monkeypatch.delenv("FLB_MIRROR", raising=False)
    for var, value in {"FLB_FETCH_CONNECT_TIMEOUT": "1", "FLB_FETCH_READ_TIMEOUT": "0.5",
                       "FLB_FETCH_ATTEMPTS": "2", "FLB_FETCH_BACKOFF": "0.05"}.items():  # fmt: skip
        monkeypatch.setenv(var, value)


def eurosat_zip() -> bytes:
    """EuroSAT.zip in the real layout (``2750/<Class>/<Class>_<n>.jpg``), one small image per class."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for c, cls in enumerate(folders.EUROSAT_CLASSES):
            img = io.BytesIO()
            Image.new("RGB", (6, 4), (20 * c, 10, 0)).save(img, format="JPEG")
            zf.writestr(f"2750/{cls}/{cls}_1.jpg", img.getvalue())
    return buf.getvalue()


DATA = eurosat_zip()
SHA256 = hashlib.sha256(DATA).hexdigest()


def publish(monkeypatch, url: str) -> None:
    """Make ``url`` EuroSAT's source, with the sha256 of :data:`DATA` as its official checksum."""
    remote = Remote(url, SHA256, "sha256", folders.EUROSAT_FOLDER, True, "test stand-in")
    monkeypatch.setitem(download.SOURCES, "eurosat", DataSource(folders.EUROSAT_FOLDER, (remote,)))


def fetch(root: Path, *extra: str, within: float = 150.0) -> int:
    """``flb data fetch eurosat --data-root ROOT``, failing the test if it has not returned ``within`` s."""
    result: list[int] = []
    t = threading.Thread(target=lambda: result.append(cli.main(["data", "fetch", "eurosat", "--data-root",
                                                                str(root), *extra])), daemon=True)  # fmt: skip
    t.start()
    t.join(within)
    assert result, f"flb data fetch still hangs after {within:.0f} s"
    return result[0]


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) if root.exists() else []


# --------------------------------------------------------------------------- 1. flb data fetch faults


def test_stalled_server_is_a_clear_error_within_seconds(
    tmp_path, monkeypatch, serve, fast_fetch, one_line_error, tree_guard
):
    """(a) A server that accepts the connection and never answers: one error within seconds naming the URL,
    the read timeout and the mirror setting, after the bounded retries; nothing left in the data root."""
    srv = serve(lambda s, req, conn: s.stop.wait())
    url = srv.url("EuroSAT.zip")
    publish(monkeypatch, url)
    guard = tree_guard(tmp_path / "data", *CHECKOUT)
    start = time.monotonic()
    rc = fetch(tmp_path / "data")
    took = time.monotonic() - start
    err = one_line_error()
    assert rc == 2 and took < 8, took
    assert err == (
        f"flb: error: download of {url} failed after 2 attempts: no answer (timed out) -- check the network "
        "and run the same command again, or set FLB_MIRROR (or `flb data fetch --mirror URL`) to a mirror "
        "holding it"
    )
    assert len(srv.requests) == 2
    guard.check()
    assert files_under(tmp_path / "data") == []


@pytest.mark.parametrize("honours_range", [True, False], ids=["resumed", "server-ignores-range"])
def test_dropped_connection_is_retried_and_resumed(
    tmp_path, monkeypatch, serve, fast_fetch, capsys, tree_guard, honours_range
):
    """(b) A server that drops the connection mid-body: the retry asks for the rest (``Range``) and appends to
    the ``.part`` file; a server that ignores the range restarts it from byte 0. Either way the file ends with
    the official sha256, the dataset loads, and no staging file stays behind."""
    half = len(DATA) // 2

    def respond(s: Server, req: Request, conn: socket.socket) -> None:
        if len(s.requests) == 1:  # announce it all, send half, drop the connection
            answer(conn, "200 OK", DATA[:half], length=str(len(DATA)))
        elif req.range and honours_range:
            start = int(req.range.removeprefix("bytes=").rstrip("-"))
            answer(conn, "206 Partial Content", DATA[start:],
                   Content_Range=f"bytes {start}-{len(DATA) - 1}/{len(DATA)}")  # fmt: skip
        else:
            answer(conn, "200 OK", DATA)

    srv = serve(respond)
    publish(monkeypatch, srv.url("EuroSAT.zip"))
    guard = tree_guard(*CHECKOUT)
    root = tmp_path / "data"
    rc = fetch(root)
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert [r.range for r in srv.requests] == [None, f"bytes={half}-"]
    assert f"attempt 1/2 failed (the connection closed after {half:,} of {len(DATA):,} bytes)" in out.out
    assert f"resuming at byte {half:,}" in out.out
    assert f"sha256 {SHA256} verified" in out.out
    d = load_dataset("eurosat", "all", root, download=False)
    assert len(d) == 10 and d.class_names == folders.EUROSAT_CLASSES
    assert sorted(p.name for p in root.iterdir()) == ["eurosat"]  # no .flb-fetch, no .part left
    guard.check()


def test_failed_fetch_keeps_its_part_and_the_next_run_resumes(tmp_path, monkeypatch, serve, fast_fetch, capsys):
    """A fetch whose every attempt is cut keeps the bytes that arrived (under ``.flb-fetch/``, never under the
    dataset's folder) and says so; the same command then asks only for the rest."""
    cut = len(DATA) // 3

    def respond(s: Server, req: Request, conn: socket.socket) -> None:
        if req.range is None:
            answer(conn, "200 OK", DATA[:cut], length=str(len(DATA)))
        else:
            start = int(req.range.removeprefix("bytes=").rstrip("-"))
            answer(conn, "206 Partial Content", DATA[start:],
                   Content_Range=f"bytes {start}-{len(DATA) - 1}/{len(DATA)}")  # fmt: skip

    monkeypatch.setenv("FLB_FETCH_ATTEMPTS", "1")
    srv = serve(respond)
    publish(monkeypatch, srv.url("EuroSAT.zip"))
    root = tmp_path / "data"
    assert fetch(root) == 2
    part = root / ".flb-fetch" / "eurosat" / f"{SHA256}.EuroSAT.zip.part"
    err = capsys.readouterr().err
    assert f"{cut:,} bytes kept in {part}, the same command resumes from there" in err
    assert files_under(root) == [str(part.relative_to(root))] and part.read_bytes() == DATA[:cut]
    assert fetch(root) == 0, capsys.readouterr().err
    assert [r.range for r in srv.requests] == [None, f"bytes={cut}-"]
    assert sorted(p.name for p in root.iterdir()) == ["eurosat"]


def test_corrupt_bytes_are_refused_and_nothing_is_left(
    tmp_path, monkeypatch, serve, fast_fetch, one_line_error, tree_guard
):
    """(c) A server that serves other bytes: refused by the official sha256 before anything is extracted;
    no file is left in the data root (no ``.part`` either), and the error names the URL."""
    bad = bytearray(DATA)
    bad[len(bad) // 2] ^= 0xFF
    srv = serve(lambda s, req, conn: answer(conn, "200 OK", bytes(bad)))
    url = srv.url("EuroSAT.zip")
    publish(monkeypatch, url)
    root = tmp_path / "data"
    guard = tree_guard(root, *CHECKOUT)
    assert fetch(root, "--marker", str(tmp_path / "m.json")) == 2
    err = one_line_error()
    assert err == (
        f"flb: error: sha256 mismatch for {url}: official {SHA256} (test stand-in), downloaded file has "
        f"{hashlib.sha256(bad).hexdigest()}; nothing was written to the data root -- retry (the transfer may "
        "have been corrupted); if it persists the upstream file (or the mirror's copy) changed"
    )
    assert len(srv.requests) == 1  # a complete, corrupt file is not fetched again
    assert files_under(root) == [] and not (tmp_path / "m.json").exists()
    guard.check()
    with pytest.raises(Exception, match="eurosat"):
        load_dataset("eurosat", "all", root, download=False)


@pytest.mark.parametrize(("status", "requests", "tries"), [
    ("500 Internal Server Error", 2, " after 2 attempts"),  # a server error: retried, then refused
    ("404 Not Found", 1, ""),  # the file is not there: not retried
])  # fmt: skip
def test_http_error_status_is_a_clear_error(
    tmp_path, monkeypatch, serve, fast_fetch, one_line_error, tree_guard, status, requests, tries
):
    """(d) A server that answers 500 or 404: one error naming the URL, the status and the mirror setting."""
    srv = serve(lambda s, req, conn: answer(conn, status))
    url = srv.url("EuroSAT.zip")
    publish(monkeypatch, url)
    root = tmp_path / "data"
    guard = tree_guard(root, *CHECKOUT)
    assert fetch(root) == 2
    err = one_line_error()
    fix = ("check the network and run the same command again, or set FLB_MIRROR (or `flb data fetch --mirror "
           "URL`) to a mirror holding it" if requests == 2 else "the file is not served there: set FLB_MIRROR "
           f"(or `flb data fetch --mirror URL`) to a mirror holding {url.removeprefix('http://')}")  # fmt: skip
    assert err == f"flb: error: download of {url} failed{tries}: HTTP {status} -- {fix}"
    assert len(srv.requests) == requests
    guard.check()
    assert files_under(root) == []


def test_mirror_setting_fetches_from_the_mirror(tmp_path, monkeypatch, serve, fast_fetch, capsys, tree_guard):
    """``FLB_MIRROR`` (or ``--mirror``): files come from ``<mirror>/<host>/<path>`` and are checked against the
    official checksum; the official host is not contacted."""
    official = serve(lambda s, req, conn: answer(conn, "404 Not Found"))
    mirror = serve(lambda s, req, conn: answer(conn, "200 OK", DATA))
    url = official.url("files/EuroSAT.zip")
    publish(monkeypatch, url)
    guard = tree_guard(*CHECKOUT)
    base = mirror.url("m")
    monkeypatch.setenv("FLB_MIRROR", base)
    assert fetch(tmp_path / "a") == 0, capsys.readouterr().err
    monkeypatch.delenv("FLB_MIRROR")
    assert fetch(tmp_path / "b", "--mirror", base) == 0, capsys.readouterr().err
    host = url.removeprefix("http://").split("/")[0]
    assert [r.path for r in mirror.requests] == [f"/m/{host}/files/EuroSAT.zip"] * 2 and official.requests == []
    assert len(load_dataset("eurosat", "all", tmp_path / "b", download=False)) == 10
    guard.check()


# ------------------------------------------------------------------ 2. named locations that do not exist


def _snakemake_dry_run(tmp_path: Path, *config: str) -> tuple[int, str]:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "smoke", "-s", str(ROOT / "workflow" / "Snakefile"),
         "--directory", str(tmp_path), "--config", *config],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "FLB_OFFLINE": "1"},
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


def test_named_data_root_or_weights_dir_that_does_not_exist_is_refused_at_plan_time(
    tmp_path, monkeypatch, capsys, tree_guard
):
    """A data root or weights folder the user named (config, environment or flag) that does not exist, or is
    a file, is one error naming it and its setting, when planning (``snakemake -n`` already refuses) and
    when an ``flb`` command starts; the default ``./data``, when nothing names one, may still be absent."""
    missing, afile = tmp_path / "nonexistent", tmp_path / "a-file"
    afile.write_text("not a folder")
    monkeypatch.chdir(tmp_path)
    for var in ("FLB_DATA_ROOT", "FLB_WEIGHTS_DIR"):
        monkeypatch.delenv(var, raising=False)
    guard = tree_guard(*CHECKOUT)
    fill = f", or create it (mkdir -p {missing}) for `flb data fetch NAME` to fill"
    data = "the folder holding the datasets"
    cases = {
        ("config", "data_root", None): f"data root {missing} (named by config 'data_root') does not exist -- "
        f"point config 'data_root' at {data}{fill}",
        ("config", "weights_dir", None): f"weights folder {missing} (named by config 'weights_dir') does not "
        "exist -- point config 'weights_dir' at the folder holding the substitute *.safetensors files, or "
        "unset it (default: <data root>/weights)",
        ("env", None, "FLB_DATA_ROOT"): f"data root {missing} (named by $FLB_DATA_ROOT) does not exist -- "
        f"point $FLB_DATA_ROOT at {data}{fill}",
        ("env", None, "FLB_WEIGHTS_DIR"): f"weights folder {missing} (named by $FLB_WEIGHTS_DIR) does not "
        "exist -- point $FLB_WEIGHTS_DIR at the folder holding the substitute *.safetensors files, or unset "
        "it (default: <data root>/weights)",
    }  # fmt: skip
    for (how, key, var), msg in cases.items():
        with monkeypatch.context() as m:
            if var:
                m.setenv(var, str(missing))
            with pytest.raises(ConfigError) as err:
                wf.load_config(overrides={key: str(missing)} if key else {})
            assert str(err.value) == msg, (how, key, var)
    with pytest.raises(ConfigError, match=rf"^data root {afile} \(named by config 'data_root'\) is not a folder"):
        wf.validate_config({**wf.load_config(), "data_root": str(afile)})
    # the flags of the flb commands that read data or weights
    argv = ["extract", "--dataset", "cifar10", "--split", "train", "--backbone", "squeezenet1_1",
            "--preprocess", "legate2023_cifar", "--out", str(tmp_path / "p.json")]  # fmt: skip
    assert cli.main([*argv, "--data-root", str(missing)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"flb: error: data root {missing} (named by --data-root) does not exist -- point --data-root at {data}{fill}"
    )
    assert cli.main([*argv, "--data-root", str(tmp_path), "--weights-dir", str(afile)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"flb: error: weights folder {afile} (named by --weights-dir) is not a folder -- point --weights-dir at "
        "the folder holding the substitute *.safetensors files"
    )
    # nothing named: the default ./data may be absent (its cells are NOT RUN with the reason, as before)
    assert wf.load_config()["data_root"] is None and not (tmp_path / "data").exists()
    # the workflow refuses when it is planned, before writing anything
    rc, out = _snakemake_dry_run(tmp_path, f"data_root={missing}")
    assert rc != 0 and f"data root {missing} (named by config 'data_root') does not exist" in out, out[-3000:]
    assert not (tmp_path / "results").exists() and not missing.exists()
    guard.check()


# --------------------------------------------------------------------- 3. the NOT RUN reason of no weights


def test_wrong_weights_dir_reason_names_the_weights_setting_and_the_fetch(tmp_path, monkeypatch, tree_guard):
    """With a weights folder that lacks the substitute file (and no torchvision checkpoint, offline), the NOT
    RUN reason names both ways to get weights: FLB_WEIGHTS_DIR / weights_dir and `flb data fetch --weights`;
    the summary's command says the same. Models without a substitute keep their reason word for word."""
    from benchmark.models.backbones import backbone_spec
    from benchmark.models.weights import hub_checkpoint_path
    from benchmark.tables.summary import reason_group

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setattr(availability, "online", lambda: False)
    availability.clear_caches()
    wrong = tmp_path / "wrong-weights"
    wrong.mkdir()
    guard = tree_guard(*CHECKOUT)
    try:
        source, reason = availability.choose_weights("squeezenet1_1", None, str(wrong))
        ckpt = hub_checkpoint_path(backbone_spec("squeezenet1_1").torchvision_url)
        sub = backbone_spec("squeezenet1_1").substitute.filename
        assert source is None and reason == (
            f"no weights for squeezenet1_1: torchvision's {ckpt.name} is not in the torch hub cache "
            f"({ckpt.parent}) and the substitute {sub} is not in the weights folder {wrong}; point "
            f"FLB_WEIGHTS_DIR (--config weights_dir=...) at the folder holding {sub}, or run "
            "`flb data fetch --weights squeezenet1_1` where there is network"
        )
        blocker = availability.weights_blocker("squeezenet1_1", None, str(wrong))
        assert blocker is not None and blocker.render() == reason and blocker.command == (
            "flb data fetch --weights squeezenet1_1")
        group = reason_group(blocker, "table3")
        assert group.name == "no weights for squeezenet1_1"
        assert group.command.startswith("point FLB_WEIGHTS_DIR (--config weights_dir=...) at its substitute's "
                                        "folder, or put torchvision's squeezenet1_1 checkpoint")  # fmt: skip
        # a model without a substitute: the reason of before, unchanged
        r18 = hub_checkpoint_path(backbone_spec("resnet18").torchvision_url)
        assert availability.choose_weights("resnet18", None, str(wrong)) == (None, (
            f"no weights for resnet18: torchvision's {r18.name} is not in the torch hub cache ({r18.parent}) and "
            "no substitute exists; run `flb data fetch --weights resnet18` where there is network"))  # fmt: skip
        assert reason_group(availability.weights_blocker("resnet18", None, str(wrong)), "t").command == (
            "put torchvision's resnet18 checkpoint in the torch hub cache (or allow the download), then "
            "snakemake --cores all t"
        )
    finally:
        availability.clear_caches()
    guard.check()


# --------------------------------------------------------------------------- 4. flb data list, bad roots


def test_data_list_with_a_missing_or_file_data_root_is_one_line(tmp_path, monkeypatch, capsys, tree_guard):
    """``flb data list`` on a data root that does not exist or is a file: one line, exit 2, no listing; with
    nothing named and no ./data, the listing of before (every dataset absent, with how to get it)."""
    missing, afile = tmp_path / "nonexistent", tmp_path / "a-file"
    afile.write_text("x")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLB_DATA_ROOT", raising=False)
    guard = tree_guard(tmp_path, *CHECKOUT)
    assert cli.main(["data", "list", "--data-root", str(missing)]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err == (
        f"flb: error: data root {missing} (named by --data-root) does not exist -- point --data-root at the "
        f"folder holding the datasets, or create it (mkdir -p {missing}) for `flb data fetch NAME` to fill\n"
    )
    assert cli.main(["data", "list", "--data-root", str(afile)]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err == (
        f"flb: error: data root {afile} (named by --data-root) is not a folder -- point --data-root at the "
        "folder holding the datasets\n"
    )
    monkeypatch.setenv("FLB_DATA_ROOT", str(missing))
    assert cli.main(["data", "list"]) == 2
    assert f"data root {missing} (named by $FLB_DATA_ROOT) does not exist" in capsys.readouterr().err
    monkeypatch.delenv("FLB_DATA_ROOT")
    assert cli.main(["data", "list"]) == 0
    lines = {ln.split()[0]: ln for ln in capsys.readouterr().out.splitlines()}
    assert "downloadable" in lines["cifar10"] and "no_download" in lines["stanford_cars"]
    guard.check()


def test_a_missing_torchvision_checkpoint_downloads_with_timeouts_not_forever(
    tmp_path, monkeypatch, serve, fast_fetch, tree_guard
):
    """A backbone whose torchvision checkpoint is missing downloads it through the same timeouts and retries
    as `flb data fetch` (it used torch.hub's download, which has none): a stalled server is one error naming
    the URL within seconds, and nothing is left in the torch hub cache."""
    from benchmark.errors import BenchmarkError
    from benchmark.models import weights

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    srv = serve(lambda s, req, conn: s.stop.wait())
    url = srv.url("resnet18-f37072fd.pth")
    guard = tree_guard(*CHECKOUT)
    result: list[BaseException] = []

    def load() -> None:
        try:
            weights.load_torchvision_checkpoint(url, download=True)
        except BaseException as err:  # the test asserts on it below
            result.append(err)

    start = time.monotonic()
    t = threading.Thread(target=load, daemon=True)
    t.start()
    t.join(60)
    assert result, "the checkpoint download still hangs after 60 s"
    assert time.monotonic() - start < 20
    err = result[0]
    assert isinstance(err, BenchmarkError) and url in str(err) and "timed out" in str(err), repr(err)
    assert len(srv.requests) == 2  # FLB_FETCH_ATTEMPTS
    assert not (tmp_path / "torch" / "hub" / "checkpoints" / "resnet18-f37072fd.pth").exists()
    guard.check()
