"""Event ids and the newer-cognitive-state error: what a mutation round found no test held (session 50).

Each test failed under a small change of ``events/_base.py`` or ``events/_errors.py``
that survived the suite.
"""

from __future__ import annotations

import re

import pytest

from cogfabric.events import DEFAULT_CODEC, NewerCognitiveStateError, PrivateSet, new_event_id
from tests.test_events_config_contract_edges import _forged

_ID = re.compile(r"[0-9a-f]{16}-[0-9a-f]{12}")


# Kills: the counter written "%x", not "%012x": an id lost its fixed width (README: an id
# is `<16 hex>-<12 hex>`), and ids of one process no longer sorted as they were made
def test_an_event_id_is_16_hex_a_dash_and_12_hex_and_ids_sort_as_made() -> None:
    ids = [new_event_id() for _ in range(40)] + [PrivateSet(at=0.0, agent="a", key="k").id]

    assert all(_ID.fullmatch(event_id) for event_id in ids), ids[:3]
    assert ids == sorted(ids)
    assert len({event_id.split("-")[0] for event_id in ids}) == 1  # one prefix a process


# Kills: NewerCognitiveStateError's message without the original's sentinel, which
# CognitiveStateSchemaVersionError's docstring says every such message starts with
def test_a_newer_cognitive_state_error_starts_with_the_sentinel_and_names_where_it_is() -> None:
    with pytest.raises(NewerCognitiveStateError) as caught:
        DEFAULT_CODEC.decode(_forged(3))

    text = str(caught.value)
    assert text.startswith("agentfabric: cognitive state schema version mismatch: ")
    assert "CognitiveStateSet.state" in text
    assert "schema version 3, newer than the known version 1" in text
