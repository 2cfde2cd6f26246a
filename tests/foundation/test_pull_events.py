"""Issue 40 (hostile pass): a pull's heartbeat reads what Docker's event stream says of each layer, and an
event it cannot read is skipped, never the run's end (exit 70).

Kind: *a progress reader that trusts the shape of a remote's events*. Members: ``progressDetail`` not an
object, byte counts as strings, as floats past any size or NaN, negative, booleans, an event that is not
an object. The real pull through dockerd and the local registry is ``tests/containers/test_pull_progress.py``;
a conforming daemon never sends these, a proxy in front of its API can, so the stream is given here by a
client object whose ``api.pull`` yields them (the parsing loop is what is tested)."""

from __future__ import annotations

import math

import docker
import pytest

from bisectbot import progress
from bisectbot.components import _byte_count, ensure_image


class _Images:
    def __init__(self) -> None:
        self.pulled = False

    def get(self, image: str) -> str:
        if not self.pulled:
            raise docker.errors.ImageNotFound("no")
        return "IMAGE"


class _Client:
    def __init__(self, events: list) -> None:
        self.images, self.api, self._events = _Images(), self, events

    def pull(self, image: str, stream: bool, decode: bool):
        yield from self._events
        self.images.pulled = True


@pytest.mark.parametrize("v,want", [(5, 5), (5.0, 5), ("12.5MB", None), ("7", None), (True, None), (-1, None),
                                    (1e400, None), (math.nan, None), (None, None), ({}, None)])
def test_a_byte_count_is_a_non_negative_finite_number_or_none(v, want) -> None:
    assert _byte_count(v) == want


@pytest.mark.parametrize("ev", [
    {"id": "l1", "status": "Downloading", "progressDetail": {"current": 1, "total": "12.5MB"}},
    {"id": "l1", "status": "Downloading", "progressDetail": {"current": "n/a", "total": 100}},
    {"id": "l1", "status": "Downloading", "progressDetail": "50%"},
    {"id": "l1", "status": "Downloading", "progressDetail": {"current": 1, "total": 1e400}},
    {"id": "l1", "status": "Downloading", "progressDetail": {"current": 1, "total": math.nan}},
    ["not", "an", "event"],
])
def test_an_odd_pull_event_is_skipped(ev, monkeypatch) -> None:
    lines: list[str] = []
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.0)
    progress.enable(lines.append)
    try:
        events = [{"status": "Pulling from x/y", "id": "z"},
                  {"id": "l1", "status": "Downloading", "progressDetail": {"current": 10, "total": 100}}, ev,
                  {"id": "l1", "status": "Pull complete"}]
        assert ensure_image("x/y:z", _Client(events)) == "IMAGE"
    finally:
        progress.enable(None)
    assert any("10 of 100 B" in ln or "0 of 1 layers done" in ln for ln in lines), lines
    assert any("1 of 1 layers done" in ln for ln in lines), lines
