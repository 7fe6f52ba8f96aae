"""The protocol catalogue evaluates to exactly what the Python definitions gave (fixture written before the
move to YAML, see ``tests/protocol_snapshot.py``)."""

from __future__ import annotations

import json
from pathlib import Path

from protocol_snapshot import dumps, snapshot

FIXTURE = Path(__file__).parent / "data" / "protocols_snapshot.json"


def test_every_protocol_evaluates_as_before() -> None:
    before = json.loads(FIXTURE.read_text())
    now = json.loads(dumps(snapshot()))
    for part in ("closed_form", "fl"):
        for key in sorted(set(before[part]) | set(now[part])):
            assert dumps(now[part].get(key)) == dumps(before[part].get(key)), f"{part}/{key} changed"


# ------------------------------------------------------------------------------------ bad catalogue files
import pytest  # noqa: E402
import yaml  # noqa: E402

from benchmark.closed_form.protocols import load_closed_form_catalogue  # noqa: E402
from benchmark.errors import ConfigError  # noqa: E402
from benchmark.fl.protocols import load_protocols  # noqa: E402
from benchmark.protocols import CATALOGUE_DIR  # noqa: E402


def _write(tmp_path: Path, name: str, edit) -> Path:
    data = yaml.safe_load((CATALOGUE_DIR / f"{name}.yaml").read_text())
    edit(data)
    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return tmp_path


def _fl(tmp_path, edit):
    return load_protocols(_write(tmp_path, "fl", edit))


def _cf(tmp_path, edit):
    return load_closed_form_catalogue(_write(tmp_path, "closed_form", edit))


def test_shipped_catalogues_load(tmp_path) -> None:
    sweeps = {f"legate2023_cifar10_{t}" for t in ("a100", "a001", "k200", "k500", "k1000", "e2", "e5")}
    assert _fl(tmp_path, lambda d: None).keys() == {"legate2023_cifar10", "fedcof_cifar100_lp", *sweeps}
    assert "suite" in _cf(tmp_path, lambda d: None).protocols


LEGATE = "legate2023_cifar10"
FL_BAD = {
    "unknown field": (lambda d: d["protocols"][LEGATE].update(round=3), "unknown key 'round' -- did you mean 'rounds'"),
    "wrong type": (lambda d: d["protocols"][LEGATE].update(rounds="many"), "field 'rounds': wrong type"),
    "wrong method type": (
        lambda d: d["protocols"][LEGATE]["methods"]["lp"].update(client_lr="fast"),
        "field 'methods.lp.client_lr': wrong type",
    ),
    "bad literal": (lambda d: d["protocols"][LEGATE].update(rounds_unit="epochs"), "field 'rounds_unit'"),
    "missing field": (lambda d: d["protocols"][LEGATE].pop("dataset"), "missing key 'dataset'"),
    "unknown dataset": (lambda d: d["protocols"][LEGATE].update(dataset="cifar11"), "unknown dataset 'cifar11'"),
    "unknown backbone": (lambda d: d["protocols"][LEGATE].update(backbone="vgg"), "unknown backbone 'vgg'"),
    "unknown preset": (lambda d: d["protocols"][LEGATE].update(preprocess="x"), "unknown preprocessing preset"),
    "unknown partition": (
        lambda d: d["protocols"][LEGATE].update(partition_scheme="iid2"), "unknown partition scheme 'iid2'"
    ),
    "unknown init": (
        lambda d: d["protocols"][LEGATE]["methods"]["lp"].update(init="centralised_ncm"),
        "unknown federated closed-form method 'centralised_ncm'",
    ),
    "invalid value": (lambda d: d["protocols"][LEGATE].update(participation=1.5), "participation"),
}


@pytest.mark.parametrize("case", sorted(FL_BAD))
def test_bad_fl_catalogue_names_file_protocol_and_field(tmp_path, case) -> None:
    edit, message = FL_BAD[case]
    with pytest.raises(ConfigError) as err:
        _fl(tmp_path, edit)
    text = str(err.value)
    assert str(tmp_path / "fl.yaml") in text and f"protocol {LEGATE!r}" in text and message in text, text


CF_BAD = {
    "unknown field": (lambda d: d["protocols"]["fedcof"].update(method={}), "fedcof", "unknown key 'method' -- did you mean 'methods'?"),
    "unknown method": (
        lambda d: d["protocols"]["legate2023"]["methods"].update(fedxyz={}),
        "legate2023", "unknown closed-form method 'fedxyz'",
    ),
    "unknown paper key": (
        lambda d: d["protocols"]["legate2023"]["methods"]["fedncm"].update(paper_options="legate"),
        "legate2023", "unknown paper key 'legate'",
    ),
    "paper key lacks the method": (
        lambda d: d["protocols"]["legate2023"]["methods"]["fedncm"].update(paper_options="fedcof")
        or d["paper_options"]["fedcof"]["methods"].pop("fedncm"),
        "fedcof", "has no options for 'fedncm'",  # protocol fedcof uses it first
    ),
    "wrong option type": (
        lambda d: d["paper_options"]["fedcof"]["methods"]["fedncm"].update(bias=[0]),
        "fedcof", "field 'paper_options.methods.fedncm.bias': wrong type",
    ),
    "unknown run-time value": (
        lambda d: d["paper_options"]["fedcof"]["methods"]["fedcof"].update(gamma="@gamma"),
        "fedcof", "unknown run-time value '@gamma'",
    ),
    "unknown protocol": (lambda d: d["paper_protocol"].update(fedcof="fedcof2"), None, "unknown protocol 'fedcof2'"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CF_BAD))
def test_bad_closed_form_catalogue_names_file_protocol_and_field(tmp_path, case) -> None:
    edit, protocol, message = CF_BAD[case]
    with pytest.raises(ConfigError) as err:
        _cf(tmp_path, edit)
    text = str(err.value)
    assert str(tmp_path / "closed_form.yaml") in text and message in text, text
    assert protocol is None or f"protocol {protocol!r}" in text, text


def test_invalid_yaml_names_the_file(tmp_path) -> None:
    (tmp_path / "fl.yaml").write_text("protocols: [\n")
    with pytest.raises(ConfigError, match=r"fl\.yaml:2: not valid YAML"):
        load_protocols(tmp_path)
