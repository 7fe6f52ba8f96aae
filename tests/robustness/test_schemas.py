"""Strict schemas for what users write by hand (issue 23: item 3, item 4 and the poor-handling list).

A misspelled key in a ``paper_tables/`` spec, a protocol catalogue or a cell protocol of ``expected/``, a
duplicated seed, an ill-typed ``--set`` and a ``flb job`` JSON with missing fields each become ONE error
(``flb: error: <file>:<line>: ... -- did you mean ...``, exit 2, no traceback) instead of a silent NOT RUN, a
biased mean or a traceback; and nothing else changes (no plan, no table, no committed file).

Every file is a temporary copy of a real one with one edit (the real files are never touched); the line the
error names is the line of the edit.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
from toy_specs import write_toy_spec

from benchmark.cli import main
from benchmark.errors import ConfigError
from benchmark.jobs import Job
from benchmark.runners import Runner
from benchmark.runners._features import collect_runs

ROOT = Path(__file__).resolve().parents[2]
TARGET = "fedcof_table3"
WHEN_LISTING = "(valid keys: a cell-protocol key (benchmark.expected.PROTOCOL_KEYS) or metric, unit, id)"


def copy_edited(src: Path, folder: Path, old: str, new: str) -> int:
    """Copy ``src`` into ``folder`` with the first ``old`` replaced by ``new``; the 1-based line where the
    edit's last line starts (the line of the key it introduces)."""
    text = src.read_text(encoding="utf-8")
    assert old in text, f"{src} no longer holds {old!r}: update the test's edit"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / src.name).write_text(text.replace(old, new, 1), encoding="utf-8")
    start = text.index(old)
    return text[:start].count("\n") + new.rstrip("\n").count("\n") + 1


@pytest.fixture
def repo_guard(tree_guard):
    """The committed inputs that a refused file must leave alone."""
    return tree_guard(ROOT / "paper_tables", ROOT / "expected", ROOT / "benchmark" / "protocols")


@pytest.fixture
def cli_in(tmp_path, monkeypatch):
    """Run ``flb`` in an empty folder, planning specs from ``tmp_path/specs`` (the real config's values)."""
    import benchmark.tables.plan as plan_module
    import benchmark.workflow as workflow
    from benchmark.tables.spec import load_spec

    config = workflow.load_config()
    monkeypatch.setattr(workflow, "load_config", lambda path=None, overrides=None: dict(config))
    monkeypatch.setattr(plan_module, "load_spec", lambda target, folder=None: load_spec(target, tmp_path / "specs"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


# ------------------------------------------------------------------------------------------------- case 1
SPEC_EDITS = {
    "methods for method in when": ("    method:\n", "    methods:\n", "unknown key 'methods' in runners[0].when -- did you mean 'method'? " + WHEN_LISTING),
    "metirc for metric in when": ("    metric: accuracy", "    metirc: accuracy", "unknown key 'metirc' in runners[0].when -- did you mean 'metric'? " + WHEN_LISTING),
    "unknown top-level key": ("seeds:", "seed:", "unknown key 'seed' -- did you mean 'seeds'? (valid keys: aliases, expected, not_run_reason, notes, paper, runners, seeds, table, target, unit_seeds)"),
    "unknown runner parameter": ("  methods:", "  method:", "unknown key 'method' in runners[0] -- did you mean 'methods'? (valid keys: methods, natural_users, partition, preprocess, protocol, runner, seeds, when)"),
    "unknown partition parameter": ("    num_clients: 100", "    num_client: 100", "unknown key 'num_client' in runners[0].partition -- did you mean 'num_clients'? (valid keys: alpha, num_clients, scheme)"),
}  # fmt: skip

CATALOGUE_EDITS = {
    "fl.yaml methods.<m>": ("fl", "        client_lr: 0.01", "        client_lrr: 0.01", "protocol 'legate2023_cifar10': unknown key 'client_lrr' in methods.lp -- did you mean 'client_lr'? (valid keys: client_lr, head, init, init_options, init_participation, lr_source, mlp_hidden, note, rounds)"),
    "fl_train.yaml algorithms.<a>": ("fl_train", "fedavg: {server_opt: fedavg", "fedavg: {server_op: fedavg", "protocol 'legate2023_cifar10': unknown key 'server_op' in algorithms.fedavg -- did you mean 'server_opt' or 'server_lr' or 'server_lr_grid'? (valid keys: client_lr, client_lr_grid, lr_source, prox_mu, server_lr, server_lr_grid, server_opt)"),
    "closed_form.yaml method options": ("closed_form", "fedncm: {bias: zero, solver: pinv32}", "fedncm: {bais: zero, solver: pinv32}", "protocol 'fedcof': unknown key 'bais' in paper_options.methods.fedncm -- did you mean 'bias'? (valid keys: bias, clients_per_round, max_rounds, participation, schedule_seed, seed, solver)"),
}  # fmt: skip


def _load_catalogue(name: str, folder: Path) -> None:
    from benchmark.closed_form.protocols import load_closed_form_catalogue
    from benchmark.fl.protocols import load_protocols
    from benchmark.fl.train_protocols import load_train_protocols

    {"fl": load_protocols, "fl_train": load_train_protocols, "closed_form": load_closed_form_catalogue}[name](folder)


@pytest.mark.parametrize("case", sorted(SPEC_EDITS))
def test_case1_misspelled_spec_key_is_one_error_with_file_line_and_closest_key(
    case, tmp_path, cli_in, repo_guard, tree_guard, one_line_error
) -> None:
    """Issue item 3: today every cell becomes NOT RUN and the run exits 0; now planning (``flb run``, and the
    Snakemake DAG through ``plan_inputs``) refuses the spec with one line naming file, line, key, closest key."""
    from benchmark.tables.records import plan_inputs
    from benchmark.workflow import load_config

    old, new, message = SPEC_EDITS[case]
    line = copy_edited(ROOT / "paper_tables" / f"{TARGET}.yaml", tmp_path / "specs", old, new)
    specs = tree_guard(tmp_path / "specs", cli_in)
    assert main(["run", TARGET]) == 2
    assert one_line_error() == f"flb: error: {tmp_path / 'specs' / TARGET}.yaml:{line}: {message}"
    with pytest.raises(ConfigError) as err:  # what `snakemake -n <target>` evaluates first
        plan_inputs(TARGET, load_config())
    assert str(err.value) == f"{tmp_path / 'specs' / TARGET}.yaml:{line}: {message}"
    specs.check()  # no plan, no run file, no table: nothing was written
    repo_guard.check()


@pytest.mark.parametrize("case", sorted(CATALOGUE_EDITS))
def test_case1_misspelled_protocol_catalogue_key_is_one_error_with_line(case, tmp_path, repo_guard) -> None:
    """Issue item 3 for the protocol YAMLs, nested keys included: today ``closed_form.yaml`` accepts any option
    name (the run fails later with a TypeError traceback); every catalogue now names file, line and key."""
    name, old, new, message = CATALOGUE_EDITS[case]
    line = copy_edited(ROOT / "benchmark" / "protocols" / f"{name}.yaml", tmp_path, old, new)
    with pytest.raises(ConfigError) as err:
        _load_catalogue(name, tmp_path)
    assert str(err.value) == f"{tmp_path / name}.yaml:{line}: {message}"
    repo_guard.check()


# ------------------------------------------------------------------------------------------------- case 2
@dataclass(frozen=True)
class DupJob(Job):
    """A toy run: one tidy row of accuracy per seed (``TWICE``: a buggy writer that repeats seed 0's row)."""

    KIND: ClassVar[str] = "dup_toy"
    PATTERN: ClassVar[str] = "results/runs/dup_toy/{method}/seed{seed}.csv"
    method: str
    seed: int

    def execute(self, config) -> None:
        from benchmark.tidy import make_row, write_tidy

        row = make_row(method=self.method, metric="accuracy", value=40.0 + self.seed, unit="percent",
                       seed=self.seed, weights="n/a")  # fmt: skip
        write_tidy([row, row] if TWICE["seed0"] and self.seed == 0 else [row], self.path)


TWICE = {"seed0": False}


class DupRunner(Runner):
    """A toy runner on :class:`DupJob` (``plan_twice``: a buggy one that plans seed 0 twice)."""

    name = "dup_toy"
    needs_data = False

    def __init__(self, plan_twice: bool) -> None:
        self.plan_twice = plan_twice

    def plan(self, spec, rule, plan, config):
        plan.method = rule.params["methods"][plan.cell.protocol["method"]]
        seeds = (spec.seeds[0], *spec.seeds) if self.plan_twice else spec.seeds
        plan.jobs = tuple(DupJob(plan.method, s) for s in seeds)
        plan.status = "planned"
        return plan

    def collect(self, spec, plan, labels, settings):
        return collect_runs(spec, plan)


@pytest.mark.parametrize("how", ["spec lists a seed twice", "a run file repeats a row", "a runner plans a seed twice"])
def test_case2_duplicated_seed_is_refused_not_averaged(how, tmp_path, monkeypatch, cli_in, repo_guard, tree_guard,
                                                       one_line_error) -> None:  # fmt: skip
    """Issue item 4: ``seeds: [0, 0, 1]`` counted seed 0 twice (mean and std biased). The spec is refused at
    load, and the assembly refuses a seed that reaches a verdict twice (a repeated tidy row, or a plan with
    two runs of one seed) instead of averaging it: no table, no checks are written."""
    from benchmark import jobs as jobs_module
    from benchmark import runners
    from benchmark.tables.execute import run_target
    from benchmark.workflow import load_config

    if how == "spec lists a seed twice":
        line = copy_edited(ROOT / "paper_tables" / f"{TARGET}.yaml", tmp_path / "specs",
                           "seeds:\n- 0\n- 1\n- 2\n- 3\n- 4", "seeds: [0, 0, 1]")  # fmt: skip
        guard = tree_guard(tmp_path / "specs", cli_in)
        assert main(["run", TARGET]) == 2
        assert one_line_error() == (
            f"flb: error: {tmp_path / 'specs' / TARGET}.yaml:{line}: field 'seeds': duplicated seed 0 in [0, 0, 1] "
            "-- list each seed once (a seed counted twice biases the mean and the std)"
        )
        guard.check()
        repo_guard.check()
        return
    runners.load_runners()  # the real ones first; the toy runner and job type are removed afterwards
    monkeypatch.setitem(runners._RUNNERS, "dup_toy", DupRunner(plan_twice=how == "a runner plans a seed twice"))
    monkeypatch.setitem(jobs_module.JOB_KINDS, "dup_toy", DupJob)
    monkeypatch.setitem(TWICE, "seed0", how == "a run file repeats a row")
    write_toy_spec(tmp_path / "specs", "dup_toy", "dup_toy", not_run_reason=False)
    run_target("dup_toy", load_config(), Path("results"), folder=tmp_path / "specs")
    guard = tree_guard(cli_in)
    assert main(["table", "dup_toy"]) == 2
    if how == "a run file repeats a row":
        expected = ("flb: error: results/runs/dup_toy/toy_ncm/seed0.csv: seed 0 reaches the verdict 2 times (one "
                    "run per seed expected)")  # fmt: skip
    else:
        expected = ("flb: error: dup_toy: cell cifar10/fedavg/fedncm: seed 0 reaches the verdict 2 times (one run "
                    "per seed expected)")  # fmt: skip
    assert one_line_error() == expected + (
        " -- remove the duplicate run or row (or delete the file and rebuild it); a seed counted twice biases the "
        "mean and the std"
    )
    guard.check()  # no tidy table, no checks, no rendered table
    repo_guard.check()


# ------------------------------------------------------------------------------------------------- case 3
FL_RUN = ["fl-run", "--protocol", "legate2023_cifar10", "--method", "lp", "--train", "a.json", "--test", "b.json",
          "--partition", "c.json", "--seed", "0", "--out", "out.csv"]  # fmt: skip


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("client_lr=abc", "protocol override client_lr='abc': expected float, got str -- e.g. --set client_lr=0.01 "
                          "(the protocol's value)"),
        ("rounds=1.5", "protocol override rounds=1.5: expected int or null, got float -- e.g. --set rounds=200 (the "
                       "protocol's value)"),
        ("cliet_lr=0.1", "unknown protocol override 'cliet_lr' -- did you mean 'client_lr' or 'client_shuffle'? "
                         "(valid keys: alpha, backbone, batch_size, client_lr, client_momentum, client_shuffle, "
                         "dataset, eval_every, head, init, init_options, init_participation, local_epochs, lr_source, "
                         "mlp_hidden, note, notes, num_clients, participation, partition_scheme, preprocess, rounds, "
                         "rounds_unit, selection, server_lr, server_opt)"),
    ],
)  # fmt: skip
def test_case3_ill_typed_or_unknown_set_is_one_error(setting, message, tmp_path, monkeypatch, repo_guard,
                                                     tree_guard, one_line_error) -> None:  # fmt: skip
    """``flb fl-run --set client_lr=abc`` was a ValueError traceback; now one line naming the field, the value
    and the expected type (an unknown key: the closest valid one). ``flb run`` / ``flb job --set`` go through the
    workflow config, whose schema refuses the key with one line too."""
    monkeypatch.chdir(tmp_path)
    guard = tree_guard(tmp_path)
    assert main([*FL_RUN, "--set", setting]) == 2
    assert one_line_error() == f"flb: error: {message}"
    for argv in (["run", TARGET, "--set", "client_lr=abc"],
                 ["job", '{"kind": "partition", "dataset": "cifar10", "subset": "all", "ptag": "iid-num_clients10", '
                  '"seed": 0}', "--set", "client_lr=abc"]):  # fmt: skip
        assert main(argv) == 2
        assert "client_lr" in one_line_error()
    guard.check()
    repo_guard.check()


# ------------------------------------------------------------------------------------------------- case 4
PARTITION_FIELDS = "fields of a partition job: dataset (str), subset (str), ptag (str), seed (int)"


@pytest.mark.parametrize(
    ("job", "message"),
    [
        ({"kind": "partition", "dataset": "cifar10"}, f"partition job: missing field(s) subset, ptag, seed -- {PARTITION_FIELDS}"),
        ({"kind": "partition", "dataset": "cifar10", "subset": "all", "ptag": "iid-num_clients10", "sed": 0}, f"partition job: unknown field(s) 'sed' -- did you mean 'seed'? {PARTITION_FIELDS}"),
        ({"kind": "partition", "dataset": "cifar10", "subset": "all", "ptag": "iid-num_clients10", "seed": "0"}, f"partition job: field seed='0' is not of type int -- {PARTITION_FIELDS}"),
        ({"kind": "partiton"}, "unknown job kind 'partiton' -- did you mean 'partition'?"),
    ],
)  # fmt: skip
def test_case4_flb_job_with_bad_fields_names_kind_fields_and_valid_ones(job, message, tmp_path, monkeypatch,
                                                                       repo_guard, tree_guard, one_line_error) -> None:  # fmt: skip
    """``flb job '<json>'`` with a missing field was a TypeError traceback; now one line naming the job kind,
    the missing (unknown, ill-typed) field(s) and the valid fields."""
    monkeypatch.chdir(tmp_path)
    guard = tree_guard(tmp_path)
    assert main(["job", json.dumps(job)]) == 2
    assert one_line_error().startswith(f"flb: error: {message}")
    guard.check()
    repo_guard.check()


# ------------------------------------------------------------------------------------------------- case 5
def test_case5_misspelled_cell_protocol_key_is_one_error_not_a_cryptic_not_run(
    tmp_path, monkeypatch, cli_in, repo_guard, tree_guard, one_line_error
) -> None:
    """A cell protocol with ``methd`` for ``method`` made the cell NOT RUN ("method None is not implemented");
    now loading the expected file (at plan time) names the file, the line, the cell and the closest key."""
    import benchmark.expected as expected

    shutil.copytree(ROOT / "paper_tables", tmp_path / "specs")
    shutil.copytree(ROOT / "expected", tmp_path / "expected")
    table = tmp_path / "expected" / "fedcof" / "table3.yaml"
    line = copy_edited(table, table.parent, "method: fedncm", "methd: fedncm")
    monkeypatch.setattr(expected, "EXPECTED_ROOT", tmp_path / "expected")
    guard = tree_guard(tmp_path / "expected", cli_in)
    assert main(["run", TARGET]) == 2
    assert one_line_error() == (
        f"flb: error: {tmp_path / 'expected' / 'fedcof' / 'table3.yaml'}:{line}: unknown key 'methd' in cells[0] "
        "(cifar100/squeezenet1_1/fedncm/accuracy).protocol -- did you mean 'method'? (valid keys: the "
        "cell-protocol keys of PROTOCOL_KEYS in benchmark/expected.py)"
    )
    guard.check()
    repo_guard.check()


def test_every_committed_spec_protocol_and_expected_file_still_loads() -> None:
    """The real files are the truth: the strict schemas accept every one of them."""
    from benchmark.closed_form.protocols import load_closed_form_catalogue
    from benchmark.expected import load_all
    from benchmark.fl.protocols import load_protocols
    from benchmark.fl.train_protocols import load_train_protocols
    from benchmark.tables.spec import list_specs, load_spec

    assert len([load_spec(t) for t in list_specs()]) == len(list((ROOT / "paper_tables").glob("*.yaml")))
    assert load_all() and load_protocols() and load_train_protocols() and load_closed_form_catalogue()
