"""A record an upcaster chain leaves invalid names the versions and the steps run (session 51).

Only the last upcaster's result is checked against the current type, so the error said
"upcast from version 1 is not valid" and named neither the version it was checked at
nor that two steps ran: a user hunting the faulty upcaster of a chain had no lead
(helper h5's store-integrator persona).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
import pytest

from cogfabric.events import EVENT_TYPES, Event, EventCodec, EventDecodeError


class _Order(Event, frozen=True, kw_only=True, tag="OrderS51"):
    v: Annotated[int, msgspec.Meta(ge=3, le=3)] = 3
    amount: int = 0

    @property
    def stream(self) -> str:
        return "order/o1"


def _record(version: int) -> bytes:
    return msgspec.msgpack.encode({"type": "OrderS51", "v": version, "id": "o1", "at": 0.0})


def _bad(d: dict[str, Any]) -> dict[str, Any]:
    return {**d, "amount": "ten"}


def test_a_chain_of_two_names_both_steps_and_the_version_checked() -> None:
    codec = EventCodec((*EVENT_TYPES, _Order))
    codec.register_upcaster("OrderS51", 1, dict)
    codec.register_upcaster("OrderS51", 2, _bad)
    said = (
        r"OrderS51 record upcast from version 1 is not valid at version 3: Expected `int`, got `str` - at "
        r"`\$\.amount` \(the upcasters from versions 1 to 2, the last one's result checked\)"
    )
    with pytest.raises(EventDecodeError, match=said):
        codec.decode(_record(1))


def test_one_step_names_its_upcaster() -> None:
    codec = EventCodec((*EVENT_TYPES, _Order))
    codec.register_upcaster("OrderS51", 2, _bad)
    said = r"upcast from version 2 is not valid at version 3: .* \(the upcaster from version 2\)$"
    with pytest.raises(EventDecodeError, match=said):
        codec.decode(_record(2))
