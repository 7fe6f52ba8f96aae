"""EMNIST ByClass (Cohen et al. 2017) from the official gzip IDX release, for fedbabu's App. I (Table 19).

**Which EMNIST.** fedbabu (App. A.2, Table 8) lists EMNIST with 731,668 training and 82,587 validation
images in 62 classes. 731,668 + 82,587 = 814,255, the size of EMNIST *ByClass* (62 classes: digits,
upper- and lower-case letters; ByMerge has the same images in 47 classes), so this loader reads ByClass.
The paper's own train/validation division is not the official one (697,932 / 116,323) and is not
described; neither is how its 1,488 clients (App. I: "approximately 450" images each) were formed, and the
reference code (jhoon-oh/FedBABU) has no EMNIST path. The splits here are the **official** ByClass train
and test, in file order; ``groups`` is None (the gzip release carries no writer ids).

**Layout.** ``<data root>/emnist/gzip/emnist-byclass-{train,test}-{images-idx3,labels-idx1}-ubyte.gz``
and ``emnist-byclass-mapping.txt``: NIST's ``gzip.zip`` (the file torchvision's ``EMNIST`` downloads)
extracted into ``emnist/``, the ``.gz`` files left compressed (they are read with :mod:`gzip`).

**Verification.** NIST publishes an md5 only for ``gzip.zip`` (torchvision's ``EMNIST.md5``); the
download (``flb data fetch emnist``, :mod:`benchmark.data.download`) checks it before extracting and
then records the sha256 of the files read here in ``emnist/gzip/MANIFEST.sha256``. Every load verifies
the files against that manifest before any byte is parsed. Files extracted by hand need the same
manifest lines (the error says so).

**Orientation.** The IDX images are stored transposed (row ``r`` of a stored image is column ``r`` of the
upright character). torchvision's ``EMNIST`` returns them as stored and so does this loader:
``images`` is uint8 ``(N, 28, 28)`` exactly as in the file (``images.transpose(0, 2, 1)`` is upright).
Kept because the paper most likely trained on torchvision's tensors; for a CNN trained from scratch the
transposition is a fixed relabelling of pixel positions, but with fedbabu's horizontal flip augmentation a
flip of the stored image is a *vertical* flip of the character. ``meta["orientation"]`` records this.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path

import numpy as np

from benchmark.data.dataset import DatasetSplit, register_dataset
from benchmark.data.fetch import ensure_present, public_downloader, verify_dataset_files
from benchmark.errors import CacheCorruptError

EMNIST_DEST = "emnist"  # where gzip.zip is extracted (relative to the data root)
EMNIST_FOLDER = "emnist/gzip"  # the folder the zip's ``gzip/`` member becomes
EMNIST_URL = "https://biometrics.nist.gov/cs_links/EMNIST/gzip.zip"
EMNIST_ZIP_MD5 = "58c8d27c78d21e728a6bc7b3cc06412e"  # torchvision.datasets.EMNIST.md5
VARIANT = "byclass"
NUM_CLASSES = 62
#: The official ByClass sizes (Cohen et al. 2017, Table II); documentation, not enforced.
OFFICIAL_SIZES = {"train": 697_932, "test": 116_323}
MAPPING = f"emnist-{VARIANT}-mapping.txt"
IMAGE_MAGIC, LABEL_MAGIC = 0x0803, 0x0801  # IDX: unsigned byte, 3 dims / 1 dim
ORIENTATION = "stored (transposed, as torchvision returns it); images.transpose(0, 2, 1) is upright"
_HOW = (
    "run `flb data fetch emnist` (needs network), or download "
    f"{EMNIST_URL} (md5 {EMNIST_ZIP_MD5}), extract it into DATA_ROOT/{EMNIST_DEST}/ and list the sha256 "
    f"of the files read in DATA_ROOT/{EMNIST_FOLDER}/MANIFEST.sha256"
)


def split_files(split: str) -> tuple[str, str]:
    """The (images, labels) file names of ``split`` (``train`` or ``test``) in ``emnist/gzip/``."""
    prefix = f"emnist-{VARIANT}-{split}"
    return f"{prefix}-images-idx3-ubyte.gz", f"{prefix}-labels-idx1-ubyte.gz"


def _corrupt(path: Path, why: str) -> CacheCorruptError:
    return CacheCorruptError(
        f"cannot read {path}: {why}", f"delete {path.parent} and run `flb data fetch emnist` again"
    )


def read_idx(path: Path, magic: int, ndim: int) -> np.ndarray:
    """A gzip-compressed IDX file of unsigned bytes as a uint8 array of its declared shape.

    Only ever called on a verified file; a malformed one (bad gzip stream, wrong magic, sizes that
    disagree with the data) raises :class:`CacheCorruptError` naming the file.
    """
    try:
        with gzip.open(path, "rb") as f:
            head = f.read(4 + 4 * ndim)
            if len(head) != 4 + 4 * ndim:
                raise _corrupt(path, "truncated header")
            got, *shape = struct.unpack(f">{1 + ndim}I", head)
            if got != magic:
                raise _corrupt(path, f"IDX magic {got:#06x}, expected {magic:#06x}")
            out = np.empty(shape, dtype=np.uint8)
            view, filled = memoryview(out).cast("B"), 0
            while filled < out.nbytes and (n := f.readinto(view[filled:])):
                filled += n
            if filled != out.nbytes or f.read(1):
                raise _corrupt(path, f"data length disagrees with the header's shape {tuple(shape)}")
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise _corrupt(path, str(exc)) from exc
    return out


def read_mapping(path: Path) -> tuple[str, ...]:
    """Class names from ``emnist-byclass-mapping.txt`` (lines ``<label> <ASCII code>``, labels 0..61)."""
    try:
        pairs = [
            tuple(int(v) for v in line.split()) for line in path.read_text().splitlines() if line.strip()
        ]
        names = dict(pairs)
    except (ValueError, TypeError) as exc:
        raise _corrupt(path, f"not '<label> <ascii code>' lines ({exc})") from exc
    if sorted(names) != list(range(NUM_CLASSES)) or len(pairs) != NUM_CLASSES:
        raise _corrupt(path, f"expected labels 0..{NUM_CLASSES - 1} once each, got {len(pairs)} lines")
    return tuple(chr(names[i]) for i in range(NUM_CLASSES))


@register_dataset(
    "emnist",
    num_classes=NUM_CLASSES,
    modality="image",
    expected_layout=(
        f"{EMNIST_FOLDER}/{{emnist-byclass-{{train,test}}-{{images-idx3,labels-idx1}}-ubyte.gz,{MAPPING}}}"
    ),
    source="Cohen et al. 2017 (EMNIST ByClass, NIST gzip release); fedbabu App. A.2 Table 8, App. I Table 19",
)
def load_emnist(root: Path, split: str, download: bool | None = None) -> DatasetSplit:
    """EMNIST ByClass train (697,932) or test (116,323): uint8 ``(N, 28, 28)`` as stored (transposed),
    labels 0..61 (``class_names`` ``'0'..'9', 'A'..'Z', 'a'..'z'`` from the mapping file), file order."""
    images_file, labels_file = split_files(split)
    files = [images_file, labels_file, MAPPING]
    ensure_present(
        root,
        EMNIST_FOLDER,
        files,
        dataset="emnist",
        download=download,
        downloader=public_downloader("emnist"),
        how_to_get=_HOW,
    )
    checksum = verify_dataset_files(root, EMNIST_FOLDER, files)
    folder = root / EMNIST_FOLDER
    class_names = read_mapping(folder / MAPPING)
    images = read_idx(folder / images_file, IMAGE_MAGIC, 3)
    labels = read_idx(folder / labels_file, LABEL_MAGIC, 1).astype(np.int64)
    if len(images) != len(labels):
        raise _corrupt(folder / labels_file, f"{len(labels)} labels for {len(images)} images")
    if labels.size and labels.max() >= NUM_CLASSES:
        raise _corrupt(folder / labels_file, f"label {labels.max()} outside 0..{NUM_CLASSES - 1}")
    return DatasetSplit(
        "emnist",
        split,
        labels,
        class_names,
        checksum,
        images=images,
        meta={"variant": VARIANT, "orientation": ORIENTATION},
    )
