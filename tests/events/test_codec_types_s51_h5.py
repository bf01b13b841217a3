"""An EventCodec refuses a bad list of types in words that name the problem (helper h5)."""

from __future__ import annotations

import pytest

from cogfabric.events import EVENT_TYPES, AgentEvent, Event, EventCodec


class _Placed(Event, frozen=True, kw_only=True):
    order: str

    @property
    def stream(self) -> str:
        return "order/" + self.order


_FirstPlaced = _Placed


class _Placed(Event, frozen=True, kw_only=True):  # type: ignore[no-redef]  # another class of the same name
    customer: str = ""

    @property
    def stream(self) -> str:
        return "order/x"


class PrivateSet(AgentEvent, frozen=True, kw_only=True):
    """One of mine, named as one of the package's."""

    note: str = ""


class _Tagged(Event, frozen=True, kw_only=True, tag="_Placed"):
    @property
    def stream(self) -> str:
        return "order/t"


class _NoStream(Event, frozen=True, kw_only=True):
    pass


def test_two_types_of_one_tag_are_refused_naming_the_tag_and_both_classes() -> None:
    with pytest.raises(TypeError, match="two event types of the type tag '_Placed'") as same_name:
        EventCodec((_FirstPlaced, _Placed))
    with pytest.raises(TypeError, match="type tag 'PrivateSet'") as builtin:
        EventCodec((*EVENT_TYPES, PrivateSet))
    with pytest.raises(TypeError, match="type tag '_Placed'"):
        EventCodec((_FirstPlaced, _Tagged))

    assert "cogfabric.events._events.PrivateSet and " + __name__ + ".PrivateSet" in str(builtin.value)
    assert "AgentSpawned" not in str(builtin.value)  # not the whole union, as msgspec's own error lists it
    assert str(same_name.value).count("_Placed and ") == 1


def test_one_class_given_twice_is_one_type() -> None:
    codec = EventCodec((_Placed, _Placed))

    event = _Placed(at=0.0, customer="c")  # type: ignore[call-arg]  # mypy sees the first _Placed
    assert list(codec.types) == ["_Placed"]
    assert codec.decode(codec.encode(event)) == event


def test_no_types_or_a_type_that_is_no_event_is_refused_in_words() -> None:
    with pytest.raises(TypeError, match="at least one event type"):
        EventCodec(())
    with pytest.raises(TypeError, match="Event subclasses, got <class 'int'>"):
        EventCodec((_Placed, int))  # type: ignore[arg-type]


def test_an_event_type_without_a_stream_says_so_by_name() -> None:
    with pytest.raises(NotImplementedError, match="_NoStream does not define stream"):
        _ = _NoStream(at=0.0).stream
