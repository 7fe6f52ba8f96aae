"""Paper-table specs (``paper_tables/<target>.yaml``): which runner fills which reported cell.

A spec names the ``expected/`` file it checks and a list of ``runners``; each runner has a ``when``
filter on the cell's (merged) protocol and metric, and the parameters it needs::

    target: fedcof_table3
    expected: fedcof/table3.yaml
    seeds: [0, 1, 2, 3, 4]
    runners:
      - when: {metric: accuracy}
        runner: closed_form
        methods: {fedncm: fedncm, fed3r: fed3r_fedcof, fedcof: fedcof, fedcof_oracle: fedcof_oracle}
        partition: {scheme: dirichlet, alpha: 0.1, num_clients: 100}
        preprocess: {default: fedcof_folder, cifar100: fedcof_cifar}
      - when: {metric: comm_mb}
        runner: cost

A cell that no runner takes is ``not_run`` with the spec's ``not_run_reason`` (or a default). The table
layout is the expected file's own row and column labels, so nothing about the layout is repeated here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmark.errors import ConfigError, UnknownNameError
from benchmark.runners import runner_names

ROOT = Path(__file__).resolve().parents[2]
SPEC_DIR = ROOT / "paper_tables"
EXPECTED_DIR = ROOT / "expected"


@dataclass(frozen=True)
class RunnerRule:
    """One runner and the cells it takes."""

    runner: str
    when: Mapping[str, Any]
    params: Mapping[str, Any]

    def matches(self, cell: Mapping[str, Any]) -> bool:
        for key, want in self.when.items():
            have = cell.get(key)
            if isinstance(want, list):
                if have not in want:
                    return False
            elif have != want:
                return False
        return True


@dataclass(frozen=True)
class TableSpec:
    """A paper table target."""

    target: str
    paper: str
    table: str
    expected: Path
    seeds: tuple[int, ...]
    runners: tuple[RunnerRule, ...]
    aliases: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    not_run_reason: str = "no runner in this suite fills this cell yet"
    notes: tuple[str, ...] = ()

    @property
    def expected_paper(self) -> str:
        return self.expected.parent.name

    @property
    def expected_table(self) -> str:
        return self.expected.stem.removeprefix("table")

    def rule_for(self, cell: Mapping[str, Any]) -> RunnerRule | None:
        return next((r for r in self.runners if r.matches(cell)), None)


def list_specs(folder: Path = SPEC_DIR) -> list[str]:
    """Target names of all specs."""
    return sorted(p.stem for p in folder.glob("*.yaml"))


def load_spec(target: str, folder: Path = SPEC_DIR) -> TableSpec:
    """Read and check ``paper_tables/<target>.yaml``."""
    path = folder / f"{target}.yaml"
    if not path.is_file():
        raise UnknownNameError(f"no table spec {path}", f"use one of: {', '.join(list_specs(folder))}")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML ({exc})", "fix the file") from exc
    for key in ("target", "paper", "table", "expected", "runners"):
        if key not in raw:
            raise ConfigError(f"{path}: missing field {key!r}", "see benchmark/tables/spec.py for the format")
    if raw["target"] != target:
        raise ConfigError(
            f"{path}: field 'target' is {raw['target']!r}", f"it must equal the file name {target!r}"
        )
    rules = []
    runners = runner_names()  # the runner plug-ins (benchmark/runners/) and the declared-only names
    for i, r in enumerate(raw["runners"]):
        if r.get("runner") not in runners:
            raise ConfigError(
                f"{path}: runners[{i}].runner is {r.get('runner')!r}", f"use one of: {', '.join(runners)}"
            )
        params = {k: v for k, v in r.items() if k not in ("runner", "when")}
        rules.append(RunnerRule(r["runner"], r.get("when", {}), params))
    expected = EXPECTED_DIR / raw["expected"]
    if not expected.is_file():
        raise ConfigError(f"{path}: expected file {expected} does not exist", "fix the 'expected' field")
    return TableSpec(
        target=target,
        paper=str(raw["paper"]),
        table=str(raw["table"]),
        expected=expected,
        seeds=tuple(int(s) for s in raw.get("seeds", [0])),
        runners=tuple(rules),
        aliases=raw.get("aliases", {}),
        not_run_reason=raw.get("not_run_reason", TableSpec.not_run_reason),
        notes=tuple(raw.get("notes", [])),
    )
