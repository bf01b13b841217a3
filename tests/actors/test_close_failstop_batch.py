"""close() in batch durability raises a journal failure no call has reported (its changes are not stored)."""

import logging
from pathlib import Path

import pytest

import cogfabric as cf


def test_batch_close_reports_a_commit_that_failed_in_storage(tmp_path: Path) -> None:
    path = tmp_path / "j"
    config = {"journal": {"durability": "batch", "map_size": 140 << 10, "max_map_size": 140 << 10}}
    rt = cf.Runtime.open(path, clock=cf.FakeClock(), config=config)
    session = rt.memory.create_session("u")
    rt.flush()
    rt.memory.add_message(session, "user", "y" * 200_000)  # applied at once; no commit can hold it
    assert len(rt.memory.get_messages(session)) in (1, 2)  # the live runtime may show it
    # close() flushes: the refused commit must not pass unseen (flush() raises JournalFullError)
    with pytest.raises(cf.JournalError):
        rt.close()
    with cf.Journal.open(path, readonly=True) as journal:
        kinds = [type(r.event).__name__ for r in journal.read(stream="session/" + session)]
    assert kinds == ["SessionCreated"]  # the message is lost: that is what close() must say


def test_batch_close_reports_a_background_failure_no_call_saw(tmp_path: Path) -> None:
    path = tmp_path / "j"
    config = {"journal": {"durability": "batch", "map_size": 140 << 10, "max_map_size": 140 << 10}}
    rt = cf.Runtime.open(path, clock=cf.FakeClock(), config=config)
    rt.spawn("a", task_id="t")
    rt.flush()
    rt.agent("a").set_private("big", "z" * 200_000)  # batch: applied, handed over, refused by storage
    with pytest.raises(cf.JournalError):
        rt.close()


def test_batch_close_after_a_flush_reported_the_failure_closes_without_raising(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The program heard it (flush raised): close() closes, as after any reported failure.
    config = {"journal": {"durability": "batch", "map_size": 140 << 10, "max_map_size": 140 << 10}}
    rt = cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), config=config)
    try:
        rt.spawn("a", task_id="t")
        rt.flush()
        with caplog.at_level(logging.WARNING, logger="cogfabric"):
            rt.agent("a").set_private("big", "z" * 200_000)
            with pytest.raises(cf.JournalError):
                rt.flush(10)
    finally:
        rt.close()  # raises nothing: the failure was reported
    assert "1 change applied already (to agent/a) is not stored" in caplog.text
