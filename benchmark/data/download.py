"""Verified downloads of the datasets (and torchvision checkpoints) that have a public source.

The one download path of the suite: ``flb data fetch NAME``, the workflow's ``fetch_data`` step and the
loaders' ``download=True`` all call :func:`fetch_files`. For each file of a dataset's :class:`DataSource`:

1. it is downloaded into ``<data root>/.flb-fetch/<name>/<checksum>.<file>.part`` by
   :func:`benchmark.data.transfer.download_part` (connect and read timeouts, bounded retries with back-off,
   HTTP ``Range`` resume, the ``FLB_MIRROR`` / ``--mirror`` setting); a transfer that still fails leaves the
   ``.part`` file there (never under a dataset's folder) and the same command resumes it;
2. once complete, its digest is compared with the **official** checksum (the values torchvision / torchtext
   check, or the pinned published one) before anything is extracted or moved: a mismatch removes the
   ``.part`` file (after one fresh download when the file had been resumed) and raises
   :class:`~benchmark.errors.ChecksumError`, and nothing under the data root changed;
3. only when every file of the source has been verified, archives are extracted into the staging folder
   and then moved into place (a folder that does not exist yet is moved in one rename);
4. files that a local ``MANIFEST.sha256`` vouches for (e.g. the CIFAR-10 rebuild of ``shared/data``) are
   never overwritten, and their manifest lines are never rewritten;
5. annotation files without a per-file official checksum are recorded in ``<folder>/MANIFEST.sha256``, so
   later loads verify them before parsing.

Datasets without a working public download (Stanford Cars, iNaturalist-User-120k) raise one
:class:`~benchmark.errors.DataMissingError` saying where to get them.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from benchmark.data import cifar, emnist, folders, text
from benchmark.data.fetch import manifest_entries
from benchmark.data.registry import dataset_info, load_dataset
from benchmark.data.transfer import Opener, download_part, mirror_base, mirrored, urlopen
from benchmark.errors import BenchmarkError, ChecksumError, DataMissingError, UnknownNameError
from benchmark.io import atomic_write_json, file_digest, sha256_file
from benchmark.paths import data_root

STAGING = ".flb-fetch"


@dataclass(frozen=True)
class Remote:
    """One published file: where it comes from, its official checksum, and where it lands.

    ``dest`` is a folder relative to the data root; an archive (``extract=True``, tar or zip) is unpacked
    into it, a plain file is placed in it under ``filename``.
    """

    url: str
    checksum: str
    algorithm: Literal["md5", "sha256"]
    dest: str
    extract: bool
    checksum_source: str

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class DataSource:
    """How to get one dataset: its remotes, its folder under the data root and the files to record.

    ``record`` lists files (relative to ``folder``) that have no per-file official checksum and are
    therefore recorded in ``<folder>/MANIFEST.sha256`` after the verified archive was extracted.
    """

    folder: str
    remotes: tuple[Remote, ...]
    record: tuple[str, ...] = ()


_TV = "torchvision.datasets"
_CIFAR10 = DataSource(cifar.CIFAR10_FOLDER, (Remote(
    "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz", "c58f30108f718f92721af3b95e74349a", "md5",
    "", True, f"{_TV}.CIFAR10.tgz_md5"),))  # fmt: skip
_CIFAR100 = DataSource(cifar.CIFAR100_FOLDER, (Remote(
    "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz", "eb9058c3a382ffc7106e4002c42a8d85", "md5",
    "", True, f"{_TV}.CIFAR100.tgz_md5"),))  # fmt: skip
_EMNIST = DataSource(emnist.EMNIST_FOLDER, (Remote(
    emnist.EMNIST_URL, emnist.EMNIST_ZIP_MD5, "md5", emnist.EMNIST_DEST, True, f"{_TV}.EMNIST.md5"),),
    record=(*emnist.split_files("train"), *emnist.split_files("test"), emnist.MAPPING))  # fmt: skip
_FLOWERS_URL = "https://www.robots.ox.ac.uk/~vgg/data/flowers/102/"
_FLOWERS = DataSource(folders.FLOWERS_FOLDER, (
    Remote(_FLOWERS_URL + "102flowers.tgz", "52808999861908f626f3c1f4e79d11fa", "md5", folders.FLOWERS_FOLDER,
           True, f"{_TV}.Flowers102._file_dict"),
    *(Remote(_FLOWERS_URL + name, md5, "md5", folders.FLOWERS_FOLDER, False, f"{_TV}.Flowers102._file_dict")
      for name, md5 in folders.FLOWERS_MD5.items()),
))  # fmt: skip
_EUROSAT = DataSource(folders.EUROSAT_FOLDER, (Remote(
    "https://huggingface.co/datasets/torchgeo/eurosat/resolve/c877bcd43f099cd0196738f714544e355477f3fd/EuroSAT.zip",
    "c8fa014336c82ac7804f0398fcb19387", "md5", folders.EUROSAT_FOLDER, True, f"{_TV}.EuroSAT.download"),))  # fmt: skip
_CUB = DataSource(folders.CUB_FOLDER, (Remote(
    folders.CUB_URL, folders.CUB_TGZ_MD5, "md5", "", True, "tgz_md5 of legate2023's Cub2011 loader"),),
    record=folders.CUB_FILES)  # fmt: skip
_IMAGENET_R = DataSource(folders.IMAGENET_R_FOLDER, (Remote(
    folders.IMAGENET_R_URL, folders.IMAGENET_R_MD5, "md5", "", True, "the md5 ImageNet-R loaders check (e.g. pytorch-ood)"),))  # fmt: skip
_AG_URL = "https://raw.githubusercontent.com/mhjabreel/CharCnn_Keras/master/data/ag_news_csv/"
_AG_NEWS = DataSource(text.AG_FOLDER, tuple(
    Remote(_AG_URL + name, md5, "md5", text.AG_FOLDER, False, "torchtext.datasets.AG_NEWS MD5")
    for name, md5 in text.AG_MD5.items()
))  # fmt: skip
_SST2 = DataSource(text.SST2_FOLDERS[0], (Remote(
    text.SST2_URL, text.SST2_ZIP_MD5, "md5", "text", True, "torchtext.datasets.SST2 MD5"),),
    record=("train.tsv", "dev.tsv", "test.tsv"))  # fmt: skip
_SST5 = DataSource(text.SST5_FOLDERS[1], (Remote(
    text.SST5_URL, text.SST5_ZIP_SHA256, "sha256", "text", True, "Flux.jl Data.Sentiment (789,539 bytes)"),),
    record=("train.txt", "dev.txt", "test.txt"))  # fmt: skip
_MNLI = DataSource(text.MNLI_FOLDERS[0], (Remote(
    text.MNLI_URL, text.MNLI_ZIP_SHA256, "sha256", "text", True,
    "Hugging Face datasets glue/dataset_infos.json (312,783,507 bytes)"),),
    record=tuple(f"{s}.tsv" for s in text.MNLI_SPLITS))  # fmt: skip

#: Registry name -> its public source (datasets sharing files share the source).
SOURCES: dict[str, DataSource] = {
    "cifar10": _CIFAR10, "cifar100": _CIFAR100, "flowers102": _FLOWERS, "eurosat": _EUROSAT,
    "eurosat_sub": _EUROSAT, "cub200": _CUB, "imagenet_r": _IMAGENET_R, "ag_news": _AG_NEWS, "sst2": _SST2,
    "sst5": _SST5, "mnli": _MNLI, "emnist": _EMNIST,
}  # fmt: skip

#: Registry name -> where to get a dataset that has no working public download.
NO_DOWNLOAD: dict[str, str] = {
    "stanford_cars": folders._HOW_CARS,
    "inat_user_120k": folders._HOW_INAT,
}


def data_source(name: str) -> DataSource:
    """The public source of dataset ``name``; one clear error when it has none."""
    if name in SOURCES:
        return SOURCES[name]
    if name in NO_DOWNLOAD:
        raise DataMissingError(f"{name} has no public download", NO_DOWNLOAD[name])

    dataset_info(name)  # unknown names: the registry's error, listing the valid ones
    raise DataMissingError(
        f"{name} has no download source in {__name__}.SOURCES", "put its files in the data root"
    )


def fetch_command(name: str, root: str | Path | None = None) -> str:
    """The command that downloads ``name`` (what a NOT RUN reason tells the user to run)."""
    return f"flb data fetch {name}" + (f" --data-root {root}" if root else "")


# ------------------------------------------------------------------------------------------ download


#: How a URL is opened (:func:`benchmark.data.transfer.urlopen`: urllib with the connect and read
#: timeouts); tests may inject another.
URLOPEN: Opener = urlopen


def _download_checked(
    url: str, part: Path, accept: Callable[[str], bool], digest_of: Callable[[Path], str],
    *, log: Callable[[str], None], mirror: str | None,
) -> str:  # fmt: skip
    """Download ``url`` completely into ``part`` and return its digest; ``part`` is removed unless ``accept``
    takes the digest. A file completed from bytes of an earlier attempt or run that does not verify is
    downloaded once more from byte 0 before it is refused."""
    resumed = download_part(url, part, opener=URLOPEN, log=log, mirror=mirror)
    got = digest_of(part)
    if not accept(got) and resumed:
        log(f"  {mirrored(url, mirror)}: the resumed file does not verify; downloading it again from byte 0")
        part.unlink(missing_ok=True)
        download_part(url, part, opener=URLOPEN, log=log, mirror=mirror)
        got = digest_of(part)
    if not accept(got):
        part.unlink(missing_ok=True)  # the caller raises, naming both digests
    return got


def download_verified(
    remote: Remote, dest: Path, *, log: Callable[[str], None] = print, mirror: str | None = None
) -> str:  # fmt: skip
    """Download ``remote.url`` completely into ``dest`` (a ``.part`` path, resumed if it exists) and return
    its digest once it equals the official checksum.

    A transfer failure raises :class:`~benchmark.data.transfer.DownloadError` and keeps ``dest`` for the next
    try; a checksum mismatch removes ``dest`` and raises :class:`ChecksumError` naming the URL.
    """
    got = _download_checked(remote.url, dest, lambda d: d == remote.checksum,
                            lambda p: file_digest(p, remote.algorithm), log=log, mirror=mirror)  # fmt: skip
    if got != remote.checksum:
        raise ChecksumError(
            f"{remote.algorithm} mismatch for {mirrored(remote.url, mirror)}: official {remote.checksum} "
            f"({remote.checksum_source}), downloaded file has {got}; nothing was written to the data root",
            "retry (the transfer may have been corrupted); if it persists the upstream file (or the mirror's "
            "copy) changed",
        )
    return got


def _extract(archive: Path, into: Path) -> None:
    """Unpack a tar (any compression) or zip archive into ``into``, refusing paths that leave it."""
    into.mkdir(parents=True, exist_ok=True)
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            base = into.resolve()
            for member in zf.namelist():
                if not (into / member).resolve().is_relative_to(base):
                    raise ChecksumError(
                        f"{archive}: member {member!r} leaves the archive folder", "do not use it"
                    )
            zf.extractall(into)
    else:
        with tarfile.open(archive) as tf:
            tf.extractall(into, filter="data")


def _vouched(root: Path, folders_: set[str]) -> set[str]:
    """Paths (relative to ``root``) that a local manifest vouches for, in ``folders_`` or the root one."""
    out: set[str] = set()
    for folder in folders_ | {""}:
        out |= set(manifest_entries(root, folder))
    return out


def _install(src: Path, dest: Path, root: Path, vouched: set[str], kept: list[str]) -> None:
    """Move ``src`` (file or folder) onto ``dest``; never replace a file listed in ``vouched``."""
    rel = dest.relative_to(root).as_posix()
    if src.is_dir() and not dest.exists() and not any(v.startswith(rel + "/") for v in vouched):
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dest)  # a new folder: one rename
        return
    if src.is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        for child in sorted(src.iterdir()):
            _install(child, dest / child.name, root, vouched, kept)
        return
    if rel in vouched and dest.exists():
        kept.append(rel)
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(src, dest)


def _part_name(remote: Remote) -> str:
    """The ``.part`` file of ``remote`` in the staging folder, named by its official checksum, so that a
    partial download is only ever resumed into the file it belongs to."""
    return f"{remote.checksum}.{remote.filename}.part"


def _clear_staging(staging: Path, keep: set[str]) -> None:
    """Remove everything in ``staging`` but the ``.part`` files named in ``keep`` (and ``staging`` itself
    once empty)."""
    if not staging.is_dir():
        return
    for child in staging.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        elif child.name not in keep:
            child.unlink(missing_ok=True)
    try:
        staging.rmdir()
    except OSError:
        pass


def fetch_files(
    name: str, root: str | Path, *, log: Callable[[str], None] = print, mirror: str | None = None
) -> list[str]:  # fmt: skip
    """Download, verify and install the public files of ``name`` under ``root``.

    Returns the paths (relative to ``root``) that a manifest vouches for and that were therefore kept
    as they were. Raises :class:`DataMissingError` for datasets without a public download. ``mirror``
    (else ``$FLB_MIRROR``): the base URL files are fetched from instead of their official hosts. A
    transfer that fails keeps its ``.part`` file under ``<root>/.flb-fetch/<name>/`` for the next run to
    resume; nothing else stays behind.
    """
    source = data_source(name)
    if os.environ.get("FLB_OFFLINE", "") not in ("", "0"):
        raise DataMissingError(
            f"{name}: not downloading, FLB_OFFLINE={os.environ['FLB_OFFLINE']}",
            f"unset FLB_OFFLINE where there is network and run `{fetch_command(name, root)}`",
        )
    mirror = mirror_base(mirror)
    root = Path(root).absolute()
    root.mkdir(parents=True, exist_ok=True)
    staging = root / STAGING / name
    parts = {_part_name(r) for r in source.remotes}
    _clear_staging(staging, parts)  # partial downloads of these very files are resumed
    kept: list[str] = []
    done = False
    try:
        fetched = []
        for remote in source.remotes:  # 1. every file verified before any is used
            tmp = staging / _part_name(remote)
            if tmp.is_file() and file_digest(tmp, remote.algorithm) == remote.checksum:
                log(f"{name}: {remote.filename} already downloaded")
            else:
                log(f"{name}: downloading {mirrored(remote.url, mirror)}")
                download_verified(remote, tmp, log=log, mirror=mirror)
            log(
                f"{name}: {remote.filename} {remote.algorithm} {remote.checksum} verified ({remote.checksum_source})"
            )
            fetched.append((remote, tmp))
        unpacked = []
        for i, (remote, tmp) in enumerate(fetched):  # 2. extracted inside the staging folder
            if remote.extract:
                out = staging / f"x{i}"
                _extract(tmp, out)
                unpacked.append((remote, out))
            else:
                out = staging / f"f{i}"
                out.mkdir()
                os.replace(tmp, out / remote.filename)
                unpacked.append((remote, out))
        dests = {r.dest for r in source.remotes} | {source.folder}
        vouched = _vouched(root, {d for d in dests if d})
        for remote, out in unpacked:  # 3. moved into place, manifest-vouched files kept
            for child in sorted(out.iterdir()):
                _install(child, root / remote.dest / child.name, root, vouched, kept)
        record = [f for f in source.record if f"{source.folder}/{f}" not in vouched
                  and (root / source.folder / f).is_file()]  # fmt: skip
        if record:
            folders.record_manifest(root, source.folder, record)
        done = True
    finally:
        _clear_staging(staging, set() if done else parts)
        try:
            (root / STAGING).rmdir()
        except OSError:
            pass
    for rel in kept:
        log(f"{name}: kept {rel} (vouched for by MANIFEST.sha256; not overwritten)")
    return kept


# --------------------------------------------------------------------------------- dataset identity


def verified_identity(name: str, root: str | Path | None = None) -> dict[str, Any]:
    """Load every split of ``name`` without downloading (verifying it) and return its identity."""
    info = dataset_info(name)
    splits = {}
    for split in info.splits:
        d = load_dataset(name, split, root, download=False)
        splits[split] = {"checksum": d.checksum, "samples": len(d)}
    return {"dataset": name, "splits": splits}


def fetch_dataset(
    name: str, root: str | Path | None = None, *, marker: str | Path | None = None,
    log: Callable[[str], None] = print, mirror: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """``flb data fetch NAME``: use the dataset if it verifies, else download it; write ``marker``.

    The marker (``results/data/<name>.json`` in the workflow) records the data root, the verified
    identity of every split and the sources used (and the mirror, when one was used).
    """
    root_path = data_root(root).absolute()
    downloaded, kept = False, []
    try:
        identity = verified_identity(name, root_path)
    except DataMissingError:
        mirror = mirror_base(mirror)
        kept = fetch_files(name, root_path, log=log, mirror=mirror)
        downloaded = True
        identity = verified_identity(name, root_path)
    src = SOURCES.get(name)
    record = {
        **identity,
        "data_root": str(root_path),
        "downloaded": downloaded,
        "kept_vouched": kept,
        "sources": [
            {"url": r.url, r.algorithm: r.checksum, "checksum_source": r.checksum_source}
            for r in (src.remotes if src else ())
        ],
        "verified_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if downloaded and mirror:
        record["mirror"] = mirror
    if marker:
        atomic_write_json(marker, record)
    return record


# ------------------------------------------------------------------------------- torchvision weights


def download_checkpoint(
    url: str, path: Path, prefix: str, *, log: Callable[[str], None] = print, mirror: str | None = None,
    label: str | None = None,
) -> None:  # fmt: skip
    """Download a torchvision checkpoint ``url`` to ``path`` (the torch hub cache) with this module's timeouts,
    retries and resume: into ``.<name>.part`` beside it (kept for the next run after a failed transfer), renamed
    into place only when its sha256 starts with ``prefix``. ``flb data fetch --weights`` and a backbone that
    finds its checkpoint missing both come here (never ``torch.hub``'s download, which has no timeout)."""
    mirror = mirror_base(mirror)
    log(f"{label or path.name}: downloading {mirrored(url, mirror)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.part"
    _download_prefix(url, tmp, prefix, log=log, mirror=mirror)
    os.replace(tmp, path)


def _download_prefix(
    url: str, dest: Path, prefix: str, *, log: Callable[[str], None] = print, mirror: str | None = None
) -> None:  # fmt: skip
    """Download into ``dest`` and check that its sha256 starts with ``prefix`` (torchvision's convention);
    on a mismatch ``dest`` is removed and :class:`ChecksumError` names the URL."""
    got = _download_checked(url, dest, lambda d: d.startswith(prefix), sha256_file, log=log, mirror=mirror)
    if not got.startswith(prefix):
        raise ChecksumError(
            f"sha256 mismatch for {mirrored(url, mirror)}: torchvision's file name says {prefix}..., download has "
            f"{got[:12]}...; nothing was written to the torch hub cache",
            "retry (the transfer may have been corrupted)",
        )


# --------------------------------------------------------------------------------------------- status


@dataclass(frozen=True)
class DatasetStatus:
    """What ``flb data list`` shows for one dataset."""

    name: str
    state: Literal["present", "downloadable", "no_download", "invalid"]
    detail: str


def dataset_status(name: str, root: str | Path | None = None) -> DatasetStatus:
    """Present and verified / absent with a download / absent without one / present but not verifying."""
    try:
        identity = verified_identity(name, root)
    except DataMissingError as err:
        if name in SOURCES:
            return DatasetStatus(name, "downloadable", f"absent; get it with `{fetch_command(name, root)}`")
        return DatasetStatus(
            name, "no_download", f"absent, no public download: {NO_DOWNLOAD.get(name, err.fix)}"
        )
    except UnknownNameError:
        raise
    except BenchmarkError as err:
        return DatasetStatus(name, "invalid", f"present but does not verify: {err}")
    n = ", ".join(f"{s} {v['samples']}" for s, v in identity["splits"].items())
    return DatasetStatus(name, "present", f"present, verified ({n})")
