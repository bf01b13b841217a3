"""Pins of the event codec's promises that no other test held (found by mutation testing)."""

from __future__ import annotations

import datetime as dt
import threading
import types
from typing import Any

import msgspec
import pytest

from cogfabric.events import (
    DEFAULT_CODEC,
    EVENT_TYPES,
    AgentEvent,
    EventCodec,
    EventDecodeError,
    EventVersionError,
    InvalidEventError,
    InvalidTextError,
    Message,
    PrivateSet,
    UnencodableValueError,
    encode_value,
)
from cogfabric.events._codec import journal_repr, journal_text, nests_too_deeply, validated


class Renamed(AgentEvent, frozen=True, kw_only=True):
    """A test-only event type at version 2, with a plain (unpinned) version field."""

    v: int = 2
    value: str


def _renamed(v: int, **fields: Any) -> bytes:
    return msgspec.msgpack.encode({"type": "Renamed", "v": v, "at": 1.0, "id": "x", "agent": "a", **fields})


def _uppercase(raw: dict[str, Any]) -> dict[str, Any]:
    return {**raw, "value": str(raw["value"]).upper()}


class _FailingOffset(dt.tzinfo):
    """A time zone whose offset raises: msgspec's encoding of a datetime then raises ValueError."""

    def utcoffset(self, when: dt.datetime | None) -> dt.timedelta:  # noqa: ARG002 - it fails for any
        msg = "no offset"
        raise ValueError(msg)

    def dst(self, when: dt.datetime | None) -> None:  # noqa: ARG002 - no daylight saving
        return None

    def tzname(self, when: dt.datetime | None) -> str:  # noqa: ARG002 - one name
        return "failing"


BAD_TIME = dt.datetime(2020, 1, 1, tzinfo=_FailingOffset())


class TestEncodeErrors:
    def test_a_value_whose_encoding_raises_value_error_is_unencodable(self) -> None:
        with pytest.raises(UnencodableValueError):
            encode_value({"when": BAD_TIME})
        with pytest.raises(UnencodableValueError, match="PrivateSet"):
            DEFAULT_CODEC.encode(PrivateSet(at=1.0, agent="a", key="k", value=BAD_TIME))
        with pytest.raises(UnencodableValueError, match="PrivateSet"):
            DEFAULT_CODEC.encode_many([PrivateSet(at=1.0, agent="a", key="k", value=BAD_TIME)])


class TestPinned:
    def test_a_codec_of_the_built_in_types_is_pinned(self) -> None:
        assert DEFAULT_CODEC.pinned is True
        assert EventCodec(EVENT_TYPES).pinned is True

    @pytest.mark.parametrize("types_", [(Renamed,), (*EVENT_TYPES, Renamed)], ids=["alone", "with-built-ins"])
    def test_a_codec_holding_a_plain_version_field_is_not_pinned(self, types_: tuple[type[Any], ...]) -> None:
        assert EventCodec(types_).pinned is False

    def test_decode_many_upcasts_an_old_record_that_fits_the_current_schema(self) -> None:
        # The typed decode alone accepts a v1 Renamed that has ``value``: only the
        # per-record check sends it through the upcaster.
        codec = EventCodec((*EVENT_TYPES, Renamed), {("Renamed", 1): _uppercase})
        current = PrivateSet(at=1.0, agent="a", key="k", value=1)

        events = codec.decode_many([codec.encode(current), _renamed(1, value="old")])

        assert events == [current, Renamed(at=1.0, id="x", agent="a", value="OLD")]
        assert events[1].v == 2


class TestUpcasterSteps:
    def test_an_upcaster_may_start_from_version_zero(self) -> None:
        codec = EventCodec((Renamed,))
        codec.register_upcaster("Renamed", 0, lambda raw: {**raw, "val": raw.pop("old")})
        codec.register_upcaster("Renamed", 1, lambda raw: {**raw, "value": raw.pop("val")})

        assert codec.decode(_renamed(0, old="o")) == Renamed(at=1.0, id="x", agent="a", value="o")

    @pytest.mark.parametrize("error", [TypeError, ValueError, AttributeError, RuntimeError])
    def test_any_exception_of_an_upcaster_is_an_event_decode_error(self, error: type[Exception]) -> None:
        def upcast(raw: dict[str, Any]) -> dict[str, Any]:
            raise error(raw["value"])

        codec = EventCodec((Renamed,), {("Renamed", 1): upcast})

        with pytest.raises(EventDecodeError, match="could not be upcast") as info:
            codec.decode(_renamed(1, value="old"))

        assert type(info.value.__cause__) is error

    def test_an_upcaster_returning_a_read_only_mapping_is_refused_as_no_dict(self) -> None:
        def read_only(raw: dict[str, Any]) -> Any:  # an upcaster that breaks its contract
            return types.MappingProxyType(raw)

        codec = EventCodec((Renamed,), {("Renamed", 1): read_only})

        with pytest.raises(EventDecodeError, match="not a dict"):
            codec.decode(_renamed(1, value="old"))

    def test_an_upcaster_returning_an_unencodable_value_is_an_event_decode_error(self) -> None:
        codec = EventCodec((Renamed,), {("Renamed", 1): lambda raw: {**raw, "value": object()}})

        with pytest.raises(EventDecodeError, match="upcast from version 1 is not valid at version"):
            codec.decode(_renamed(1, value="old"))


class TestStoredVersions:
    @pytest.mark.parametrize("stored", [True, 1.0], ids=["bool", "float"])
    def test_a_version_that_is_no_int_is_refused_not_upcast(self, stored: object) -> None:
        raw = {"type": "IpcSubscribed", "v": stored, "at": 1.0, "id": "x", "agent": "a", "topic": "t"}

        with pytest.raises(EventDecodeError, match="not an integer") as info:
            DEFAULT_CODEC.decode(msgspec.msgpack.encode(raw))

        assert not isinstance(info.value, EventVersionError)

    def test_a_record_with_no_version_reads_as_the_current_one_also_when_it_is_malformed(self) -> None:
        # the typed decode fills in the current version; the checked path read 1 and let
        # the upcaster from 1 "repair" a forged order
        raw = {"type": "IpcSubscribed", "at": 1.0, "id": "x", "agent": "a", "topic": "t", "order": 3}
        assert DEFAULT_CODEC.decode(msgspec.msgpack.encode(raw)).v == 2
        with pytest.raises(EventDecodeError, match=r"not a valid IpcSubscribed record.*order"):
            DEFAULT_CODEC.decode(msgspec.msgpack.encode({**raw, "order": -5}))

    def test_a_malformed_record_with_no_version_is_no_version_error(self) -> None:
        raw = {"type": "PrivateSet", "at": 1.0, "id": "x", "agent": "a", "key": 5}

        with pytest.raises(EventDecodeError) as info:
            DEFAULT_CODEC.decode(msgspec.msgpack.encode(raw))

        assert not isinstance(info.value, EventVersionError)


def test_an_encoding_too_deep_to_decode_nests_too_deeply() -> None:
    assert nests_too_deeply(b"\x91" * 5000 + b"\x01") is True
    assert nests_too_deeply(b"\x91" * 10 + b"\x01") is False


class _Interrupting:
    def __str__(self) -> str:
        raise KeyboardInterrupt


def test_a_ctrl_c_in_str_reaches_the_main_thread() -> None:
    with pytest.raises(KeyboardInterrupt):
        journal_text(_Interrupting())


def test_a_ctrl_c_in_str_on_another_thread_gives_the_placeholder() -> None:
    seen: list[str] = []
    worker = threading.Thread(target=lambda: seen.append(journal_text(_Interrupting())))
    worker.start()
    worker.join()

    assert seen == ["<_Interrupting whose str() failed>"]


def test_journal_repr_keeps_1000_characters_by_default() -> None:
    assert len(journal_repr("x" * 5000)) == 1000
    assert len(journal_repr("x" * 5000, None)) == 5002


class TestValidated:
    def test_a_text_field_holding_none_is_an_invalid_text_error(self) -> None:
        with pytest.raises(InvalidTextError, match=r"Message\.role"):
            validated(Message(role=None, content="c"))  # type: ignore[arg-type]

    @pytest.mark.parametrize("time", [object(), BAD_TIME], ids=["type-error", "value-error"])
    def test_an_unencodable_field_is_an_invalid_event_error(self, time: object) -> None:
        with pytest.raises(InvalidEventError, match="not a valid Message"):
            validated(Message(role="user", content="c", time=time))  # type: ignore[arg-type]
