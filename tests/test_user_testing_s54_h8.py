"""README "Testing your agents": what a user writing tests of their behaviors relies on (session 54, h8).

Found writing a pytest suite for a small reviewer agent from the README, docstrings and
``help()`` alone: the README said nothing about testing (freezegun without ``tick=True``
makes every wait for a busy agent outlast ``call_timeout``, timeouts are real seconds on
a ``FakeClock``, ``flush()`` is no wait for a behavior's sends to be handled). Each test
holds one statement of that section; the in-memory journal shows that a backend with no
files passes ``JournalContract`` as its docstring describes.
"""

from __future__ import annotations

import inspect
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import pytest
from freezegun import freeze_time

import cogfabric as cf
from cogfabric.events import DEFAULT_CODEC, Event, LlmOutputRecorded, SessionExpired
from cogfabric.store import (
    InvalidStreamError,
    Journal,
    JournalClosedError,
    JournalConflictError,
    Record,
    Snapshot,
    VerifyReport,
)
from cogfabric.store.testing import JournalContract

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

_README = Path(__file__).resolve().parents[1] / "README.md"
_HEADING = "## Testing your agents"


def _section() -> str:
    text = _README.read_text(encoding="utf-8")
    start = text.index(_HEADING)
    return text[start : text.index("\n## ", start + 1)]


def test_the_sections_example_is_a_test_module_whose_tests_pass(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", _section(), flags=re.DOTALL)
    assert len(blocks) == 1
    before = set(threading.enumerate())
    namespace: dict[str, Any] = {"__name__": "readme_testing_example"}
    exec(compile(blocks[0], "README-testing-example", "exec"), namespace)  # noqa: S102 - the README's own code

    tests = {name: f for name, f in namespace.items() if name.startswith("test_")}
    assert sorted(tests) == ["test_a_review_reaches_the_lead", "test_a_session_expires_on_the_fake_clock"]
    for name, test in tests.items():
        wanted = inspect.signature(test).parameters
        test(**({"tmp_path": tmp_path / name} if "tmp_path" in wanted else {}))
    assert set(threading.enumerate()) <= before  # the with blocks left no thread behind


def test_a_fake_clock_stamps_every_record_and_timeouts_stay_real(tmp_path: Path) -> None:
    clock = cf.FakeClock(start=2000.0)
    release = threading.Event()

    class Stuck:
        def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:
            if message.topic == "wait":
                release.wait(10)
            return ctx.llm.generate("say ok")

    try:
        with cf.Runtime.open(
            tmp_path / "j", clock=clock, behaviors={"s": Stuck}, llm_provider=cf.ScriptedProvider(["ok"])
        ) as rt:
            rt.spawn("s", behavior="s")
            clock.advance(3)
            assert rt.bus.request("t", "s", "go", timeout=5).payload == "ok"
            session = rt.memory.create_session("u", agent_id="s")
            rt.llm().turn(session, "hi")
            with pytest.raises(cf.IpcTimeoutError):  # the clock never moved: the timeout is real
                rt.bus.request("t", "s", "wait", timeout=0.2)
            release.set()
    finally:
        release.set()
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        times = {r.event.at for r in journal.read()}
        outputs = [r for r in journal.read() if isinstance(r.event, LlmOutputRecorded)]
    assert times == {2000.0, 2003.0}
    assert len(outputs) >= 2  # the request's and the turn's (the timed-out one's may follow)


def test_a_runtime_reopened_on_the_advanced_fake_clock_expires_sessions_as_it_opens(tmp_path: Path) -> None:
    clock, config = cf.FakeClock(), {"memory": {"session_ttl": 60.0}}
    with cf.Runtime.open(tmp_path / "j", clock=clock, config=config) as rt:
        session = rt.memory.create_session("u1")
        assert not any("session-ticker" in t.name for t in threading.enumerate())  # no sweeps of its own
    clock.advance(61)
    with cf.Runtime.open(tmp_path / "j", clock=clock, config=config) as rt:
        assert rt.memory.sessions() == []
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        expired = [r.event for r in journal.read() if isinstance(r.event, SessionExpired)]
    assert [(e.session, e.at) for e in expired] == [(session, clock.now())]


def test_freezegun_with_tick_stamps_the_frozen_time_and_a_tick_expires_sessions(tmp_path: Path) -> None:
    start = 1704067200.0  # 2024-01-01
    config = {"memory": {"session_ttl": 60.0}}
    with freeze_time("2024-01-01", tick=True) as frozen, cf.Runtime.open(tmp_path / "j", config=config) as rt:
        agent = rt.spawn("a")
        session = rt.memory.create_session("u", agent_id="a")
        frozen.tick(120)
        assert rt.memory.sweep() == 1
        agent.set_private("k", 1)
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        stamped = [(type(r.event).__name__, r.event.at - start) for r in journal.read()]
        expired_session = next(r.event.session for r in journal.read() if isinstance(r.event, SessionExpired))
    assert [name for name, _ in stamped] == ["AgentSpawned", "SessionCreated", "SessionExpired", "PrivateSet"]
    assert all(0 <= offset < 60 for _, offset in stamped[:2])
    assert all(120 <= offset < 180 for _, offset in stamped[2:])
    assert expired_session == session


@pytest.mark.parametrize("frozen", [False, True], ids=["real time", "freeze_time without tick"])
def test_without_tick_a_wait_for_a_busy_agent_outlasts_call_timeout(frozen: bool) -> None:
    release = threading.Event()
    timer = threading.Timer(0.6, release.set)  # frozen: the behavior ends after 0.6 s of real time

    class Busy:
        def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:  # noqa: ARG002
            release.wait(5)

    try:
        with cf.Runtime.open(behaviors={"b": Busy}, config={"runtime": {"call_timeout": 0.1}}) as rt:
            agent = rt.spawn("b", behavior="b")
            rt.bus.send("t", "b", "go")
            if frozen:
                timer.start()
                with freeze_time("2024-01-01"):
                    assert agent.private("k") is None  # answered once the message was handled
                assert release.is_set()  # so it waited past call_timeout, for the behavior
            else:
                with pytest.raises(cf.ActorTimeoutError):  # the behavior waits for the set below
                    agent.private("k")
                release.set()
    finally:
        timer.cancel()
        release.set()


def test_a_behavior_can_be_called_with_a_stub_ctx_and_a_gating_llm_client() -> None:
    class Stub:
        agent_id = "rev"
        llm = cf.LLMClient(cf.ScriptedProvider(["ok"]), {"max_prompt_length": 20})

    class Reviewer:
        def on_message(self, ctx: Stub, message: cf.IpcMessage) -> object:
            return {"verdict": ctx.llm.generate(f"Review: {message.payload['claim']}")}

    message = cf.IpcMessage(
        at=0.0, sender="lead", recipient="rev", topic="review", payload={"claim": "X"}, kind="request"
    )
    assert Reviewer().on_message(Stub(), message) == {"verdict": "ok"}
    long_claim = msgspec.structs.replace(message, payload={"claim": "x" * 20})
    with pytest.raises(cf.PromptTooLongError):
        Reviewer().on_message(Stub(), long_claim)


# ------------------------------------------------------------- a journal in memory


def _check_stream(stream: object) -> str:
    if not isinstance(stream, str):
        msg = f"a stream name is a str, got {type(stream).__name__}"
        raise TypeError(msg)
    try:
        size = len(stream.encode())
    except UnicodeEncodeError:
        size = 0
    if not 0 < size <= 255 or "\0" in stream:  # the limits Journal's docstring gives
        msg = f"no stream name: {stream!r}"
        raise InvalidStreamError(msg)
    return stream


_SORTED = msgspec.msgpack.Encoder(order="sorted")


def _same(stored: Event, given: Event) -> bool:
    """Journal.append's test: equal encodings, or equal with mappings' keys sorted."""
    first, second = DEFAULT_CODEC.encode(stored), DEFAULT_CODEC.encode(given)
    if first == second:
        return True
    try:
        return _SORTED.encode(DEFAULT_CODEC.decode(first)) == _SORTED.encode(DEFAULT_CODEC.decode(second))
    except TypeError:  # keys msgspec cannot sort: their own order
        return False


class InMemoryJournal(Journal):
    """A journal that keeps its records in a list: no chain, no file, written from the docstrings."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[Record] = []
        self._ids: dict[str, int] = {}
        self._snapshots: dict[str, Snapshot] = {}
        self._closed = False

    @classmethod
    def open(cls, *_: object, **__: object) -> InMemoryJournal:
        return cls()

    def _open(self) -> None:
        if self._closed:
            msg = "the journal is closed"
            raise JournalClosedError(msg)

    @property
    def last_seq(self) -> int:
        self._open()
        return len(self._records)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def readonly(self) -> bool:
        return False

    def append(
        self, events: Iterable[Event], *, snapshots: Sequence[Snapshot] = (), validate: bool = True
    ) -> list[int]:
        self._open()
        batch = list(events)
        DEFAULT_CODEC.encode_many(batch, validate=validate)
        for event in batch:
            _check_stream(event.stream)
        with self._lock:
            seqs: list[int] = []
            new: dict[str, Event] = {}
            for event in batch:
                if event.id in self._ids:
                    seq = self._ids[event.id]
                    if not _same(self._records[seq - 1].event, event):
                        raise JournalConflictError(event.id, seq)
                elif event.id in new:
                    if not _same(new[event.id], event):
                        raise JournalConflictError(event.id, 0)
                    seq = len(self._records) + list(new).index(event.id) + 1
                else:
                    new[event.id] = event
                    seq = len(self._records) + len(new)
                seqs.append(seq)
            last = len(self._records) + len(new)
            for snapshot in snapshots:
                _check_stream(snapshot.stream)
                if not 1 <= snapshot.seq <= last:
                    msg = f"a snapshot's seq is 1 to {last}, got {snapshot.seq}"
                    raise ValueError(msg)
            for event in new.values():  # stored as it reads back
                stored = DEFAULT_CODEC.decode(DEFAULT_CODEC.encode(event))
                self._records.append(Record(seq=len(self._records) + 1, event=stored))
                self._ids[event.id] = len(self._records)
            self._snapshots.update((s.stream, s) for s in snapshots)
            return seqs

    def read(self, after: int = 0, until: int | None = None, stream: str | None = None) -> Iterator[Record]:
        self._open()
        if stream is not None:
            _check_stream(stream)
        with self._lock:
            records = self._records[after:until]
        return iter([r for r in records if stream is None or r.stream == stream])

    def streams(self, prefix: str = "") -> list[str]:
        self._open()
        if not isinstance(prefix, str):
            msg = f"prefix is a str, got {type(prefix).__name__}"
            raise TypeError(msg)
        with self._lock:
            return sorted({r.stream for r in self._records if r.stream.startswith(prefix)})

    def load_snapshot(self, stream: str) -> Snapshot | None:
        self._open()
        return self._snapshots.get(_check_stream(stream))

    def verify(self, *, after: int = 0, decode: bool = False) -> VerifyReport:  # noqa: ARG002 - kept decoded
        last = self.last_seq
        return VerifyReport(ok=True, checked=max(0, last - after), head_seq=last)

    def close(self) -> None:
        self._closed = True


class TestInMemoryJournal(JournalContract):
    is_persistent = False

    @pytest.fixture
    def journal(self) -> Iterator[Journal]:
        with InMemoryJournal.open() as journal:
            yield journal
