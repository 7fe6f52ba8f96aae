"""Seeds per runner entry (issue 27: a second seed for the cells one seed cannot decide) and ``flb harvest --seeds``
(record the second seed before the spec asks for it): the cells an entry takes are planned and collected with its
seeds, the other cells with the spec's; the harvester's override replaces them all; bad seeds are one error."""

from __future__ import annotations

import json

import pytest
import yaml

from benchmark.errors import ConfigError
from benchmark.tables.plan import cell_spec, plan_target
from benchmark.tables.spec import SPEC_DIR, load_spec
from benchmark.workflow import load_config

TWO = "s-2/f-0_1/tau-10/fedavg/w-classifier"
ONE = "s-5/f-0_1/tau-10/fedbabu/w-classifier"


def _spec_with_entry(folder, seeds) -> None:
    raw = yaml.safe_load((SPEC_DIR / "fedbabu_table12.yaml").read_text())
    general = [r for r in raw["runners"] if "seeds" not in r]  # the real spec's own seed entries left out
    entry = {"when": {"metric": "accuracy", "id": [TWO]}, "runner": "pfl", "seeds": seeds,
             "methods": general[0]["methods"]}  # fmt: skip
    raw["runners"] = [entry, *general]
    (folder / "fedbabu_table12.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))


def _seeds(plans, cell_id):
    (plan,) = [p for p in plans if p.cell.id == cell_id]
    assert plan.status == "planned", plan.not_run
    return sorted({j.seed for j in plan.jobs})


def test_a_runner_entry_plans_and_collects_its_own_seeds(real_data_root, tmp_path, monkeypatch):
    monkeypatch.setenv("FLB_DATA_ROOT", str(real_data_root))
    _spec_with_entry(tmp_path, [0, 1])
    cfg = load_config(overrides={"data_root": str(real_data_root), "device": "cpu", "cpu_training": True})
    plans = plan_target("fedbabu_table12", cfg, folder=tmp_path)
    assert _seeds(plans, TWO) == [0, 1] and _seeds(plans, ONE) == [0]
    spec = load_spec("fedbabu_table12", tmp_path)
    cells = {p.cell.id: p.cell for p in plans}
    assert cell_spec(spec, cells[TWO]).seeds == (0, 1) and cell_spec(spec, cells[ONE]) is spec
    over = plan_target("fedbabu_table12", cfg, folder=tmp_path, seeds=(1,))  # flb harvest --seeds 1
    assert _seeds(over, TWO) == [1] and _seeds(over, ONE) == [1]
    real = plan_target("fedbabu_table12", cfg)  # the real spec: s = 2, tau = 10 on two seeds since 2026-12-07
    assert _seeds(real, TWO) == [0, 1] and _seeds(real, ONE) == [0]


def test_bad_entry_seeds_are_one_error_naming_the_field(tmp_path):
    _spec_with_entry(tmp_path, [0, 0])
    with pytest.raises(ConfigError, match="seeds"):
        load_spec("fedbabu_table12", tmp_path)


def test_harvest_seeds_must_be_distinct_and_non_negative(capsys):
    from benchmark import harvest_cli

    with pytest.raises(ConfigError, match="distinct non-negative"):
        harvest_cli.main(["--device", "cpu", "--budget", "1m", "--targets", "fedbabu_table12", "--seeds", "1", "1",
                          "--dry-run"])  # fmt: skip


def _fedbabu_targets() -> list[str]:
    return sorted(p.stem for p in SPEC_DIR.glob("fedbabu_table*.yaml"))


def test_the_same_number_is_judged_on_the_same_seeds_in_every_fedbabu_table(real_data_root, monkeypatch):
    """Cells whose jobs are the same but for the seed report the same number (Table 14's FedAvg conv1234+linear
    row is Table 12's FedAvg w/ classifier): a runner entry with its own seeds must take all of them, in every
    table, or one table passes what another fails on fewer seeds."""
    from benchmark.jobs import job_to_dict

    monkeypatch.setenv("FLB_DATA_ROOT", str(real_data_root))
    cfg = load_config(overrides={"data_root": str(real_data_root), "device": "cpu", "cpu_training": True})
    seeds_of: dict[str, dict[tuple[int, ...], list[str]]] = {}
    for target in _fedbabu_targets():
        for plan in plan_target(target, cfg):
            if plan.status != "planned":
                continue
            jobs = sorted(json.dumps({k: v for k, v in job_to_dict(j).items() if k not in ("seed", "path")},
                                     sort_keys=True) for j in plan.jobs)  # fmt: skip
            seeds = tuple(sorted({j.seed for j in plan.jobs}))
            seeds_of.setdefault("\n".join(dict.fromkeys(jobs)), {}).setdefault(seeds, []).append(
                f"{target}#{plan.cell.id}")
    split = {k: v for k, v in seeds_of.items() if len(v) > 1}
    assert not split, "one number judged on different seeds: " + "; ".join(
        " vs ".join(f"{cells} on {list(seeds)}" for seeds, cells in v.items()) for v in split.values())
