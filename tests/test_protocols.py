"""Closed-form runs use the protocol of the paper being reproduced, and the protocol is in the path and rows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmark.cli import main
from benchmark.closed_form.protocols import PROTOCOLS, protocol_methods, protocol_options
from benchmark.data.partition import PartitionData, make_partition
from benchmark.errors import UnknownNameError
from benchmark.io import sha256_file
from benchmark.jobs import ClosedFormJob
from benchmark.pipeline import closed_form_step
from benchmark.seeding import int_seed
from benchmark.workflow import closed_form_path


def test_paper_protocol_options() -> None:
    fedcof = protocol_options("fedcof", "squeezenet1_1")
    assert fedcof["fedncm"] == {"bias": "zero", "solver": "pinv32"}
    assert fedcof["fed3r_fedcof"] == {"lam": 0.01, "solver": "pinv32"}
    assert fedcof["fedcof"]["gamma"] == 1.0 and fedcof["fedcof"]["solver"] == "pinv32"
    assert protocol_options("fedcof", "mobilenet_v2")["fedcof"]["gamma"] == 0.1
    assert fedcof["centralised_within_class"] == {"gamma": 0.0, "ridge": 0.01, "solver": "pinv32"}  # Table 2
    assert protocol_options("legate2023", "squeezenet1_1")["fedncm"]["bias"] == "zero"  # legate2023 §3.2
    code = protocol_options("legate2023-code", "squeezenet1_1", seed=2)["fedncm"]
    # issue 26: the code's bias is named torch_default_init and drawn from the run seed's fedncm_bias stream
    assert code["bias"] == "torch_default_init" and code["seed"] == int_seed(2, "fedncm_bias")
    assert set(protocol_methods("legate2023")) == {"fedncm", "centralised_ncm"}
    with pytest.raises(UnknownNameError, match="legate2023"):
        protocol_options("legate", "squeezenet1_1")


def _pointer(tmp: Path, split: str, x: np.ndarray, y: np.ndarray) -> Path:
    from safetensors.numpy import save_file

    tensors = tmp / f"{split}.safetensors"
    save_file({"features": x.astype(np.float32), "labels": y.astype(np.int64)}, str(tensors))
    ptr = {
        "dataset": "synthetic", "split": split, "subset": "all", "backbone": "squeezenet1_1",
        "num_samples": len(y), "feature_dim": x.shape[1], "num_classes": 4, "key_digest": f"k-{split}",
        "tensors": str(tensors), "metadata": "", "file_sha256": sha256_file(tensors), "data_checksum": "c0",
        "weights": {"source": "substitute", "sha256": "w0"}, "preprocess": {}, "precision": "fp32",
    }  # fmt: skip
    path = tmp / f"{split}.json"
    path.write_text(json.dumps(ptr))
    return path


@pytest.fixture()
def synthetic_run(tmp_path):
    rng = np.random.default_rng(0)
    means = rng.normal(size=(4, 16)) * 2
    y = np.repeat(np.arange(4), 60)
    x = np.abs(means[y] + rng.normal(size=(240, 16)))
    yt = np.repeat(np.arange(4), 20)
    xt = np.abs(means[yt] + rng.normal(size=(80, 16)))
    part = make_partition("dirichlet", y, 1, num_clients=6, alpha=0.5)
    part = part.with_data(PartitionData("synthetic", "all", "train", len(y), "c0"))
    part.to_json(tmp_path / "part.json")
    return _pointer(tmp_path, "train", x, y), _pointer(tmp_path, "test", xt, yt), tmp_path / "part.json"


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_closed_form_step_records_the_protocol(tmp_path, synthetic_run, protocol) -> None:
    train, test, part = synthetic_run
    out = tmp_path / f"{protocol}.csv"
    closed_form_step(train=train, test=test, partition=part, out=out, protocol=protocol)
    df = pd.read_csv(out)
    assert list(df["method"]) == list(protocol_methods(protocol))
    assert set(df["protocol"]) == {protocol}
    opts = {m: json.loads(n) for m, n in zip(df["method"], df["note"], strict=True)}
    assert opts == {
        m: json.loads(json.dumps(o))
        for m, o in protocol_options(protocol, "squeezenet1_1", seed=1).items()
        if m in opts
    }


def test_random_bias_is_an_explicit_option(tmp_path, synthetic_run) -> None:
    """legate2023 (text: bias 0) and legate2023-code (random nn.Linear bias) are two protocols, two files."""
    train, test, part = synthetic_run
    paths = {}
    for protocol in ("legate2023", "legate2023-code"):
        paths[protocol] = tmp_path / protocol / "seed1.csv"
        closed_form_step(train=train, test=test, partition=part, out=paths[protocol], protocol=protocol)
    zero = pd.read_csv(paths["legate2023"]).set_index("method")
    code = pd.read_csv(paths["legate2023-code"]).set_index("method")
    assert json.loads(zero.loc["fedncm", "note"])["bias"] == "zero"
    assert json.loads(code.loc["fedncm", "note"])["bias"] == "torch_default_init"


def test_cli_protocol_flag_and_overrides(tmp_path, synthetic_run, capsys) -> None:
    train, test, part = synthetic_run
    out = tmp_path / "x.csv"
    rc = main(["closed-form", "--train", str(train), "--test", str(test), "--partition", str(part),
               "--protocol", "fedcof", "--methods", "fedcof", "--options", '{"fedcof": {"gamma": 0.5}}',
               "--out", str(out)])  # fmt: skip
    assert rc == 0
    row = pd.read_csv(out).iloc[0]
    assert row["protocol"] == "fedcof" and json.loads(row["note"])["gamma"] == 0.5
    rc = main(["closed-form", "--train", str(train), "--test", str(test), "--partition", str(part),
               "--protocol", "nope", "--out", str(out)])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("flb: error: unknown closed-form protocol") and "\n" not in err
    rc = main(["closed-form", "--train", str(train), "--test", str(test), "--partition", str(part),
               "--protocol", "legate2023", "--methods", "fedcof", "--out", str(out)])  # fmt: skip
    assert rc == 2 and "not in closed-form protocol" in capsys.readouterr().err


def test_protocol_is_part_of_the_run_path() -> None:
    a = closed_form_path(
        "cifar10", "squeezenet1_1", "substitute", "legate2023_cifar", "fp32", "all", "t", 0, "fedcof"
    )
    b = closed_form_path(
        "cifar10", "squeezenet1_1", "substitute", "legate2023_cifar", "fp32", "all", "t", 0, "legate2023"
    )
    assert a != b and "/fedcof/seed0.csv" in a
    job = ClosedFormJob("cifar10", "squeezenet1_1", "substitute", "legate2023_cifar", "fp32", "all", "t", "legate2023", 0)
    assert job.path == b and job.protocol == "legate2023"


def test_centralised_heads_take_the_reference_solver() -> None:
    """Under the fedcof protocol Table 2's centralised ridge uses the federated servers' float32 pinv."""
    from benchmark.closed_form import run_method
    from benchmark.closed_form.centralised import ridge_head, within_class_head

    rng = np.random.default_rng(3)
    x = np.abs(rng.normal(size=(400, 12)))
    y = rng.integers(0, 5, 400)
    np.testing.assert_allclose(ridge_head(x, y, 5, solver="pinv64").W, ridge_head(x, y, 5).W, atol=1e-10)
    np.testing.assert_allclose(
        within_class_head(x, y, 5, gamma=0.5, ridge=0.01, solver="solve64").W,
        within_class_head(x, y, 5, gamma=0.5, ridge=0.01).W,
        atol=1e-12,
    )
    clients = [np.arange(0, 150), np.arange(150, 400)]
    fed = run_method("fed3r_fedcof", x, y, x, y, clients, 5, lam=0.01, solver="pinv32")
    cen = run_method("centralised_ridge", x, y, x, y, clients, 5, lam=0.01, solver="pinv32")
    assert cen.head.W.dtype == np.float32
    np.testing.assert_allclose(cen.head.W, fed.head.W, atol=2e-4)
