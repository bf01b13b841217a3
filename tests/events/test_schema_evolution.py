"""Schema evolution: event versions, upcasters, and refusing what cannot be read."""

from __future__ import annotations

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
    IpcSubscribed,
    PrivateSet,
    PromptRejected,
    UnknownEventTypeError,
    register_upcaster,
    unregister_upcaster,
)


# Redeclaring ``v`` makes it a positional field with a default ahead of the required
# ones, which msgspec refuses unless the subclass is ``kw_only=True``.
class Renamed(AgentEvent, frozen=True, kw_only=True):
    """A test-only event type at version 2: version 1 called ``value`` ``val``."""

    v: int = 2
    value: str


class ThreeStep(AgentEvent, frozen=True, kw_only=True):
    """A test-only event type at version 3: v1 ``a`` -> v2 ``b`` -> v3 ``c``."""

    v: int = 3
    c: str


def old_renamed(**overrides: Any) -> bytes:
    record: dict[str, Any] = {"type": "Renamed", "v": 1, "at": 1.0, "id": "x", "agent": "a", "val": "old"}
    record.update(overrides)
    return msgspec.msgpack.encode(record)


def rename_val_to_value(raw: dict[str, Any]) -> dict[str, Any]:
    raw["value"] = raw.pop("val")
    return raw


def uppercase_value(raw: dict[str, Any]) -> dict[str, Any]:
    return {**raw, "value": str(raw["value"]).upper()}


@pytest.fixture
def codec() -> EventCodec:
    return EventCodec((*EVENT_TYPES, Renamed, ThreeStep))


class TestVersions:
    def test_every_event_type_of_the_package_is_at_version_one_but_two_at_two(self) -> None:
        at_two = (IpcSubscribed, PromptRejected)
        assert {name: DEFAULT_CODEC.current_version(name) for name in DEFAULT_CODEC.types} == {
            cls.__name__: 2 if cls in at_two else 1 for cls in EVENT_TYPES
        }

    def test_a_version_one_refusal_reads_with_no_session(self) -> None:
        # PromptRejected gained ``session`` at version 2: a cogfabric that knows only
        # version 1 refuses the new records by name, instead of dropping the field.
        raw = {"type": "PromptRejected", "v": 1, "at": 1.0, "id": "x", "agent": None, "length": 9, "limit": 8}

        event = DEFAULT_CODEC.decode(msgspec.msgpack.encode(raw))

        assert isinstance(event, PromptRejected)
        assert (event.session, event.v, event.id) == (None, 2, "x")
        # one written with a session at version 1 (for a while, before the bump) keeps it
        named = DEFAULT_CODEC.decode(msgspec.msgpack.encode({**raw, "session": "s1"}))
        assert isinstance(named, PromptRejected)
        assert named.session == "s1"

    @pytest.mark.parametrize(
        "upcasters",
        [
            {("Renamed", 1): None},
            {("Renamed", True): rename_val_to_value},
            {("Nope", 1): rename_val_to_value},
        ],
    )
    def test_a_codec_refuses_the_upcasters_register_upcaster_would(self, upcasters: Any) -> None:
        with pytest.raises((TypeError, ValueError)):
            EventCodec((*EVENT_TYPES, Renamed), upcasters)

    def test_a_codec_may_replace_a_built_in_upcaster(self) -> None:
        def later(raw: dict[str, Any]) -> dict[str, Any]:
            return {**raw, "order": 7}

        codec = EventCodec(EVENT_TYPES, {("IpcSubscribed", 1): later})
        raw = {"type": "IpcSubscribed", "v": 1, "at": 1.0, "id": "x", "agent": "a", "topic": "t"}

        event = codec.decode(msgspec.msgpack.encode(raw))

        assert isinstance(event, IpcSubscribed)
        assert event.order == 7

    @pytest.mark.parametrize("make", [lambda: DEFAULT_CODEC, EventCodec, lambda: EventCodec(EVENT_TYPES)])
    def test_a_version_one_subscription_reads_as_order_zero_in_every_codec_of_the_built_in_types(
        self, make: Any
    ) -> None:
        raw = {"type": "IpcSubscribed", "v": 1, "at": 1.0, "id": "x", "agent": "a", "topic": "news"}

        event = make().decode(msgspec.msgpack.encode(raw))

        assert event == IpcSubscribed(at=1.0, id="x", agent="a", topic="news", order=0)
        assert event.v == 2

    def test_a_type_that_redeclares_its_version_reports_it(self, codec: EventCodec) -> None:
        assert codec.current_version("Renamed") == 2
        assert codec.current_version("ThreeStep") == 3
        assert Renamed(at=1.0, agent="a", value="x").v == 2

    def test_the_current_version_of_an_unknown_type_raises(self, codec: EventCodec) -> None:
        with pytest.raises(UnknownEventTypeError, match="Nope"):
            codec.current_version("Nope")

    def test_a_custom_codec_round_trips_its_own_type_at_its_current_version(self, codec: EventCodec) -> None:
        event = Renamed(at=1.0, agent="a", value="new")

        assert codec.decode(codec.encode(event)) == event

    def test_the_default_codec_does_not_know_a_custom_type(self, codec: EventCodec) -> None:
        data = codec.encode(Renamed(at=1.0, agent="a", value="new"))

        with pytest.raises(UnknownEventTypeError, match="Renamed"):
            DEFAULT_CODEC.decode(data)


class TestUpcasting:
    def test_an_old_record_is_upcast_to_the_current_version_on_read(self, codec: EventCodec) -> None:
        codec.register_upcaster("Renamed", 1, rename_val_to_value)

        event = codec.decode(old_renamed())

        assert isinstance(event, Renamed)
        assert event.v == 2
        assert event.value == "old"
        assert (event.at, event.id, event.agent) == (1.0, "x", "a")

    def test_without_an_upcaster_an_old_record_raises_the_version_error(self, codec: EventCodec) -> None:
        with pytest.raises(EventVersionError, match="Renamed") as info:
            codec.decode(old_renamed())

        assert (info.value.type_name, info.value.stored, info.value.known) == ("Renamed", 1, 2)
        assert "no upcaster from version 1" in str(info.value)

    def test_the_upcaster_runs_even_when_the_old_record_fits_the_new_schema(self, codec: EventCodec) -> None:
        codec.register_upcaster("Renamed", 1, uppercase_value)
        data = msgspec.msgpack.encode(
            {"type": "Renamed", "v": 1, "at": 1.0, "id": "x", "agent": "a", "value": "old"}
        )

        event = codec.decode(data)

        assert isinstance(event, Renamed)
        assert event.value == "OLD"
        assert event.v == 2

    def test_upcasters_given_to_the_constructor_are_used(self) -> None:
        codec = EventCodec((Renamed,), upcasters={("Renamed", 1): rename_val_to_value})

        event = codec.decode(old_renamed())

        assert event == Renamed(at=1.0, id="x", agent="a", value="old")

    def test_upcasters_chain_one_version_at_a_time(self, codec: EventCodec) -> None:
        seen: list[int] = []

        def one_to_two(raw: dict[str, Any]) -> dict[str, Any]:
            seen.append(raw["v"])
            return {**raw, "b": raw.pop("a") + "-2"}

        def two_to_three(raw: dict[str, Any]) -> dict[str, Any]:
            seen.append(raw["v"])
            return {**raw, "c": raw.pop("b") + "-3"}

        codec.register_upcaster("ThreeStep", 1, one_to_two)
        codec.register_upcaster("ThreeStep", 2, two_to_three)
        data = msgspec.msgpack.encode({"type": "ThreeStep", "v": 1, "at": 1.0, "agent": "a", "a": "x"})

        event = codec.decode(data)

        assert isinstance(event, ThreeStep)
        assert event.c == "x-2-3"
        assert event.v == 3
        assert seen == [1, 1]

    def test_a_record_at_a_middle_version_starts_from_its_own_upcaster(self, codec: EventCodec) -> None:
        codec.register_upcaster("ThreeStep", 2, lambda raw: {**raw, "c": raw.pop("b")})
        data = msgspec.msgpack.encode({"type": "ThreeStep", "v": 2, "at": 1.0, "agent": "a", "b": "y"})

        event = codec.decode(data)

        assert isinstance(event, ThreeStep)
        assert event.c == "y"

    def test_a_gap_in_the_upcaster_chain_raises_the_version_error_naming_the_gap(
        self, codec: EventCodec
    ) -> None:
        codec.register_upcaster("ThreeStep", 1, lambda raw: {**raw, "b": raw.pop("a")})
        data = msgspec.msgpack.encode({"type": "ThreeStep", "v": 1, "at": 1.0, "agent": "a", "a": "x"})

        with pytest.raises(EventVersionError, match="no upcaster from version 2"):
            codec.decode(data)

    def test_a_record_newer_than_the_custom_type_raises_the_version_error(self, codec: EventCodec) -> None:
        codec.register_upcaster("Renamed", 1, rename_val_to_value)

        with pytest.raises(EventVersionError, match="newer") as info:
            codec.decode(old_renamed(v=3, value="future"))

        assert (info.value.stored, info.value.known) == (3, 2)

    def test_an_upcaster_that_produces_an_invalid_record_raises_an_event_decode_error(
        self, codec: EventCodec
    ) -> None:
        codec.register_upcaster("Renamed", 1, lambda raw: raw)

        with pytest.raises(EventDecodeError, match="upcast from version 1") as info:
            codec.decode(old_renamed())

        assert not isinstance(info.value, EventVersionError)

    def test_an_upcaster_cannot_change_the_type_or_the_version(self, codec: EventCodec) -> None:
        codec.register_upcaster(
            "Renamed", 1, lambda raw: {**rename_val_to_value(raw), "type": "PrivateSet", "v": 99}
        )

        event = codec.decode(old_renamed())

        assert isinstance(event, Renamed)
        assert event.v == 2

    @pytest.mark.parametrize("returned_id", ["dropped", "changed"])
    def test_an_upcaster_cannot_change_the_id(self, codec: EventCodec, returned_id: str) -> None:
        # The id is the record's identity (retries and causes name it): an upcaster that
        # rebuilt the dict without it gave every read a fresh id.
        def upcast(raw: dict[str, Any]) -> dict[str, Any]:
            out = rename_val_to_value(raw)
            if returned_id == "dropped":
                del out["id"]
            else:
                out["id"] = "another"
            return out

        codec.register_upcaster("Renamed", 1, upcast)

        events = [codec.decode(old_renamed()) for _ in range(2)]

        assert [event.id for event in events] == ["x", "x"]

    def test_a_failing_upcaster_is_named_with_the_versions_of_the_record(self, codec: EventCodec) -> None:
        codec.register_upcaster("ThreeStep", 1, lambda raw: {**raw, "b": raw.pop("a")})
        codec.register_upcaster("ThreeStep", 2, lambda raw: raw["nothing"])
        record = msgspec.msgpack.encode(
            {"type": "ThreeStep", "v": 1, "at": 1.0, "id": "x", "agent": "a", "a": "1"}
        )

        named = r"stored at version 1 .* upcaster from version 2 .* KeyError"
        with pytest.raises(EventDecodeError, match=named):
            codec.decode(record)

    def test_registering_a_second_upcaster_for_one_step_is_refused(self, codec: EventCodec) -> None:
        codec.register_upcaster("Renamed", 1, rename_val_to_value)

        with pytest.raises(ValueError, match="registered already"):
            codec.register_upcaster("Renamed", 1, uppercase_value)
        event = codec.decode(old_renamed())
        assert isinstance(event, Renamed)
        assert event.value == "old"  # the first one stays
        codec.unregister_upcaster("Renamed", 1)
        codec.register_upcaster("Renamed", 1, uppercase_value)  # replacing takes an unregister

    @pytest.mark.parametrize(
        ("from_version", "upcaster"), [(1, None), (1, "not callable"), (True, rename_val_to_value)]
    )
    def test_an_upcaster_that_is_no_function_or_a_version_that_is_no_int_is_refused_when_registered(
        self, codec: EventCodec, from_version: Any, upcaster: Any
    ) -> None:
        with pytest.raises(TypeError):
            codec.register_upcaster("Renamed", from_version, upcaster)

    def test_a_current_record_with_a_bad_field_is_a_decode_error_not_a_version_error(
        self, codec: EventCodec
    ) -> None:
        codec.register_upcaster("Renamed", 1, rename_val_to_value)

        with pytest.raises(EventDecodeError) as info:
            codec.decode(old_renamed(v=2, value=5))

        assert not isinstance(info.value, EventVersionError)

    def test_unregistering_an_upcaster_makes_old_records_unreadable_again(self, codec: EventCodec) -> None:
        codec.register_upcaster("Renamed", 1, rename_val_to_value)
        codec.unregister_upcaster("Renamed", 1)
        codec.unregister_upcaster("Renamed", 1)

        with pytest.raises(EventVersionError):
            codec.decode(old_renamed())

    def test_registering_on_one_codec_leaves_the_default_codec_alone(self, codec: EventCodec) -> None:
        codec.register_upcaster("Renamed", 1, rename_val_to_value)
        old_private_set = msgspec.msgpack.encode(
            {"type": "PrivateSet", "v": 0, "at": 1.0, "id": "x", "agent": "a", "key": "k"}
        )

        with pytest.raises(EventVersionError):
            DEFAULT_CODEC.decode(old_private_set)


class TestRegisterUpcaster:
    @pytest.mark.parametrize("from_version", [2, 3, -1], ids=["current", "newer", "negative"])
    def test_an_upcaster_must_start_from_an_older_version(self, codec: EventCodec, from_version: int) -> None:
        with pytest.raises(ValueError, match="Renamed is at version 2"):
            codec.register_upcaster("Renamed", from_version, rename_val_to_value)

    def test_an_upcaster_for_an_unknown_type_raises(self, codec: EventCodec) -> None:
        with pytest.raises(UnknownEventTypeError, match="Nope"):
            codec.register_upcaster("Nope", 0, rename_val_to_value)

    def test_the_default_codec_refuses_an_upcaster_for_an_unknown_type(self) -> None:
        with pytest.raises(UnknownEventTypeError, match="Renamed") as info:
            register_upcaster("Renamed", 1, rename_val_to_value)

        assert info.value.type_name == "Renamed"

    def test_the_default_codec_refuses_an_upcaster_from_the_current_version(self) -> None:
        with pytest.raises(ValueError, match="PrivateSet is at version 1"):
            register_upcaster("PrivateSet", 1, lambda raw: raw)

    def test_a_built_in_upcaster_of_the_default_codec_can_be_replaced(self) -> None:
        old = msgspec.msgpack.encode(
            {"type": "IpcSubscribed", "v": 1, "at": 1.0, "id": "x", "agent": "a", "topic": "news"}
        )
        built_in = DEFAULT_CODEC._upcasters[("IpcSubscribed", 1)]
        try:
            unregister_upcaster("IpcSubscribed", 1)
            with pytest.raises(EventVersionError):
                DEFAULT_CODEC.decode(old)
            register_upcaster("IpcSubscribed", 1, lambda raw: {**raw, "order": 7})

            assert DEFAULT_CODEC.decode(old) == IpcSubscribed(
                at=1.0, id="x", agent="a", topic="news", order=7
            )
        finally:
            unregister_upcaster("IpcSubscribed", 1)
            register_upcaster("IpcSubscribed", 1, built_in)
        assert DEFAULT_CODEC.decode(old) == IpcSubscribed(at=1.0, id="x", agent="a", topic="news", order=0)

    def test_unregistering_no_upcaster_is_a_no_op(self) -> None:
        before = dict(DEFAULT_CODEC._upcasters)

        unregister_upcaster("PrivateSet", 0)

        assert DEFAULT_CODEC._upcasters == before

    @pytest.mark.parametrize(
        ("type_name", "from_version", "error"),
        [("IpcSubscribd", 1, UnknownEventTypeError), ("IpcSubscribed", True, TypeError)],
        ids=["misspelt type", "bool version"],
    )
    def test_unregistering_is_checked_as_registering_is(
        self, type_name: str, from_version: int, error: type[Exception]
    ) -> None:
        before = dict(DEFAULT_CODEC._upcasters)

        with pytest.raises(error):
            unregister_upcaster(type_name, from_version)

        assert DEFAULT_CODEC._upcasters == before

    def test_the_default_codec_still_reads_current_records_after_refusals(self) -> None:
        event = PrivateSet(at=1.0, agent="a", key="k", value=1)

        assert DEFAULT_CODEC.decode(DEFAULT_CODEC.encode(event)) == event


class TestFailingUpcasters:
    def test_an_upcaster_that_raises_on_a_malformed_old_record_gives_an_event_decode_error(self) -> None:
        codec = EventCodec((Renamed,), {("Renamed", 1): rename_val_to_value})
        malformed = msgspec.msgpack.encode({"type": "Renamed", "v": 1, "at": 1.0, "agent": "a"})

        with pytest.raises(EventDecodeError, match="could not be upcast") as info:
            codec.decode(malformed)

        assert isinstance(info.value.__cause__, KeyError)

    def test_an_upcaster_that_returns_no_dict_gives_an_event_decode_error(self) -> None:
        def broken(raw: dict[str, Any]) -> Any:  # noqa: ARG001 - an upcaster that forgets its input
            return None

        codec = EventCodec((Renamed,), {("Renamed", 1): broken})

        with pytest.raises(EventDecodeError, match="not a dict"):
            codec.decode(old_renamed())
