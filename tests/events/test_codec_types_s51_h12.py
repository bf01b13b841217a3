"""``EventCodec.types`` is read-only; the codec's docstrings name what its version checks raise (helper h12).

``types`` handed out the codec's own dict: a caller that added or removed a type
through it changed what ``decode`` and ``encode_many`` accepted, without the typed
decoder the codec was built with.
"""

from __future__ import annotations

import pytest

from cogfabric.events import (
    DEFAULT_CODEC,
    EventCodec,
    IpcMessage,
    PrivateSet,
    UnknownEventTypeError,
)


def test_types_is_a_read_only_view_that_leaves_the_codec_as_built() -> None:
    codec = EventCodec()
    known = dict(codec.types)
    event = PrivateSet(at=1.0, agent="a", key="k", value=1)
    payload = codec.encode(event)

    with pytest.raises(TypeError):
        codec.types["Mine"] = IpcMessage  # type: ignore[index]
    with pytest.raises(TypeError):
        del codec.types["PrivateSet"]  # type: ignore[attr-defined]

    assert dict(codec.types) == known
    assert codec.decode(payload) == event
    assert codec.encode_many([event]) == [payload]
    assert set(DEFAULT_CODEC.types) == set(known)


def test_current_version_and_register_upcaster_raise_what_their_docstrings_say() -> None:
    codec = EventCodec()
    assert "UnknownEventTypeError" in (EventCodec.current_version.__doc__ or "")
    with pytest.raises(UnknownEventTypeError):
        codec.current_version("Nope")

    doc = EventCodec.register_upcaster.__doc__ or ""
    assert "negative" in doc
    for version in (-1, 1):  # PrivateSet is at version 1: only 0 can start a step
        with pytest.raises(ValueError, match="an upcaster must start from 0 to 0"):
            codec.register_upcaster("PrivateSet", version, dict)
