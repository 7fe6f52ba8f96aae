"""One registry pattern for everything looked up by name (timm's ``register_model`` / ``list_models``).

A :class:`Registry` maps names to entries of one kind (closed-form methods, FL methods, datasets,
backbones, preprocessing presets, protocols). Entries register themselves where they are defined
(``registry.add(name, entry)`` or the ``@registry.register(name)`` decorator); every list of names the
suite needs is derived from the registry (:meth:`Registry.names`), never kept by hand, so that a newly
registered entry is seen by the workflow and by the contract tests in ``tests/contracts/`` at once.

Registries whose entries live in modules that are imported lazily take a ``loader``: a function that
imports those modules, called before any lookup. :meth:`Registry.names` keeps registration order (the
order the loader imports the modules in); :meth:`Registry.sorted_names` sorts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

from benchmark.errors import UnknownNameError

T = TypeVar("T")
F = TypeVar("F")


def lookup(table: Mapping[str, T], name: str, message: str) -> T:
    """``table[name]``; else :class:`UnknownNameError` with ``message`` and the fix listing ``table``'s names, sorted."""
    try:
        return table[name]
    except KeyError:
        raise UnknownNameError(message, f"use one of: {', '.join(sorted(table))}") from None


class Registry(Generic[T]):
    """Entries of one ``kind`` by name; unknown names raise :class:`UnknownNameError` listing the known ones.

    ``kind`` names the registry in messages ("closed-form method", "dataset", ...). ``loader``, if given,
    imports the modules whose entries register themselves; it runs once, before the first lookup.
    """

    def __init__(self, kind: str, *, loader: Callable[[], None] | None = None) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._loader = loader
        self._loading = False

    def _load(self) -> None:
        if self._loader is not None and not self._loading:
            self._loading = True  # stays set: the loader's imports register through add(), not lookups
            self._loader()

    def add(self, name: str, entry: T) -> T:
        """Register ``entry`` under ``name`` and return it; a name registered twice is a ``ValueError``."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} registered twice")
        self._entries[name] = entry
        return entry

    def register(self, name: str, make: Callable[[F], T]) -> Callable[[F], F]:
        """Decorator: register ``make(fn)`` under ``name`` and return ``fn`` unchanged."""

        def deco(fn: F) -> F:
            self.add(name, make(fn))
            return fn

        return deco

    def remove(self, name: str) -> T:
        """Drop ``name`` (tests that register a temporary entry clean up with this)."""
        return self._entries.pop(name)

    def get(self, name: str) -> T:
        """The entry ``name``; :class:`UnknownNameError` listing the registered names otherwise."""
        self._load()
        return lookup(self._entries, name, f"unknown {self.kind} {name!r}")

    def names(self) -> tuple[str, ...]:
        """Registered names in registration order."""
        self._load()
        return tuple(self._entries)

    def sorted_names(self) -> list[str]:
        """Registered names, sorted."""
        self._load()
        return sorted(self._entries)

    def items(self) -> Iterator[tuple[str, T]]:
        """``(name, entry)`` pairs in registration order."""
        self._load()
        return iter(list(self._entries.items()))

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

    def __len__(self) -> int:
        self._load()
        return len(self._entries)
