"""kill -9 of a runtime while a behavior handles a message: README's "Messages across a crash".

IPC is at most once. The message in hand keeps the changes its behavior made before the
crash and its delivery record (journaled with the first of them), not the rest; the
messages queued behind it and a request waiting for them have neither a delivery, a
dead letter nor a reply, and reopening delivers none of them again. Each acknowledged
change survives, with ``fsync`` on and off (a process crash leaves the page cache).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from cogfabric.actors import Config, JournalConfig, Runtime
from cogfabric.cli import main
from cogfabric.events import IpcDeadLettered, IpcDelivered, IpcMessage
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.actors import AgentContext

_CHILD = textwrap.dedent(
    """
    import sys, threading
    from cogfabric.actors import Config, JournalConfig, Runtime

    path, fsync = sys.argv[1], sys.argv[2] == "1"
    out = sys.stdout
    hold = threading.Event()

    class Slow:
        def on_message(self, ctx, message):
            ctx.set_private("first-" + str(message.payload), 1)  # sync: durable when it returns
            out.write("started " + str(message.payload) + "\\n"); out.flush()
            hold.wait()  # never set: the kill comes while the behavior is in the middle
            ctx.set_private("second-" + str(message.payload), 1)
            return "done"

    rt = Runtime.open(path, config=Config(journal=JournalConfig(fsync=fsync)), behaviors={"slow": Slow})
    rt.spawn("s", behavior="slow")
    rt.spawn("d")
    for i in range(5):
        out.write("sent " + rt.bus.send("d", "s", "t", i).id + "\\n")
    out.flush()
    ask = threading.Thread(target=rt.bus.request, args=("d", "s", "q", "req", 600), daemon=True)
    ask.start()
    n = 0
    while True:
        rt.agent("d").set_private("k" + str(n), n)
        out.write("private " + str(n) + "\\n"); out.flush()
        n += 1
    """
)


def _run_and_kill(path: Path, *, fsync: bool) -> list[str]:
    """Run the child until its behavior is in the middle and 50 changes are acknowledged; kill it."""
    argv = [sys.executable, "-c", _CHILD, str(path), "1" if fsync else "0"]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE)
    assert child.stdout is not None
    fd = child.stdout.fileno()
    lines: list[str] = []
    buffer = b""
    deadline = time.monotonic() + 60
    try:
        while "started 0" not in lines or sum(line.startswith("private ") for line in lines) <= 50:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"the child did not get going: {lines[-5:]}"
            if select.select([fd], [], [], remaining)[0]:
                chunk = os.read(fd, 65536)
                assert chunk, f"the child stopped: {lines[-5:]}"
                buffer += chunk
                *done, buffer = buffer.split(b"\n")
                lines.extend(line.decode() for line in done)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    # what it printed before the kill was acknowledged before the kill
    lines.extend(line.decode() for line in (buffer + child.stdout.read()).split(b"\n")[:-1])
    child.stdout.close()
    return lines


def _bus(path: Path) -> tuple[dict[str, IpcMessage], set[str], set[str]]:
    """The bus stream's messages by id, and the ids delivered and dead-lettered."""
    with Journal.open(path, readonly=True) as journal:
        assert journal.verify(decode=True).ok
        events = [record.event for record in journal.read(stream="bus")]
    messages = {e.id: e for e in events if isinstance(e, IpcMessage)}
    delivered = {e.message_id for e in events if isinstance(e, IpcDelivered)}
    dead = {e.message_id for e in events if isinstance(e, IpcDeadLettered)}
    return messages, delivered, dead


@pytest.mark.parametrize("fsync", [True, False], ids=["fsync", "no-fsync"])
def test_a_crash_mid_behavior_keeps_what_was_acknowledged_and_delivers_nothing_twice(
    tmp_path: Path, fsync: bool
) -> None:
    path = tmp_path / "j"
    lines = _run_and_kill(path, fsync=fsync)
    sent = [line.split()[1] for line in lines if line.startswith("sent ")]
    acked = [int(line.split()[1]) for line in lines if line.startswith("private ")]
    messages, delivered, dead = _bus(path)
    [request] = [m for m in messages.values() if m.kind == "request"]

    assert set(sent) <= set(messages)
    assert sent[0] in delivered  # taken up: its record went with the behavior's first change
    assert not set(sent[1:]) & delivered  # queued behind it: lost with the process
    assert request.id not in delivered
    assert not (set(sent) | {request.id}) & dead
    assert not [m for m in messages.values() if m.kind == "reply"]
    result = CliRunner().invoke(main, ["replay", str(path), "--agent", "s", "--json"])
    assert result.exit_code == 0, result.output
    status = {m["id"]: m["status"] for m in json.loads(result.output)["ipc"]["latest"]}
    assert [status[i] for i in sent] == ["delivered"] + ["pending"] * 4
    assert status[request.id] == "pending"

    handled: list[Any] = []

    class Recording:
        def on_message(self, _ctx: AgentContext, message: IpcMessage) -> str:
            handled.append(message.payload)
            return "ok"

    config = Config(journal=JournalConfig(fsync=fsync))
    with Runtime.open(path, config=config, behaviors={"slow": Recording}) as rt:
        private = rt.agent("s").context_view().private
        assert private.get("first-0") == 1  # the change made before the crash
        assert "second-0" not in private
        assert acked
        kept = rt.agent("d").context_view().private
        assert [n for n in acked if kept.get(f"k{n}") != n] == []
        assert rt.bus.request("d", "s", "probe", "probe", timeout=10).payload == "ok"
        assert handled == ["probe"]  # nothing of before the crash is delivered again
        assert rt.bus.dead_letters() == []
    after, delivered_after, dead_after = _bus(path)
    new = {i: m for i, m in after.items() if i not in messages}  # the probe and its reply
    assert sorted(m.kind for m in new.values()) == ["reply", "request"]
    assert delivered_after - delivered == set(new)
    assert dead_after == dead == set()
