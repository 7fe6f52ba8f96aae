"""Fault and misuse cases of the Snakemake workflow, its plans and its config (issue 23, helper h1).

Each test feeds one fault or bad input and asserts the exact error (one line, exit status != 0, no traceback) or
the correct result, and that nothing else changed. Snakemake runs only in temporary working directories
(``--directory``) or temporary copies of ``workflow/`` and ``config/``; the checkout is never written.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from toy_plugins import plugin_module

from benchmark import workflow as wf
from benchmark.cli import main
from benchmark.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_KEYS = set(yaml.safe_load(wf.SCHEMA.read_text())["properties"])
COST_TARGET = "fedcof_table5"  # cost cells only: planned and assembled in seconds, no data needed


def _env(**extra: str) -> dict[str, str]:
    """The environment of a Snakemake run here: this checkout's package first, offline."""
    env = {**os.environ, "FLB_OFFLINE": "1", **extra}
    env["PYTHONPATH"] = os.pathsep.join([*extra.get("PYTHONPATH", "").split(os.pathsep), str(ROOT)]).strip(os.pathsep)
    return env


def _snakemake(*args: str, cwd: Path, env: dict[str, str] | None = None, snakefile: Path | None = None,
               timeout: int = 300) -> subprocess.CompletedProcess:  # fmt: skip
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", "-s", str(snakefile or ROOT / "workflow" / "Snakefile"),
           "--directory", str(cwd), *args]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env or _env(), timeout=timeout)


def _error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    """The ``flb: error:`` lines of a Snakemake run, after checking it printed no traceback."""
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and 'File "' not in out and "Exception" not in out, out[-3000:]
    return [line for line in out.splitlines() if line.startswith("flb: error: ")]


def _copy_workflow(dest: Path, config_edit: dict[str, Any] | None = None) -> Path:
    """A copy of this checkout's workflow/, config/ and env/ (no package: the installed one runs it), its
    config.yaml updated with ``config_edit``; returns the copy's Snakefile."""
    for part in ("workflow", "config", "env"):
        shutil.copytree(ROOT / part, dest / part)
    if config_edit:
        cfg = yaml.safe_load((dest / "config" / "config.yaml").read_text())
        cfg.update(config_edit)
        (dest / "config" / "config.yaml").write_text(yaml.safe_dump(cfg))
    return dest / "workflow" / "Snakefile"


# ------------------------------------------------------------------------------- 1. plans are immutable
def _cfg(**overrides: Any) -> dict[str, Any]:
    return wf.load_config(overrides=overrides)


def test_plan_immutability_a_dry_run_with_another_config_leaves_the_builds_plan(tmp_path, monkeypatch, tree_guard):
    """A build holds its plan file (named by its content); planning the target under another config (what a
    dry run does) only adds a file: the build's plan stays byte-identical and `flb table --plan` renders it."""
    from benchmark.jobs import run_jobs
    from benchmark.tables.plan import make_plan, read_plan, write_plan

    monkeypatch.chdir(tmp_path)
    results = tmp_path / "results"
    plan = make_plan(COST_TARGET, _cfg())
    first = write_plan(plan, results)  # the build: plan A (written when its DAG is built), its jobs, its table
    run_jobs(plan.jobs, _cfg())
    assert main(["table", COST_TARGET]) == 0
    built = json.loads((results / "checks" / f"{COST_TARGET}.json").read_text())
    frozen = first.read_bytes()
    guard = tree_guard(results / "plans")

    other = write_plan(make_plan(COST_TARGET, _cfg(cell_filter="^nothing$")), results)  # the dry run: plan B
    assert other != first, f"planning under another config rewrote the build's plan file {first}"
    assert other.is_file() and re.fullmatch(rf"{COST_TARGET}-[0-9a-f]{{12}}\.json", first.name), first
    guard.check(allow=[other.name, f"{COST_TARGET}.json"])  # plan A untouched; only B and the pointer move
    assert first.read_bytes() == frozen
    assert read_plan(COST_TARGET, results).settings["cell_filter"] == "^nothing$"  # the newest plan is B

    assert main(["table", COST_TARGET, "--plan", str(first)]) == 0  # the build renders its own plan, A
    again = json.loads((results / "checks" / f"{COST_TARGET}.json").read_text())
    assert again["counts"] == built["counts"] and again["counts"].get("PASS") == 5
    assert [c["verdict"] for c in again["cells"]] == [c["verdict"] for c in built["cells"]]

    # an unchanged plan keeps its file and time stamp (no re-assembly); going back to it marks it newer
    stamp = os.stat(other).st_mtime_ns
    assert write_plan(make_plan(COST_TARGET, _cfg(cell_filter="^nothing$")), results) == other
    assert os.stat(other).st_mtime_ns == stamp
    os.utime(first, ns=(1, 1))
    assert write_plan(make_plan(COST_TARGET, _cfg()), results) == first and os.stat(first).st_mtime_ns > 1
    assert first.read_bytes() == frozen


def test_plan_immutability_the_table_rule_renders_the_plan_of_its_own_dag(dry_run):
    """The paper_table job's input and `flb table --plan` argument are the plan file its DAG wrote."""
    line = next(line for line in dry_run.lines if f" table {COST_TARGET} " in line)
    argv = shlex.split(line)
    plan = argv[argv.index("--plan") + 1]
    assert re.fullmatch(rf"results/plans/{COST_TARGET}-[0-9a-f]{{12}}\.json", plan), line
    assert json.loads((dry_run.workdir / plan).read_text())["settings"]["cell_filter"] == "cifar10/.*"


@pytest.mark.parametrize("damage", ["truncated", "bit flip", "not a plan"])
def test_a_damaged_plan_file_is_one_clear_error(tmp_path, monkeypatch, capsys, one_line_error, tree_guard, damage):
    from benchmark.tables.plan import make_plan, write_plan

    monkeypatch.chdir(tmp_path)
    results = tmp_path / "results"
    path = write_plan(make_plan(COST_TARGET, _cfg()), results)
    text = path.read_bytes()
    broken = {"truncated": text[: len(text) // 2], "bit flip": text.replace(b'"tier": "full"', b'"tier": "fulL"'),
              "not a plan": b"{}\n"}[damage]  # fmt: skip
    assert broken != text
    path.write_bytes(broken)
    guard = tree_guard(results)
    for argv, shown in ((["table", COST_TARGET], f"results/plans/{COST_TARGET}.json -> {path.name}"),  # the newest
                        (["table", COST_TARGET, "--plan", str(path)], path)):  # or the file named
        capsys.readouterr()
        assert main(argv) == 2
        err = one_line_error()
        assert err.startswith(f"flb: error: plan file {shown} is damaged ("), err
        assert err.endswith(f"-- re-plan it with `snakemake --cores all {COST_TARGET}` (or `flb run {COST_TARGET}`)")
    guard.check()  # nothing assembled from a damaged plan
    # re-planning writes the plan again under its name
    assert write_plan(make_plan(COST_TARGET, _cfg()), results) == path and path.read_bytes() == text


# ------------------------------------------------------------------ 2. every config key reaches its jobs
def _typed(tmp: Path) -> dict[str, Any]:
    """A valid, non-default value of every key of the schema, as a user would set it."""
    return {
        "data_root": str(tmp / "data root"), "weights_dir": str(tmp / "weights dir"),
        "cache_dir": str(tmp / "cache dir"), "device": "cuda:1", "batch_size": 7, "precision": "bf16",
        "tier": "ci", "table_subset": "stratified5", "ci_closed_form": [["cifar100", "resnet18"]],
        "cpu_training": True, "use_records": False, "train_precision": "bf16", "train_exec": "vectorised", "train_chunk": 3,
        "channels_last": True, "checkpoint_every": 5, "pfl_selection": "last", "pfl_ncm_metric": "euclidean",
        "pfl_lg_fedavg": "from_scratch", "pfl_fedrep_finetune": "joint",
        "pfl_fedrep_momentum": "released", "pfl_per_fedavg_eval": "released_step",
        "pfl_ditto": "released",
        "pfl_both_selections": True, "pfl_eval_every": 1, "pfl_measure_exec": False, "pfl_client_procs": 3, "fedbabu_central_epochs": 3, "fedbabu_central_train_images": 100, "zo_k_shot": 16, "zo_lr": 0.25,
        "zo_rounds": 4, "zo_encoder": "roberta-large", "zo_eval_every": 2, "zo_test_limit": 50,
        "zo_figure_tasks": ["mnli"], "cell_filter": "cifar10/.*", "ci_training": ["legate2023_cifar100/lp"],
        "fl_report_round": "best_on_test", "flip_stream": "fixed", "resize": "pil_uint8",
        "fedncm_bias": "torch_default_init", "lr_search": "halving", "lr_halving_eta": 4, "lr_halving_keep": 2,
        "targets": {"tiny": {"paper": "suite", "table": "tiny", "dataset": "cifar10", "backbones": ["resnet18"],
                             "weights": "substitute", "preprocess": "legate2023_cifar", "subset": "stratified5",
                             "partition": {"scheme": "iid", "num_clients": 2}, "seeds": [3], "methods": ["fedncm"]}},
    }  # fmt: skip


def _cli_word(value: Any) -> str:
    """``value`` as typed after ``--config key=`` (Snakemake reads lists as YAML)."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, list):
        return json.dumps(value).replace('"', "").replace(" ", "")
    return str(value)


#: Where each key takes effect: read by a job when it runs ("job"), or when the target is planned and the DAG
#: built ("plan": the jobs' output paths, which cells run, the plan's settings). Every key also reaches the config
#: a plug-in job runs with (`flb job --config-json`): the whole validated config.
WHERE = {
    "data_root": "job", "weights_dir": "job", "cache_dir": "job", "device": "job", "batch_size": "job",
    "train_exec": "job", "train_chunk": "job", "channels_last": "job", "checkpoint_every": "job",
    "pfl_both_selections": "job", "pfl_eval_every": "job", "pfl_measure_exec": "job", "pfl_client_procs": "job",
    "precision": "plan (extraction jobs' paths)", "tier": "plan", "table_subset": "plan (jobs' subset)",
    "ci_closed_form": "plan (tier ci)", "ci_training": "plan (tier ci)", "cpu_training": "plan (training cells)",
    "use_records": "plan (jobs filled from the ledger)",
    "train_precision": "plan (training jobs' paths)", "pfl_selection": "plan (pfl jobs' paths)",
    "pfl_ncm_metric": "plan (pfl jobs' paths)", "pfl_lg_fedavg": "plan (pfl jobs' paths)",
    "pfl_fedrep_finetune": "plan (pfl jobs' paths)", "pfl_fedrep_momentum": "plan (pfl jobs' paths)",
    "pfl_per_fedavg_eval": "plan (pfl jobs' paths)",
    "pfl_ditto": "plan (pfl jobs' paths)", "cell_filter": "plan (cells selected)",
    "zo_k_shot": "plan (zo jobs' fields)", "zo_lr": "plan (zo jobs' fields)", "zo_rounds": "plan (zo jobs' fields)",
    "zo_encoder": "plan (zo jobs' fields)", "zo_eval_every": "plan (zo jobs' fields)",
    "zo_test_limit": "plan (zo jobs' fields)", "fedbabu_central_epochs": "plan (fedbabu figures' jobs)",
    "fedbabu_central_train_images": "plan (fedbabu figures' jobs)", "zo_figure_tasks": "plan (zo figures)",
    "targets": "plan (free-form targets)",
    "fl_report_round": "plan (the settings the training cells are read with)",
    "flip_stream": "plan (jobs' preprocessing: @seedflip)", "resize": "plan (jobs' preprocessing: @pil)",
    "fedncm_bias": "plan (the closed-form protocol in the jobs' paths)",
    "lr_search": "plan (training jobs' lr_from and the choice job)",
    "lr_halving_eta": "plan (training jobs' lr_from and the choice job)",
    "lr_halving_keep": "plan (training jobs' lr_from and the choice job)",
}  # fmt: skip
CENTRAL_JOB = "results/runs/pfl_central/cifar10/cnn4/full-default/e3-n100/seed0.json"
EXTRACT_JOB = "results/features/cifar10/squeezenet1_1-substitute/legate2023_cifar-fp32/stratified10/train.json"
PARTITION_JOB = "results/partitions/cifar10/stratified10/iid-num_clients2/seed0.json"


class DryRun:
    def __init__(self, workdir: Path, typed: dict[str, Any], proc: subprocess.CompletedProcess) -> None:
        self.workdir, self.typed, self.proc = workdir, typed, proc
        out = proc.stdout + proc.stderr
        self.lines = [line.split("Shell command: ", 1)[-1].strip() for line in out.splitlines()
                      if "python -m benchmark.cli " in line]  # fmt: skip

    def line(self, command: str) -> list[str]:
        """The shell line of ``flb <command>`` as its argv (after ``python -m benchmark.cli``, before ``2>``)."""
        line = next((x for x in self.lines if f"benchmark.cli {command} " in x), None)
        assert line is not None, (self.proc.stdout + self.proc.stderr)[-3000:]
        argv = shlex.split(line)
        return argv[argv.index("benchmark.cli") + 1 : argv.index("2>")]


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> DryRun:
    """One `snakemake -n -p` of a plug-in job (fedbabu's centralised curve), an extraction, a partition and the
    cost-only table, with every schema key set to a non-default value: scalars on the command line as a user
    types them (`--config checkpoint_every=5 data_root="/a path/with spaces"`), lists and targets in a
    --configfile."""
    tmp = tmp_path_factory.mktemp("dry run")
    typed = _typed(tmp)
    for key in ("data_root", "weights_dir", "cache_dir"):
        Path(typed[key]).mkdir()
    structured = {k: v for k, v in typed.items() if isinstance(v, dict)}
    (tmp / "extra.yaml").write_text(yaml.safe_dump(structured))
    words = [f"{k}={_cli_word(v)}" for k, v in typed.items() if k not in structured]
    work = tmp / "work"
    work.mkdir()
    proc = _snakemake("-n", "-p", CENTRAL_JOB, EXTRACT_JOB, PARTITION_JOB, COST_TARGET, "--configfile",
                      str(tmp / "extra.yaml"), "--config", *words, cwd=work)  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return DryRun(work, typed, proc)


@pytest.fixture(scope="module")
def job_config(dry_run) -> dict[str, Any]:
    """The config the plug-in job runs with: its shell line, run through `flb job` up to ``execute``."""
    from benchmark.runners.pfl_central import CentralCurveJob

    seen: dict[str, Any] = {}
    mp = pytest.MonkeyPatch()
    mp.setattr(CentralCurveJob, "execute", lambda self, config: seen.update(config))
    try:
        assert main(dry_run.line("job")) == 0
    except SystemExit:  # a shell line that does not parse back into the job's arguments
        pass
    finally:
        mp.undo()
    return seen


def test_every_schema_key_is_typed_and_placed_here() -> None:
    """The list of keys below and the schema stay in sync: a new key needs a value and a place here."""
    assert set(_typed(Path("/t"))) == SCHEMA_KEYS == set(WHERE)


@pytest.mark.parametrize("key", sorted(SCHEMA_KEYS))
def test_every_config_key_reaches_the_job_config(job_config, dry_run, key) -> None:
    """The value typed for ``key`` is the value of ``key`` in the config the job executes with."""
    typed = dry_run.typed[key]
    assert key in job_config, f"{key} does not reach the job ({WHERE[key]})"
    if key == "targets":
        assert job_config[key]["tiny"] == typed["tiny"] and "smoke" in job_config[key]
    else:
        assert job_config[key] == typed


def test_every_config_key_is_what_the_job_uses(job_config, dry_run, tmp_path) -> None:
    """The job-read keys drive what runs: the training request of a full-model job, the pfl run's configuration,
    the extraction's arguments (paths with spaces stay one argument); the plan-time keys are the plan's settings."""
    from benchmark.runners.fl_train import FLTrainJob
    from benchmark.runners.pfl import PFLTrainJob
    from benchmark.tables.plan import PLAN_SETTINGS, make_plan

    typed = dry_run.typed
    train = FLTrainJob("cifar10", "resnet18", "substitute", "legate2023_cifar", "all", "legate2023_cifar10", "fedavg",
                       "ft", "fp32", "iid-num_clients2", "stated", 0).request(job_config)  # fmt: skip
    assert (train.device, train.client_exec, train.vector_chunk, train.channels_last, train.checkpoint_every,
            train.data_root, train.weights_dir) == (typed["device"], typed["train_exec"], typed["train_chunk"],
                                                    typed["channels_last"], typed["checkpoint_every"],
                                                    typed["data_root"], typed["weights_dir"])  # fmt: skip
    pfl = PFLTrainJob(dataset="cifar10", model="cnn4", bn="none", scheme="shards", scheme_param="2", clients=10,
                      server_fraction="0", algorithm="fedavg", participation="0.1", local_epochs=1, rounds=2,
                      momentum="0.9", head_lr="1", head_init="default", prox_mu="default", selection="best",
                      seed=0)  # fmt: skip
    # worker processes run the per-client loop: the vectorised executor and pfl_client_procs are read one at a time
    vectorised = pfl.pfl_config({**job_config, "pfl_client_procs": 1})
    assert (vectorised.client_exec, vectorised.vector_chunk, vectorised.eval_every) == (
        typed["train_exec"], typed["train_chunk"], typed["pfl_eval_every"])  # fmt: skip
    procs = pfl.pfl_config({**job_config, "train_exec": "auto"})
    assert (procs.client_exec, procs.client_procs) == ("loop", typed["pfl_client_procs"])
    extract = dry_run.line("extract")
    for flag, key in (("--data-root", "data_root"), ("--weights-dir", "weights_dir"), ("--cache-dir", "cache_dir"),
                      ("--device", "device"), ("--batch-size", "batch_size")):  # fmt: skip
        assert extract[extract.index(flag) + 1] == str(typed[key]), extract
    partition = dry_run.line("partition")
    assert partition[partition.index("--data-root") + 1] == typed["data_root"]
    settings = make_plan(COST_TARGET, job_config).settings
    assert {k: settings[k] for k in PLAN_SETTINGS} == {k: typed[k] for k in PLAN_SETTINGS}


# --------------------------------------------------------------------------------- 3. a strict --config
def test_strict_config_unknown_keys_device_typos_bad_patterns_and_repeated_seeds_are_one_line_errors(
    tmp_path, capsys, one_line_error, tree_guard
):
    work = tmp_path / "work"
    work.mkdir()
    guard = tree_guard(work, ROOT / "config", ROOT / "workflow")
    unknown = ("flb: error: unknown config key 'chekpoint_every' (did you mean 'checkpoint_every'?) -- fix the key "
               "in the config file or --config (every key: workflow/schemas/config.schema.yaml)")  # fmt: skip
    device = ("flb: error: config field 'device': 'gpu' is not a device -- use cpu, cuda (a GPU), cuda:N (GPU N) "
              "or mps, or leave it null (CUDA when available, else CPU)")  # fmt: skip
    for word, line in (("chekpoint_every=5", unknown), ("device=gpu", device)):
        proc = _snakemake("-n", "smoke", "--config", word, cwd=work)
        assert proc.returncode == 2 and _error_lines(proc) == [line], proc.stderr[-2000:]
    # the same message from `flb job --set` and `flb run --set` (one validation for all)
    job = json.dumps({"kind": "pfl_central_curve", "dataset": "cifar10", "model": "cnn4", "part": "full",
                      "head_init": "default", "epochs": 3, "train_images": "100", "seed": 0})  # fmt: skip
    for argv, line in ((["job", job, "--set", "chekpoint_every=5"], unknown), (["run", COST_TARGET, "--set",
                       "device=gpu"], device)):  # fmt: skip
        capsys.readouterr()
        assert main(argv) == 2 and one_line_error() == line
    cfg = wf.load_config()
    with pytest.raises(ConfigError, match=re.escape("config field 'cell_filter': '(' is not a regular expression")):
        wf.validate_config({**cfg, "cell_filter": "("})
    seeds = {**cfg, "targets": {"smoke": {**cfg["targets"]["smoke"], "seeds": [0, 0, 1]}}}
    with pytest.raises(ConfigError) as err:
        wf.validate_config(seeds)
    assert str(err.value) == ("config field 'targets.smoke.seeds': 0 is listed more than once in [0, 0, 1] -- list "
                              "each value once (a repeated seed would be counted twice in the mean and std)")  # fmt: skip
    smoke = {**cfg, "targets": {"smoke": {**cfg["targets"]["smoke"], "methodz": ["fedncm"]}}}
    with pytest.raises(ConfigError, match=r"^unknown config key 'methodz' in targets\.smoke \(did you mean 'methods'\?\)"):
        wf.validate_config(smoke)
    for ok in ("cpu", "cuda", "cuda:3", "mps", None):
        wf.validate_config({**cfg, "device": ok})
    guard.check()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
DEFAULT = yaml.safe_load(wf.DEFAULT_CONFIG.read_text())
TARGET_KEYS = st.sampled_from(["paper", "table", "dataset", "backbones", "weights", "preprocess", "subset",
                               "partition", "seeds", "methods", "protocol", "options", "method"])  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    overrides=st.dictionaries(st.sampled_from(sorted(SCHEMA_KEYS)), st.text(max_size=20) | JSON, max_size=2),
    unknown=st.dictionaries(st.text(max_size=16), JSON, max_size=1) | st.just({}),
    target=st.dictionaries(TARGET_KEYS, JSON | st.lists(st.integers(-1, 3), max_size=4), max_size=2) | st.just({}),
)
@example(overrides={"device": "gpu"}, unknown={}, target={})
@example(overrides={"cell_filter": "("}, unknown={}, target={})
@example(overrides={}, unknown={}, target={"seeds": [0, 0, 1]})
def test_any_config_validates_or_fails_with_one_config_error(overrides, unknown, target) -> None:
    """Any config dict (values as YAML or `--config` strings give them) raises one ConfigError, or is one the
    workflow can use: its cell_filter compiles, its device is a torch device, each target's seeds are distinct."""
    import torch

    cfg = copy.deepcopy(DEFAULT)
    cfg["targets"]["smoke"].update(target)
    cfg.update(unknown)
    cfg.update(overrides)
    wf.coerce_cli_booleans(cfg)
    try:
        wf.validate_config(cfg)
    except ConfigError as err:
        assert "\n" not in str(err) and str(err).strip()
        return
    if cfg.get("cell_filter") is not None:
        re.compile(cfg["cell_filter"])
    if cfg.get("device") is not None:
        torch.device(cfg["device"])
    for t in cfg["targets"].values():
        assert len(set(t["seeds"])) == len(t["seeds"]), t["seeds"]


# ----------------------------------------------------------------- 4. a checkout reads its own config
def test_the_workflow_reads_the_config_of_its_own_checkout(tmp_path) -> None:
    """Two copies of workflow/ + config/ with different config.yaml values: each Snakefile reads its own. (At
    main, both read the installed package's config/config.yaml and plan a build.)"""
    work = tmp_path / "work"
    work.mkdir()
    for name, tier in (("a", "nightly"), ("b", "weekly")):
        snakefile = _copy_workflow(tmp_path / name, {"tier": tier})
        proc = _snakemake("-n", "smoke", cwd=work, snakefile=snakefile)
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert _error_lines(proc) == [f"flb: error: config field 'tier': '{tier}' is not one of ['full', 'ci'] -- "
                                      "fix it in the config file or --config"]  # fmt: skip
        assert wf.checkout_files(snakefile.parent).config == tmp_path / name / "config" / "config.yaml"
    assert not (work / "results").exists()


def test_a_checkout_with_its_own_package_refuses_another_imported_one(tmp_path) -> None:
    (tmp_path / "benchmark").mkdir()
    (tmp_path / "benchmark" / "__init__.py").write_text("")
    with pytest.raises(ConfigError, match=re.escape(f"the workflow of {tmp_path} would run the benchmark package "
                                                    f"imported from {ROOT / 'benchmark'}")):  # fmt: skip
        wf.checkout_package(tmp_path)


# ------------------------------------------------------------------------- 5. recovery after kill -9
NAP_MODULE = plugin_module(
    '''
class NapJob(Job):
    """Writes ``started``, sleeps as many seconds as the file ``nap`` says, then writes its output."""

    KIND: ClassVar[str] = "nap"
    PATTERN: ClassVar[str] = "results/runs/nap/seed{seed}.txt"
    seed: int

    def execute(self, config):
        Path("started").write_text("yes")
        time.sleep(float(Path("nap").read_text()))
        Path(self.path).write_text(f"done {self.seed}\\n")
''',
    imports=("import time", "from pathlib import Path"),
)
NAP_OUT = "results/runs/nap/seed0.txt"


def _wait_for(path: Path, proc: subprocess.Popen, seconds: float = 240) -> None:
    end = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < end, f"{path} did not appear"
        time.sleep(0.2)


@pytest.mark.slow
def test_recovery_after_kill_9_the_next_plain_build_completes(tmp_path) -> None:
    """A build killed with kill -9 (its whole process group) while a job runs leaves Snakemake's lock and an
    incomplete output; the next plain `snakemake --cores 1 <target>` removes the stale lock (a note says so),
    re-runs the unfinished job and ends with the right output. (At main it stops: "Directory cannot be locked".)"""
    snakefile = _copy_workflow(tmp_path / "checkout")
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "nap_runner.py").write_text(NAP_MODULE)
    work = tmp_path / "work"
    work.mkdir()
    (work / "nap").write_text("600")
    env = _env(PYTHONPATH=str(tmp_path / "mods"), FLB_RUNNER_MODULES="nap_runner")
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", "-s", str(snakefile), "--directory", str(work), NAP_OUT]
    build = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)  # fmt: skip
    try:
        _wait_for(work / "started", build)
    finally:
        os.killpg(build.pid, signal.SIGKILL)
        build.communicate()
    assert list((work / ".snakemake" / "locks").glob("*.lock")), "the killed build left no lock"
    assert any((work / ".snakemake" / "incomplete").iterdir()), "the killed build left no incomplete marker"

    (work / "nap").write_text("0")
    again = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=300)
    log = again.stdout + again.stderr
    assert again.returncode == 0, log[-3000:]
    assert (f"flb: note: removed the locks of a build in {work} that ended without removing them (killed?); no "
            "build is running there, so its unfinished jobs run again") in log  # fmt: skip
    assert (work / NAP_OUT).read_text() == "done 0\n"
    assert not list((work / ".snakemake" / "locks").glob("*.lock"))


def test_recovery_after_kill_9_a_live_build_keeps_its_lock(tmp_path) -> None:
    """The stale-lock rule itself, with real processes: while a build (a process holding the build lock) lives, a
    second one leaves Snakemake's locks alone (Snakemake then refuses the second build of the same files); once
    the first is killed with kill -9, the next removes them."""
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.output.lock").write_text(f"{tmp_path}/results/x\n")
    probe = textwrap.dedent(f"""
        import sys, time
        from benchmark.build_lock import recover
        r = recover({str(tmp_path)!r})
        print(len(r.removed), r.note, flush=True)
        time.sleep(float(sys.argv[1]))
    """)  # fmt: skip
    env = _env()
    holder = subprocess.Popen([sys.executable, "-c", probe, "600"], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().split(" ", 1)[0] == "1"  # it found the planted lock stale
        (locks.parent / "locks").mkdir(exist_ok=True)
        (locks / "0.output.lock").write_text(f"{tmp_path}/results/x\n")  # the live build's own lock
        second = subprocess.run([sys.executable, "-c", probe, "0"], env=env, capture_output=True, text=True)
        assert second.stdout.strip() == "0 None", second.stderr  # a live build: nothing removed, nothing said
        assert (locks / "0.output.lock").is_file()
    finally:
        holder.kill()  # SIGKILL: no clean-up of any kind
        holder.wait()
    third = subprocess.run([sys.executable, "-c", probe, "0"], env=env, capture_output=True, text=True)
    assert third.stdout.startswith("1 flb: note: removed the locks of a build in "), third.stdout + third.stderr
    assert not (locks / "0.output.lock").exists()


# ------------------------------------------------------------------------------- 6. a misspelled target
def test_a_misspelled_target_is_one_line_with_the_closest_names(tmp_path) -> None:
    proc = _snakemake("tabel3", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert _error_lines(proc) == [
        "flb: error: unknown snakemake target 'tabel3' (did you mean 'table3' or 'table8' or 'table7'?) -- list "
        "every target with `snakemake --list-target-rules` (or name an output path under results/)"
    ]
    assert "fedcof_table3" not in proc.stdout + proc.stderr  # not the ~95 names
    assert not (tmp_path / "results").exists()
