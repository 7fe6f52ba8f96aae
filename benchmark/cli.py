"""Command line of the suite (``flb`` or ``python -m benchmark.cli``); the Snakemake rules call it.

Every failure is one line on stderr, never a traceback (:func:`main`): an error on bad input
(``flb: error: <what> -- <fix>``, exit 2), a failed file operation (disk full, read-only or forbidden folder,
a file where a folder is needed or the reverse: the path and what to do, exit 2), an interruption (exit 130),
``flb job`` stopped by SIGTERM (exit 143; a training first ends its round and checkpoints there:
:func:`_job_on_sigterm`) and anything unexpected (``flb: error: internal error <Type>: <message> -- rerun with
--debug ...``, exit 70).
``--debug`` anywhere on the line, or ``FLB_DEBUG=1`` in the environment (for jobs Snakemake starts), prints
the traceback as well. Output cut short by a closed pipe (``flb data list | head``) ends quietly (exit 141,
as for a command killed by SIGPIPE). ``flb`` applications (:mod:`benchmark.apps`) run under the same handler.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import select
import signal
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from benchmark import (
    apps,
    report,
    workflow,  # module attribute: tests replace load_config
)
from benchmark.data import download
from benchmark.data.registry import list_datasets
from benchmark.errors import BenchmarkError, ConfigError
from benchmark.fs_errors import check_output_file, os_error
from benchmark.jobs import job_from_dict
from benchmark.paths import check_locations
from benchmark.report_guard import built
from benchmark.runners import load_runners
from benchmark.tables.execute import run_planned
from benchmark.tables.gate import ci_gate, verdict_exit
from benchmark.workflow import parse_kv

T = TypeVar("T")


def batch_size_arg(text: str) -> int | str:
    """``--batch-size``: ``auto`` (the device's, :func:`benchmark.features.extract.resolve_batch_size`) or an integer >= 1."""
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 'auto' or a positive integer, got {text!r}")
    return value


def _common_paths(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-root", default=None, help="dataset root (default: $FLB_DATA_ROOT or ./data)")
    p.add_argument("--weights-dir", default=None, help="local weight files (default: $FLB_WEIGHTS_DIR)")
    p.add_argument(
        "--cache-dir", default=None, help="feature cache (default: $FLB_CACHE_DIR or results/cache)"
    )


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="flb", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--debug",
        action="store_true",
        help="on an error, print the traceback too (anywhere on the line; or set FLB_DEBUG=1)",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("extract", help="extract (or find cached) features of one dataset split")
    p.add_argument("--dataset", required=True)
    p.add_argument("--split", required=True)
    p.add_argument("--backbone", required=True)
    p.add_argument("--weights", default="substitute", help="torchvision | substitute | random")
    p.add_argument(
        "--preprocess", required=True, help="preprocessing preset (see benchmark.features.preprocess)"
    )
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    p.add_argument("--subset", default="all", help="'all' or 'stratified<N>' samples per class")
    p.add_argument("--subset-seed", type=int, default=0)
    p.add_argument("--flip-seed", type=int, default=0)
    p.add_argument("--batch-size", type=batch_size_arg, default="auto",
                   help="images per forward pass: auto (8 on a CPU, 64 on a GPU) or a number")
    p.add_argument("--device", default=None)
    p.add_argument("--out", required=True, help="pointer JSON to write")
    _common_paths(p)

    p = sub.add_parser("partition", help="partition a dataset's train split over clients")
    p.add_argument("--dataset", required=True)
    p.add_argument("--subset", default="all")
    p.add_argument("--scheme", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--param", action="append", default=[], help="scheme parameter key=value (repeatable)")
    p.add_argument("--out", required=True)
    p.add_argument("--data-root", default=None)

    p = sub.add_parser("closed-form", help="run a closed-form protocol's methods on cached features")
    p.add_argument("--train", required=True)
    p.add_argument("--test", required=True)
    p.add_argument("--partition", required=True)
    p.add_argument(
        "--protocol",
        default="suite",
        help="methods and options of a paper (fedcof, legate2023, legate2023-code) or 'suite' "
        "(see benchmark/closed_form/protocols.py)",
    )
    p.add_argument("--methods", default="", help="comma-separated method names (default: the protocol's)")
    p.add_argument("--options", default="{}", help="JSON: per-method options laid over the protocol's")
    p.add_argument("--out", required=True)

    p = sub.add_parser(
        "table",
        help="assemble, check and render a paper-table target from its plan (results/plans/<target>-<sha12>.json) "
        "and runs",
    )
    p.add_argument("target")
    p.add_argument("--plan", default=None, help="the plan file to assemble (default: the newest plan of the target)")

    p = sub.add_parser(
        "run", help="run a paper-table target's jobs in this process (no Snakemake), then assemble it"
    )
    p.add_argument("target")
    p.add_argument("--config", default=None, help="YAML config (default: config/config.yaml)")
    p.add_argument("--set", action="append", default=[], help="config override key=value (repeatable)")

    p = sub.add_parser("fl-run", help="one federated training run on cached features (benchmark.fl.jobs)")
    p.add_argument("--protocol", required=True, help="benchmark.fl.protocols name, e.g. legate2023_cifar10")
    p.add_argument("--method", required=True, help="a method of the protocol, e.g. lp")
    p.add_argument("--train", required=True, help="train feature pointer JSON")
    p.add_argument("--test", required=True, help="test feature pointer JSON")
    p.add_argument("--partition", required=True, help="partition JSON of the train split")
    p.add_argument("--seed", type=int, required=True, help="run seed (client sampling, head init)")
    p.add_argument("--out", required=True, help="tidy CSV to write")
    p.add_argument("--curve", default=None, help="per-round curve CSV to write")
    p.add_argument("--record", default=None, help="JSON run record to write")
    p.add_argument("--set", action="append", default=[], help="protocol override key=value (repeatable)")
    p.add_argument("--device", default="auto")
    p.add_argument("--no-progress", action="store_true")

    p = sub.add_parser(
        "verdict",
        help="one-screen summary of a built table target; exit 1 only on a FAIL not in the known findings",
    )
    p.add_argument("target")
    p.add_argument("--results", default="results", help="results folder (default: results)")
    p.add_argument("--findings", default=None, help="known findings (default: expected/known_findings.yaml)")

    p = sub.add_parser(
        "ci-gate", help="verdict summary of checks files; exit 1 on an unlisted FAIL or a stale finding"
    )
    p.add_argument("checks", nargs="+", help="results/checks/<target>.json files")
    p.add_argument("--findings", default=None, help="known findings (default: expected/known_findings.yaml)")
    p.add_argument(
        "--partial", action="store_true", help="checks of some targets only: skip findings of the others"
    )

    p = sub.add_parser(
        "report", help="the Results section (cells that ran, verdict counts) from check reports"
    )
    p.add_argument("--checks", default="results/checks", help="folder of <target>.json check reports")
    p.add_argument("--readme", default=None, help="write the section into this README (between its markers)")
    p.add_argument(
        "--command",
        default=None,
        help="the run the checks came from, as a label (the configuration is read from the checks; a "
        "--command naming another tier/table_subset/cell_filter is refused)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="with --readme: replace committed totals/pages built with another configuration or more targets",
    )
    p.add_argument("--claims", default=None, help="folder of results/claims/<paper>.json: their totals too")
    p.add_argument(
        "--figures", default=None, help="folder of drawn figures (results/figures): their totals too"
    )
    p.add_argument(
        "--report-link", default=None, help="the HTML report to link (e.g. docs/report/index.html)"
    )

    p = sub.add_parser("data", help="datasets and checkpoints: list their status, fetch (download + verify)")
    data = p.add_subparsers(dest="data_cmd", required=True)
    q = data.add_parser("list", help="each dataset: present and verified, downloadable, or where to get it")
    q.add_argument("--data-root", default=None)
    q = data.add_parser(
        "fetch", help="download and verify a dataset (or --weights MODEL: a torchvision checkpoint)"
    )
    q.add_argument("name", nargs="?", help="dataset name (see `flb data list`)")
    q.add_argument("--weights", default=None, metavar="MODEL", help="fetch MODEL's torchvision checkpoint")
    q.add_argument("--data-root", default=None)
    q.add_argument("--marker", default=None, help="JSON to write with the verified identity (workflow)")
    q.add_argument("--mirror", default=None, metavar="URL",
                   help="fetch from URL/<host>/<path> instead of the official host (default: $FLB_MIRROR)")  # fmt: skip

    p = sub.add_parser("collect", help="concatenate tidy CSVs")
    p.add_argument("inputs", nargs="*")
    p.add_argument("--methods", default="", help="keep only these methods (comma-separated)")
    p.add_argument("--label", action="append", default=[], help="set a column for every row: key=value")
    p.add_argument("--out", required=True)

    p = sub.add_parser(
        "job",
        help="run one typed job of a runner plug-in (benchmark/jobs.py JSON, as the workflow passes it)",
    )
    p.add_argument("job_json", help='the job, e.g. {"kind": "toy", "method": "m", "seed": 0}')
    p.add_argument("--config", default=None, help="YAML config (default: config/config.yaml)")
    p.add_argument("--config-json", default=None, help="the whole config as JSON (the workflow passes its own)")
    p.add_argument("--set", action="append", default=[], help="config override key=value (repeatable)")
    _add_apps(sub)
    return ap


def _add_apps(sub: argparse._SubParsersAction) -> None:
    """``flb pin-reduced``, ``flb tune-lr``, ``flb plot``: applications, listed here, run by :func:`run`."""
    apps.register(sub)


def run(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if (code := apps.dispatch(argv)) is not None:  # an application parses its own arguments
        return code
    args = build_parser().parse_args(argv)
    _check_outputs(args)

    if hasattr(args, "data_root"):  # a data root / weights folder named by a flag or $FLB_* must exist
        check_locations(args.data_root, getattr(args, "weights_dir", None), via="flag",
                        weights=hasattr(args, "weights_dir"), will_create=getattr(args, "data_cmd", "") == "fetch")  # fmt: skip

    if args.cmd in ("extract", "partition", "closed-form", "collect"):
        from benchmark import pipeline  # torch and torchvision: only for the steps that need them

    if args.cmd == "extract":
        ptr = _call_step(pipeline.extract_step, args)
        hit = "cache hit" if ptr["cache_hit"] else f"{ptr['images_per_s']:.1f} img/s"
        print(
            f"{args.dataset}/{args.split} {args.backbone}: {ptr['num_samples']} x {ptr['feature_dim']} ({hit})"
        )
    elif args.cmd == "partition":
        info = _call_step(pipeline.partition_step, args, params=parse_kv(args.param))
        print(
            f"partition {args.scheme} seed {args.seed}: {info['clients']} clients, sha256 {info['sha256'][:12]}"
        )
    elif args.cmd == "closed-form":
        methods = [m for m in args.methods.split(",") if m] or None
        options = _json_arg(args.options, "--options")
        n = _call_step(pipeline.closed_form_step, args, methods=methods, options=options)
        print(f"wrote {n} rows ({args.protocol} protocol) to {args.out}")
    elif args.cmd == "run":
        from benchmark.tables.assemble import build_table  # local: heavy import (pandas)

        cfg = workflow.load_config(args.config, parse_kv(args.set))
        plan_file, jobs = run_planned(args.target, cfg)
        table = build_table(args.target, plan_file=plan_file)
        print(f"{len(jobs)} jobs\n{table.summary()}")
        return verdict_exit(args.target)
    elif args.cmd == "table":
        # Exit 0 whatever the verdicts: Snakemake deletes the outputs of a failing job. The target rule
        # runs `flb verdict` afterwards, which is where a FAIL turns into a non-zero exit.
        from benchmark.tables.assemble import build_table  # local: heavy import (pandas)

        table = build_table(args.target, plan_file=args.plan)
        print(table.summary())
    elif args.cmd == "verdict":
        return verdict_exit(args.target, args.results, args.findings)
    elif args.cmd == "ci-gate":
        return ci_gate(args.checks, args.findings, partial=args.partial)
    elif args.cmd == "fl-run":
        from benchmark.fl.jobs import fl_run_step  # local: heavy import (pandas, scipy, torch, torchvision)

        job = _call_step(fl_run_step, args, overrides=parse_kv(args.set), progress=not args.no_progress)
        r = job.result
        print(
            f"{args.protocol}/{args.method} seed {args.seed}: accuracy {100 * r.reported_acc:.2f}% "
            f"(best {100 * r.best_acc:.2f}% at round {r.best_round}, last {100 * r.last_acc:.2f}%), "
            f"{r.costs.total_bytes / 1e9:.4f} GB, {r.costs.compute_f:.3g} F -> {args.out}"
        )
    elif args.cmd == "report":
        built_with = built(report.load_checks(args.checks)).label if args.figures else None
        extra = report.extra_totals(args.claims, args.figures, built_with=built_with)
        if args.readme:
            print(report.update_readme(args.readme, args.checks, command=args.command, extra_totals=extra,
                                       report_link=args.report_link, force=args.force).summary(), end="")  # fmt: skip
        else:
            print(report.results_section_now(args.checks, command=args.command, extra_totals=extra))
    elif args.cmd == "data":
        return _data_command(args)
    elif args.cmd == "job":
        return _job_command(args)
    elif args.cmd == "collect":
        methods = [m for m in args.methods.split(",") if m]
        n = pipeline.collect_step(args.inputs, args.out, methods=methods, labels=parse_kv(args.label))
        print(f"collected {n} rows into {args.out}")
    return 0


class JobTerminated(BaseException):
    """Raised in ``flb job`` by a SIGTERM that does not wait for a round's end (:func:`_job_on_sigterm`)."""


def _job_on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM to ``flb job``: SLURM's at a job's time limit or on ``scancel`` (its SIGKILL follows
    ``KillWait`` later), a harvest's or Snakemake's when they stop. In a training's round loop the first one
    lets the round end and its checkpoint be written there (:func:`benchmark.federated.loop.request_stop`): the
    retry resumes after it, not after the last periodic checkpoint (up to ``checkpoint_every`` rounds earlier).
    Anywhere else, and a second time, the job stops at once; its atomic writes leave no partial file."""
    loop = sys.modules.get("benchmark.federated.loop")  # never an import inside a signal handler
    if loop is not None and loop.in_round_loop() and not loop.stop_requested():
        loop.request_stop()
        return
    raise JobTerminated


def _job_command(args: argparse.Namespace) -> int:
    """``flb job JSON``: run one typed job in this process. SIGTERM stops it as :func:`_job_on_sigterm` says,
    with exit status :data:`EXIT_TERMINATED`: Snakemake sees a failed job, and its ``retries`` run it again."""
    load_runners()  # plug-ins register their job types on import
    job = job_from_dict(_json_arg(args.job_json, "job_json"))
    base = _json_arg(args.config_json, "--config-json") if args.config_json is not None else None
    config = workflow.load_config(args.config, parse_kv(args.set), base=base)
    previous = signal.signal(signal.SIGTERM, _job_on_sigterm)
    try:
        job.execute(config)
    except JobTerminated:
        print(f"flb job: stopped by SIGTERM; {job.path} not written", file=sys.stderr)
        return EXIT_TERMINATED
    except BaseException as exc:
        # StopRequested comes only from the round loop; importing it here would import torch for every job
        loop = sys.modules.get("benchmark.federated.loop")
        if loop is None or not isinstance(exc, loop.StopRequested):
            raise
        print(f"flb job: stopped by SIGTERM after round {exc.rounds}, its checkpoint written there "
              f"({job.checkpoint_file()}); the same job run again resumes after it",
              file=sys.stderr)  # fmt: skip
        return EXIT_TERMINATED
    finally:
        signal.signal(signal.SIGTERM, previous)
        if (loop := sys.modules.get("benchmark.federated.loop")) is not None:
            loop.clear_stop_request()
    print(f"{job.KIND} job -> {job.path}")
    return 0


def _data_command(args: argparse.Namespace) -> int:
    """``flb data list`` / ``flb data fetch NAME`` / ``flb data fetch --weights MODEL``."""
    if args.data_cmd == "list":
        for name in list_datasets():
            st = download.dataset_status(name, args.data_root)
            print(f"{name:16s} {st.state:12s} {st.detail}")
        return 0
    if (args.name is None) == (args.weights is None):
        raise ConfigError("flb data fetch needs a dataset NAME or --weights MODEL (one of them)",
                          "e.g. `flb data fetch cifar10` or `flb data fetch --weights resnet18`")  # fmt: skip
    if args.weights:
        from benchmark.models.fetch import fetch_weights  # local: heavy import (torch, torchvision)

        rec = fetch_weights(args.weights, marker=args.marker, mirror=args.mirror)
        print(f"{args.weights}: {rec['file']} sha256 {rec['sha256'][:12]}... verified at {rec['path']}")
        return 0
    rec = download.fetch_dataset(args.name, args.data_root, marker=args.marker, mirror=args.mirror)
    how = "downloaded and verified" if rec["downloaded"] else "present and verified (nothing downloaded)"
    splits = ", ".join(f"{s} {v['samples']}" for s, v in rec["splits"].items())
    print(f"{args.name}: {how} in {rec['data_root']} ({splits})")
    return 0


def _call_step(step: Callable[..., T], args: argparse.Namespace, **given: Any) -> T:
    """``step(**given, ...)`` with each other parameter of ``step`` that has a flag of the same name set from
    that flag: the steps name their keyword parameters as the subcommands' flags (``--batch-size`` is
    ``batch_size``), so the parser is the one list of them; a parameter without a flag keeps its default."""
    names = inspect.signature(step).parameters
    return step(**given, **{n: getattr(args, n) for n in names if n not in given and hasattr(args, n)})


def _json_arg(text: str, name: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{name} is not valid JSON ({exc.msg})", f"pass a JSON object to {name}") from exc
    if not isinstance(value, dict):
        raise ConfigError(f"{name} must be a JSON object", f"pass e.g. '{{}}' to {name}")
    return value


#: Options that name a file a subcommand writes (checked by :func:`_check_outputs` before any work).
OUTPUT_OPTIONS = {"out": "--out", "curve": "--curve", "record": "--record", "marker": "--marker"}

#: Exit status of an unexpected error (sysexits' EX_SOFTWARE), apart from 1 (a FAIL) and 2 (bad input).
EXIT_INTERNAL = 70
#: Exit status when stdout is a closed pipe: what a shell reports for a command killed by SIGPIPE.
EXIT_BROKEN_PIPE = 141
#: Exit status of ``flb job`` stopped by SIGTERM (:func:`_job_on_sigterm`): what a shell reports for a command
#: killed by it.
EXIT_TERMINATED = 143


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before any work, an output option (``--out``, ``--curve``, ``--record``, ``--marker``) that
    names an existing folder or a path under a file."""
    for attr, option in OUTPUT_OPTIONS.items():
        value = getattr(args, attr, None)
        if value:
            check_output_file(value, option)


def _outputs_named(argv: Sequence[str]) -> str | None:
    """``"--out X"`` (and the other output options) as given on the command line, or ``None``: what an
    error without a file name says the command was writing."""
    named = []
    for i, arg in enumerate(argv):
        for option in OUTPUT_OPTIONS.values():
            if arg == option and i + 1 < len(argv):
                named.append(f"{option} {argv[i + 1]}")
            elif arg.startswith(option + "="):
                named.append(f"{option} {arg.split('=', 1)[1]}")
    return ", ".join(named) or None


def _debug_flag(argv: list[str]) -> tuple[list[str], bool]:
    """``argv`` without the global ``--debug`` (anywhere before a bare ``--``), and whether debugging is on
    (that flag, or ``FLB_DEBUG`` set to anything but empty/0/false/no)."""
    end = argv.index("--") if "--" in argv else len(argv)
    debug = "--debug" in argv[:end]
    rest = [a for a in argv[:end] if a != "--debug"] + argv[end:]
    env = os.environ.get("FLB_DEBUG", "").strip().lower()
    return rest, debug or env not in ("", "0", "false", "no")


def _fail(err: BaseException, line: str, code: int, debug: bool) -> int:
    """Print ``line`` (after the traceback of ``err`` when debugging) on stderr; return ``code``."""
    if debug:
        traceback.print_exception(type(err), err, err.__traceback__, file=sys.stderr)
    print(line, file=sys.stderr)
    return code


def internal_error_line(err: BaseException) -> str:
    """The one line for an unexpected exception: its type and message (newlines folded, at most 300
    characters), and what to do."""
    msg = " ".join(str(err).split())
    if len(msg) > 300:
        msg = msg[:297] + "..."
    kind = type(err).__name__
    return (
        f"flb: error: internal error {kind}{': ' + msg if msg else ''} "
        "-- rerun with --debug for the traceback and report it"
    )


def _stdout_gone() -> bool:
    """Whether stdout is a pipe whose reader has gone (``poll`` reports an error on it); true as well when
    that cannot be told (stdout replaced, no ``poll``), as a closed stdout is where a BrokenPipeError of
    ``flb`` comes from."""
    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return True


def _quiet_stdout() -> None:
    """After a closed pipe: point stdout at /dev/null, so that the interpreter's last flush is silent."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # stdout replaced by an object without a file (tests)
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``flb`` (or an application) and turn every failure into one line (module docstring)."""
    args, debug = _debug_flag(list(sys.argv[1:] if argv is None else argv))
    try:
        code = run(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return code
    except BrokenPipeError as err:
        if not _stdout_gone():  # another pipe (a child process, a socket): an error like any other
            return _fail(err, internal_error_line(err), EXIT_INTERNAL, debug)
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt as err:
        return _fail(err, "flb: interrupted", 130, debug)
    except BenchmarkError as err:
        return _fail(err, f"flb: error: {err}", 2, debug)
    except OSError as err:
        return _fail(err, f"flb: error: {os_error(err, _outputs_named(args))}", 2, debug)
    except Exception as err:
        return _fail(err, internal_error_line(err), EXIT_INTERNAL, debug)


if __name__ == "__main__":
    sys.exit(main())
