"""The protocol catalogue evaluates to exactly what the Python definitions gave (fixture written before the
move to YAML, see ``tests/protocol_snapshot.py``)."""

from __future__ import annotations

import json
from pathlib import Path

from protocol_snapshot import dumps, snapshot

FIXTURE = Path(__file__).parent / "data" / "protocols_snapshot.json"


def test_every_protocol_evaluates_as_before() -> None:
    before = json.loads(FIXTURE.read_text())
    now = json.loads(dumps(snapshot()))
    for part in ("closed_form", "fl"):
        for key in sorted(set(before[part]) | set(now[part])):
            assert dumps(now[part].get(key)) == dumps(before[part].get(key)), f"{part}/{key} changed"
