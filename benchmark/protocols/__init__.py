"""The protocol catalogue: run protocols as data (``closed_form.yaml``, ``fl.yaml`` in this folder).

The YAML files hold the values (and, per protocol, the ``source`` / ``note`` fields citing the paper); the
modules that use them turn them into their own types: :mod:`benchmark.closed_form.protocols` (method lists and
option dicts, and :func:`benchmark.closed_form.paper_protocol_options`) and :mod:`benchmark.fl.protocols`
(:class:`~benchmark.fl.protocols.Protocol` dataclasses). This module only reads a file and checks fields:
every problem is one :class:`~benchmark.errors.ConfigError` naming the file, the protocol and the field.
The files are package data (``pyproject.toml``), so an installed package finds them.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from benchmark.errors import ConfigError

CATALOGUE_DIR = Path(__file__).resolve().parent


def load_catalogue(name: str, folder: Path | None = None) -> tuple[Path, dict[str, Any]]:
    """``(path, mapping)`` of catalogue file ``<folder>/<name>.yaml`` (default: this package's folder)."""
    path = (folder or CATALOGUE_DIR) / f"{name}.yaml"
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read protocol catalogue {path} ({exc})", "reinstall the package") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML ({exc})", "fix the file") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level", "see benchmark/protocols/__init__.py")
    return path, data


class Where:
    """Location of a value for error messages: ``<file>: protocol <name>: field <a.b.c>``."""

    def __init__(self, path: Path, protocol: str | None = None, field: str = "") -> None:
        self.path, self.protocol, self.field = path, protocol, field

    def at(self, key: str) -> Where:
        return Where(self.path, self.protocol, f"{self.field}.{key}" if self.field else key)

    def error(self, what: str, fix: str = "") -> ConfigError:
        proto = f" protocol {self.protocol!r}:" if self.protocol is not None else ""
        fld = f" field {self.field!r}:" if self.field else ""
        return ConfigError(f"{self.path}:{proto}{fld} {what}", fix)


def check_mapping(
    value: Any, where: Where, *, allowed: Mapping[str, str] | None = None, required: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``value`` as a mapping with string keys; with ``allowed`` (key -> what it is), unknown keys are errors."""
    if not isinstance(value, dict):
        raise where.error(f"expected a mapping, got {type(value).__name__} {value!r}")
    for key in value:
        if not isinstance(key, str):
            raise where.error(f"key {key!r} is not a string", "quote it")
        if allowed is not None and key not in allowed:
            raise where.at(key).error("unknown field", f"use one of: {', '.join(sorted(allowed))}")
    for key in required:
        if key not in value:
            raise where.at(key).error("missing field", f"add it ({allowed[key] if allowed else key})")
    return value


def check_name(value: Any, where: Where, known: Callable[[], Any], kind: str) -> str:
    """``value`` if it is a name in ``known()`` (a registry or a collection); an error listing them otherwise."""
    names = known()
    if not isinstance(value, str) or value not in names:
        listed = sorted(names) if not hasattr(names, "sorted_names") else names.sorted_names()
        raise where.error(f"unknown {kind} {value!r}", f"use one of: {', '.join(listed)}")
    return value


def coerce(value: Any, hint: Any, where: Where) -> Any:
    """``value`` checked against type ``hint`` (str, int, float, bool, None, Literal, unions, tuple[str, ...]);
    an int is accepted where a float is expected (``1`` -> ``1.0``), nothing else is converted."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return value
    if origin is typing.Literal:
        if value in typing.get_args(hint) and type(value) in {type(a) for a in typing.get_args(hint)}:
            return value
        raise where.error(f"must be one of {list(typing.get_args(hint))}, got {value!r}")
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(hint):
            try:
                return coerce(value, arg, where)
            except ConfigError:
                continue
        raise where.error(f"wrong type: expected {hint_name(hint)}, got {type(value).__name__} {value!r}")
    if origin is tuple:
        if not isinstance(value, list):
            raise where.error(f"expected a list, got {type(value).__name__} {value!r}")
        (item,) = typing.get_args(hint)[:1]
        return tuple(coerce(v, item, where.at(str(i))) for i, v in enumerate(value))
    if hint is type(None):
        if value is None:
            return None
    elif hint is float:
        if isinstance(value, float) or (isinstance(value, int) and not isinstance(value, bool)):
            return float(value)
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(hint, type) and isinstance(value, hint):
        return value
    raise where.error(f"wrong type: expected {hint_name(hint)}, got {type(value).__name__} {value!r}")


def hint_name(hint: Any) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(hint_name(a) for a in typing.get_args(hint))
    if typing.get_origin(hint) is typing.Literal:
        return " or ".join(repr(a) for a in typing.get_args(hint))
    return "null" if hint is type(None) else getattr(hint, "__name__", str(hint))
