"""The event codec pinned where a second mutation test of ``events/_codec.py`` found no test holding it.

Each test here failed under a small change of ``events/_codec.py`` (a bound left out,
a loop stopped early, an error naming the wrong version) that every test of
``tests/events``, ``tests/store`` and the event contract tests let through.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
import pytest

from cogfabric.events import (
    DEFAULT_CODEC,
    EVENT_TYPES,
    AgentEvent,
    CognitiveState,
    CognitiveStateSchemaVersionError,
    CognitiveStateSet,
    EventCodec,
    EventDecodeError,
    EventVersionError,
    IpcSubscribed,
    PrivateSet,
)

from .test_codec_pins import Renamed, _renamed, _uppercase
from .test_schema_evolution import ThreeStep


class CappedOnly(AgentEvent, frozen=True, kw_only=True, tag="Renamed"):
    """A test-only event type at version 2 whose version is bounded above only (``le``, no ``ge``)."""

    v: Annotated[int, msgspec.Meta(le=2)] = 2
    value: str


def test_a_version_bounded_only_above_is_not_pinned_and_its_old_records_are_upcast() -> None:
    # Its typed decode takes a version-1 record as it is: decode_many must not trust it alone.
    codec = EventCodec((*EVENT_TYPES, CappedOnly), {("Renamed", 1): _uppercase})
    current = PrivateSet(at=1.0, agent="a", key="k", value=1)

    assert codec.pinned is False
    events = codec.decode_many([codec.encode(current), _renamed(1, value="old")])

    assert events == [current, CappedOnly(at=1.0, id="x", agent="a", value="OLD")]


def _subscribed_v1(topic: str) -> bytes:
    raw = msgspec.to_builtins(IpcSubscribed(at=1.0, id=topic, agent="a", topic=topic))
    del raw["order"]
    return msgspec.msgpack.encode({**raw, "v": 1})


class TestDecodeManyReturnsEveryEvent:
    """On its one-by-one path, decode_many decodes every payload, in order, not only the first few."""

    def test_a_pinned_codec_reading_old_records_among_current_ones(self) -> None:
        sets = [PrivateSet(at=float(i), agent="a", key=f"k{i}", value=i) for i in range(4)]
        olds = [IpcSubscribed(at=1.0, id=topic, agent="a", topic=topic, order=0) for topic in ("t1", "t2")]
        expected = [sets[0], olds[0], sets[1], olds[1], sets[2], sets[3]]
        payloads = [
            _subscribed_v1(event.topic) if isinstance(event, IpcSubscribed) else DEFAULT_CODEC.encode(event)
            for event in expected
        ]

        assert DEFAULT_CODEC.decode_many(payloads) == expected

    def test_a_codec_that_is_not_pinned(self) -> None:
        codec = EventCodec((*EVENT_TYPES, Renamed), {("Renamed", 1): _uppercase})
        values = [f"value {i}" for i in range(6)]
        payloads = [_renamed(1 + i % 2, value=value) for i, value in enumerate(values)]

        events = codec.decode_many(payloads)

        expected = [value.upper() if i % 2 == 0 else value for i, value in enumerate(values)]
        assert [event.value for event in events] == expected  # type: ignore[attr-defined]
        assert {event.v for event in events} == {2}


def test_a_gap_in_the_upcaster_chain_names_the_records_own_version() -> None:
    codec = EventCodec((ThreeStep,))
    codec.register_upcaster("ThreeStep", 1, lambda raw: {**raw, "b": raw.pop("a")})
    data = msgspec.msgpack.encode({"type": "ThreeStep", "v": 1, "at": 1.0, "id": "x", "agent": "a", "a": "x"})

    with pytest.raises(
        EventVersionError, match="at version 1, not upgradable to the known version 3"
    ) as info:
        codec.decode(data)

    assert (info.value.type_name, info.value.stored, info.value.known) == ("ThreeStep", 1, 3)
    assert "no upcaster from version 2" in str(info.value)


@pytest.mark.parametrize("version", [2.0, 2.5], ids=["whole", "fraction"])
def test_a_state_whose_schema_version_is_a_float_is_malformed_not_newer(version: float) -> None:
    raw = msgspec.to_builtins(CognitiveStateSet(at=1.0, agent="a", state=CognitiveState(schema_version=1)))
    raw["state"]["schema_version"] = version

    with pytest.raises(EventDecodeError, match="not a valid CognitiveStateSet record") as info:
        DEFAULT_CODEC.decode(msgspec.msgpack.encode(raw))

    assert not isinstance(info.value, (EventVersionError, CognitiveStateSchemaVersionError))
