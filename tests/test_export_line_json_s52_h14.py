"""An export line is written byte for byte as ``encode_json`` writes it (session 52, helper h14).

``export`` walks only a line's ``data`` values for a map JSON has no object for (a key that
is not text, or ``"$map"``), not the whole line, and skips the walk's second pass on a
line that holds one: the line must come out exactly as ``encode_json(line)`` makes it,
with such a map anywhere in any field of ``data``, however deep, in a list, a tuple or a
nested struct, plain or with a verifiable export's ``prev`` and ``record``.
"""

from __future__ import annotations

import datetime as dt
import math

import msgspec
import msgspec.inspect
from hypothesis import given, settings
from hypothesis import strategies as st

from cogfabric import CognitiveState
from cogfabric._audit import _event_data, _line_json, encode_json, export_line
from cogfabric.events import (
    EVENT_TYPES,
    CognitiveStateSet,
    Event,
    IpcMessage,
    PrivateSet,
    TaskContextPublished,
    TaskContextSet,
)
from cogfabric.store import Record

WHEN = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
TEXT = st.text(
    alphabet=st.sampled_from("a$mp1\x00\x1b\x7f\x85\x9b\u202e\u2028\u00ad\U000e0001 é"), max_size=4
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN and the infinities too
    TEXT,
    st.binary(max_size=3),
    st.just(WHEN),
)
KEYS = st.one_of(
    TEXT,
    st.just("$map"),
    st.integers(),
    st.binary(max_size=2),
    st.none(),
    st.booleans(),
    st.tuples(st.integers(), TEXT),
    st.just(WHEN),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(TEXT, inner, max_size=3),  # text keys: no map of its own to rewrite
        st.dictionaries(KEYS, inner, max_size=3),
        st.builds(lambda v: CognitiveState(schema_version=1, context=v), inner),
    ),
    max_leaves=12,
)


def _events(value: object, other: object) -> list[Event]:
    """Events of several types holding ``value`` (and ``other``) in their data."""
    state = CognitiveState(schema_version=1, context=value, tool_state=other)
    text_keyed = {"$map": value, "k": other}
    return [
        PrivateSet(at=1.5, agent="a", key="k", value=value),
        IpcMessage(at=math.nan, sender="a", recipient="b", topic="t\u202e", payload=[[other, value]]),
        TaskContextSet(at=2.0, agent="a", context={"plain": other, "odd": value}),
        TaskContextSet(at=2.0, agent="a", context=text_keyed),
        TaskContextPublished(at=3.0, task_id="t", context={"x": value}, agents=("a",)),
        CognitiveStateSet(at=4.0, agent="a", state=state),
    ]


@settings(max_examples=300, deadline=None)
@given(VALUES, VALUES)
def test_an_export_line_is_written_as_encode_json_writes_it(value: object, other: object) -> None:
    for seq, event in enumerate(_events(value, other), 1):
        record = Record(seq, event, bytes(range(40)))
        line = export_line(record)

        assert _line_json(line) == encode_json(line)

        line["prev"] = bytes(16).hex()
        line["record"] = b"\x93stored\xff"
        assert _line_json(line) == encode_json(line)


def test_an_odd_key_only_deep_inside_a_list_of_a_later_field_is_found() -> None:
    deep = [[{"x": [{7: "int key"}]}]]
    event = TaskContextSet(at=1.0, agent="a", context={"a": 1, "b": [1, 2], "c": deep})
    line = export_line(Record(1, event, bytes(40)))

    written = _line_json(line)

    assert written == encode_json(line)
    assert b'{"$map":[[7,"int key"]]}' in written


def test_every_event_type_s_line_holds_maps_only_in_its_data() -> None:
    # What lets export walk only ``data``: every other field of every type's line is a
    # scalar or the list of layer names, and ``data``'s keys are its field names.
    for kind in EVENT_TYPES:
        assert all(type(name) is str and name != "$map" for name in kind.__struct_fields__), kind
        info = msgspec.inspect.type_info(kind)
        assert isinstance(info, msgspec.inspect.StructType)
        typed = {field.name: type(field.type) for field in info.fields}
        assert (typed["at"], typed["v"]) == (msgspec.inspect.FloatType, msgspec.inspect.IntType), kind
    event = PrivateSet(at=1.0, agent="a", key="k", value={1: 2})
    line = export_line(Record(9, event, bytes(40)))
    assert list(_event_data(event)) == [name for name in PrivateSet.__struct_fields__ if name != "v"]
    for name, field in line.items():
        if name == "layers":
            assert isinstance(field, list)
            assert all(type(layer) is str for layer in field)
        elif name != "data":
            assert type(field) in (int, float, str, type(None)), name
