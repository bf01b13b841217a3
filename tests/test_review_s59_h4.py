"""Review of session 58's thread-start, leak-hunt and newer-journal commits (session 59, helper h4).

Each test states what the code should do; each finding below failed on the code before
its fix, which came with this file.

- ``start_actor_loop`` (actors/_core.py) takes a never-started actor out of Pykka's
  registry only for a ``RuntimeError``: a ``MemoryError`` from ``Thread.start`` (CPython
  raises it when it cannot allocate the new thread's state), or a ``KeyboardInterrupt``
  in ``Runtime.open`` (no hold covers it), leaves a registered actor no thread serves,
  which ``ActorRegistry.stop_all()`` waits for forever.
- A message asked of the actor between its registration and the failed start (by
  ``ActorRegistry.stop_all()`` or a broadcast on another thread) is never answered: its
  caller waits forever, where a stopped actor's queued asks raise ``ActorDeadError``.
- ``Runtime.open`` on a real clock starts a third thread of its own, the session
  ticker's: a process out of threads there raised a plain ``RuntimeError``, not the
  ``RuntimeCapacityError`` the README promises for "the runtime's own threads".
- ``salvage`` before a damaged page took a record a newer cogfabric wrote for where the
  salvage stops, without checking the records before it: one of them damaged (its body
  changed, so it fails its own chain link, while the newer one's link, made from the
  stored link before it, still matches) was not named; the refusal sent the user to a
  newer cogfabric for a journal damaged earlier.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

import pykka
import pytest

import cogfabric as cf
from cogfabric.actors._agent import AgentActor
from cogfabric.actors._memory import SessionActor
from cogfabric.actors._writer import JournalWriterActor
from cogfabric.store import Journal, LmdbJournal
from cogfabric.store.testing import make_events
from tests.test_cli_json_s56_h4 import _run
from tests.test_inspect_unknown_types_s58_h2 import _NEWER_CODEC, _Budget
from tests.test_salvage_s54_h12 import _link, _nothing_under

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

_ACTORS: dict[str, type[pykka.ThreadingActor]] = {
    "agent": AgentActor,
    "journal writer": JournalWriterActor,
    "session actor": SessionActor,
}


class _FailedStarts:
    """``Thread.start`` patched to raise for the threads of one actor class; the actors it failed."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, cls: type[pykka.ThreadingActor], error: BaseException
    ) -> None:
        self.actors: list[pykka.ThreadingActor] = []
        self.asked: list[pykka.Future[Any]] = []
        self.ask_first = False
        real = threading.Thread.start

        def start(thread: threading.Thread) -> None:
            target = getattr(thread, "_target", None)
            actor = getattr(target, "__self__", None)
            if isinstance(actor, cls):
                self.actors.append(actor)
                if self.ask_first:  # another thread's stop_all or broadcast, as the start fails
                    self.asked.append(actor.actor_ref.ask("ping", block=False))
                raise error
            real(thread)

        monkeypatch.setattr(threading.Thread, "start", start)

    def left_registered(self) -> list[pykka.ThreadingActor]:
        registered = {ref.actor_urn for ref in pykka.ActorRegistry.get_all()}
        return [actor for actor in self.actors if actor.actor_urn in registered]

    def clean_up(self) -> None:
        """Take out what the code left (else a later test's stop_all would wait for it forever)."""
        for actor in self.actors:
            pykka.ActorRegistry.unregister(actor.actor_ref)
            actor.actor_stopped.set()


@pytest.fixture
def failed_starts(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str, BaseException], _FailedStarts]]:
    made: list[_FailedStarts] = []

    def make(role: str, error: BaseException) -> _FailedStarts:
        made.append(_FailedStarts(monkeypatch, _ACTORS[role], error))
        return made[-1]

    yield make
    monkeypatch.undo()
    for one in made:
        one.clean_up()


def _fail_to_start(tmp_path: Path, role: str, expected: type[BaseException]) -> None:
    """Open a runtime (journaled) and, for ``agent``, spawn one; what the failed start raises."""
    if role == "agent":
        with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as runtime, pytest.raises(expected):
            runtime.spawn("a")
        return
    with pytest.raises(expected):
        cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock())


@pytest.mark.parametrize("error", [MemoryError, KeyboardInterrupt])
@pytest.mark.parametrize("role", ["agent", "journal writer", "session actor"])
def test_a_start_that_fails_otherwise_leaves_no_registered_actor(
    tmp_path: Path,
    failed_starts: Callable[[str, BaseException], _FailedStarts],
    role: str,
    error: type[BaseException],
) -> None:
    starts = failed_starts(role, error())

    _fail_to_start(tmp_path, role, error)

    assert len(starts.actors) == 1
    assert starts.left_registered() == []
    assert starts.actors[0].actor_stopped.is_set()  # a ref kept anywhere answers ActorDeadError
    with Journal.open(tmp_path / "j", readonly=True) as journal:  # the open let go of its path
        assert journal.verify().ok


@pytest.mark.parametrize("role", ["agent", "journal writer", "session actor"])
def test_a_start_out_of_threads_leaves_no_registered_actor(
    tmp_path: Path, failed_starts: Callable[[str, BaseException], _FailedStarts], role: str
) -> None:
    # Pins what session 58 made of it (0469947): "can't start new thread" is typed, and unregistered.
    starts = failed_starts(role, RuntimeError("can't start new thread"))

    _fail_to_start(tmp_path, role, cf.AgentCapacityError if role == "agent" else cf.RuntimeCapacityError)

    assert len(starts.actors) == 1
    assert starts.left_registered() == []


@pytest.mark.parametrize("role", ["agent", "journal writer", "session actor"])
def test_a_message_asked_of_an_actor_whose_start_failed_is_answered(
    tmp_path: Path, failed_starts: Callable[[str, BaseException], _FailedStarts], role: str
) -> None:
    starts = failed_starts(role, RuntimeError("can't start new thread"))
    starts.ask_first = True

    _fail_to_start(tmp_path, role, cf.AgentCapacityError if role == "agent" else cf.RuntimeCapacityError)

    assert len(starts.asked) == 1
    with pytest.raises(pykka.ActorDeadError):  # as a stopped actor answers what was queued to it
        starts.asked[0].get(timeout=1.0)  # not answered: pykka.Timeout


def test_an_open_that_cannot_start_the_session_ticker_raises_runtime_capacity_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        if thread.name.startswith("cogfabric-session-ticker"):
            msg = "can't start new thread"
            raise RuntimeError(msg)
        real(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    try:
        with pytest.raises(cf.RuntimeCapacityError) as caught:
            cf.Runtime.open(tmp_path / "j")  # a real clock: the ticker sweeps expired sessions
    finally:
        monkeypatch.undo()
        assert [ref for ref in pykka.ActorRegistry.get_all() if ref.is_alive()] == []  # nothing left running
        with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as runtime:  # the path is not locked
            assert runtime.agents() == []
    assert isinstance(caught.value, RuntimeError)
    assert caught.value.thread == "session ticker"
    assert "session ticker" in str(caught.value)


def _damage_record_body(path: Path, seq: int, old: bytes, new: bytes) -> None:
    """Change ``old`` to ``new`` (as long) in record ``seq``'s event, its link left: it still decodes."""
    import lmdb  # noqa: PLC0415 - the plain package, as conftest's fixtures

    assert len(old) == len(new)
    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True, db=env.open_db(b"events")) as txn:
        key = seq.to_bytes(8, "big")
        value = bytes(txn.get(key) or b"")
        assert value.count(old) == 1, value
        txn.put(key, value.replace(old, new))
    env.close()


def test_salvage_before_a_damaged_page_names_a_damaged_record_before_a_newer_one(
    tmp_path: Path, damage_page: Callable[[Path, bytes], None]
) -> None:
    path = tmp_path / "j"
    with Journal.open(path, max_map_size=1 << 26) as opened:
        opened.append(make_events(4))  # seqs 1 to 4, seq 4's key "k3"
    with LmdbJournal.open(path, codec=_NEWER_CODEC) as opened:
        opened.append([_Budget(at=9.0, agent="a")])  # seq 5: a type a newer cogfabric added
    with Journal.open(path, max_map_size=1 << 26) as opened:
        opened.append(make_events(295, start=5))  # one batch: each record's link on one page only
    _damage_record_body(path, 4, b"\xa2k3", b"\xa2k9")  # as a bad disk would: seq 4 fails its link
    with Journal.open(path, readonly=True) as opened:
        assert not opened.record_intact(4)
        assert opened.record_intact(5)  # chained to the link stored with seq 4, which is unchanged
    damage_page(path, _link(path, 250))
    dest = tmp_path / "saved"

    code, stdout, _ = _run(["salvage", str(path), str(dest), "--json"])

    assert code == 1
    verdict = json.loads(stdout)
    assert (verdict["ok"], verdict["until"]) == (False, None)
    assert "the cogfabric that wrote" not in verdict["reason"]  # not for a journal damaged before it
    assert verdict["first_bad_seq"] == 4, verdict["reason"]  # the first bad record, as verify would say
    _nothing_under(dest)
    code, stdout, _ = _run(["salvage", str(path), str(dest), "--until", "3"])
    assert code == 0, stdout
