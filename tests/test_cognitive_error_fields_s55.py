"""CognitiveStateSchemaVersionError says which version it refused and which it knows.

A program that reads states from elsewhere (a JSON file, another runtime) tells "upgrade
cogfabric" (stored > known) from "malformed" by these two attributes, not by parsing
the message.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from cogfabric import (
    COGNITIVE_STATE_SCHEMA_VERSION,
    CognitiveState,
    CognitiveStateSchemaVersionError,
    decode_cognitive_state,
)
from cogfabric.events import upgrade_cognitive_state

KNOWN = COGNITIVE_STATE_SCHEMA_VERSION


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        (CognitiveState(schema_version=KNOWN + 1), KNOWN + 1),
        ({"schema_version": KNOWN + 5}, KNOWN + 5),
        ({"schema_version": -(2**63) - 1}, -(2**63) - 1),
        ({"schema_version": "2"}, "2"),
        ({"schema_version": 1.5}, 1.5),
        ({"schema_version": Fraction(3, 2)}, Fraction(3, 2)),
        ({"schema_version": KNOWN, "mood": 1}, KNOWN),
        (CognitiveState(schema_version=True), True),
    ],
)
def test_decode_names_the_stored_and_known_versions(value: object, stored: object) -> None:
    with pytest.raises(CognitiveStateSchemaVersionError) as caught:
        decode_cognitive_state(value)
    assert caught.value.stored == stored
    assert type(caught.value.stored) is type(stored)
    assert caught.value.known == KNOWN


def test_a_newer_state_refused_on_write_names_both_versions() -> None:
    with pytest.raises(CognitiveStateSchemaVersionError) as caught:
        upgrade_cognitive_state(CognitiveState(schema_version=KNOWN + 2))
    assert (caught.value.stored, caught.value.known) == (KNOWN + 2, KNOWN)
    stored, known = caught.value.stored, caught.value.known
    assert isinstance(stored, int)
    assert known is not None
    assert stored > known  # how a program tells "newer"


def test_raised_by_hand_it_holds_none() -> None:
    err = CognitiveStateSchemaVersionError("agentfabric: cognitive state schema version mismatch")
    assert (err.stored, err.known) == (None, None)
    assert isinstance(err, ValueError)
