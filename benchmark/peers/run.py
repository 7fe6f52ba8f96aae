"""Run one peer comparison (``flb peer``): the family's two sides, the comparison's files, its ledger record.

The outputs are ``results/peers/<family>/<config>/<commit>/seeds-<seeds>.json`` (the typed comparison,
:meth:`PeerComparison.to_dict`, with its checksum sidecar) and ``.md`` beside it (:func:`compare.render`);
the comparison is then recorded in the ledger (``runs/peer/<id>/``, :mod:`benchmark.ledger`) with the
provenance of this machine, so a comparison is kept like any other recorded run.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from benchmark import ledger
from benchmark.io import atomic_write_json, atomic_write_text, read_verified_json
from benchmark.peers.compare import PeerComparison, SideRun, render
from benchmark.peers.job import PeerJob, seeds_tag
from benchmark.peers.registry import PeerRequest, check_request, get_family
from benchmark.portable import portable
from benchmark.provenance import git_commit, machine, package_versions


@dataclass(frozen=True)
class PeerOutcome:
    """What ``flb peer`` made: the comparison, its files and its record (``None`` with ``record=False``)."""

    comparison: PeerComparison
    json_path: Path
    markdown_path: Path
    record: ledger.RunRecord | None


def official_commit(checkout: Path) -> str:
    """The released code's HEAD commit (first 12 hex digits; ``+dirty`` when its tracked files were edited),
    or ``unknown`` for a folder that is not a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True,
                              check=True, timeout=10).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=checkout,
                               capture_output=True, text=True, timeout=10).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head[:12] + ("+dirty" if dirty else "")


def portable_comparison(comparison: PeerComparison, request: PeerRequest) -> PeerComparison:
    """``comparison`` with this machine's folders written as symbols in every text it carries (commands, notes,
    differences): the released code's checkout as ``$OFFICIAL_REPO``, the scratch folder as ``$PEER_WORKDIR``,
    the released code's environment as ``$PEER_PYTHON_ENV``, then :func:`benchmark.portable.portable` (data
    root, weights, cache, checkout, home), so that a recorded comparison names no machine path."""
    env = Path(request.python).resolve().parent.parent if Path(request.python).is_absolute() else None
    swaps = [(str(request.official_repo.resolve()), "$OFFICIAL_REPO"), (str(request.workdir.resolve()), "$PEER_WORKDIR")]
    if env is not None and len(env.parts) > 2:
        swaps.append((str(env), "$PEER_PYTHON_ENV"))

    def clean(text: str) -> str:
        for path, symbol in sorted(swaps, key=lambda s: -len(s[0])):
            text = text.replace(path, symbol)
        return portable(text)

    def side(r: SideRun) -> SideRun:
        return replace(r, command=clean(r.command), notes=tuple(clean(n) for n in r.notes))

    return replace(
        comparison,
        official_repo=clean(comparison.official_repo),
        ours=tuple(side(r) for r in comparison.ours), theirs=tuple(side(r) for r in comparison.theirs),
        differences=tuple(replace(d, theirs=clean(d.theirs), ours=clean(d.ours), effect=clean(d.effect))
                          for d in comparison.differences),
        notes=tuple(clean(n) for n in comparison.notes),
    )  # fmt: skip


def peer_job(request: PeerRequest, commit: str) -> PeerJob:
    return PeerJob(request.family, request.config_name, commit.replace("+", "_"), seeds_tag(request.seeds))


def run_peer(request: PeerRequest, *, root: Path = Path("."), ledger_dir: Path | None = ledger.LEDGER_DIR,
             replace: bool = False) -> PeerOutcome:  # fmt: skip
    """Run ``request``'s family, write its files under ``root`` and (``ledger_dir`` not None) record it."""
    family = get_family(request.family)
    check_request(family, request)
    commit = official_commit(request.official_repo)
    request.workdir.mkdir(parents=True, exist_ok=True)
    start = datetime.now(UTC)
    t0 = time.perf_counter()
    comparison = portable_comparison(family.run(request), request)
    wall = time.perf_counter() - t0
    end = datetime.now(UTC)
    job = peer_job(request, commit)
    json_path, md_path = root / job.path, root / job.markdown_path
    atomic_write_json(json_path, comparison.to_dict(), checksum=True)
    atomic_write_text(md_path, render(comparison))
    record = None
    if ledger_dir is not None:
        seeds = " ".join(str(s) for s in request.seeds)
        provenance = ledger.Provenance(
            code_commit=git_commit(), machine=machine(), versions=package_versions(), device="cpu",
            threads=request.threads, precision="fp32", start=start.isoformat(timespec="seconds"),
            end=end.isoformat(timespec="seconds"), wall_s=round(wall, 1),
            command=f"flb peer {request.family} --official-repo <checkout> --config {request.config_name} "
                    f"--seeds {seeds}",
            source=f"{family.official_url} at {commit}",
            notes=(f"outcome: {comparison.outcome().status} ({comparison.rule.describe()})",),
        )  # fmt: skip
        record = ledger.write_record(job, provenance, root=root, ledger=ledger_dir, replace=replace)
    return PeerOutcome(comparison, json_path, md_path, record)


def read_comparison(path: Path) -> PeerComparison:
    """A comparison written by :func:`run_peer`, checked against its sidecar."""
    return PeerComparison.from_dict(
        read_verified_json(path, fix=f"run the comparison again (flb peer) or restore {path}")
    )
