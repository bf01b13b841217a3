"""EventCodec names an item of its types that is no Event subclass, an unhashable one too (helper h8)."""

from __future__ import annotations

import pytest

from cogfabric.events import EVENT_TYPES, EventCodec


def test_a_list_given_inside_the_types_is_named_as_no_event_type() -> None:
    # its de-duplication of the types hashed each one first: "unhashable type: 'list'"
    with pytest.raises(TypeError, match=r"an EventCodec's types are Event subclasses, got \[<class"):
        EventCodec([list(EVENT_TYPES)])  # type: ignore[list-item]
