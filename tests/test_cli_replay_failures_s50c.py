"""`replay --agent`'s failures (session 50): what its first tests left unpinned (mutation round).

A failure's message is found among all of the agent's IPC, not only the latest 20 the
``ipc`` entry shows; and the table's head counts one failure in the singular.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import cogfabric as cf
from tests.test_cli_replay_failures_s50 import _START, _WHEN, _records, _rows, _Touchy, _view

if TYPE_CHECKING:
    from pathlib import Path


def test_a_failure_names_the_message_it_handled_after_the_ipc_shown_moved_past_it(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with cf.Runtime.open(path, clock=cf.FakeClock(start=_START), behaviors={"touchy": _Touchy}) as rt:
        rt.spawn("a", behavior="touchy")
        rt.spawn("x")
        rt.bus.send("x", "a", "boom", 0)
        for n in range(25):  # more than the 20 latest messages the ipc entry shows
            rt.bus.send("x", "a", "hello", n)
        assert rt.agent("a").private("seen") == "hello"  # a call: answered once the sends are handled
        rt.flush()
    (failed,), messages = _records(path)
    boom_seq, boom_id = messages["boom"]

    view = _view(path, "--agent", "a")
    assert view["ipc"]["messages"] == 26
    assert boom_id not in [m["id"] for m in view["ipc"]["latest"]]
    (shown,) = view["failures"]["latest"]
    assert shown["message"] == {"id": boom_id, "seq": boom_seq, "kind": "send", "from": "x", "topic": "boom"}
    assert _rows(path, "a", "failures") == [
        "1 failure:",
        (
            f'seq {failed} ({_WHEN}) error "ValueError: cannot handle 0", '
            f'handling seq {boom_seq} send from "x" "boom"'
        ),
    ]
