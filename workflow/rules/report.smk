# The reproducibility report (issue 14): `snakemake --cores all report` evaluates the claims catalogue
# (claims/*.yaml -> results/claims/<paper>.json, `flb claims`) and builds the static HTML site
# (results/report/index.html, `flb site`) from WHATEVER results exist: the check reports of the tables run so
# far, the figures drawn so far, the known findings. Named alone it builds nothing else first; named beside other
# targets on one command line (`snakemake --cores all ci_tables figures report --config tier=ci`), it waits for
# them: their inputs become inputs of the claims and the report (`_beside`), so the site never shows a half-built
# set of results. Both rules re-run when the set of available results changes (their inputs are globbed when the
# DAG is built).
from glob import glob as _glob
import hashlib as _hashlib
import os as _os

CLAIM_PAPERS = sorted(Path(p).stem for p in _glob("claims/*.yaml"))
# Results are not inputs (they are other rules' outputs: naming them would make Snakemake re-run tables and
# figures); a fingerprint of the files present (names, sizes, mtimes) is a param, so a new or changed result
# re-runs the rule (Snakemake's params rerun trigger).
_CLAIM_SOURCES = ("results/checks/*.json", "results/figures/*.json", "results/figures/*.csv")
_REPORT_SOURCES = (*_CLAIM_SOURCES, "results/figures/*.png", "results/figures/*.pdf", "results/tidy/*.csv")


def _fingerprint(*patterns):
    h = _hashlib.sha256()
    for f in sorted(f for p in patterns for f in _glob(p)):
        st = _os.stat(f)
        h.update(f"{f}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def _beside():
    """The inputs of the target rules named with `claims` / `report` on this command line (`figures`, `ci_tables`,
    a table target): the results they build, which the claims and the report then read only when finished. An
    input function of such a rule (`figures` asks which figures run only when it is a target) is called here; a
    named file adds nothing."""
    from snakemake.iocontainers import Wildcards

    asked = set(getattr(getattr(workflow, "dag_settings", None), "targets", None) or ())
    out = []
    for name in sorted(asked - {"claims", "report"}):
        try:
            target = getattr(rules, name)
        except Exception:  # a file target, or a name no rule has (Snakemake reports it itself)
            continue
        for f in target.input:
            if callable(f):  # a target rule has no wildcards
                got = f(Wildcards())
                out += [str(x) for x in (got if isinstance(got, (list, tuple)) else [got])]
            else:
                out.append(str(f))
    return out



rule claims:
    localrule: True
    input: lambda w: sorted(_glob("claims/*.yaml")) + _beside()  # a function: the targets are known at DAG time
    output: [f"results/claims/{p}.json" for p in CLAIM_PAPERS]
    params:
        results=lambda w: _fingerprint(*_CLAIM_SOURCES),
    shell: "flb claims --checks results/checks --figures results/figures --out results/claims --catalogue claims"


rule report:
    localrule: True
    input:
        claims=rules.claims.output,
        findings="expected/known_findings.yaml",
        beside=lambda w: _beside(),
    output: directory("results/report")
    params:
        results=lambda w: _fingerprint(*_REPORT_SOURCES),
    shell: "flb site --results results --findings {input.findings} --out {output}"
