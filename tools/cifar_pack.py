"""Move the CIFAR pickles to a machine that can only receive a small upload, losslessly, and prove it.

A lent GPU machine (docs/performance.md) receives the working tree and at most 64 MiB per call; CIFAR-10's
pickles are 184 MB and compress to 75 % with xz. Each image is stored instead as a lossless WebP (58 % of the
raw bytes on CIFAR-10), and the pickle around the image array is kept with that array zeroed (xz: a few kB).
``unpack`` decodes the images, writes them back into the pickle at the recorded offset and checks the
result's sha256 against the one recorded when packing, then against ``MANIFEST.sha256`` when one is given:
the files loaded on the other side are byte for byte the checked ones, or nothing is written.

    python tools/cifar_pack.py pack   --src .cache/data/cifar-10-batches-py --out PACKDIR \\
        --files data_batch_1,data_batch_2 [--files ...]              # one PACKDIR per upload
    python tools/cifar_pack.py unpack --src PACKDIR --out DATA_ROOT/cifar-10-batches-py [--manifest M]

Needs numpy and Pillow (with WebP) on both sides.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import lzma
import os
import pickle
import sys
from functools import partial
from pathlib import Path

import numpy as np

SIDE = 32
PLANE = SIDE * SIDE


def _images_of(path: Path) -> tuple[bytes, int, np.ndarray]:
    """The pickle's bytes, the offset of its image array's raw bytes in them, and the array (N x 3072)."""
    raw = path.read_bytes()
    obj = pickle.loads(raw, encoding="bytes")
    data = np.ascontiguousarray(obj[b"data"], dtype=np.uint8)
    blob = data.tobytes()
    off = raw.find(blob[:4096])
    if off < 0 or raw[off : off + len(blob)] != blob:
        raise SystemExit(f"{path}: the image array is not stored contiguously in the pickle; cannot pack it")
    if raw.find(blob[:4096], off + 1) >= 0:
        raise SystemExit(f"{path}: the image array's first bytes occur twice; cannot place it unambiguously")
    return raw, off, data


def _encode(row: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(row.reshape(3, SIDE, SIDE).transpose(1, 2, 0)).save(
        buf, format="WEBP", lossless=True, quality=100, method=4
    )
    return buf.getvalue()


def _decode(b: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(b)).convert("RGB")).transpose(2, 0, 1).reshape(-1)


def pack(src: Path, out: Path, files: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    index = {}
    for name in files:
        raw, off, data = _images_of(src / name)
        skeleton = bytearray(raw)
        skeleton[off : off + data.nbytes] = bytes(data.nbytes)
        (out / f"{name}.skel.xz").write_bytes(lzma.compress(bytes(skeleton), preset=9))
        encoded = [_encode(r) for r in data]
        lengths = np.array([len(e) for e in encoded], dtype=np.int64)
        (out / f"{name}.webp").write_bytes(b"".join(encoded))
        index[name] = {"offset": off, "rows": int(data.shape[0]), "row_bytes": int(data.shape[1]),
                       "lengths": lengths.tolist(), "sha256": hashlib.sha256(raw).hexdigest(), "size": len(raw)}  # fmt: skip
        print(
            f"{name}: {len(raw):,} B -> {int(lengths.sum()):,} B of WebP ({lengths.sum() / data.nbytes:.0%})"
        )
    (out / "index.json").write_text(json.dumps(index))


def _manifest(path: Path | None) -> dict[str, str]:
    if path is None:
        return {}
    sums = {}
    for line in path.read_text().splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            sums[Path(name.strip().lstrip("*")).name] = digest
    return sums


def unpack(src: Path, out: Path, manifest: Path | None, workers: int | None = None) -> None:
    from concurrent.futures import ProcessPoolExecutor
    from contextlib import ExitStack

    out.mkdir(parents=True, exist_ok=True)
    index = json.loads((src / "index.json").read_text())
    expected = _manifest(manifest)
    workers = workers or os.cpu_count() or 1
    with ExitStack() as stack:
        decode_all = map  # --workers 1: in this process
        if workers > 1:
            pool = stack.enter_context(ProcessPoolExecutor(max_workers=workers))
            decode_all = partial(pool.map, chunksize=500)
        for name, rec in index.items():
            skeleton = bytearray(lzma.decompress((src / f"{name}.skel.xz").read_bytes()))
            blob = (src / f"{name}.webp").read_bytes()
            ends = np.cumsum(rec["lengths"])
            parts = [blob[e - n : e] for e, n in zip(ends, rec["lengths"], strict=True)]
            data = np.stack(list(decode_all(_decode, parts)))
            off = rec["offset"]
            skeleton[off : off + data.nbytes] = data.tobytes()
            digest = hashlib.sha256(skeleton).hexdigest()
            if digest != rec["sha256"] or (name in expected and expected[name] != digest):
                raise SystemExit(
                    f"{src / name}: rebuilt sha256 {digest} differs from the one recorded when packing or in the "
                    "MANIFEST; not written"
                )
            tmp = out / f".{name}.tmp"
            tmp.write_bytes(bytes(skeleton))
            tmp.replace(out / name)
            print(
                f"{name}: rebuilt, sha256 {digest[:16]}... {'= MANIFEST' if name in expected else '(recorded)'}"
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=("pack", "unpack"))
    ap.add_argument("--src", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--files", default="", help="pack: comma-separated pickle names")
    ap.add_argument("--manifest", type=Path, default=None, help="unpack: a MANIFEST.sha256 to check against")
    ap.add_argument(
        "--workers", type=int, default=None, help="unpack: decoding processes (default: all cores)"
    )
    args = ap.parse_args(argv)
    if args.action == "pack":
        pack(args.src, args.out, [f for f in args.files.split(",") if f])
    else:
        unpack(args.src, args.out, args.manifest, args.workers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
