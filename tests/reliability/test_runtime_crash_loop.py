"""kill -9 of a whole runtime (agents, IPC, sessions, sync durability) never loses an acknowledged change.

What this cannot prove: the page cache survives a process crash, so it says nothing
about power loss; that needs a fault-injecting file system (see README "Guarantees").
"""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import textwrap
import time
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import Runtime
from cogfabric.events import IpcMessage
from cogfabric.store import Journal

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

_CHILD = textwrap.dedent(
    """
    import sys
    from cogfabric.actors import Runtime
    from cogfabric.events import IpcMessage

    class Echo:
        def on_message(self, ctx, message):
            ctx.set_private("last_request", message.payload)
            return message.payload

    path, run = sys.argv[1], int(sys.argv[2])
    with Runtime.open(path, behaviors={"echo": Echo}) as rt:
        if not rt.agents():
            rt.spawn_many([{"agent_id": f"a{i}", "behavior": "echo"} for i in range(4)])
        session = rt.memory.create_session(f"run{run}", agent_id="a0")
        out = sys.stdout
        n = 0
        while True:
            agent = f"a{n % 4}"
            rt.agent(agent).set_private(f"r{run}-{n}", n)
            out.write(f"private {agent} r{run}-{n} {n}\\n")
            rt.memory.add_message(session, "user", f"r{run}-{n}")
            out.write(f"message {session} r{run}-{n}\\n")
            if n % 5 == 0:
                reply = rt.bus.request("driver", agent, "ping", n, timeout=10)
                out.write(f"reply {reply.id} {reply.correlation_id} {reply.payload}\\n")
            out.flush()
            n += 1
    """
)


def _collect(child: subprocess.Popen[bytes], deadline: float, lines: list[str]) -> None:
    assert child.stdout is not None
    fd = child.stdout.fileno()
    buffer = b""
    while (remaining := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        lines.extend(line.decode() for line in complete)


def _bus_messages(journal: Journal) -> dict[str, IpcMessage]:
    """Every message on the bus stream, by id."""
    return {r.event.id: r.event for r in journal.read(stream="bus") if isinstance(r.event, IpcMessage)}


def _crash_loop(path: Path, kills: int, seed: int) -> tuple[int, int, int]:
    rng = random.Random(seed)
    acked: list[str] = []
    for run in range(kills):
        child = subprocess.Popen([sys.executable, "-c", _CHILD, str(path), str(run)], stdout=subprocess.PIPE)
        try:
            start = len(acked)
            deadline = time.monotonic() + 60
            while len(acked) == start and time.monotonic() < deadline:
                _collect(child, min(deadline, time.monotonic() + 0.5), acked)
            assert len(acked) > start, "the child acknowledged nothing"
            _collect(child, time.monotonic() + rng.uniform(0.05, 0.5), acked)
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
        _collect(child, time.monotonic() + 5, acked)
        assert child.stdout is not None
        child.stdout.close()

        with Journal.open(path) as journal:
            assert journal.verify(decode=True).ok
            bus = _bus_messages(journal)
        found = 0
        with Runtime.open(path) as rt:
            # each agent's private layer and each session's messages, read once per run
            privates: dict[str, Mapping[str, Any]] = {}
            contents: dict[str, set[str]] = {}
            for line in acked:
                kind, where, what, *rest = line.split(" ")
                if kind == "private":
                    if where not in privates:
                        privates[where] = rt.agent(where).context_view().private
                    assert privates[where].get(what) == int(rest[0]), line
                elif kind == "message":
                    if where not in contents:
                        contents[where] = {m.content for m in rt.memory.get_messages(where)}
                    assert what in contents[where], line
                elif kind == "reply":  # the reply is stored, with its payload, and its request
                    reply = bus[where]
                    assert (reply.kind, reply.correlation_id, reply.payload) == ("reply", what, int(rest[0]))
                    assert any(m.kind == "request" and m.correlation_id == what for m in bus.values()), line
                found += 1
    return kills, len(acked), found


def test_kill_nine_of_a_runtime_loses_no_acknowledged_change(tmp_path: Path) -> None:
    kills, acknowledged, found = _crash_loop(tmp_path / "j", kills=6, seed=7)

    print(f"kills {kills}, acknowledged {acknowledged}, found {found}")  # noqa: T201 - the report
    assert found == acknowledged > 0


@pytest.mark.slow
def test_kill_nine_fifty_times(tmp_path: Path) -> None:
    kills, acknowledged, found = _crash_loop(tmp_path / "j", kills=50, seed=11)

    print(f"kills {kills}, acknowledged {acknowledged}, found {found}")  # noqa: T201 - the report
    assert found == acknowledged > 0
