# Constants and wildcard constraints shared by the rules. Jobs call the installed package (`pip install -e .`).
from pathlib import Path

from benchmark import workflow as wf
from benchmark.closed_form.protocols import PROTOCOLS
from benchmark.fl.protocols import list_protocols
from benchmark.gpu_slots import SLOTS_PER_GPU, job_gpu_slots, uses_gpu
from benchmark.jobs import ClosedFormJob, ExtractJob, FLRunJob, PartitionJob
from benchmark.ledger import LEDGER_DIR
from benchmark.tables.records import plan_inputs
from benchmark.tables.spec import list_specs

PY = "python -m benchmark.cli"
PLOTS = "python -m benchmark.apps.plots"
CONDA_ENV = str(CHECKOUT.root / "env" / "environment.yml")
PATHS = " ".join(  # quoted: a path with spaces stays one argument
    f"--{flag} {wf.shell_word(config[key])}"
    for flag, key in (("data-root", "data_root"), ("weights-dir", "weights_dir"), ("cache-dir", "cache_dir"))
    if config.get(key)
)
TABLES = list_specs()
FL_PROTOCOLS = list_protocols()
FREEFORM = wf.closed_form_targets(config)
DATA = wf.data_root_identity(config)  # the resolved data root the data-reading jobs use

wildcard_constraints:
    seed=r"\d+",
    split="train|test",
    subset=r"all|stratified[1-9]\d*",
    scheme="shards|dirichlet",  # the pfl runner's partition (benchmark/runners/pfl.py)
    clients=r"\d+",
    local_epochs=r"\d+",
    rounds=r"\d+",
    ft_epochs=r"\d+",


def table_outputs(target):
    return [f"results/tables/{target}.md", f"results/tables/{target}.tex", f"results/checks/{target}.json",
            f"results/tidy/{target}.csv"]
