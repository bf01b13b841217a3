"""Kills of helper h15's mutation round (session 54): salvage, its pages and DEST, close()'s joins.

Each test pins what a user sees where a mutant of this session's code passed every
earlier test: a salvage --until past the records a damaged index hides the end of (it
blamed seq 1), the first record copied upcast (no "--until 0" advice), --until at a
clean journal's last record, a DEST created meanwhile, the last seq a damaged page
may hold, and close() waiting for its stopped agents' threads but not a busy one's.
"""

from __future__ import annotations

import hashlib
import mmap
import threading
from typing import TYPE_CHECKING, Any

import lmdb
import pykka
import pytest
from click.testing import CliRunner

import cogfabric as cf
from cogfabric import _audit
from cogfabric.actors._agent import AgentActor
from cogfabric.cli import main
from cogfabric.events import IpcSubscribed
from cogfabric.store import Journal, JournalDamagedError, _lmdb
from cogfabric.store._record import CHAIN_LEN, head_value
from cogfabric.store.testing import make_events
from tests.actors.test_supervision import _short_call_timeout
from tests.reliability.test_corruption_corpus import _with_event
from tests.reliability.test_damaged_pages import _leaf_nodes, _page, _tree, _write_page

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

_LINGER = 0.2  # seconds an agent's thread runs on after its stop was acknowledged


def _journal(path: Path, count: int) -> Path:
    with Journal.open(path, max_map_size=1 << 24) as journal:
        journal.append(make_events(count))
    return path


def _salvage(*args: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["salvage", *map(str, args)])
    return result.exit_code, result.stdout, result.stderr


def _nothing_under(dest: Path) -> None:
    assert not dest.exists()
    assert not list(dest.parent.glob(f".{dest.name}.salvage-*"))


def test_until_past_the_records_of_a_journal_with_a_damaged_index_is_refused_naming_its_last_seq(
    tmp_path: Path,
) -> None:
    path = _journal(tmp_path / "j", 50)
    _, root = _tree(path, b"ids")
    _write_page(path, root, bytes(mmap.PAGESIZE))  # a damaged page that holds no records: no first seq

    code, out, err = _salvage(path, tmp_path / "saved", "--until", "100", "--json")

    # a usage error (helper h14's review): --until past the last record the journal holds
    assert (code, out) == (2, ""), err
    assert f"--until 100 is past {path}'s last record, seq 50" in err
    _nothing_under(tmp_path / "saved")

    code, out, err = _salvage(path, tmp_path / "saved", "--until", "50")
    assert code == 0, err
    assert out.startswith(f"ok: salvaged seqs 1 to 50 of {path}")


def _upcast_first(path: Path) -> None:
    """Store record 1 (an IpcSubscribed) at version 1, re-chained as a version-1 writer chained it."""
    env = lmdb.open(str(path), max_dbs=8)
    try:
        events, meta = env.open_db(b"events"), env.open_db(b"meta")
        with env.begin(write=True) as txn:

            def older(event: dict[str, Any]) -> None:
                event.pop("order", None)
                event["v"] = 1

            body = _with_event(bytes(txn.get((1).to_bytes(8, "big"), db=events) or b""), older)
            prev, seq = bytes(CHAIN_LEN), 1
            while True:
                prev = hashlib.blake2b(prev + body, digest_size=CHAIN_LEN).digest()
                txn.put(seq.to_bytes(8, "big"), body + prev, db=events)
                following = txn.get((seq + 1).to_bytes(8, "big"), db=events)
                if following is None:
                    break
                seq += 1
                body = bytes(following)[:-CHAIN_LEN]
            txn.put(b"head", head_value(seq.to_bytes(8, "big"), prev, b""), db=meta)
    finally:
        env.close()


def test_a_first_record_copied_upcast_is_named_with_no_until_to_retry(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path, max_map_size=1 << 24) as journal:
        journal.append([IpcSubscribed(at=1.0, agent="a0", topic="news"), *make_events(9, start=1)])
    _upcast_first(path)
    with Journal.open(path, readonly=True) as journal:
        assert journal.verify(decode=True).ok

    code, out, err = _salvage(path, tmp_path / "saved")

    assert (code, out) == (1, "")
    assert err == (
        f"error: cannot salvage {path} into {tmp_path / 'saved'}: seq 1's copy does not match it: it is "
        "stored at version 1 of IpcSubscribed and is copied upcast, at version 2: its bytes differ, so "
        f"its chain link and every later one would; nothing was written to {tmp_path / 'saved'}\n"
    )
    _nothing_under(tmp_path / "saved")


def test_until_at_a_clean_journal_s_last_record_copies_it_whole(tmp_path: Path) -> None:
    path = _journal(tmp_path / "j", 20)

    code, out, err = _salvage(path, tmp_path / "saved", "--until", "20")

    assert code == 0, err
    assert out.endswith(f"20 records verified; {path} verifies clean: every record was copied\n")


def test_a_dest_created_meanwhile_is_named_so_and_left_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _journal(tmp_path / "j", 20)
    dest = tmp_path / "saved"
    sync = _lmdb.fsync_file

    def another_process_writes_dest(file: Path) -> None:
        dest.mkdir()
        (dest / "theirs").write_text("mine", encoding="utf-8")
        sync(file)

    monkeypatch.setattr(_audit, "fsync_file", another_process_writes_dest)

    code, out, err = _salvage(path, dest, "--json")

    assert (code, out) == (2, "")
    # with --json, the error object follows its line (tests/test_cli_json_s56_h4.py)
    assert err.splitlines()[0] == f"error: cannot salvage {path} into {dest}: it was created meanwhile"
    assert [p.name for p in dest.iterdir()] == ["theirs"]
    assert not list(tmp_path.glob(".saved.salvage-*"))


def test_a_damaged_page_names_exactly_the_seqs_it_holds(
    tmp_path: Path, damage_page: Callable[[Path, bytes], None]
) -> None:
    path = tmp_path / "j"
    with Journal.open(path, max_map_size=1 << 24) as journal:
        journal.append(make_events(300))
        marker = next(journal.read(after=149, until=150)).chain
    leaf = (path / "data.mdb").read_bytes().index(marker) // mmap.PAGESIZE  # the page damage_page breaks
    seqs = [int.from_bytes(key, "big") for *_, key in _leaf_nodes(_page(path, leaf))]
    assert seqs == list(range(seqs[0], seqs[-1] + 1))
    assert 1 < seqs[0] <= 150 <= seqs[-1] < 300  # a page in the middle: seqs before and after it
    damage_page(path, marker)

    with pytest.raises(JournalDamagedError) as info:
        Journal.open(path, readonly=True)

    assert f"the page holds the records from seq {seqs[0]} to seq {seqs[-1]} at most;" in str(info.value)
    assert info.value.first_seq == seqs[0]


@pytest.fixture
def lingering_agents(monkeypatch: pytest.MonkeyPatch) -> None:
    """Agents' threads (only theirs) run on a moment after their stop was acknowledged."""
    teardown = pykka.Actor._actor_loop_teardown

    def slow(self: pykka.Actor) -> None:
        teardown(self)
        if isinstance(self, AgentActor):
            threading.Event().wait(_LINGER)  # a thread descheduled after its stop: not a wait for anything

    monkeypatch.setattr(pykka.Actor, "_actor_loop_teardown", slow)


class Echo:
    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:  # noqa: ARG002
        return message.payload


@pytest.mark.usefixtures("lingering_agents")
def test_no_agent_thread_is_left_after_close() -> None:
    before = set(threading.enumerate())
    with cf.Runtime.open(None, behaviors={"echo": Echo}) as rt:
        for n in range(3):
            rt.spawn(f"a{n}", behavior="echo")
        assert rt.bus.request("t", "a1", "ping", 1, timeout=5).payload == 1

    assert [t.name for t in threading.enumerate() if t not in before and t.is_alive()] == []


def test_close_does_not_wait_for_a_busy_agent_s_thread(tmp_path: Path) -> None:
    release, started = threading.Event(), threading.Event()
    joined: list[float | None] = []
    threads: list[threading.Thread] = []

    class Stuck:
        def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:  # noqa: ARG002
            threads.append(threading.current_thread())
            started.set()
            release.wait(10)

    rt = cf.Runtime.open(tmp_path / "j", behaviors={"stuck": Stuck})
    try:
        rt.spawn("s", behavior="stuck")
        rt.bus.send("t", "s", "go", None)
        assert started.wait(5)
        join = threads[0].join

        def recorded(timeout: float | None = None) -> None:
            joined.append(timeout)
            join(timeout)

        threads[0].join = recorded  # type: ignore[method-assign]
        with _short_call_timeout(rt, 0.3):  # the set-up's commits keep 10 s, as a loaded machine may need
            rt.close()  # call_timeout for the stuck agent to stop, then it is left to its behavior

        assert joined == []  # not waited for a second time
    finally:
        release.set()
        rt.close()
