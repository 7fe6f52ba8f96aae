"""The generic registry (benchmark.registry): register, get with an error listing the names, order."""

from __future__ import annotations

import pytest

from benchmark.errors import UnknownNameError
from benchmark.registry import Registry


def test_register_get_names_in_registration_order():
    reg: Registry[int] = Registry("widget")
    reg.add("b", 2)
    assert reg.register("a", lambda fn: fn())(lambda: 1)() == 1
    assert reg.get("a") == 1 and reg.get("b") == 2
    assert reg.names() == ("b", "a") and reg.sorted_names() == ["a", "b"]
    assert "a" in reg and len(reg) == 2 and dict(reg.items()) == {"b": 2, "a": 1}


def test_unknown_name_lists_the_known_ones():
    reg: Registry[int] = Registry("widget")
    reg.add("x", 1)
    with pytest.raises(UnknownNameError, match=r"unknown widget 'y'.*use one of: x"):
        reg.get("y")


def test_twice_is_an_error_and_remove_undoes():
    reg: Registry[int] = Registry("widget")
    reg.add("x", 1)
    with pytest.raises(ValueError, match="registered twice"):
        reg.add("x", 2)
    assert reg.remove("x") == 1 and reg.names() == ()


def test_loader_runs_once_before_the_first_lookup():
    calls = []
    reg: Registry[int] = Registry("widget", loader=lambda: calls.append(reg.add("late", 3)))
    assert calls == []
    assert reg.get("late") == 3 and reg.names() == ("late",)
    assert calls == [3]
