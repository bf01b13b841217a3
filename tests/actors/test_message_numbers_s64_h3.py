"""A session message whose ``time`` is NaN or infinite (session 64, helper h3).

Through the runtime none is journaled: ``memory.add_structured_message`` refuses one
(``InvalidEventError``), and ``add_message``, ``turn`` and a session's seed take the
clock's reading, which must be finite. ``Journal.append`` stored one all the same, its
``validate=True`` checking only the event's ``at``: ``export`` then printed the time as
JSON's ``null``, and the message was no longer equal to itself read back (NaN != NaN).
It now refuses one as it refuses a bad ``at``, the batch whole.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pytest

from cogfabric.events import InvalidEventError, Message, SessionCreated, SessionMessageAdded
from cogfabric.store import Journal
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from cogfabric.events import Event


def _added(time: float) -> SessionMessageAdded:
    return SessionMessageAdded(at=1.0, session="s", message=Message(role="user", content="x", time=time))


def _created(time: float) -> SessionCreated:
    return SessionCreated(
        at=1.0, session="s", user_id="u", seed=Message(role="system", content="x", time=time)
    )


@pytest.mark.parametrize("time", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("event", [_added, _created], ids=["message", "seed"])
def test_append_refuses_a_session_message_whose_time_is_not_finite_and_stores_nothing_of_the_batch(
    tmp_path: Path, time: float, event: Callable[[float], Event]
) -> None:
    bad = event(time)
    with Journal.open(tmp_path / "j") as journal:
        journal.append(make_events(1))
        with pytest.raises(InvalidEventError) as refused:
            journal.append([*make_events(1, start=1), bad])

        assert str(refused.value) == (
            f"event 1 ({type(bad).__name__}): its message's time must be finite seconds, got {time!r}"
        )
        assert isinstance(refused.value, ValueError)
        assert journal.last_seq == 1
        assert journal.streams("session/") == []
        assert journal.append([_added(2.5)]) == [2]  # refused before the transaction: still usable
