"""The tidy results table: one row per (cell, seed, metric), every protocol field and provenance spelled out.

Columns (issue 3/4 contract): ``paper, table, cell, dataset, model, weights, weights_sha256, method,
fl_algorithm, partition, alpha, clients, participation, seed, metric, value, unit, status, reason, protocol,
note`` plus provenance ``data_checksum, partition_hash, features_key, git_commit, versions, machine, wall_s,
peak_rss_mb``. ``status`` is ``ok`` or ``not_run`` (then ``value`` is empty and ``reason`` says why).
``protocol`` is the closed-form protocol a run used (or ``cost model``); ``note`` the method's options or,
for a cost cell, how its value came about. Files written before ``protocol``/``note`` existed are read with
those columns empty.

Integrity: :func:`write_tidy` writes atomically with a checksum sidecar (``<file>.sha256``); :func:`read_tidy`
checks the sidecar and the file's structure (complete last line, every line with every field, ``status`` never
empty, ``value`` and ``seed`` numbers where set) before anything is parsed, so a truncated or damaged file is
one :class:`~benchmark.errors.CorruptFileError` naming it, never a dropped seed or a garbage row. Files written
before sidecars existed have no checksum: they are accepted when their structure is sound.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from benchmark.errors import ConfigError, DataMissingError
from benchmark.io import RERUN, atomic_path, read_verified_csv

TIDY_COLUMNS: tuple[str, ...] = (
    "paper", "table", "cell", "dataset", "model", "weights", "weights_sha256", "method", "fl_algorithm",
    "partition", "alpha", "clients", "participation", "seed", "metric", "value", "unit", "status", "reason",
    "protocol", "note", "data_checksum", "partition_hash", "features_key", "git_commit", "versions", "machine", "wall_s",
    "peak_rss_mb",
)  # fmt: skip


def make_row(**fields: Any) -> dict[str, Any]:
    """A row with every column (missing ones empty); unknown column names are an error."""
    unknown = set(fields) - set(TIDY_COLUMNS)
    if unknown:
        raise ConfigError(f"unknown tidy column(s) {sorted(unknown)}", f"use only: {', '.join(TIDY_COLUMNS)}")
    row = dict.fromkeys(TIDY_COLUMNS, None)
    row.update(fields)
    row.setdefault("status", "ok")
    if row["status"] is None:
        row["status"] = "ok"
    return row


_INTEGER_COLUMNS = ("seed", "clients")


def frame(rows: Iterable[Mapping[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    """Rows -> DataFrame with the tidy columns in order (``seed``/``clients`` as nullable integers)."""
    df = (
        rows.copy()
        if isinstance(rows, pd.DataFrame)
        else pd.DataFrame(list(rows), columns=list(TIDY_COLUMNS))
    )
    for col in _INTEGER_COLUMNS:
        values = pd.to_numeric(df[col], errors="coerce")
        if df[col].notna().equals(values.notna()) and (values.dropna() % 1 == 0).all():
            df[col] = values.astype("Int64")
    return df


def write_tidy(rows: Iterable[Mapping[str, Any]] | pd.DataFrame, path: str | Path) -> pd.DataFrame:
    """Write rows (or a frame) to CSV atomically and return the frame."""
    df = frame(rows)
    with atomic_path(path, checksum=True) as tmp:
        df.to_csv(tmp, index=False)
    return df


#: Columns added after the first files were written; absent ones are read as empty.
LATER_COLUMNS: tuple[str, ...] = ("protocol", "note")


#: Fields of a tidy row that are never empty, and those that are numbers where set.
NONEMPTY_COLUMNS: tuple[str, ...] = ("status",)
NUMERIC_COLUMNS: tuple[str, ...] = ("value", "seed")


def read_tidy(path: str | Path, *, fix: str = RERUN) -> pd.DataFrame:
    """Read a tidy CSV, checking that it exists, matches its checksum sidecar (when it has one), is complete and
    well-formed (module docstring) and has the tidy columns: one clear error each, naming the file, with
    ``fix`` for a damaged one."""
    if not Path(path).is_file():
        raise DataMissingError(
            f"tidy results file {path} does not exist",
            "run the job that writes it first (snakemake builds a target's run files), or check the path",
        )
    try:
        df = read_verified_csv(path, nonempty=NONEMPTY_COLUMNS, numeric=NUMERIC_COLUMNS, fix=fix)
    except (pd.errors.EmptyDataError, pd.errors.ParserError) as exc:
        raise ConfigError(f"{path} is not a readable CSV ({exc})", fix) from None
    for col in LATER_COLUMNS:
        if col not in df.columns:
            df[col] = None
    missing = [c for c in TIDY_COLUMNS if c not in df.columns]
    if missing:
        raise ConfigError(f"{path} is not a tidy results file: missing columns {missing}", "regenerate it")
    return df


def concat_tidy(paths: Iterable[str | Path]) -> pd.DataFrame:
    """Concatenate several tidy CSVs."""
    frames = [read_tidy(p) for p in paths]
    return pd.concat(frames, ignore_index=True) if frames else frame([])
