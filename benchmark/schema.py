"""Strict schemas for the YAML files users write by hand: one check of a mapping against its known keys, and
errors that name the file, the line, the key and the closest valid key.

The hand-written files (``paper_tables/`` specs, the protocol catalogues of :mod:`benchmark.protocols`, the
cell protocols of ``expected/``) are read with :func:`read_yaml`: plain dicts and lists from YAML's safe
loader, exactly as before. The line of a key is looked up only when an error is raised (:meth:`YamlFile.line`
composes the node tree then), so a clean file costs nothing extra. A :class:`Where` is a place in such a file
(a key path); :func:`check_mapping` refuses unknown keys with one :class:`~benchmark.errors.ConfigError`::

    paper_tables/x.yaml:12: unknown key 'metirc' in runners[0].when -- did you mean 'metric'? (...)

:func:`coerce` checks a value against a type hint (str, int, float, bool, None, Literal, unions, tuples,
lists, dicts) with the same kind of error, and :func:`check_seeds` refuses a seed list with a duplicate (a
seed counted twice would bias the mean and the std), as :func:`check_one_per_seed` does for what reaches the
assembly.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmark.errors import ConfigError
from benchmark.suggest import did_you_mean

ROOT = Path(__file__).resolve().parents[1]
Key = str | int
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: Above this many valid keys an error names the closest ones and says where the list is, instead of all.
_LIST_AT_MOST = 30


def display_path(path: str | Path) -> str:
    """``path`` relative to the checkout when it lies inside it (``paper_tables/x.yaml``), else as given."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(ROOT))
    except (ValueError, OSError):
        return str(p)


def format_keys(keys: Sequence[Key]) -> str:
    """``("runners", 0, "when")`` -> ``runners[0].when`` (``""`` for the top level); a key that is not plain
    printable text is shown quoted (``methods['a\\n']``), so a message stays one line."""
    out = ""
    for k in keys:
        if isinstance(k, int) and not isinstance(k, bool):
            out += f"[{k}]"
        elif not isinstance(k, str) or not k.isprintable() or not k or any(c in k for c in ".[] "):
            out += f"[{k!r}]"
        else:
            out += f".{k}" if out else k
    return out


def one_line(text: str) -> str:
    """``text`` with its whitespace runs (newlines included) as single spaces: an error stays one line."""
    return " ".join(str(text).split())


# ------------------------------------------------------------------------------------------------ loading
@dataclass
class YamlFile:
    """A YAML file as read: its ``path``, ``text`` and ``data``; :meth:`line` finds where a key is."""

    path: Path
    text: str
    data: Any
    _lines: dict[tuple[Key, ...], int] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return display_path(self.path)

    def line(self, keys: Sequence[Key]) -> int | None:
        """1-based line of the key (or list item) at ``keys``, else of its nearest ancestor that has one."""
        if self._lines is None:
            self._lines = key_lines(self.text)
        keys = tuple(keys)
        while keys:
            if keys in self._lines:
                return self._lines[keys]
            keys = keys[:-1]
        return None

    def at(self, keys: Sequence[Key]) -> str:
        """``<file>:<line>`` of ``keys`` (``<file>`` alone when no line is known)."""
        line = self.line(keys)
        return f"{self.name}:{line}" if line else self.name


def parse_yaml(text: str, name: str) -> Any:
    """``text`` parsed by the safe loader; any parse problem is one :class:`ConfigError` with its line."""
    try:
        return yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{name}:{mark.line + 1}" if mark is not None else name
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where}: not valid YAML ({one_line(problem)})", "fix the file") from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:  # e.g. a date like 2001-13-45
        raise ConfigError(f"{name}: not valid YAML ({type(exc).__name__}: {one_line(str(exc))})", "fix the file") from None


def read_yaml(path: str | Path, *, missing_fix: str = "check the path") -> YamlFile:
    """Read and parse ``path``; an unreadable file or invalid YAML is one :class:`ConfigError` naming it."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{display_path(p)}: not UTF-8 text", "save the file as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {display_path(p)} ({exc.strerror or exc})", missing_fix) from None
    return YamlFile(p, text, parse_yaml(text, display_path(p)))


def key_lines(text: str) -> dict[tuple[Key, ...], int]:
    """``{key path: 1-based line}`` of every mapping key and list item of ``text`` (best effort: ``{}`` when the
    text cannot be composed)."""
    out: dict[tuple[Key, ...], int] = {}
    loader = _LOADER(text)
    try:
        root = loader.get_single_node()

        def walk(node: Any, keys: tuple[Key, ...]) -> None:
            if isinstance(node, yaml.MappingNode):
                for knode, vnode in node.value:
                    try:
                        key = loader.construct_object(knode, deep=True)
                        hash(key)
                    except Exception:  # an odd key just has no line
                        continue
                    out.setdefault((*keys, key), knode.start_mark.line + 1)
                    walk(vnode, (*keys, key))
            elif isinstance(node, yaml.SequenceNode):
                for i, item in enumerate(node.value):
                    out.setdefault((*keys, i), item.start_mark.line + 1)
                    walk(item, (*keys, i))

        if root is not None:
            walk(root, ())
    except Exception:  # lines are a courtesy of the error message, never a new error
        return out
    finally:
        loader.dispose()
    return out


# ----------------------------------------------------------------------------------------------- places
@dataclass(frozen=True)
class Where:
    """A place in a checked file, for error messages: ``<file>:<line>: [protocol '<name>':] ...``.

    ``field`` is the key path (relative to the entry ``protocol``, if any), shown after ``shown`` (a label
    such as ``paper_options``); ``base`` is the absolute key path of ``field``'s root in the file, used only to
    find the line. :meth:`at` goes deeper.
    """

    path: Path
    protocol: str | None = None
    field: tuple[Key, ...] = ()
    src: YamlFile | None = None
    base: tuple[Key, ...] = ()
    shown: tuple[Key, ...] = ()

    @classmethod
    def of(cls, src: YamlFile, *keys: Key, protocol: str | None = None) -> Where:
        """The place of ``keys`` in ``src``: shown as a field path, or as entry ``protocol`` at ``keys``."""
        if protocol is not None:
            return cls(src.path, protocol, (), src, tuple(keys))
        return cls(src.path, None, tuple(keys), src, ())

    def at(self, *keys: Key) -> Where:
        return Where(self.path, self.protocol, (*self.field, *keys), self.src, self.base, self.shown)

    @property
    def keys(self) -> tuple[Key, ...]:
        """The absolute key path (for the line)."""
        return (*self.base, *self.field)

    def location(self, keys: Sequence[Key] | None = None) -> str:
        """``<file>:<line>`` of this place (or of the absolute ``keys``)."""
        k = self.keys if keys is None else tuple(keys)
        if self.src is not None:
            return self.src.at(k)
        return display_path(self.path)

    @property
    def label(self) -> str:
        """The field path as shown (``runners[0].when``)."""
        return format_keys((*self.shown, *self.field))

    def _prefix(self, keys: Sequence[Key] | None = None) -> str:
        proto = f" protocol {self.protocol!r}:" if self.protocol is not None else ""
        return f"{self.location(keys)}:{proto}"

    def error(self, what: str, fix: str = "") -> ConfigError:
        """``<file>:<line>: [protocol 'p':] field 'a.b': <what>`` -- ``fix``."""
        fld = f" field {self.label!r}:" if self.label else ""
        return ConfigError(f"{self._prefix()}{fld} {what}", fix)

    def say(self, what: str, fix: str = "") -> ConfigError:
        """``<file>:<line>: [protocol 'p':] <what>`` -- ``fix`` (``what`` names the field itself)."""
        return ConfigError(f"{self._prefix()} {what}", fix)

    def unknown(self, key: Any, valid: Collection[str], *, listing: str | None = None) -> ConfigError:
        """The one error for an unknown ``key`` here: its file and line, where it is, the closest valid key."""
        inside = f" in {self.label}" if self.label else ""
        return ConfigError(
            f"{self._prefix((*self.keys, key))} unknown key {key!r}{inside}", valid_keys_hint(key, valid, listing)
        )

    def missing(self, key: str, what: str = "") -> ConfigError:
        inside = f" in {self.label}" if self.label else ""
        return ConfigError(f"{self._prefix()} missing key {key!r}{inside}", f"add it{f' ({what})' if what else ''}")


def valid_keys_hint(key: Any, valid: Collection[str], listing: str | None = None) -> str:
    """``did you mean 'x'? (valid keys: a, b, c)`` for an unknown ``key``; ``listing`` replaces a long list."""
    names = sorted(str(v) for v in valid)
    near = did_you_mean(str(key), names)
    if listing is None:
        listing = ", ".join(names) if len(names) <= _LIST_AT_MOST else f"{len(names)} keys, e.g. {', '.join(names[:8])}"
    body = f"(valid keys: {listing})" if names else "(no key is valid here)"
    return f"{near} {body}" if near else f"remove or rename it {body}"


# --------------------------------------------------------------------------------------------- mappings
def check_mapping(
    value: Any,
    where: Where,
    *,
    allowed: Mapping[str, str] | Collection[str] | None = None,
    required: Sequence[str] = (),
    listing: str | None = None,
) -> dict[str, Any]:
    """``value`` as a mapping with string keys; with ``allowed`` (keys, or key -> what it is) an unknown key is
    :meth:`Where.unknown` (the first in file order), a missing ``required`` one :meth:`Where.missing`."""
    if not isinstance(value, dict):
        raise where.error(f"expected a mapping, got {type(value).__name__} {_short(value)}")
    for key in value:
        if not isinstance(key, str):
            raise where.say(f"key {key!r}{_in(where)} is not a string", "quote it")
        if allowed is not None and key not in allowed:
            raise where.unknown(key, allowed, listing=listing)
    for key in required:
        if key not in value:
            what = allowed.get(key, "") if isinstance(allowed, Mapping) else ""
            raise where.missing(key, what)
    return value


def _in(where: Where) -> str:
    return f" in {where.label}" if where.label else ""


def _short(value: Any, n: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."


def check_name(value: Any, where: Where, known: Callable[[], Any], kind: str) -> str:
    """``value`` if it is a name in ``known()`` (a registry or a collection); an error listing them otherwise."""
    names = known()
    if not isinstance(value, str) or value not in names:
        listed = sorted(names) if not hasattr(names, "sorted_names") else names.sorted_names()
        near = did_you_mean(str(value), listed)
        raise where.error(f"unknown {kind} {value!r}", f"{near + ' ' if near else ''}use one of: {', '.join(listed)}")
    return value


# ------------------------------------------------------------------------------------------------ types
def coerce(value: Any, hint: Any, where: Where) -> Any:
    """``value`` checked against type ``hint`` (str, int, float, bool, None, Literal, unions, ``tuple[X, ...]``
    from a list, ``list[X]``, ``dict[str, X]``); an int is accepted where a float is expected (``1`` -> ``1.0``),
    nothing else is converted. A mismatch is :meth:`Where.error` naming the expected type and the value."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return value
    if origin is typing.Literal:
        if value in typing.get_args(hint) and type(value) in {type(a) for a in typing.get_args(hint)}:
            return value
        raise where.error(f"must be one of {list(typing.get_args(hint))}, got {_short(value)}")
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(hint):
            try:
                return coerce(value, arg, where)
            except ConfigError:
                continue
        raise _wrong_type(value, hint, where)
    if origin in (tuple, list):
        if not isinstance(value, list):
            raise _wrong_type(value, hint, where)
        (item,) = typing.get_args(hint)[:1] or (Any,)
        items = [coerce(v, item, where.at(i)) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin in (dict, Mapping) or hint in (dict, Mapping):
        if not isinstance(value, dict):
            raise _wrong_type(value, hint, where)
        kt, vt = typing.get_args(hint) or (Any, Any)
        for k in value:
            coerce(k, kt, where)
        return {k: coerce(v, vt, where.at(k)) for k, v in value.items()}
    if hint is type(None) or hint is None:
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
    raise _wrong_type(value, hint, where)


def _wrong_type(value: Any, hint: Any, where: Where) -> ConfigError:
    return where.error(f"wrong type: expected {hint_name(hint)}, got {type(value).__name__} {_short(value)}")


def hint_name(hint: Any) -> str:
    """A type hint as a user reads it: ``float``, ``int or null``, ``'a' or 'b'``, ``list of str``."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(hint_name(a) for a in typing.get_args(hint))
    if origin is typing.Literal:
        return " or ".join(repr(a) for a in typing.get_args(hint))
    if origin in (tuple, list):
        return f"list of {hint_name((typing.get_args(hint) or (Any,))[0])}"
    if origin in (dict, Mapping) or hint in (dict, Mapping):
        args = typing.get_args(hint)
        return f"mapping of {hint_name(args[0])} -> {hint_name(args[1])}" if args else "mapping"
    if hint is Any:
        return "any value"
    return "null" if hint is type(None) or hint is None else getattr(hint, "__name__", str(hint))


# ------------------------------------------------------------------------------------------------ seeds
def check_seeds(value: Any, where: Where, *, allow_empty: bool = False) -> tuple[int, ...]:
    """``value`` as a tuple of distinct non-negative integer seeds; a duplicate (counted twice, it would bias
    the mean and the std), a non-integer or a negative seed is one :class:`ConfigError` naming it."""
    if not isinstance(value, list):
        raise where.error(f"expected a list of seeds, got {type(value).__name__} {_short(value)}", "e.g. [0, 1, 2]")
    if not value and not allow_empty:
        raise where.error("no seed", "give at least one, e.g. [0]")
    seen: set[int] = set()
    for i, s in enumerate(value):
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise where.at(i).error(f"seed {_short(s)} is not a non-negative integer", "e.g. [0, 1, 2]")
        if s in seen:  # the line of the second one, the message about the whole list
            label = f" field {where.label!r}:" if where.label else ""
            raise where.at(i).say(
                f"{label.strip()} duplicated seed {s} in {value}".strip(),
                "list each seed once (a seed counted twice biases the mean and the std)",
            )
        seen.add(s)
    return tuple(value)


def check_one_per_seed(seeds: Iterable[Any], what: str) -> None:
    """Refuse ``seeds`` (one per run or value that reaches a verdict) that name a seed twice: two runs of one
    seed must never be averaged as two samples. ``what`` names the cell or file for the message."""
    counts: dict[Any, int] = {}
    for s in seeds:
        counts[s] = counts.get(s, 0) + 1
    dup = sorted((s for s, n in counts.items() if n > 1), key=str)
    if dup:
        raise ConfigError(
            f"{what}: seed {dup[0]} reaches the verdict {counts[dup[0]]} times (one run per seed expected)",
            "remove the duplicate run or row (or delete the file and rebuild it); a seed counted twice biases "
            "the mean and the std",
        )


def check_planned_seeds(jobs: Iterable[Any], what: str) -> None:
    """The jobs of one cell run each seed once (:func:`check_one_per_seed` on their ``seed`` fields): a plan
    that lists a seed twice would average one run with itself."""
    check_one_per_seed((j.seed for j in jobs if isinstance(getattr(j, "seed", None), int)), what)
