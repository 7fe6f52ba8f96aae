"""Seeds per runner entry and per training unit (issue 27: a second seed for the numbers one seed cannot decide) and
``flb harvest --seeds`` (record the second seed before the spec asks for it): the cells an entry takes, or whose
training unit the paper's unit-seeds file lists, are planned and collected with those seeds, in every table that
prints them; the other cells with the spec's; the harvester's override replaces them all; bad seeds and a cell given
seeds both ways are one error."""

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
    raw.pop("unit_seeds")  # the real unit seeds left out: this spec's seeds come from its entry alone
    general = [r for r in raw["runners"] if "seeds" not in r]
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


# ------------------------------------------------------------------------------------------ seeds per training unit
#: FedAvg s = 2, tau = 10: Table 12's "w/ classifier" and Table 14's conv1234+linear row are one training's number.
T12, T14 = "s-2/f-0_1/tau-10/fedavg/w-classifier", "s-2/f-0_1/tau-10/local-update-parts/conv1234-linear-fedavg"
T12_OTHER = "s-2/f-0_1/tau-4/fedavg/w-classifier"  # FedAvg at tau = 4: another unit
UNIT = {"when": {"dataset": "cifar10", "model": "4convnet", "scheme_param": 2, "participation": 0.1,
                 "local_epochs": 10, "algorithm": "fedavg"}, "seeds": [0, 2], "why": "a test"}  # fmt: skip


def _specs_with_units(folder, units, job="pfl_train", targets=("fedbabu_table12", "fedbabu_table14")) -> None:
    """The real specs of ``targets`` in ``folder`` (their runner entries without seeds of their own), with a
    unit-seeds file of ``units``."""
    for target in targets:
        raw = yaml.safe_load((SPEC_DIR / f"{target}.yaml").read_text())
        raw["runners"] = [r for r in raw["runners"] if "seeds" not in r]
        (folder / f"{target}.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    (folder / "unit_seeds").mkdir(exist_ok=True)
    (folder / "unit_seeds" / "fedbabu.yaml").write_text(yaml.safe_dump({"job": job, "units": units}, sort_keys=False))


def _cfg(root, **extra):
    return load_config(overrides={"data_root": str(root), "device": "cpu", "cpu_training": True, **extra})


def test_a_unit_seeds_entry_gives_its_seeds_to_every_table_that_prints_the_unit(real_data_root, tmp_path, monkeypatch):
    monkeypatch.setenv("FLB_DATA_ROOT", str(real_data_root))
    _specs_with_units(tmp_path, [UNIT])
    cfg = _cfg(real_data_root)
    t12 = plan_target("fedbabu_table12", cfg, folder=tmp_path)
    t14 = plan_target("fedbabu_table14", cfg, folder=tmp_path)
    assert _seeds(t12, T12) == [0, 2] and _seeds(t14, T14) == [0, 2]
    assert _seeds(t12, T12_OTHER) == [0]  # the unit's fields must all match
    assert _seeds(t12, "s-2/f-0_1/tau-10/fedavg/w-o-classifier") == [0, 2]  # its evaluation: the same unit
    spec = load_spec("fedbabu_table12", tmp_path)
    (plan,) = [p for p in t12 if p.cell.id == T12]
    assert cell_spec(spec, plan.cell, plan.jobs).seeds == (0, 2)  # what the collection sees
    over = plan_target("fedbabu_table12", cfg, folder=tmp_path, seeds=(1,))  # flb harvest --seeds 1
    assert _seeds(over, T12) == [1] and _seeds(over, T12_OTHER) == [1]


def test_a_cell_not_trained_here_states_the_cost_of_its_units_seeds(real_data_root, tmp_path, monkeypatch):
    monkeypatch.setenv("FLB_DATA_ROOT", str(real_data_root))
    _specs_with_units(tmp_path, [UNIT])
    cfg = load_config(overrides={"data_root": str(real_data_root)})  # no GPU, no cpu_training: NOT RUN
    plans = {p.cell.id: p for p in plan_target("fedbabu_table12", cfg, folder=tmp_path)}
    assert plans[T12].status == "not_run" and "2 seed(s)" in plans[T12].reason
    assert "1 seed(s)" in plans[T12_OTHER].reason


def test_a_cell_given_seeds_by_its_entry_and_by_its_unit_is_one_error(real_data_root, tmp_path, monkeypatch):
    monkeypatch.setenv("FLB_DATA_ROOT", str(real_data_root))
    _spec_with_entry(tmp_path, [0, 1])
    raw = yaml.safe_load((tmp_path / "fedbabu_table12.yaml").read_text())
    raw["unit_seeds"] = "fedbabu.yaml"
    (tmp_path / "fedbabu_table12.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    (tmp_path / "unit_seeds").mkdir()
    (tmp_path / "unit_seeds" / "fedbabu.yaml").write_text(yaml.safe_dump({"job": "pfl_train", "units": [UNIT]}))
    with pytest.raises(ConfigError, match=f"cell {TWO} gets seeds \\[0, 1\\] from its runner entry and \\[0, 2\\]"):
        plan_target("fedbabu_table12", _cfg(real_data_root), folder=tmp_path)


@pytest.mark.parametrize(
    ("units", "job", "match"),
    [
        ([{**UNIT, "when": {**UNIT["when"], "shard_param": 2}}], "pfl_train", "shard_param.*scheme_param"),
        ([{**UNIT, "when": {"seed": 1}}], "pfl_train", "seed"),
        ([{**UNIT, "when": {}}], "pfl_train", "empty"),
        ([{**UNIT, "seeds": [1, 1]}], "pfl_train", "duplicated seed 1"),
        ([{k: v for k, v in UNIT.items() if k != "why"}], "pfl_train", "why"),
        ([UNIT], "pfl_trian", "pfl_train"),
    ],
    ids=["unknown-field", "the-seed-field", "empty-when", "duplicate-seed", "no-why", "unknown-job-kind"],
)
def test_a_bad_unit_seeds_file_is_one_error_naming_the_file_and_the_field(tmp_path, units, job, match):
    _specs_with_units(tmp_path, units, job=job, targets=("fedbabu_table12",))
    with pytest.raises(ConfigError, match=match) as err:
        load_spec("fedbabu_table12", tmp_path)
    assert "unit_seeds/fedbabu.yaml" in str(err.value)


def test_a_missing_unit_seeds_file_is_one_error_naming_the_spec_field(tmp_path):
    _specs_with_units(tmp_path, [UNIT], targets=("fedbabu_table12",))
    (tmp_path / "unit_seeds" / "fedbabu.yaml").unlink()
    with pytest.raises(ConfigError, match="unit_seeds") as err:
        load_spec("fedbabu_table12", tmp_path)
    assert "fedbabu_table12.yaml" in str(err.value)


def test_a_unit_entry_naming_a_field_leaves_the_other_values_of_that_field_on_their_seeds(real_data_root, monkeypatch):
    """FedRep s = 2, tau = 10 has seed 1 at the text's momentum 0.9 only: its entry names the momentum, so under the
    released momentum (0.5, seed 0 recorded) the same cell stays on seed 0 (docs/fedbabu.md, Next, item 3)."""
    monkeypatch.setenv("FLB_DATA_ROOT", str(real_data_root))
    cell = "s-2/f-0_1/tau-10/personalized-accuracy/fedrep"
    assert _seeds(plan_target("fedbabu_table13", _cfg(real_data_root)), cell) == [0, 1]
    released = _cfg(real_data_root, pfl_fedrep_momentum="released")
    assert _seeds(plan_target("fedbabu_table13", released), cell) == [0]
