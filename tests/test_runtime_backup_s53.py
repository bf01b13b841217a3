"""``Runtime.backup``: a program hosting a runtime backs up its journal while its agents go on."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest

import cogfabric as cf
from cogfabric.store import JournalLockedError, LmdbJournal

if TYPE_CHECKING:
    from pathlib import Path


def _batch() -> cf.Config:
    return cf.Config(journal=cf.JournalConfig(durability="batch"))


def test_a_backup_taken_while_agents_change_state_is_a_prefix_of_the_journal(tmp_path: Path) -> None:
    with cf.Runtime.open(tmp_path / "j") as rt:
        agents = [rt.spawn(f"a{i}") for i in range(4)]
        with pytest.raises(JournalLockedError):  # why a host needs Runtime.backup
            LmdbJournal.open(tmp_path / "j", readonly=True)
        stop = threading.Event()

        def change(agent: cf.Agent) -> None:
            n = 0
            while not stop.is_set() and n < 2_000:
                agent.set_private("n", n)
                n += 1

        writers = [threading.Thread(target=change, args=(agent,)) for agent in agents]
        for writer in writers:
            writer.start()
        try:
            seq = rt.backup(tmp_path / "b")
        finally:
            stop.set()
            for writer in writers:
                writer.join(30)
        assert not any(writer.is_alive() for writer in writers)
    with LmdbJournal.open(tmp_path / "b") as copied, LmdbJournal.open(tmp_path / "j", readonly=True) as whole:
        assert copied.verify(decode=True).ok
        assert copied.last_seq == seq
        assert [r.chain for r in copied.read()] == [r.chain for r in whole.read(until=seq)]
    with cf.Runtime.open(tmp_path / "b") as restored:  # the backup continues as a journal
        assert restored.agents() == [f"a{i}" for i in range(4)]


def test_in_batch_durability_a_flush_first_puts_every_change_handed_over_in_it(
    tmp_path: Path,
) -> None:
    with cf.Runtime.open(tmp_path / "j", config=_batch()) as rt:
        rt.spawn("a").set_private("k", "v")
        rt.flush()
        rt.backup(tmp_path / "b")
    with cf.Runtime.open(tmp_path / "b") as restored:
        assert restored.agent("a").private("k") == "v"


def test_a_runtime_without_a_journal_or_closed_refuses_by_type(tmp_path: Path) -> None:
    with cf.Runtime.open() as rt, pytest.raises(cf.NoJournalError, match="no journal"):
        rt.backup(tmp_path / "b")
    rt = cf.Runtime.open(tmp_path / "j")
    rt.close()
    with pytest.raises(cf.RuntimeClosedError):
        rt.backup(tmp_path / "b")
    assert not (tmp_path / "b").exists()
