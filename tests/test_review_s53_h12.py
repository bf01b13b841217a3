"""Review of the runtime's thread names and LMDB's serialized opens (helper h12, session 53).

- A behavior that called ``close()`` twice (or two behaviors at once) started two closer
  threads; only the last was known as the closer, so the first raised the journal's
  unreported failure into a log, and the program's own ``close()`` raised nothing.
- The HTTP provider's exchange thread, which the runtime's agents start, named no runtime.
- One journal's LMDB open that waited (another process held its lock file) held up every
  other journal's open in the process, and ``os.fork()``.
"""

from __future__ import annotations

import http.server
import json
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lmdb._envid
import pytest

import cogfabric as cf
from cogfabric.store import Journal

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

CONFIG = {"journal": {"durability": "batch", "map_size": 140 << 10, "max_map_size": 140 << 10}}


def test_a_second_close_from_a_behavior_does_not_take_the_failure_from_the_programs_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    entered, go, done, gate = (threading.Event() for _ in range(4))
    holder: list[cf.Runtime] = []

    class Closer:
        def on_message(self, ctx: Any, message: Any) -> None:  # noqa: ARG002
            entered.set()
            assert go.wait(10)
            holder[0].close()  # returns at once; closes on a helper thread
            holder[0].close()  # again, before that thread began: nothing more to do
            done.set()

    rt = cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), config=CONFIG, behaviors={"c": Closer})
    holder.append(rt)
    writer = rt._core.writer
    assert writer is not None
    failed, hook = threading.Event(), writer.on_failstop

    def noted() -> None:
        failed.set()
        if hook is not None:
            hook()

    writer.on_failstop = noted
    real = rt._close_for_agent

    def held() -> None:  # the closer waits until the behavior's second close() returned
        assert gate.wait(10)
        real()

    monkeypatch.setattr(rt, "_close_for_agent", held)
    rt.spawn("c", behavior="c")
    rt.spawn("u")
    rt.flush()
    rt.bus.send("u", "c", "close")
    assert entered.wait(10)
    rt.agent("u").set_private("big", "z" * 200_000)  # batch: applied, refused by storage; nobody told
    assert failed.wait(10)
    go.set()
    assert done.wait(10)
    closers = [t for t in threading.enumerate() if t.name.startswith("cogfabric-close")]
    gate.set()
    for closer in closers:
        closer.join(10)

    assert len(closers) == 1
    assert not [r for r in caplog.records if "begun by an agent's behavior, failed" in r.getMessage()]
    with pytest.raises(cf.JournalError):  # was: a closer raised it into a log, this nothing
        rt.close()


class _Held(http.server.BaseHTTPRequestHandler):
    """Answers a completion once the test lets it."""

    arrived = threading.Event()
    release = threading.Event()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        _Held.arrived.set()
        _Held.release.wait(10)
        data = json.dumps({"choices": [{"message": {"content": "ok"}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Quiet."""


def test_the_http_providers_exchange_thread_names_the_runtime(
    tmp_path: Path, serve_http: Callable[..., str]
) -> None:
    _Held.arrived, _Held.release = threading.Event(), threading.Event()
    url = serve_http(_Held, _Held.release)

    class Ask:
        def on_message(self, ctx: Any, message: Any) -> Any:  # noqa: ARG002
            return ctx.llm.generate("hi")

    config = {"llm": {"base_url": url, "model": "m", "timeout": 10}}
    with cf.Runtime.open(tmp_path / "sim-a", clock=cf.FakeClock(), config=config, behaviors={"a": Ask}) as rt:
        rt.spawn("a", behavior="a")
        rt.spawn("u")
        answers: list[object] = []
        asker = threading.Thread(
            target=lambda: answers.append(rt.bus.request("u", "a", "q", None, timeout=10))
        )
        asker.start()
        try:
            assert _Held.arrived.wait(10)
            names = [t.name for t in threading.enumerate() if t.name.startswith("cogfabric-llm-http")]
        finally:
            _Held.release.set()
            asker.join(10)

    assert len(names) == 1
    assert "[sim-a]" in names[0], names  # was: cogfabric-llm-http
    assert names[0].endswith(" a")  # the agent it asked for
    assert len(answers) == 1


@pytest.fixture
def stalled_open(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[threading.Event, threading.Event]]:
    """(entered, release): LMDB's open of a directory named ``stalled`` waits inside lmdb.open until released.

    As one does while another process holds its lock file's exclusive lock (LMDB's opener
    holds it while it sets up: one stopped there, say).
    """
    real: Callable[[object, bool], tuple[object, ...]] = lmdb._envid.env_keys  # py-lmdb's guard calls it
    entered, release = threading.Event(), threading.Event()

    def env_keys(path: object, subdir: bool) -> tuple[object, ...]:  # py-lmdb's signature
        if Path(os.fsdecode(path)).name == "stalled":  # type: ignore[arg-type]  # bytes or str
            entered.set()
            release.wait(10)
        return real(path, subdir)

    monkeypatch.setattr(lmdb._envid, "env_keys", env_keys)
    yield entered, release
    release.set()


def test_a_stalled_open_of_one_journal_holds_up_no_other_journal(
    tmp_path: Path, stalled_open: tuple[threading.Event, threading.Event]
) -> None:
    entered, release = stalled_open
    opened: list[Journal] = []
    stalled = threading.Thread(target=lambda: opened.append(Journal.open(tmp_path / "stalled")))
    stalled.start()
    try:
        assert entered.wait(10)
        other = threading.Thread(target=lambda: opened.append(Journal.open(tmp_path / "other")))
        other.start()
        other.join(1.0)
        unheld = not other.is_alive()  # was: it waited for the stalled open
    finally:
        release.set()
        stalled.join(10)
        other.join(10)
        for journal in opened:
            journal.close()

    assert unheld
    assert len(opened) == 2
