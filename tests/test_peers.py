"""The peer harness core (issue 26): agreement rules, files, ledger record, CLI errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark import ledger
from benchmark.errors import ConfigError, UnknownNameError
from benchmark.peers import registry
from benchmark.peers.compare import AgreementRule, Difference, PeerComparison, SideRun, render
from benchmark.peers.registry import PeerFamily, PeerRequest
from benchmark.peers.run import read_comparison, run_peer


def side(name: str, seed: int, final: float, rounds=(1, 2), acc=(10.0, 20.0), initial=None, **extra):
    return SideRun(name, seed, tuple(rounds), tuple(acc), final, initial=initial, extra=extra)


def comparison(ours, theirs, rule) -> PeerComparison:
    return PeerComparison("toy", "tiny", {"rounds": 2}, (0, 1), "https://example.org/toy", "abc", tuple(ours),
                          tuple(theirs), rule, (Difference("bias", "random", "zero", "none measured"),))  # fmt: skip


def test_identical_agrees_bit_for_bit_and_names_the_first_difference():
    rule = AgreementRule("identical")
    same = comparison([side("ours", 0, 20.0, initial=5.0)], [side("theirs", 0, 20.0, initial=5.0)], rule)
    assert same.outcome().status == "AGREE"
    assert [c.quantity for c in same.outcome().checks] == ["seed 0 initial", "seed 0 final", "seed 0 round 1",
                                                           "seed 0 round 2"]  # fmt: skip
    off = comparison([side("ours", 0, 20.0)], [side("theirs", 0, 20.0 + 1e-6)], rule)
    out = off.outcome()
    assert out.status == "DISAGREE"
    assert [c.quantity for c in out.checks if c.status == "DISAGREE"] == ["seed 0 final"]
    assert AgreementRule("identical", atol=1e-3).kind == "identical"
    loose = comparison([side("ours", 0, 20.0)], [side("theirs", 0, 20.0 + 1e-6)], AgreementRule("identical", 1e-3))
    assert loose.outcome().status == "AGREE"


def test_seed_spread_agree_disagree_and_undecided():
    rule = AgreementRule("seed_spread", k=2.0, floor=0.1)
    ours = [side("ours", 0, 60.0, acc=(10, 20)), side("ours", 1, 62.0, acc=(11, 21))]
    near = [side("theirs", 0, 61.0, acc=(10, 20)), side("theirs", 1, 63.0, acc=(11, 21))]
    assert comparison(ours, near, rule).outcome().status == "AGREE"  # diff 1, tol 2*sqrt(2+2)/... = 2.83
    far = [side("theirs", 0, 70.0, acc=(10, 20)), side("theirs", 1, 71.0, acc=(11, 21))]
    out = comparison(ours, far, rule).outcome()
    assert out.status == "DISAGREE" and "final" in [c.quantity for c in out.checks if c.status == "DISAGREE"]
    one = comparison(ours[:1], near[:1], rule).outcome()  # one seed a side: spread unknown
    assert one.status == "UNDECIDED"
    assert comparison(ours[:1], [side("theirs", 0, 60.05, acc=(10, 20))], rule).outcome().status == "AGREE"


def test_only_quantities_both_sides_report_are_compared():
    rule = AgreementRule("identical")
    c = comparison([side("ours", 0, 1.0, rounds=(1, 2, 3), acc=(1, 2, 3), personalised=5.0)],
                   [side("theirs", 0, 1.0, rounds=(2, 3), acc=(2, 3))], rule)  # fmt: skip
    assert [q.quantity for q in c.outcome().checks] == ["seed 0 final", "seed 0 round 2", "seed 0 round 3"]


def test_bad_inputs_are_one_clear_error():
    with pytest.raises(ConfigError, match="kind"):
        AgreementRule("close_enough")
    with pytest.raises(ConfigError, match="accuracies"):
        SideRun("ours", 0, (1, 2), (1.0,), 1.0)
    with pytest.raises(ConfigError, match="side"):
        SideRun("mine", 0, (), (), 1.0)
    with pytest.raises(ConfigError, match="two ours runs"):
        comparison([side("ours", 0, 1.0), side("ours", 0, 2.0)], [side("theirs", 0, 1.0)],
                   AgreementRule("identical")).outcome()  # fmt: skip


@pytest.fixture
def toy_family(monkeypatch):
    monkeypatch.setattr(registry, "_FAMILIES", {})

    def run(req: PeerRequest) -> PeerComparison:
        (req.workdir / "theirs.log").write_text("ran\n")
        ours = [side("ours", s, 50.0 + s) for s in req.seeds]
        theirs = [side("theirs", s, 50.0 + s) for s in req.seeds]
        return PeerComparison(req.family, req.config_name, {"rounds": 2}, req.seeds, "https://example.org/toy",
                              "abc", tuple(ours), tuple(theirs), AgreementRule("identical"))  # fmt: skip

    fam = registry.register(PeerFamily("toy", "fedbabu", "https://example.org/toy", {"tiny": {"rounds": 2}}, run))
    monkeypatch.setattr(registry, "load_families", lambda: {"toy": fam})
    return fam


def test_run_writes_the_comparison_and_records_it(toy_family, tmp_path: Path):
    repo = tmp_path / "checkout"
    repo.mkdir()
    req = PeerRequest("toy", "tiny", (0, 1), repo, tmp_path / "work")
    out = run_peer(req, root=tmp_path, ledger_dir=tmp_path / "runs")
    assert out.json_path == tmp_path / "results/peers/toy/tiny/unknown/seeds-0-1.json"
    back = read_comparison(out.json_path)
    assert back == out.comparison and back.outcome().status == "AGREE"
    assert out.markdown_path.read_text() == render(back) and "**Outcome: AGREE**" in render(back)
    rec = ledger.read_record(out.record.folder)
    assert rec.job.KIND == "peer" and set(rec.files) == {
        "results/peers/toy/tiny/unknown/seeds-0-1.json", "results/peers/toy/tiny/unknown/seeds-0-1.json.sha256",
        "results/peers/toy/tiny/unknown/seeds-0-1.md"}  # fmt: skip
    assert "outcome: AGREE" in rec.provenance.notes[0]
    # a damaged comparison file is refused
    raw = json.loads(out.json_path.read_text())
    raw["ours"][0]["final"] = 99.0
    out.json_path.write_text(json.dumps(raw))
    with pytest.raises(Exception, match=r"seeds-0-1\.json"):
        read_comparison(out.json_path)


def test_request_errors_name_the_field(toy_family, tmp_path: Path):
    with pytest.raises(UnknownNameError, match="no configuration 'huge'"):
        run_peer(PeerRequest("toy", "huge", (0,), tmp_path, tmp_path / "w"), root=tmp_path, ledger_dir=None)
    with pytest.raises(ConfigError, match=r"--official-repo .* is not a folder"):
        run_peer(PeerRequest("toy", "tiny", (0,), tmp_path / "nope", tmp_path / "w"), root=tmp_path, ledger_dir=None)
    with pytest.raises(UnknownNameError, match="no peer family 'flsim'"):
        registry.get_family("flsim")


def test_cli_without_repo_says_where_to_get_it(toy_family, capsys):
    from benchmark.cli import main

    assert main(["peer", "toy"]) == 2
    assert "https://example.org/toy" in capsys.readouterr().err


def test_a_recorded_comparison_names_no_machine_path(toy_family, tmp_path: Path, monkeypatch):
    """The commands a family reports carry the checkout, the scratch folder and the released code's environment;
    the written comparison spells them as symbols."""
    repo, work, env = tmp_path / "checkout", tmp_path / "work", tmp_path / "envs" / "flsim"
    repo.mkdir()

    def run(req: PeerRequest) -> PeerComparison:
        cmd = f"{req.python} {req.official_repo}/main.py --out {req.workdir}/x.json"
        ours = (SideRun("ours", 0, (), (), 1.0, command="flb ..."),)
        theirs = (SideRun("theirs", 0, (), (), 1.0, command=cmd, notes=(f"log: {req.workdir}/x.log",)),)
        return PeerComparison(req.family, req.config_name, {}, req.seeds, "u", "c", ours, theirs,
                              AgreementRule("identical"))  # fmt: skip

    fam = registry.register(PeerFamily("toy2", "fedbabu", "u", {"tiny": {}}, run))
    monkeypatch.setattr(registry, "load_families", lambda: {"toy2": fam})
    out = run_peer(PeerRequest("toy2", "tiny", (0,), repo, work, python=str(env / "bin" / "python")),
                   root=tmp_path, ledger_dir=None)  # fmt: skip
    text = out.json_path.read_text()
    assert str(tmp_path) not in text
    assert "$PEER_PYTHON_ENV/bin/python $OFFICIAL_REPO/main.py --out $PEER_WORKDIR/x.json" in text
