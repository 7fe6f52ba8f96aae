"""Image-folder loaders on tiny fixture folders written in each dataset's real on-disk layout.

Nothing here touches the network: download paths run with the verified downloader
(``benchmark.data.download``) fed by an injected opener, or replaced by one that writes the fixture.
"""

from __future__ import annotations

import csv
import hashlib
import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy.io import savemat

from benchmark.data import folders
from benchmark.data.registry import dataset_info, list_datasets, load_dataset
from benchmark.errors import ChecksumError, ConfigError, DataMissingError, UnknownNameError

# ----------------------------------------------------------------------------------- fixture builders


def _jpeg(color: tuple[int, int, int] = (90, 120, 30), size: tuple[int, int] = (7, 5)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="JPEG")
    return buf.getvalue()


JPEG = _jpeg()


def _write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data)
    else:
        path.write_bytes(data)
    return path


def _manifest(root: Path, rels: list[str]) -> None:
    """Append ``sha256  rel`` lines for ``rels`` to ``root/MANIFEST.sha256``."""
    lines = [f"{hashlib.sha256((root / r).read_bytes()).hexdigest()}  {r}\n" for r in rels]
    with open(root / "MANIFEST.sha256", "a") as f:
        f.writelines(lines)


def make_flowers(root: Path, manifest: bool = True) -> dict[str, list[int]]:
    """flowers-102/ with 10 images: trnid [3, 1, 5, 9], valid [2], tstid [4, 6, 7, 8, 10]."""
    base = root / "flowers-102"
    labels = np.array([[5, 1, 102, 7, 7, 1, 3, 3, 50, 2]], dtype=np.uint8)  # 1-based, image i -> labels[i-1]
    ids = {"trnid": [3, 1, 5, 9], "valid": [2], "tstid": [4, 6, 7, 8, 10]}
    base.mkdir(parents=True)
    savemat(base / "imagelabels.mat", {"labels": labels})
    savemat(base / "setid.mat", {k: np.array([v], dtype=np.uint16) for k, v in ids.items()})
    for i in range(1, 11):
        _write(base / "jpg" / f"image_{i:05d}.jpg", _jpeg((i * 20, 0, 0)))
    if manifest:
        _manifest(root, ["flowers-102/imagelabels.mat", "flowers-102/setid.mat"])
    return ids


def make_cub(root: Path, manifest: bool = True) -> None:
    """CUB_200_2011/ with 200 classes and 6 images (ids 1, 3, 6 train; 2, 4, 5 test)."""
    base = root / "CUB_200_2011"
    cls = [f"{c:03d}.Bird_{c}" for c in range(1, 201)]
    imgs = {1: (1, 1), 2: (1, 0), 3: (200, 1), 4: (17, 0), 5: (200, 0), 6: (2, 1)}  # id -> (class, is_train)
    _write(base / "classes.txt", "".join(f"{c} {n}\n" for c, n in enumerate(cls, 1)))
    _write(base / "images.txt", "".join(f"{i} {cls[c - 1]}/img_{i}.jpg\n" for i, (c, _) in imgs.items()))
    _write(base / "image_class_labels.txt", "".join(f"{i} {c}\n" for i, (c, _) in imgs.items()))
    _write(base / "train_test_split.txt", "".join(f"{i} {t}\n" for i, (_, t) in imgs.items()))
    for i, (c, _) in imgs.items():
        _write(base / "images" / cls[c - 1] / f"img_{i}.jpg", JPEG)
    if manifest:
        _manifest(root, [f"CUB_200_2011/{f}" for f in folders.CUB_FILES])


def _annos(rows: list[tuple[str, int]]) -> np.ndarray:
    dt = [
        ("bbox_x1", "O"),
        ("bbox_y1", "O"),
        ("bbox_x2", "O"),
        ("bbox_y2", "O"),
        ("class", "O"),
        ("fname", "O"),
    ]
    return np.array([(1, 2, 30, 40, np.uint8(c), f) for f, c in rows], dtype=dt).reshape(1, -1)


def make_cars(root: Path, manifest: bool = True) -> None:
    """stanford_cars/ in torchvision's layout: 3 train, 2 test images, 196 class names."""
    base = root / "stanford_cars"
    (base / "devkit").mkdir(parents=True)
    names = np.array([[f"Car {c}" for c in range(196)]], dtype=object)
    savemat(base / "devkit" / "cars_meta.mat", {"class_names": names})
    train = [("00001.jpg", 1), ("00002.jpg", 196), ("00003.jpg", 14)]
    test = [("00001.jpg", 3), ("00002.jpg", 1)]
    savemat(base / "devkit" / "cars_train_annos.mat", {"annotations": _annos(train)})
    savemat(base / "cars_test_annos_withlabels.mat", {"annotations": _annos(test)})
    for f, _ in train:
        _write(base / "cars_train" / f, JPEG)
    for f, _ in test:
        _write(base / "cars_test" / f, JPEG)
    if manifest:
        rels = ["devkit/cars_meta.mat", "devkit/cars_train_annos.mat", "cars_test_annos_withlabels.mat"]
        _manifest(root, [f"stanford_cars/{r}" for r in rels])


def make_eurosat(root: Path, per_class: int) -> None:
    """eurosat/2750/<Class>/<Class>_N.jpg, ``per_class`` identical tiny JPEGs per class."""
    for cls in folders.EUROSAT_CLASSES:
        d = root / "eurosat" / "2750" / cls
        d.mkdir(parents=True)
        for i in range(1, per_class + 1):
            (d / f"{cls}_{i}.jpg").write_bytes(JPEG)


def make_imagenet_r(root: Path, per_class: int = 5, presplit: bool = False) -> None:
    """imagenet-r/<wnid>/ with 200 class folders (or imagenet-r/{train,test}/<wnid>/)."""
    parts = ["train", "test"] if presplit else [""]
    for part in parts:
        for c in range(200):
            d = root / "imagenet-r" / part / f"n{1000000 + c:08d}"
            d.mkdir(parents=True)
            for i in range(per_class if part != "test" else 1):
                (d / f"art_{i}.jpg").write_bytes(JPEG)


INAT_TRAIN = [  # user_id, image_id, class, label
    ("7", "a1", 0, 11), ("7", "a2", 5, 16), ("12", "b1", 1202, 999), ("3", "c1", 5, 16), ("12", "b2", 0, 11),
]  # fmt: skip
INAT_TEST = [("t1", 5, 16), ("t2", 0, 11)]


def make_inat(root: Path, manifest: bool = True, train_rows=INAT_TRAIN) -> None:
    base = root / "inat"
    with open(
        _write(base / "inaturalist-user-120k" / "federated_train_user_120k.csv", ""), "w", newline=""
    ) as f:
        w = csv.writer(f)
        w.writerow(["user_id", "image_id", "class", "label"])
        w.writerows(train_rows)
    with open(_write(base / "inaturalist-user-120k" / "test.csv", ""), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["image_id", "class", "label"])
        w.writerows(INAT_TEST)
    for _, img, c, _ in INAT_TRAIN:
        _write(base / "train_val_images" / "Plantae" / f"Species_{c}" / f"{img}.jpg", JPEG)
    for img, c, _ in INAT_TEST:
        _write(base / "train_val_images" / "Aves" / f"Species_{c}" / f"{img}.jpg", JPEG)
    if manifest:
        _manifest(root, [f"inat/{r}" for r in folders.INAT_CSV.values()])


# ----------------------------------------------------------------------------------------- registry


def test_registry_names_and_class_counts() -> None:
    want = {
        "flowers102": 102, "cub200": 200, "stanford_cars": 196, "eurosat": 10, "eurosat_sub": 10,
        "imagenet_r": 200, "inat_user_120k": 1203, "ag_news": 4, "sst2": 2, "sst5": 5,
    }  # fmt: skip
    assert set(want) <= set(list_datasets())
    for name, c in want.items():
        info = dataset_info(name)
        assert info.num_classes == c and info.expected_layout and info.source


def test_unknown_name_and_option() -> None:
    with pytest.raises(UnknownNameError, match="flowers102"):
        load_dataset("flowers101", "train")
    with pytest.raises(ConfigError, match="no option 'sede'"):
        load_dataset("eurosat_sub", "train", "/nonexistent", sede=1)


@pytest.mark.parametrize(
    "name",
    ["flowers102", "cub200", "stanford_cars", "eurosat", "eurosat_sub", "imagenet_r", "inat_user_120k",
     "ag_news", "sst2", "sst5"],
)  # fmt: skip
def test_every_loader_says_what_is_missing_where(tmp_path, name) -> None:
    split = dataset_info(name).splits[0]
    with pytest.raises(DataMissingError) as err:
        load_dataset(name, split, tmp_path / "empty", download=False)
    msg = str(err.value)
    assert str(tmp_path / "empty") in msg and "FLB_DATA_ROOT" in msg and "\n" not in msg


# ---------------------------------------------------------------------------------------- Flowers102


def test_flowers_splits_follow_setid_order_and_labels(tmp_path) -> None:
    ids = make_flowers(tmp_path)
    tr = load_dataset("flowers102", "train", tmp_path)
    te = load_dataset("flowers102", "test", tmp_path)
    assert [p.name for p in tr.paths] == [f"image_{i:05d}.jpg" for i in ids["trnid"]]
    assert tr.labels.tolist() == [101, 4, 6, 49] and te.labels.tolist() == [6, 0, 2, 2, 1]
    assert len(te) == 5 and tr.num_classes == 102 and tr.class_names[0] == "pink primrose"
    assert tr.modality == "image" and all(p.is_absolute() and p.is_file() for p in tr.paths)
    assert len(tr.checksum) == 64 and tr.checksum != te.checksum
    assert load_dataset("flowers102", "train", tmp_path).checksum == tr.checksum
    with pytest.raises(ConfigError, match="no split 'val'"):
        load_dataset("flowers102", "val", tmp_path)


def test_flowers_checksum_changes_with_an_image(tmp_path) -> None:
    make_flowers(tmp_path)
    before = load_dataset("flowers102", "train", tmp_path).checksum
    (tmp_path / "flowers-102" / "jpg" / "image_00003.jpg").write_bytes(JPEG + b"\0")
    assert load_dataset("flowers102", "train", tmp_path).checksum != before


def _refused_before_parsing(monkeypatch, dataset: str, split: str, root: Path, match: str) -> None:
    """Loading ``dataset``'s ``split`` from ``root`` raises a :class:`ChecksumError` matching ``match`` before any
    annotation file (``.mat``, text) is parsed."""
    calls: list[str] = []
    real_mat, real_text = folders._loadmat, folders.read_verified_text
    monkeypatch.setattr(folders, "_loadmat", lambda p: calls.append(str(p)) or real_mat(p))
    monkeypatch.setattr(folders, "read_verified_text", lambda p: calls.append(str(p)) or real_text(p))
    with pytest.raises(ChecksumError, match=match):
        load_dataset(dataset, split, root)
    assert calls == []


def test_flowers_without_manifest_checks_official_md5_before_loadmat(tmp_path, monkeypatch) -> None:
    make_flowers(tmp_path, manifest=False)
    _refused_before_parsing(
        monkeypatch, "flowers102", "train", tmp_path, r"md5 mismatch for .*imagelabels\.mat"
    )


def test_corrupt_annotation_is_refused_before_parsing(tmp_path, monkeypatch) -> None:
    make_flowers(tmp_path)
    setid = tmp_path / "flowers-102" / "setid.mat"
    data = bytearray(setid.read_bytes())
    data[-1] ^= 1
    setid.write_bytes(bytes(data))
    _refused_before_parsing(monkeypatch, "flowers102", "test", tmp_path, r"sha256 mismatch for .*setid\.mat")


def test_manifest_listed_image_is_verified(tmp_path) -> None:
    make_flowers(tmp_path)
    _manifest(tmp_path, ["flowers-102/jpg/image_00001.jpg"])
    a = load_dataset("flowers102", "train", tmp_path)
    (tmp_path / "flowers-102" / "jpg" / "image_00001.jpg").write_bytes(_jpeg((1, 2, 3)))
    with pytest.raises(ChecksumError, match=r"image_00001\.jpg"):
        load_dataset("flowers102", "train", tmp_path)
    assert len(a) == 4


def test_flowers_missing_is_one_clear_error_and_no_download_offline(tmp_path, monkeypatch) -> None:
    import torchvision.datasets as tvd

    calls = []
    monkeypatch.setattr(tvd, "Flowers102", lambda *a, **k: calls.append(a))
    with pytest.raises(DataMissingError) as err:
        load_dataset("flowers102", "train", tmp_path)  # download=None and FLB_OFFLINE=1: no download
    msg = str(err.value)
    assert "imagelabels.mat" in msg and str(tmp_path / "flowers-102") in msg and "FLB_DATA_ROOT" in msg
    assert "\n" not in msg and calls == []


def test_flowers_download_runs_the_verified_downloader(tmp_path, monkeypatch) -> None:
    from benchmark.data import download

    calls = []

    def fake(name, root, **kw):
        calls.append((name, Path(root)))
        make_flowers(Path(root))

    monkeypatch.setattr(download, "fetch_files", fake)
    d = load_dataset("flowers102", "test", tmp_path, download=True)
    assert len(d) == 5 and calls == [("flowers102", tmp_path.absolute())]


# -------------------------------------------------------------------------------------- CUB-200-2011


def test_cub_split_from_train_test_split_txt(tmp_path) -> None:
    make_cub(tmp_path)
    tr = load_dataset("cub200", "train", tmp_path)
    te = load_dataset("cub200", "test", tmp_path)
    assert tr.labels.tolist() == [0, 199, 1] and te.labels.tolist() == [0, 16, 199]
    assert [p.name for p in tr.paths] == ["img_1.jpg", "img_3.jpg", "img_6.jpg"]
    assert tr.class_names[0] == "001.Bird_1"  # classes.txt's second column, as legate2023's Cub2011
    assert len(tr.class_names) == 200 and not set(tr.paths) & set(te.paths)


def test_cub_missing_annotation_and_missing_image(tmp_path) -> None:
    make_cub(tmp_path)
    (tmp_path / "CUB_200_2011" / "train_test_split.txt").unlink()
    with pytest.raises(DataMissingError, match=r"train_test_split\.txt under .*CUB_200_2011"):
        load_dataset("cub200", "train", tmp_path, download=False)
    make_cub(tmp_path / "b")
    (tmp_path / "b" / "CUB_200_2011" / "images" / "002.Bird_2" / "img_6.jpg").unlink()
    with pytest.raises(DataMissingError, match=r"img_6\.jpg"):
        load_dataset("cub200", "train", tmp_path / "b")
    assert len(load_dataset("cub200", "test", tmp_path / "b")) == 3


def test_cub_download_extracts_official_tgz_and_records_manifest(tmp_path, monkeypatch) -> None:
    import dataclasses
    import tarfile

    from benchmark.data import download

    make_cub(tmp_path / "src", manifest=False)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        tf.add(tmp_path / "src" / "CUB_200_2011", arcname="CUB_200_2011")
    tgz = buf.getvalue()
    src = download.SOURCES["cub200"]
    remote = dataclasses.replace(src.remotes[0], checksum=hashlib.md5(tgz).hexdigest())
    monkeypatch.setitem(download.SOURCES, "cub200", dataclasses.replace(src, remotes=(remote,)))
    calls = []
    monkeypatch.setattr(download, "URLOPEN", lambda req: calls.append(req.full_url) or io.BytesIO(tgz))
    monkeypatch.delenv("FLB_OFFLINE", raising=False)
    d = load_dataset("cub200", "train", tmp_path / "root", download=True)
    assert len(d) == 3 and calls == [folders.CUB_URL]
    recorded = (tmp_path / "root" / "CUB_200_2011" / "MANIFEST.sha256").read_text()
    assert all(f in recorded for f in folders.CUB_FILES)
    (tmp_path / "root" / "CUB_200_2011" / "classes.txt").write_text("1 tampered\n")
    with pytest.raises(ChecksumError, match=r"classes\.txt"):
        load_dataset("cub200", "train", tmp_path / "root")


# ------------------------------------------------------------------------------------- Stanford Cars


def test_cars_from_devkit_mat_annotations(tmp_path) -> None:
    make_cars(tmp_path)
    tr = load_dataset("stanford_cars", "train", tmp_path)
    te = load_dataset("stanford_cars", "test", tmp_path)
    assert tr.labels.tolist() == [0, 195, 13] and te.labels.tolist() == [2, 0]
    assert [p.parent.name for p in tr.paths] == ["cars_train"] * 3 and te.paths[0].parent.name == "cars_test"
    assert tr.class_names[195] == "Car 195" and tr.num_classes == 196


def test_cars_test_annotations_unlisted_fall_back_to_official_md5(tmp_path, monkeypatch) -> None:
    make_cars(tmp_path, manifest=False)
    _manifest(tmp_path, ["stanford_cars/devkit/cars_meta.mat", "stanford_cars/devkit/cars_train_annos.mat"])
    assert len(load_dataset("stanford_cars", "train", tmp_path)) == 3
    _refused_before_parsing(
        monkeypatch, "stanford_cars", "test", tmp_path, r"md5 mismatch .*cars_test_annos_withlabels\.mat"
    )


def test_cars_missing_says_upstream_is_dead_even_with_download(tmp_path) -> None:
    with pytest.raises(DataMissingError) as err:
        load_dataset("stanford_cars", "train", tmp_path, download=True)
    msg = str(err.value)
    assert "cars_train_annos.mat" in msg and "dead" in msg and str(tmp_path) in msg


# ------------------------------------------------------------------------------------------- EuroSAT


def test_eurosat_full_is_torchvision_imagefolder_order(tmp_path) -> None:
    from torchvision.datasets import ImageFolder

    make_eurosat(tmp_path, 3)
    d = load_dataset("eurosat", "all", tmp_path)
    ref = ImageFolder(str(tmp_path.absolute() / "eurosat" / "2750"))
    assert [str(p) for p in d.paths] == [p for p, _ in ref.samples]
    assert d.labels.tolist() == ref.targets and d.class_names == tuple(ref.classes) == folders.EUROSAT_CLASSES
    with pytest.raises(ConfigError, match="no split 'train'"):
        load_dataset("eurosat", "train", tmp_path)


def test_eurosat_sub_small_counts_seeded_and_disjoint(tmp_path) -> None:
    make_eurosat(tmp_path, 4)
    a_tr = load_dataset("eurosat_sub", "train", tmp_path, seed=3, train_per_class=2, test_per_class=1)
    a_te = load_dataset("eurosat_sub", "test", tmp_path, seed=3, train_per_class=2, test_per_class=1)
    assert np.bincount(a_tr.labels).tolist() == [2] * 10 and np.bincount(a_te.labels).tolist() == [1] * 10
    assert not set(a_tr.paths) & set(a_te.paths)
    same = load_dataset("eurosat_sub", "train", tmp_path, seed=3, train_per_class=2, test_per_class=1)
    other = load_dataset("eurosat_sub", "train", tmp_path, seed=4, train_per_class=2, test_per_class=1)
    assert same.paths == a_tr.paths and same.checksum == a_tr.checksum
    assert other.paths != a_tr.paths and other.checksum != a_tr.checksum
    assert a_tr.meta["seed"] == 3
    with pytest.raises(ConfigError, match="600 needed"):
        load_dataset("eurosat_sub", "train", tmp_path)


def test_eurosat_sub_is_500_train_100_test_per_class(tmp_path) -> None:
    make_eurosat(tmp_path, 601)
    tr = load_dataset("eurosat_sub", "train", tmp_path)
    te = load_dataset("eurosat_sub", "test", tmp_path)
    assert len(tr) == 5000 and len(te) == 1000 and tr.meta["seed"] == folders.EUROSAT_SUB_SEED
    assert np.bincount(tr.labels).tolist() == [500] * 10 and np.bincount(te.labels).tolist() == [100] * 10
    assert not set(tr.paths) & set(te.paths)
    # class after class in draw order, as legate2023's get_data_subset builds it
    assert np.all(np.diff(tr.labels) >= 0)


def test_eurosat_wrong_class_folders(tmp_path) -> None:
    make_eurosat(tmp_path, 1)
    (tmp_path / "eurosat" / "2750" / "SeaLake").rename(tmp_path / "eurosat" / "2750" / "Sea")
    with pytest.raises(DataMissingError, match="expected AnnualCrop"):
        load_dataset("eurosat", "all", tmp_path)


# ----------------------------------------------------------------------------------------- ImageNet-R


def test_imagenet_r_split_is_seeded_stratified_disjoint(tmp_path) -> None:
    make_imagenet_r(tmp_path, per_class=5)
    tr = load_dataset("imagenet_r", "train", tmp_path)
    te = load_dataset("imagenet_r", "test", tmp_path)
    assert len(tr) == 800 and len(te) == 200 and tr.num_classes == 200
    assert np.bincount(te.labels, minlength=200).tolist() == [1] * 200
    assert not set(tr.paths) & set(te.paths) and len(set(tr.paths) | set(te.paths)) == 1000
    again = load_dataset("imagenet_r", "test", tmp_path)
    assert again.paths == te.paths and again.checksum == te.checksum
    other = load_dataset("imagenet_r", "test", tmp_path, seed=1)
    assert other.paths != te.paths and other.checksum != te.checksum
    assert te.meta == {"split_rule": "stratified", "seed": 0, "test_fraction": 0.2}


def test_imagenet_r_split_indices_rounding() -> None:
    labels = np.repeat(np.arange(3), [10, 3, 1])
    tr, te = folders.imagenet_r_split_indices(labels, seed=0, test_fraction=0.2)
    assert np.bincount(labels[te], minlength=3).tolist() == [2, 1, 0]
    assert sorted([*tr.tolist(), *te.tolist()]) == list(range(14))


def test_imagenet_r_presplit_folders_are_used(tmp_path) -> None:
    make_imagenet_r(tmp_path, per_class=2, presplit=True)
    tr = load_dataset("imagenet_r", "train", tmp_path)
    te = load_dataset("imagenet_r", "test", tmp_path)
    assert len(tr) == 400 and len(te) == 200 and tr.meta["split_rule"] == "presplit"


def test_imagenet_r_missing(tmp_path) -> None:
    with pytest.raises(DataMissingError, match=r"expected imagenet-r under"):
        load_dataset("imagenet_r", "train", tmp_path)


# ------------------------------------------------------------------------------ iNaturalist-User-120k


def test_inat_groups_are_the_csv_user_ids(tmp_path) -> None:
    make_inat(tmp_path)
    tr = load_dataset("inat_user_120k", "train", tmp_path)
    assert tr.groups.tolist() == [int(u) for u, *_ in INAT_TRAIN] and tr.groups.dtype == np.int64
    assert tr.labels.tolist() == [c for _, _, c, _ in INAT_TRAIN] and tr.num_classes == 1203
    assert [p.stem for p in tr.paths] == [i for _, i, _, _ in INAT_TRAIN] and tr.meta["num_users"] == 3
    te = load_dataset("inat_user_120k", "test", tmp_path)
    assert te.groups is None and te.labels.tolist() == [5, 0]


def test_inat_string_user_ids(tmp_path) -> None:
    rows = [("u" + u, *rest) for u, *rest in INAT_TRAIN]
    make_inat(tmp_path, train_rows=rows)
    tr = load_dataset("inat_user_120k", "train", tmp_path)
    assert tr.groups.tolist() == [r[0] for r in rows]


def test_inat_csv_needs_a_manifest_and_images_must_exist(tmp_path, monkeypatch) -> None:
    make_inat(tmp_path, manifest=False)
    _refused_before_parsing(
        monkeypatch,
        "inat_user_120k",
        "train",
        tmp_path,
        r"no checksum known .*federated_train_user_120k\.csv",
    )
    make_inat(tmp_path / "b")
    next((tmp_path / "b" / "inat" / "train_val_images").rglob("b2.jpg")).unlink()
    with pytest.raises(DataMissingError, match=r"1 image\(s\) .* \(first: b2\)"):
        load_dataset("inat_user_120k", "train", tmp_path / "b")


def test_inat_missing_says_where_to_get_it(tmp_path) -> None:
    with pytest.raises(DataMissingError) as err:
        load_dataset("inat_user_120k", "train", tmp_path, download=True)
    msg = str(err.value)
    assert "federated_train_user_120k.csv" in msg and "inaturalist-user-120k.zip" in msg and "2017" in msg


# ------------------------------------------------------------------------------- end to end: features


def test_extract_features_on_a_folder_dataset(tmp_path) -> None:
    from benchmark.features.cache import FeatureCache
    from benchmark.features.extract import extract_features
    from benchmark.features.preprocess import get_preprocess

    make_flowers(tmp_path / "data")
    data = load_dataset("flowers102", "train", tmp_path / "data")
    assert len(data) == 4
    cache = FeatureCache(tmp_path / "cache")
    pre = get_preprocess("legate2023_folder")
    first = extract_features(data, "squeezenet1_1", "random", pre, cache=cache, progress=False, batch_size=3)
    assert first.features.shape == (4, 512) and not first.cache_hit
    assert np.isfinite(first.features).all() and np.array_equal(first.labels, data.labels)
    second = extract_features(data, "squeezenet1_1", "random", pre, cache=cache, progress=False)
    assert second.cache_hit
    np.testing.assert_array_equal(first.features, second.features)
