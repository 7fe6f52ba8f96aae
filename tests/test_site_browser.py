"""The report in a real headless Chromium (benchmark/site/browser.py, issue 14).

Skipped when Chromium (``/usr/bin/chromium``, Debian's package) or Playwright's Python package is missing,
unless ``FLB_REQUIRE_BROWSER=1`` (CI sets it): then a missing browser is a failure, not a skip.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from benchmark.report import Stamp
from benchmark.site.browser import CHROMIUM, check_site
from benchmark.site.build import build_site

FIXTURE = Path(__file__).parent / "data" / "site"
STAMP = Stamp("2026-01-01 00:00 UTC", "test machine", "0123456789abcdef", "flb site (test)")


def _require_browser() -> None:
    missing = []
    if not CHROMIUM.is_file():
        missing.append(f"{CHROMIUM} (apt-get install -y chromium)")
    if importlib.util.find_spec("playwright") is None:
        missing.append("Playwright's Python package (pip install -e '.[test]')")
    if not missing:
        return
    why = "no headless browser: " + "; ".join(missing)
    if os.environ.get("FLB_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{why}, and FLB_REQUIRE_BROWSER=1 requires it")
    pytest.skip(why)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    _require_browser()
    return build_site(
        FIXTURE / "results",
        tmp_path / "site",
        findings=FIXTURE / "findings.yaml",
        records=FIXTURE / "runs",
        stamp=STAMP,
    )


def _failures(reports) -> dict[str, list[str]]:
    return {r.page: r.failures for r in reports if r.failures}


def test_every_page_loads_and_shows_its_tables_images_and_links(site, tmp_path):
    shot = tmp_path / "shots" / "site"  # no suffix (as .ci/run once passed): the index's PNG is site.png
    reports = check_site(site, shot)
    assert _failures(reports) == {}
    assert {r.page for r in reports} == {p.name for p in site.glob("*.html")}
    assert all(r.status == 200 for r in reports)
    # full-page screenshots of the index and the five paper pages (PNG signature)
    shots = sorted(p.name for p in shot.parent.glob("*.png"))
    assert len(shots) == 6 and "site.png" in shots and "site-fedcof.png" in shots
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in shot.parent.glob("*.png"))


def test_broken_image_and_anchor_are_reported(site):
    (site / "assets" / "figures" / "fedcof_fig9.png").unlink()  # a broken image link
    page = site / "index.html"
    page.write_text(page.read_text().replace('href="provenance.html"', 'href="provenance.html#nowhere"', 1))
    failures = _failures(check_site(site))
    assert set(failures) == {"fedcof.html", "index.html"}
    text = "\n".join(failures["fedcof.html"])
    assert "image 'assets/figures/fedcof_fig9.png' did not load" in text
    assert "HTTP 404" in text
    assert failures["index.html"] == [
        "link 'provenance.html#nowhere': no element with id 'nowhere' on provenance.html"
    ]
