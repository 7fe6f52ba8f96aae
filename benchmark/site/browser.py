"""``flb site-check``: load the report in a real headless Chromium and check what a reader would see (issue 14).

    flb site-check results/report --screenshot results/report.png

The folder is served on 127.0.0.1 (``http.server`` in a thread) and every ``*.html`` page is opened in
Debian's Chromium (``/usr/bin/chromium``, driven by Playwright's Python package with ``executable_path``;
Playwright's own browser download is never used: this machine is offline). Each page must

* answer HTTP 200 and log no console error, page error or failed / non-2xx request;
* show every ``<table>`` with rendered rows (non-zero bounding box; folded ``<details>`` are opened first);
* show every ``<img>`` loaded (``complete`` and ``naturalWidth > 0``);
* link only inside the site: every ``href`` / ``src`` is relative, every link answers 200 and every ``#id``
  it names exists on its page.

Full-page screenshots of the index and every paper page are written beside ``--screenshot`` (the index at
that path, ``.png`` added when it has another suffix or none; the others as ``<stem>-<page>.png``), as served,
before any ``<details>`` is opened. Exit status 1 with the list of failures, 2 when Chromium or the driver is
missing.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlparse

CHROMIUM = Path("/usr/bin/chromium")
#: What this offline machine needs: no sandbox (root in a container), no GPU, no network side-traffic.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
VIEWPORT = {"width": 1280, "height": 900}

_PAGE_FACTS = """() => {
  const tables = [...document.querySelectorAll('table')].map((t, i) => {
    const r = t.getBoundingClientRect();
    const rows = [...t.querySelectorAll('tbody tr')].filter(tr => tr.getBoundingClientRect().height > 0);
    return {i, w: r.width, h: r.height, rows: rows.length, id: t.closest('[id]') ? t.closest('[id]').id : ''};
  });
  const images = [...document.images].map(im => ({src: im.getAttribute('src'), complete: im.complete,
                                                  width: im.naturalWidth}));
  const links = [...document.querySelectorAll('[href],[src]')].map(a => a.getAttribute('href') ?? a.getAttribute('src'));
  const ids = [...document.querySelectorAll('[id]')].map(x => x.id);
  return {tables, images, links, ids};
}"""
_OPEN_DETAILS = "() => document.querySelectorAll('details').forEach(d => d.open = true)"


class BrowserMissing(RuntimeError):
    """Chromium or the Python driver is not installed."""


@dataclass
class PageReport:
    """What one page showed; ``failures`` empty when it passed."""

    page: str
    status: int | None = None
    failures: list[str] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    links: list[str] = field(default_factory=list)
    screenshot: Path | None = None


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the browser closing a connection early (BrokenPipe) is not a failure of the site


@contextlib.contextmanager
def serve(folder: Path) -> Iterator[str]:
    """Serve ``folder`` on 127.0.0.1 (a free port) in a thread; yields the base URL."""
    handler = functools.partial(_Quiet, directory=str(folder))
    server = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError):
        return 0


def _sync_playwright():
    try:
        from playwright.sync_api import sync_playwright  # local: optional (the [test] extra)
    except ImportError as exc:
        raise BrowserMissing(
            f"the browser driver is not installed ({exc})",
            "pip install -e '.[test]' (Playwright's Python package)",
        ) from exc
    return sync_playwright


def _visit(pg, base: str, name: str, shot: Path | None) -> PageReport:
    rep = PageReport(name)
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    pg.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    pg.on("requestfailed", lambda r: errors.append(f"request failed: {r.url} ({r.failure})"))
    pg.on("response", lambda r: errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    resp = pg.goto(base + name, wait_until="load")
    rep.status = resp.status if resp is not None else None
    if rep.status != 200:
        rep.failures.append(f"HTTP {rep.status} (expected 200)")
    pg.wait_for_load_state("networkidle")
    if shot is not None:
        pg.screenshot(path=str(shot), full_page=True)
        rep.screenshot = shot
    pg.evaluate(_OPEN_DETAILS)
    facts = pg.evaluate(_PAGE_FACTS)
    for t in facts["tables"]:
        if t["w"] <= 0 or t["h"] <= 0 or t["rows"] == 0:
            where = f" (in #{t['id']})" if t["id"] else ""
            rep.failures.append(
                f"table {t['i']}{where} has no rendered rows ({t['rows']} rows, {t['w']:.0f}x{t['h']:.0f} px)"
            )
    for im in facts["images"]:
        if not im["complete"] or im["width"] <= 0:
            rep.failures.append(
                f"image {im['src']!r} did not load (complete={im['complete']}, naturalWidth={im['width']})"
            )
    rep.ids = set(facts["ids"])
    rep.links = [str(h) for h in facts["links"] if h is not None]
    rep.failures += errors
    return rep


def _link_failures(base: str, reports: dict[str, PageReport]) -> dict[str, list[str]]:
    """Per page: links that leave the site, do not answer 200, or name an ``#id`` that does not exist."""
    out: dict[str, list[str]] = {}
    status_cache: dict[str, int] = {}
    host = urlparse(base).netloc
    for name, rep in reports.items():
        page_url = base + name
        for href in rep.links:
            if href.startswith(("mailto:", "data:")):
                continue
            url = urljoin(page_url, href)
            parsed = urlparse(url)
            if parsed.netloc != host or parsed.scheme not in ("http", "https"):
                out.setdefault(name, []).append(
                    f"link {href!r} leaves the site (only relative links are allowed)"
                )
                continue
            target, frag = urldefrag(url)
            if target not in status_cache:
                status_cache[target] = _http_status(target)
            if status_cache[target] != 200:
                out.setdefault(name, []).append(f"link {href!r}: HTTP {status_cache[target]}")
                continue
            if frag:
                other = target[len(base) :] or "index.html"
                ids = reports[other].ids if other in reports else None
                if ids is not None and frag not in ids:
                    out.setdefault(name, []).append(f"link {href!r}: no element with id {frag!r} on {other}")
    return out


def check_site(
    folder: str | Path, screenshot: str | Path | None = None, *, chromium: str | Path = CHROMIUM
) -> list[PageReport]:
    """Open every page of the site in ``folder`` in headless Chromium; one :class:`PageReport` per page (link
    failures added to the page they are on). Raises :class:`BrowserMissing` without Chromium or the driver."""
    folder = Path(folder)
    pages = sorted(p.name for p in folder.glob("*.html"))
    if not pages:
        return [PageReport("index.html", failures=[f"no *.html page in {folder}"])]
    chromium = Path(chromium)
    if not chromium.is_file():
        raise BrowserMissing(f"Chromium not found at {chromium}", "apt-get install -y chromium")
    sync_playwright = _sync_playwright()
    shot = Path(screenshot) if screenshot else None
    if shot is not None and shot.suffix.lower() != ".png":  # Chromium infers the format from the suffix
        shot = shot.with_name(shot.name + ".png")
    if shot is not None:
        shot.parent.mkdir(parents=True, exist_ok=True)
    reports: dict[str, PageReport] = {}
    with serve(folder) as base, tempfile.TemporaryDirectory(prefix="flb-chromium-") as profile:
        with sync_playwright() as p:
            ctx = p.chromium.launch_persistent_context(
                profile, executable_path=str(chromium), headless=True, args=list(FLAGS), viewport=VIEWPORT
            )
            ctx.set_default_timeout(30_000)
            try:
                for name in pages:
                    target = None
                    if shot is not None and name != "provenance.html":
                        target = (
                            shot
                            if name == "index.html"
                            else shot.with_name(f"{shot.stem}-{Path(name).stem}.png")
                        )
                    pg = ctx.new_page()
                    try:
                        reports[name] = _visit(pg, base, name, target)
                    except (
                        Exception
                    ) as exc:  # a page that cannot load is one failure, not a crash of the check
                        reports[name] = PageReport(name, failures=[f"could not load: {exc}"])
                    finally:
                        pg.close()
            finally:
                ctx.close()
        for name, failures in _link_failures(base, reports).items():
            reports[name].failures += failures
    if "index.html" not in reports:
        reports["index.html"] = PageReport("index.html", failures=["no index.html"])
    return list(reports.values())


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="flb site-check", description=__doc__.split("\n\n")[0])
    ap.add_argument("site", help="the folder `flb site` wrote (e.g. results/report)")
    ap.add_argument("--screenshot", default=None, help="full-page PNG of the index; paper pages beside it")
    ap.add_argument("--chromium", default=str(CHROMIUM))
    args = ap.parse_args(argv)
    try:
        reports = check_site(args.site, args.screenshot, chromium=args.chromium)
    except BrowserMissing as exc:
        print(f"flb site-check: {exc}")
        return 2
    bad = 0
    for r in reports:
        shot = f", screenshot {r.screenshot}" if r.screenshot else ""
        print(
            f"{r.page:<20} HTTP {r.status}: {'OK' if not r.failures else f'{len(r.failures)} failure(s)'}{shot}"
        )
        for f in r.failures:
            print(f"  - {f}")
        bad += len(r.failures)
    print(f"flb site-check: {'FAILED' if bad else 'OK'}: {len(reports)} page(s), {bad} failure(s)")
    return 1 if bad else 0
