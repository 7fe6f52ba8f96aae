"""One URL into one ``.part`` file: timeouts, bounded retries with back-off, resume, and the mirror setting.

:func:`download_part` is the transport of :mod:`benchmark.data.download` (datasets and torchvision
checkpoints). It guarantees:

* **no hang**: the TCP (and TLS / proxy) connection must open within :attr:`FetchPolicy.connect_timeout` and
  every later read (the response headers included) must bring data within :attr:`FetchPolicy.read_timeout`;
* **bounded retries**: a timeout, a dropped connection, a body shorter than announced or an HTTP 5xx / 429
  answer is retried up to :attr:`FetchPolicy.attempts` times in all, waiting ``backoff``, ``2 * backoff``,
  ... seconds between them; other HTTP errors (404, 403, ...) are not retried;
* **resume**: each retry (and the next run of the same command) asks for the rest with ``Range: bytes=N-``
  and appends to the ``.part`` file; a server that ignores the range (answers 200) restarts the file from
  byte 0, one that refuses it (416) restarts it too. The caller verifies the checksum only once the file is
  complete;
* **one error**: :class:`DownloadError` names the URL, why the last attempt failed, the bytes kept for the
  next try and the mirror setting (``FLB_MIRROR`` / ``flb data fetch --mirror``).

Settings (environment, read at each download; tests patch :data:`POLICY` or set them):
``FLB_FETCH_CONNECT_TIMEOUT``, ``FLB_FETCH_READ_TIMEOUT`` (seconds), ``FLB_FETCH_ATTEMPTS``,
``FLB_FETCH_BACKOFF`` (seconds, doubled after each failed attempt), and ``FLB_MIRROR``: a base URL (``http://``,
``https://`` or ``file://``) under which every file is looked up by the official URL's host and path, e.g.
``$FLB_MIRROR/www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz`` (the layout ``wget -x URL`` writes). The
official checksum is checked whatever the mirror.
"""

from __future__ import annotations

import dataclasses
import functools
import http.client
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchmark.errors import ConfigError, DataMissingError

USER_AGENT = "fl-pretrain-bench (python urllib)"
MIRROR_ENV = "FLB_MIRROR"
#: How the mirror setting is named in messages (the environment variable and the command-line flag).
MIRROR_SETTING = f"{MIRROR_ENV} (or `flb data fetch --mirror URL`)"
CHUNK = 1 << 20


class DownloadError(DataMissingError):
    """A download failed (network, server or disk); the message names the URL and the mirror setting."""


@dataclass(frozen=True)
class FetchPolicy:
    """Timeouts (seconds), attempts in all, and the first back-off (seconds, doubled after each failure)."""

    connect_timeout: float = 30.0
    read_timeout: float = 60.0
    attempts: int = 4
    backoff: float = 2.0


#: The defaults; :func:`fetch_policy` overlays the ``FLB_FETCH_*`` environment variables.
POLICY = FetchPolicy()
_ENV = {"connect_timeout": "FLB_FETCH_CONNECT_TIMEOUT", "read_timeout": "FLB_FETCH_READ_TIMEOUT",
        "attempts": "FLB_FETCH_ATTEMPTS", "backoff": "FLB_FETCH_BACKOFF"}  # fmt: skip


def fetch_policy(env: Mapping[str, str] | None = None) -> FetchPolicy:
    """:data:`POLICY` with the ``FLB_FETCH_*`` variables of ``env`` (default ``os.environ``) applied;
    a value that is not a positive number is a :class:`ConfigError` naming the variable."""
    env = os.environ if env is None else env
    changes: dict[str, Any] = {}
    for field, var in _ENV.items():
        if not env.get(var):
            continue
        kind, lowest = (int, 1) if field == "attempts" else (float, 0.0 if field == "backoff" else 1e-3)
        try:
            value = kind(env[var])
        except ValueError:
            value = None
        if value is None or value < lowest:
            raise ConfigError(f"{var}={env[var]!r} is not a valid {'number of attempts' if kind is int else 'time'}",
                              f"set {var} to {'an integer >= 1' if kind is int else 'a number of seconds'}, or unset it")  # fmt: skip
        changes[field] = value
    return dataclasses.replace(POLICY, **changes)


def mirror_base(explicit: str | None = None) -> str | None:
    """The mirror's base URL: ``explicit`` (``--mirror``), else ``$FLB_MIRROR``, else None (official hosts)."""
    value = explicit if explicit not in (None, "") else os.environ.get(MIRROR_ENV, "")
    if not value:
        return None
    if urlsplit(value).scheme not in ("http", "https", "file"):
        raise ConfigError(f"mirror {value!r} is not an http://, https:// or file:// URL",
                          f"set {MIRROR_SETTING} to the base URL of a mirror, or unset it")  # fmt: skip
    return value.rstrip("/")


def mirrored(url: str, mirror: str | None) -> str:
    """Where ``url`` is fetched from: ``<mirror>/<host>/<path>``, or ``url`` itself without a mirror."""
    if not mirror:
        return url
    parts = urlsplit(url)
    return f"{mirror}/{parts.netloc}{parts.path}"


# ----------------------------------------------------------------------------------------- transport


class _TimedHTTPConnection(http.client.HTTPConnection):
    """Connects within ``timeout`` (the connect timeout), then reads with ``read_timeout``."""

    def __init__(self, *args: Any, read_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_timeout = read_timeout

    def connect(self) -> None:
        super().connect()
        self.sock.settimeout(self._read_timeout)


class _TimedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, *args: Any, read_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_timeout = read_timeout

    def connect(self) -> None:
        super().connect()  # TCP, proxy tunnel and TLS handshake: all under the connect timeout
        self.sock.settimeout(self._read_timeout)


def urlopen(request: urllib.request.Request) -> Any:
    """``urllib``'s opener (proxies from the environment included) with the policy's two timeouts."""
    policy = fetch_policy()

    class HTTP(urllib.request.HTTPHandler):
        def http_open(self, req):  # type: ignore[no-untyped-def]
            return self.do_open(functools.partial(_TimedHTTPConnection, read_timeout=policy.read_timeout), req)

    class HTTPS(urllib.request.HTTPSHandler):
        def https_open(self, req):  # type: ignore[no-untyped-def]
            conn = functools.partial(_TimedHTTPSConnection, read_timeout=policy.read_timeout)
            return self.do_open(conn, req, context=self._context)

    return urllib.request.build_opener(HTTP, HTTPS).open(request, timeout=policy.connect_timeout)


Opener = Callable[[urllib.request.Request], Any]


class _Retry(Exception):
    """A transient failure of one attempt (the reason is the message)."""


class _Final(Exception):
    """A failure that another attempt cannot fix (HTTP 4xx, a file missing on a file:// mirror)."""


class _WriteError(Exception):
    def __init__(self, exc: OSError) -> None:
        super().__init__(str(exc))
        self.exc = exc


_CONTENT_RANGE = re.compile(r"bytes (\d+)-\d+/(\d+|\*)")


def _attempt(url: str, part: Path, opener: Opener) -> int:
    """One request; appends to ``part`` from its current size (or rewrites it); returns the byte it resumed at.

    Raises :class:`_Retry` on a transient failure, :class:`_Final` on one that retrying cannot fix.
    """
    offset = part.stat().st_size if part.is_file() else 0
    headers = {"User-Agent": USER_AGENT, **({"Range": f"bytes={offset}-"} if offset else {})}
    try:
        with opener(urllib.request.Request(url, headers=headers)) as resp:
            status = getattr(resp, "status", None) or 200
            info = getattr(resp, "headers", None) or {}
            length = info.get("Content-Length")
            total = None
            if offset and status == 206:
                m = _CONTENT_RANGE.match(info.get("Content-Range", ""))
                if not m or int(m.group(1)) != offset:
                    part.unlink(missing_ok=True)
                    raise _Retry(f"the server answered range {info.get('Content-Range')!r} to bytes={offset}-")
                total = int(m.group(2)) if m.group(2) != "*" else None
            else:  # a full answer (also a server that ignores Range): restart the file cleanly
                offset = 0
            if total is None and length is not None and length.isdigit():
                total = offset + int(length)
            try:
                f = open(part, "ab" if offset else "wb")
            except OSError as exc:
                raise _WriteError(exc) from exc
            with f:
                while block := resp.read(CHUNK):
                    try:
                        f.write(block)
                    except OSError as exc:
                        raise _WriteError(exc) from exc
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:  # the range is past the end: the kept part is not this file
            part.unlink(missing_ok=True)
            raise _Retry("the server refused to resume (HTTP 416); restarting from byte 0") from exc
        if exc.code >= 500 or exc.code == 429:
            raise _Retry(f"HTTP {exc.code} {exc.reason}") from exc
        raise _Final(f"HTTP {exc.code} {exc.reason}") from exc
    except (OSError, http.client.HTTPException) as exc:  # timeouts, resets, refused, TLS, malformed answers
        reason = getattr(exc, "reason", None) or exc
        if isinstance(reason, FileNotFoundError):
            raise _Final(f"no such file ({reason.filename or url})") from exc
        if isinstance(reason, TimeoutError) or "timed out" in str(reason):
            reason = "no answer (timed out)"
        raise _Retry(str(reason) or type(exc).__name__) from exc
    size = part.stat().st_size
    if total is not None and size < total:
        raise _Retry(f"the connection closed after {size:,} of {total:,} bytes")
    return offset


def download_part(
    url: str, part: Path, *, opener: Opener, log: Callable[[str], None] = print, mirror: str | None = None,
) -> bool:  # fmt: skip
    """Download ``url`` (or its copy under ``mirror``) completely into ``part``; True if bytes kept from an
    earlier attempt or run were reused (the caller may then retry once from byte 0 on a checksum mismatch).

    On failure raises one :class:`DownloadError`; ``part`` keeps what arrived, so the same command resumes.
    """
    policy = fetch_policy()
    source = mirrored(url, mirror)
    part.parent.mkdir(parents=True, exist_ok=True)
    resumed = False
    reason = ""
    for attempt in range(1, policy.attempts + 1):
        try:
            resumed |= _attempt(source, part, opener) > 0
            return resumed
        except _Retry as exc:
            reason = str(exc)
        except _Final as exc:
            raise _failed(url, source, mirror, str(exc), part, 1, final=True) from None
        except _WriteError as err:
            exc = err.exc
            raise DownloadError(
                f"cannot write {part} while downloading {source}: {exc.strerror or exc}",
                "free disk space (or fix the folder's permissions) and run the same command again; it resumes",
            ) from None
        if attempt < policy.attempts:
            wait = policy.backoff * 2 ** (attempt - 1)
            kept = part.stat().st_size if part.is_file() else 0
            log(f"  {source}: attempt {attempt}/{policy.attempts} failed ({reason}); retrying in {wait:g} s"
                + (f", resuming at byte {kept:,}" if kept else ""))  # fmt: skip
            time.sleep(wait)
    raise _failed(url, source, mirror, reason, part, policy.attempts)


def _failed(
    url: str, source: str, mirror: str | None, reason: str, part: Path, attempts: int, *, final: bool = False
) -> DownloadError:  # fmt: skip
    """The one error of a failed download: the URL, why, what was kept, and the mirror setting."""
    kept = part.stat().st_size if part.is_file() else 0
    where = f"{source} (mirror {MIRROR_ENV}={mirror}; official {url})" if mirror else source
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    keep = f"; {kept:,} bytes kept in {part}, the same command resumes from there" if kept else ""
    held = urlsplit(url).netloc + urlsplit(url).path
    if mirror:
        fix = f"check that the mirror holds {held} (and is reachable), or unset {MIRROR_ENV} to use the official host"
    elif final:
        fix = f"the file is not served there: set {MIRROR_SETTING} to a mirror holding {held}"
    else:
        fix = f"check the network and run the same command again, or set {MIRROR_SETTING} to a mirror holding it"
    return DownloadError(f"download of {where} failed{tries}: {reason}{keep}", fix)
