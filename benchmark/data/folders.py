"""Image datasets read from folders of image files: Flowers102, CUB-200-2011, Stanford Cars, EuroSAT,
legate2023's EuroSAT-Sub, ImageNet-R and iNaturalist-User-120k.

Each loader returns ``DatasetSplit(paths=...)``: the image files are decoded lazily by the feature
extractor. Layouts under the data root (each loader's docstring says which paper code it follows):

========================  ===========================================================================
``flowers102``            ``flowers-102/{jpg/image_NNNNN.jpg, imagelabels.mat, setid.mat}`` (torchvision)
``cub200``                ``CUB_200_2011/{images/, images.txt, image_class_labels.txt,
                          train_test_split.txt, classes.txt}`` (the official tgz, extracted)
``stanford_cars``         ``stanford_cars/{cars_train/, cars_test/, devkit/cars_train_annos.mat,
                          devkit/cars_meta.mat, cars_test_annos_withlabels.mat}`` (torchvision)
``eurosat``/``_sub``      ``eurosat/2750/<Class>/<Class>_N.jpg`` (torchvision, RGB version)
``imagenet_r``            ``imagenet-r/<wnid>/<image>`` (the official tar, extracted); or pre-split
                          ``imagenet-r/{train,test}/<wnid>/<image>`` (what FedCOF's code expects)
``inat_user_120k``        ``inat/inaturalist-user-120k/{federated_train_user_120k.csv, test.csv}`` and
                          ``inat/train_val_images/**/<image_id>.jpg`` (FedCOF's layout; iNat 2017 images)
========================  ===========================================================================

**Verification and identity.** Annotation files (``.mat``, ``.txt``, ``.csv``) are verified with
:func:`benchmark.data.fetch.verify_dataset_files` (a ``MANIFEST.sha256`` beside the data, or the official
md5 where one is published) *before* they are parsed; ``scipy.io.loadmat`` never sees an unverified file.
The image files are not hashed on every load (tens of thousands of files): a split's ``checksum`` is

    sha256( "flb-folder-v1" + dataset/split rule + combined digest of the verified annotation files
            + one line "<path relative to the data root> TAB <size in bytes> TAB <label>" per sample,
              in split order )

so it changes when any file read, its size, its label, the order or the split rule changes. Image files
that a manifest lists are additionally verified by content (sha256) and their digest enters the line;
list every image in ``MANIFEST.sha256`` to make the identity content-exact.

Downloads (only when the files are absent and ``download`` allows it, or ``flb data fetch NAME``) go
through :mod:`benchmark.data.download`: the files torchvision downloads for Flowers102 and EuroSAT, the
official archives of CUB-200-2011 and ImageNet-R, each checked against its official md5 *before* it is
extracted; CUB's extracted annotation files are then recorded in ``<folder>/MANIFEST.sha256``.
Stanford Cars (upstream URL dead) and iNaturalist-User-120k (images from the iNat 2017 competition) have
no automatic download: the error says what to fetch from where.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.data.dataset import DatasetSplit, register_dataset
from benchmark.data.fetch import (
    ensure_present,
    manifest_checked,
    manifest_entries,
    public_downloader,
    verify_dataset_files,
)
from benchmark.errors import CacheCorruptError, ConfigError, DataMissingError
from benchmark.io import atomic_write_text, file_digest, read_manifest, sha256_bytes
from benchmark.seeding import check_seed, numpy_rng

IDENTITY_VERSION = "flb-folder-v1"

FLOWERS_FOLDER = "flowers-102"
FLOWERS_MD5 = {  # torchvision.datasets.Flowers102._file_dict
    "imagelabels.mat": "e0620be6f572b9609742df49c70aed4d",
    "setid.mat": "a5357ecc9cb78c4bef273ce3793fc85c",
}
CUB_FOLDER = "CUB_200_2011"
CUB_URL = "https://data.caltech.edu/records/65de6-vp158/files/CUB_200_2011.tgz"
CUB_TGZ_MD5 = "97eceeb196236b17998738112f37df78"
CUB_FILES = ("images.txt", "image_class_labels.txt", "train_test_split.txt", "classes.txt")
CARS_FOLDER = "stanford_cars"
CARS_MD5 = {"cars_test_annos_withlabels.mat": "b0a2b23655a3edd16d84508592a98d10"}  # torchvision <= 0.15
EUROSAT_FOLDER = "eurosat"
EUROSAT_CLASSES = (
    "AnnualCrop", "Forest", "HerbaceousVegetation", "Highway", "Industrial",
    "Pasture", "PermanentCrop", "Residential", "River", "SeaLake",
)  # fmt: skip
EUROSAT_SUB_SEED = 0
IMAGENET_R_FOLDER = "imagenet-r"
IMAGENET_R_URL = "https://people.eecs.berkeley.edu/~hendrycks/imagenet-r.tar"
IMAGENET_R_MD5 = "a61312130a589d0ca1a8fca1f2bd3337"
IMAGENET_R_SEED = 0
IMAGENET_R_TEST_FRACTION = 0.2
INAT_FOLDER = "inat"
INAT_CSV = {
    "train": "inaturalist-user-120k/federated_train_user_120k.csv",
    "test": "inaturalist-user-120k/test.csv",
}
INAT_IMAGES = "train_val_images"
INAT_NUM_CLASSES = 1203

_HOW_FLOWERS = (
    "run `flb data fetch flowers102` (needs network) or fetch 102flowers.tgz, imagelabels.mat and setid.mat from "
    "https://www.robots.ox.ac.uk/~vgg/data/flowers/102/ into flowers-102/ (images extracted to flowers-102/jpg/)"
)
_HOW_CUB = (
    f"run `flb data fetch cub200` (needs network), or download {CUB_URL} (md5 {CUB_TGZ_MD5}) and extract it "
    f"in the data root, then list the four .txt files in {CUB_FOLDER}/MANIFEST.sha256"
)
_HOW_CARS = (
    "Stanford Cars cannot be downloaded automatically: its original URL (ai.stanford.edu/~jkrause/cars) is "
    "dead and torchvision.datasets.StanfordCars no longer downloads it; get cars_train/, cars_test/, "
    "devkit/ (car_devkit.tgz) and cars_test_annos_withlabels.mat from a mirror (e.g. the Kaggle copy of the "
    "dataset) into stanford_cars/ in torchvision's layout and list devkit/*.mat in MANIFEST.sha256"
)
_HOW_EUROSAT = (
    "run `flb data fetch eurosat` (needs network) or extract EuroSAT.zip (RGB, md5 "
    "c8fa014336c82ac7804f0398fcb19387) so that eurosat/2750/<Class>/*.jpg exist"
)
_HOW_IMAGENET_R = (
    f"run `flb data fetch imagenet_r` (needs network), or download {IMAGENET_R_URL} (md5 {IMAGENET_R_MD5}) and extract it in the data root so that "
    "imagenet-r/<wnid>/*.jpg exist (200 class folders)"
)
_HOW_INAT = (
    "no automatic download: get the split CSVs from "
    "http://storage.googleapis.com/gresearch/federated-vision-datasets/inaturalist-user-120k.zip "
    "(google-research/federated_vision_datasets) into inat/inaturalist-user-120k/ and list them in "
    "MANIFEST.sha256, and the iNaturalist 2017 train_val_images "
    "(https://github.com/visipedia/inat_comp/tree/master/2017) into inat/train_val_images/"
)


# ------------------------------------------------------------------------------------------ helpers


def record_manifest(root: Path, folder: str, files: Iterable[str]) -> None:
    """Add the sha256 of ``root/folder/<file>`` to ``root/folder/MANIFEST.sha256`` (merged, atomic).

    Called by the downloaders right after an md5-checked archive was extracted, so later loads can
    verify the extracted annotation files that have no published checksum of their own.
    """
    dest = root / folder / "MANIFEST.sha256"
    entries = read_manifest(dest) if dest.is_file() else {}
    for name in files:
        entries[name] = file_digest(root / folder / name, "sha256")
    text = "".join(f"{digest}  {name}\n" for name, digest in sorted(entries.items()))
    atomic_write_text(dest, "# sha256 recorded after a verified download\n" + text)


def _loadmat(path: Path) -> dict[str, Any]:
    """``scipy.io.loadmat(path, squeeze_me=True)``; only ever called on a verified file."""
    from scipy.io import loadmat  # local: heavy import (scipy)

    try:
        return loadmat(str(path), squeeze_me=True)
    except Exception as exc:  # a verified file that still fails to parse
        raise CacheCorruptError(f"cannot read {path}: {exc}", "delete it and re-create the data") from exc


def read_verified_text(path: Path) -> str:
    """The text of an annotation or data file; only ever called on a verified file."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CacheCorruptError(f"cannot read {path}: {exc}", "delete it and re-create the data") from exc


def bad_file(path: Path, why: str) -> CacheCorruptError:
    """The one-line error for a verified file whose content is not what its loader expects."""
    return CacheCorruptError(
        f"{path}: {why}", "the file does not have the expected content; re-create the data"
    )


def _check_num_classes(dataset: str, found: int, expected: int, where: Path) -> None:
    if found != expected:
        raise DataMissingError(
            f"{dataset}: found {found} classes in {where}, expected {expected}",
            "the copy is incomplete or not this dataset; re-download or re-extract it",
        )


_CORRUPT_IMAGE = "the image is corrupt or not the listed version; re-download it"


def folder_identity(
    root: Path,
    folder: str,
    dataset: str,
    rule: str,
    annotations: str,
    paths: Sequence[Path],
    labels: np.ndarray,
) -> str:
    """The ``checksum`` of a folder split (see the module docstring); raises if a listed file is absent.

    ``folder`` is the dataset's folder under ``root`` (its manifest applies), ``annotations`` the combined digest of the verified annotation files (``""`` when there are none),
    ``rule`` names the split rule (e.g. ``"setid.mat:tstid"`` or ``"seed=0 test_fraction=0.2"``).
    """
    manifest = manifest_entries(root, folder)
    lines = [IDENTITY_VERSION, f"{dataset} {rule}", f"annotations {annotations}"]
    missing: list[str] = []
    for path, label in zip(paths, labels.tolist(), strict=True):
        rel = path.relative_to(root).as_posix()
        try:
            size = path.stat().st_size
        except OSError:
            missing.append(rel)
            continue
        line = f"{rel}\t{size}\t{label}"
        if rel in manifest:
            line += f"\t{manifest_checked(path, manifest[rel], _CORRUPT_IMAGE)}"
        lines.append(line)
    if missing:
        shown = ", ".join(missing[:3]) + (f" (+{len(missing) - 3} more)" if len(missing) > 3 else "")
        raise DataMissingError(
            f"{dataset}: {len(missing)} image file(s) named by the annotations are missing under {root}: {shown}",
            "the copy is incomplete; re-download or re-extract it",
        )
    return sha256_bytes("\n".join(lines).encode())


def _image_folder(directory: Path, dataset: str) -> tuple[list[str], list[Path], np.ndarray]:
    """``torchvision.datasets.ImageFolder``'s classes and samples (same order), without opening images."""
    # local: heavy import (torchvision)
    from torchvision.datasets.folder import IMG_EXTENSIONS, find_classes, make_dataset

    try:
        classes, class_to_idx = find_classes(directory)
        samples = make_dataset(directory, class_to_idx, extensions=IMG_EXTENSIONS)
    except FileNotFoundError as exc:
        raise DataMissingError(
            f"{dataset}: {exc}".replace("\n", " "), "re-download or re-extract it"
        ) from exc
    paths = [Path(p) for p, _ in samples]
    labels = np.asarray([y for _, y in samples], dtype=np.int64)
    return classes, paths, labels


def _split(name: str, split: str, labels: np.ndarray, classes: Sequence[str], checksum: str,
           paths: Sequence[Path], **kw: Any) -> DatasetSplit:  # fmt: skip
    return DatasetSplit(name, split, labels, tuple(classes), checksum, paths=tuple(paths), **kw)


# ---------------------------------------------------------------------------------------- Flowers102


@register_dataset(
    "flowers102",
    num_classes=102,
    modality="image",
    expected_layout=f"{FLOWERS_FOLDER}/{{jpg/image_NNNNN.jpg,imagelabels.mat,setid.mat}}",
    source="Nilsback & Zisserman 2008; legate2023 Table 1 (torchvision Flowers102 train/test, 'val' unused)",
)
def load_flowers102(root: Path, split: str, download: bool | None = None) -> DatasetSplit:
    """Oxford Flowers-102 as legate2023's code loads it: ``torchvision.datasets.Flowers102(split=...)``.

    ``train`` = setid.mat ``trnid`` (1,020 images), ``test`` = ``tstid`` (6,149); the ``valid`` ids are
    not used (legate2023 ``utils.py:build_data_provider``). Order and labels are torchvision's (the
    order of the ids in setid.mat, labels from imagelabels.mat minus 1).
    """
    root = root.absolute()
    ann = ["imagelabels.mat", "setid.mat"]
    ensure_present(
        root, FLOWERS_FOLDER, [*ann, "jpg"], dataset="flowers102", download=download,
        downloader=public_downloader("flowers102"), how_to_get=_HOW_FLOWERS,
    )  # fmt: skip
    digest = verify_dataset_files(root, FLOWERS_FOLDER, ann, FLOWERS_MD5)
    base = root / FLOWERS_FOLDER
    key = {"train": "trnid", "test": "tstid"}[split]
    setid = _loadmat(base / "setid.mat")
    image_labels = np.atleast_1d(_loadmat(base / "imagelabels.mat").get("labels", np.array([])))
    if key not in setid:
        raise bad_file(base / "setid.mat", f"no '{key}' entry")
    ids = np.atleast_1d(setid[key]).astype(np.int64)
    if ids.size and (ids.min() < 1 or ids.max() > image_labels.size):
        raise bad_file(base / "setid.mat", "image ids outside imagelabels.mat")
    labels = image_labels.astype(np.int64)[ids - 1] - 1
    from torchvision.datasets.flowers102 import Flowers102  # the class itself, even if tvd is patched

    classes = tuple(Flowers102.classes)
    if labels.size and (labels.min() < 0 or labels.max() >= len(classes)):
        raise bad_file(base / "imagelabels.mat", f"labels outside 1..{len(classes)}")
    paths = [base / "jpg" / f"image_{i:05d}.jpg" for i in ids.tolist()]
    checksum = folder_identity(root, FLOWERS_FOLDER, "flowers102", f"setid.mat:{key}", digest, paths, labels)
    return _split(
        "flowers102", split, labels, classes, checksum, paths, meta={"split_rule": f"setid.mat:{key}"}
    )


# -------------------------------------------------------------------------------------- CUB-200-2011


def _cub_table(path: Path, columns: int) -> list[list[str]]:
    rows = []
    for lineno, line in enumerate(read_verified_text(path).splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(" ", columns - 1)
        if len(parts) != columns:
            raise bad_file(path, f"line {lineno} has {len(parts)} fields, expected {columns}")
        rows.append(parts)
    return rows


@register_dataset(
    "cub200",
    num_classes=200,
    modality="image",
    expected_layout=f"{CUB_FOLDER}/{{images/,{','.join(CUB_FILES)}}}",
    source="Wah et al. 2011; legate2023 Table 1, fedcof Table 3 (train_test_split.txt)",
)
def load_cub200(root: Path, split: str, download: bool | None = None) -> DatasetSplit:
    """CUB-200-2011 as legate2023's ``cub2011_dataset.py:Cub2011`` (also FedCOF's) loads it.

    ``train`` = images with ``is_training_img == 1`` in train_test_split.txt (5,994), ``test`` = 0
    (5,794), in images.txt order; label = image_class_labels.txt target minus 1; class names are the
    second column of classes.txt (e.g. ``001.Black_footed_Albatross``).
    """
    root = root.absolute()
    ensure_present(
        root, CUB_FOLDER, [*CUB_FILES, "images"], dataset="cub200", download=download,
        downloader=public_downloader("cub200"), how_to_get=_HOW_CUB,
    )  # fmt: skip
    digest = verify_dataset_files(root, CUB_FOLDER, list(CUB_FILES))
    base = root / CUB_FOLDER
    images = {int(i): p for i, p in _cub_table(base / "images.txt", 2)}
    targets = {int(i): int(t) for i, t in _cub_table(base / "image_class_labels.txt", 2)}
    is_train = {int(i): int(t) for i, t in _cub_table(base / "train_test_split.txt", 2)}
    classes = [name for _, name in _cub_table(base / "classes.txt", 2)]
    _check_num_classes("cub200", len(classes), 200, base / "classes.txt")
    want = 1 if split == "train" else 0
    ids = [i for i in images if is_train.get(i) == want]
    if any(i not in targets for i in ids):
        raise bad_file(base / "image_class_labels.txt", "some images in images.txt have no label")
    labels = np.asarray([targets[i] - 1 for i in ids], dtype=np.int64)
    if labels.size and (labels.min() < 0 or labels.max() >= len(classes)):
        raise bad_file(base / "image_class_labels.txt", f"labels outside 1..{len(classes)}")
    paths = [base / "images" / images[i] for i in ids]
    rule = f"train_test_split.txt:is_training_img=={want}"
    checksum = folder_identity(root, CUB_FOLDER, "cub200", rule, digest, paths, labels)
    return _split("cub200", split, labels, classes, checksum, paths, meta={"split_rule": rule})


# ------------------------------------------------------------------------------------- Stanford Cars


@register_dataset(
    "stanford_cars",
    num_classes=196,
    modality="image",
    expected_layout=(
        f"{CARS_FOLDER}/{{cars_train/,cars_test/,devkit/cars_train_annos.mat,devkit/cars_meta.mat,"
        "cars_test_annos_withlabels.mat}"
    ),
    source="Krause et al. 2013; legate2023 Table 1, fedcof Table 3 (devkit .mat annotations)",
)
def load_stanford_cars(root: Path, split: str, download: bool | None = None) -> DatasetSplit:
    """Stanford Cars as legate2023's ``stanford_cars.py`` (= torchvision's ``StanfordCars``) loads it.

    ``train`` = devkit/cars_train_annos.mat over cars_train/ (8,144), ``test`` =
    cars_test_annos_withlabels.mat over cars_test/ (8,041), in annotation order; label = ``class`` minus
    1; class names from devkit/cars_meta.mat. There is no automatic download (the upstream URL is dead).
    """
    root = root.absolute()
    if split == "train":
        ann, img_dir = "devkit/cars_train_annos.mat", "cars_train"
    else:
        ann, img_dir = "cars_test_annos_withlabels.mat", "cars_test"
    files = [ann, "devkit/cars_meta.mat"]
    ensure_present(
        root, CARS_FOLDER, [*files, img_dir], dataset="stanford_cars", download=download,
        downloader=None, how_to_get=_HOW_CARS,
    )  # fmt: skip
    digest = verify_dataset_files(root, CARS_FOLDER, files, CARS_MD5)
    base = root / CARS_FOLDER
    annos = _loadmat(base / ann).get("annotations")
    meta = _loadmat(base / "devkit/cars_meta.mat").get("class_names")
    if annos is None or meta is None:
        raise bad_file(base / ann, "no 'annotations' (or cars_meta.mat has no 'class_names')")
    classes = [str(c) for c in np.atleast_1d(meta).tolist()]
    _check_num_classes("stanford_cars", len(classes), 196, base / "devkit/cars_meta.mat")
    annos = np.atleast_1d(annos)
    try:
        names = [str(a["fname"]) for a in annos]
        labels = np.asarray([int(a["class"]) - 1 for a in annos], dtype=np.int64)
    except (KeyError, ValueError, IndexError) as exc:
        raise bad_file(base / ann, f"annotations lack 'fname'/'class' ({exc})") from exc
    if labels.size and (labels.min() < 0 or labels.max() >= len(classes)):
        raise bad_file(base / ann, f"classes outside 1..{len(classes)}")
    paths = [base / img_dir / n for n in names]
    checksum = folder_identity(root, CARS_FOLDER, "stanford_cars", ann, digest, paths, labels)
    return _split("stanford_cars", split, labels, classes, checksum, paths, meta={"split_rule": ann})


# ------------------------------------------------------------------------------------------- EuroSAT


def _eurosat_all(root: Path, download: bool | None) -> tuple[list[Path], np.ndarray, str]:
    ensure_present(
        root, EUROSAT_FOLDER, ["2750"], dataset="eurosat", download=download,
        downloader=public_downloader("eurosat"), how_to_get=_HOW_EUROSAT,
    )  # fmt: skip
    directory = root / EUROSAT_FOLDER / "2750"
    classes, paths, labels = _image_folder(directory, "eurosat")
    if tuple(classes) != EUROSAT_CLASSES:
        raise DataMissingError(
            f"eurosat: class folders in {directory} are {', '.join(classes)}; expected {', '.join(EUROSAT_CLASSES)}",
            "the copy is incomplete or not EuroSAT RGB; re-download it",
        )
    checksum = folder_identity(root, EUROSAT_FOLDER, "eurosat", "imagefolder", "", paths, labels)
    return paths, labels, checksum


@register_dataset(
    "eurosat",
    num_classes=10,
    modality="image",
    splits=("all",),
    expected_layout=f"{EUROSAT_FOLDER}/2750/<Class>/<Class>_N.jpg",
    source="Helber et al. 2019 (EuroSAT RGB, 27,000 images; no official split)",
)
def load_eurosat(root: Path, split: str, download: bool | None = None) -> DatasetSplit:
    """The full EuroSAT RGB set (27,000 images) in ``torchvision.datasets.EuroSAT`` order; split ``all``.

    EuroSAT has no official train/test split; legate2023 uses :func:`load_eurosat_sub`.
    """
    root = root.absolute()
    paths, labels, checksum = _eurosat_all(root, download)
    return _split("eurosat", split, labels, EUROSAT_CLASSES, checksum, paths)


def eurosat_sub_indices(
    labels: np.ndarray, seed: int, train_per_class: int = 500, test_per_class: int = 100
) -> tuple[np.ndarray, np.ndarray]:
    """legate2023's EuroSAT-Sub draw (``utils.py:get_data_subset``), seeded: (train, test) indices.

    For each class in label order, ``train_per_class + test_per_class`` indices are drawn without
    replacement; the first ``train_per_class`` go to train, the rest to test; indices stay in draw order,
    class after class (the paper's order). legate2023 draws with the unseeded global numpy RNG; here the
    draw is one ``numpy_rng(seed, "eurosat_sub")`` stream, so a seed names the split.
    """
    seed = check_seed(seed)
    if train_per_class < 1 or test_per_class < 1:
        raise ConfigError(
            "EuroSAT-Sub needs at least one train and one test image per class", "use e.g. 500/100"
        )
    rng = numpy_rng(seed, "eurosat_sub")
    need = train_per_class + test_per_class
    train, test = [], []
    for c in range(int(labels.max()) + 1 if labels.size else 0):
        idx = np.flatnonzero(labels == c)
        if len(idx) < need:
            raise ConfigError(
                f"EuroSAT class {c} has {len(idx)} images, {need} needed",
                "check the EuroSAT copy or lower the counts",
            )
        pick = rng.choice(idx, size=need, replace=False)
        train.append(pick[:train_per_class])
        test.append(pick[train_per_class:])
    return np.concatenate(train).astype(np.int64), np.concatenate(test).astype(np.int64)


@register_dataset(
    "eurosat_sub",
    num_classes=10,
    modality="image",
    expected_layout=f"{EUROSAT_FOLDER}/2750/<Class>/<Class>_N.jpg",
    source="legate2023 Table 1 ('EuroSAT-Sub': 600 per class drawn, 500 train / 100 test, seeded here)",
)
def load_eurosat_sub(
    root: Path,
    split: str,
    download: bool | None = None,
    *,
    seed: int = EUROSAT_SUB_SEED,
    train_per_class: int = 500,
    test_per_class: int = 100,
) -> DatasetSplit:
    """legate2023's EuroSAT-Sub: 5,000 train / 1,000 test images drawn from EuroSAT with ``seed``.

    See :func:`eurosat_sub_indices`; the seed (default :data:`EUROSAT_SUB_SEED`) and counts are part of
    the checksum and recorded in ``meta``. Train and test of one seed are disjoint.
    """
    root = root.absolute()
    paths, labels, full = _eurosat_all(root, download)
    train, test = eurosat_sub_indices(labels, seed, train_per_class, test_per_class)
    idx = train if split == "train" else test
    rule = f"seed={seed} per_class={train_per_class}/{test_per_class} full={full}"
    sel = [paths[i] for i in idx.tolist()]
    checksum = folder_identity(root, EUROSAT_FOLDER, "eurosat_sub", rule, "", sel, labels[idx])
    meta = {
        "seed": seed,
        "train_per_class": train_per_class,
        "test_per_class": test_per_class,
        "parent_checksum": full,
    }
    return _split("eurosat_sub", split, labels[idx], EUROSAT_CLASSES, checksum, sel, meta=meta)


# ----------------------------------------------------------------------------------------- ImageNet-R


def imagenet_r_split_indices(
    labels: np.ndarray, seed: int = IMAGENET_R_SEED, test_fraction: float = IMAGENET_R_TEST_FRACTION
) -> tuple[np.ndarray, np.ndarray]:
    """The documented seeded stratified split of ImageNet-R (none is official): (train, test) indices.

    For each class in label order, its indices are permuted with one ``numpy_rng(seed, "imagenet_r_split")``
    stream and the first ``round(test_fraction * n_c)`` (half up) go to test, the rest to train; both
    are returned sorted (ImageFolder order). Default: seed 0, 80% train / 20% test.
    """
    seed = check_seed(seed)
    if not 0.0 < test_fraction < 1.0:
        raise ConfigError(f"test_fraction must be in (0, 1), got {test_fraction}", "use e.g. 0.2")
    rng = numpy_rng(seed, "imagenet_r_split")
    train, test = [], []
    for c in range(int(labels.max()) + 1 if labels.size else 0):
        perm = rng.permutation(np.flatnonzero(labels == c))
        n_test = int(np.floor(test_fraction * len(perm) + 0.5))
        test.append(perm[:n_test])
        train.append(perm[n_test:])
    return np.sort(np.concatenate(train)).astype(np.int64), np.sort(np.concatenate(test)).astype(np.int64)


@register_dataset(
    "imagenet_r",
    num_classes=200,
    modality="image",
    expected_layout=f"{IMAGENET_R_FOLDER}/<wnid>/<image> (or {IMAGENET_R_FOLDER}/{{train,test}}/<wnid>/<image>)",
    source="Hendrycks et al. 2021; fedcof Table 3 (ImageFolder; seeded stratified 80/20 split here)",
)
def load_imagenet_r(
    root: Path,
    split: str,
    download: bool | None = None,
    *,
    seed: int = IMAGENET_R_SEED,
    test_fraction: float = IMAGENET_R_TEST_FRACTION,
) -> DatasetSplit:
    """ImageNet-R (30,000 renditions, 200 classes) as an ImageFolder, with a seeded stratified split.

    FedCOF's code expects pre-split ``imagenet-r/train`` and ``imagenet-r/test`` ImageFolders but does
    not publish the split. If both folders exist they are used as given (``meta["split_rule"] ==
    "presplit"``); otherwise the official tar layout ``imagenet-r/<wnid>/`` is split with
    :func:`imagenet_r_split_indices` (default seed 0, 20% test per class), which is recorded in the
    checksum and ``meta``.
    """
    root = root.absolute()
    ensure_present(
        root, "", [IMAGENET_R_FOLDER], dataset="imagenet_r", download=download,
        downloader=public_downloader("imagenet_r"),
        how_to_get=_HOW_IMAGENET_R,
    )  # fmt: skip
    base = root / IMAGENET_R_FOLDER
    if (base / "train").is_dir() and (base / "test").is_dir():
        classes, paths, labels = _image_folder(base / split, "imagenet_r")
        _check_num_classes("imagenet_r", len(classes), 200, base / split)
        checksum = folder_identity(
            root, IMAGENET_R_FOLDER, "imagenet_r", f"presplit:{split}", "", paths, labels
        )
        return _split("imagenet_r", split, labels, classes, checksum, paths, meta={"split_rule": "presplit"})
    classes, paths, labels = _image_folder(base, "imagenet_r")
    _check_num_classes("imagenet_r", len(classes), 200, base)
    train, test = imagenet_r_split_indices(labels, seed, test_fraction)
    idx = train if split == "train" else test
    rule = f"stratified seed={seed} test_fraction={test_fraction!r}"
    sel = [paths[i] for i in idx.tolist()]
    checksum = folder_identity(root, IMAGENET_R_FOLDER, "imagenet_r", rule, "", sel, labels[idx])
    meta = {"split_rule": "stratified", "seed": seed, "test_fraction": test_fraction}
    return _split("imagenet_r", split, labels[idx], classes, checksum, sel, meta=meta)


# ------------------------------------------------------------------------------ iNaturalist-User-120k


def _inat_rows(path: Path) -> list[dict[str, str]]:
    reader = csv.DictReader(io.StringIO(read_verified_text(path)))
    if reader.fieldnames is None or not {"image_id", "class"} <= set(reader.fieldnames):
        raise bad_file(path, f"expected columns user_id,image_id,class; found {reader.fieldnames}")
    return list(reader)


def _find_images(directory: Path, wanted: set[str]) -> dict[str, Path]:
    """``image_id -> path`` for files ``<image_id>.<ext>`` anywhere under ``directory`` (sorted walk).

    FedCOF's ``INaturalistDataset`` maps ids to paths the same way (``os.walk`` over train_val_images).
    """
    exts = (".jpg", ".jpeg", ".png", ".tif", ".tiff")
    found: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames.sort()
        for fname in sorted(filenames):
            stem, ext = os.path.splitext(fname)
            if ext.lower() in exts and stem in wanted and stem not in found:
                found[stem] = Path(dirpath) / fname
    return found


@register_dataset(
    "inat_user_120k",
    num_classes=INAT_NUM_CLASSES,
    modality="image",
    expected_layout=f"{INAT_FOLDER}/{{{INAT_CSV['train']},{INAT_CSV['test']},{INAT_IMAGES}/**/<image_id>.jpg}}",
    source="Hsu et al. 2020 (iNaturalist-User-120k); fedcof Table 3 (natural users, 9,275 clients)",
)
def load_inat_user_120k(root: Path, split: str, download: bool | None = None) -> DatasetSplit:
    """iNaturalist-User-120k as FedCOF's ``dataset_utils/inaturalist_dataset.py`` loads it.

    Rows of the split CSV in file order; label = the ``class`` column (0..1202); ``groups`` = the
    ``user_id`` column (the natural users; integers when all are numeric), where the CSV has it (the
    test CSV does not). Images are found by id anywhere under ``inat/train_val_images``. Departure,
    documented: FedCOF silently drops rows whose image is absent; here that is an error.
    Class names are the class ids as strings (the CSVs carry no names).
    """
    root = root.absolute()
    csv_rel = INAT_CSV[split]
    ensure_present(
        root, INAT_FOLDER, [csv_rel, INAT_IMAGES], dataset="inat_user_120k", download=download,
        downloader=None, how_to_get=_HOW_INAT,
    )  # fmt: skip
    digest = verify_dataset_files(root, INAT_FOLDER, [csv_rel])
    base = root / INAT_FOLDER
    rows = _inat_rows(base / csv_rel)
    try:
        labels = np.asarray([int(r["class"]) for r in rows], dtype=np.int64)
    except (TypeError, ValueError) as exc:
        raise bad_file(base / csv_rel, f"non-integer class ({exc})") from exc
    if labels.size and (labels.min() < 0 or labels.max() >= INAT_NUM_CLASSES):
        raise bad_file(base / csv_rel, f"class outside 0..{INAT_NUM_CLASSES - 1}")
    ids = [r["image_id"] for r in rows]
    found = _find_images(base / INAT_IMAGES, set(ids))
    missing = [i for i in ids if i not in found]
    if missing:
        raise DataMissingError(
            f"inat_user_120k: {len(missing)} image(s) of {csv_rel} not found under {base / INAT_IMAGES} "
            f"(first: {', '.join(missing[:3])})",
            _HOW_INAT,
        )
    paths = [found[i] for i in ids]
    groups = None
    if rows and "user_id" in rows[0]:
        users = [r["user_id"] for r in rows]
        groups = (
            np.asarray([int(u) for u in users], dtype=np.int64)
            if all(u.strip().lstrip("-").isdigit() for u in users)
            else np.asarray(users, dtype=str)
        )
    checksum = folder_identity(root, INAT_FOLDER, "inat_user_120k", csv_rel, digest, paths, labels)
    classes = tuple(str(c) for c in range(INAT_NUM_CLASSES))
    meta: dict[str, object] = {"split_rule": csv_rel}
    if groups is not None:
        meta["num_users"] = len(np.unique(groups))
    return _split("inat_user_120k", split, labels, classes, checksum, paths, groups=groups, meta=meta)
