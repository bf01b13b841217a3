"""Session memory's documented outcomes that no test reached (coverage audit, s53 h9).

Each test names the line of ``actors/_memory.py`` it holds and the mutant it kills.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

import cogfabric as cf
from cogfabric.events import SessionCreated
from cogfabric.store import LmdbJournal

if TYPE_CHECKING:
    from pathlib import Path


def test_build_context_of_a_session_without_messages_is_the_input_alone(tmp_path: Path) -> None:
    # A session created without a seed message (a journal's SessionCreated whose seed
    # is None, as the event allows) has no history: build_context's history part is ""
    # then, with no "Previous conversation history" header framing nothing. Kills:
    # _op_build_context's empty-history return dropped.
    path = tmp_path / "j"
    with LmdbJournal.open(path) as journal:
        journal.append([SessionCreated(at=cf.FakeClock().now(), session="s1", user_id="u")])
    with cf.Runtime.open(path, clock=cf.FakeClock()) as rt:
        assert rt.memory.build_context("hi", "s1") == "hi"
        rt.memory.add_message("s1", "user", "cats")
        assert rt.memory.build_context("hi", "s1") == (
            "Previous conversation history:\n\nUser: cats\n\nCurrent request:\nhi"
        )


def test_a_structured_message_that_is_no_message_is_a_type_error_and_adds_nothing(tmp_path: Path) -> None:
    # add_structured_message's docstring: "TypeError: message is not a Message". Kills:
    # the isinstance check dropped (msgspec's own error, of another type and message).
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as rt:
        session = rt.memory.create_session("u")
        with pytest.raises(TypeError, match=r"^expected a Message, got dict$"):
            rt.memory.add_structured_message(session, {"role": "user", "content": "x"})  # type: ignore[arg-type]
        assert [m.content for m in rt.memory.get_messages(session)] == ["New session started"]
