"""The protocol catalogue: run protocols as data (``closed_form.yaml``, ``fl.yaml``, ``fl_train.yaml`` here).

The YAML files hold the values (and, per protocol, the ``source`` / ``note`` fields citing the paper); the
modules that use them turn them into their own types: :mod:`benchmark.closed_form.protocols` (method lists and
option dicts, and :func:`benchmark.closed_form.paper_protocol_options`), :mod:`benchmark.fl.protocols`
(:class:`~benchmark.fl.protocols.Protocol` dataclasses) and :mod:`benchmark.fl.train_protocols`. This module
only reads a file; the checks are those of :mod:`benchmark.schema` (re-exported here): every problem, an
unknown key at any depth included, is one :class:`~benchmark.errors.ConfigError` naming the file, the line,
the protocol and the field (and, for an unknown key, the closest valid one). The files are package data
(``pyproject.toml``), so an installed package finds them.
"""

from __future__ import annotations

from pathlib import Path

from benchmark.errors import ConfigError
from benchmark.schema import Where, YamlFile, check_mapping, check_name, coerce, hint_name, read_yaml

__all__ = ["CATALOGUE_DIR", "Where", "check_mapping", "check_name", "coerce", "hint_name", "load_catalogue"]

CATALOGUE_DIR = Path(__file__).resolve().parent


def load_catalogue(name: str, folder: Path | None = None) -> YamlFile:
    """Catalogue file ``<folder>/<name>.yaml`` (default: this package's folder), read; its top level must be
    a mapping."""
    src = read_yaml((folder or CATALOGUE_DIR) / f"{name}.yaml", missing_fix="reinstall the package")
    if not isinstance(src.data, dict):
        raise ConfigError(f"{src.name}: expected a mapping at the top level", "see benchmark/protocols/__init__.py")
    return src
