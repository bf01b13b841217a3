"""Small defects noticed by earlier sessions and left alone (session 60, helper h3).

Each test failed on the code before its fix, which came with this file.

- A request the command line's SIGTERM stopped left a ``timeout`` dead letter saying
  "Ctrl-C": the CLI raises its own ``KeyboardInterrupt`` for a SIGTERM, and the bus
  named a ``SystemExit`` only. It now says "SIGTERM".
- ``_close_left_open`` (the exit hook that closes runtimes left open) caught
  ``Exception`` only: a Ctrl-C (or a SIGTERM handler's ``sys.exit``) in one runtime's
  close at exit left the others open, their batch-durability events never journaled. It
  now closes the rest, then raises the first interruption.
- A thread the runtime starts for a call (an LLM provider's HTTP exchange, a retriever's
  worker) that could not start raised a plain ``RuntimeError``; it is now
  ``RuntimeCapacityError``, as for the runtime's other threads.
- ``RuntimeCapacityError`` did not name the runtime whose thread did not start: it now
  names it (``Runtime.name``: the journal directory's name, ``memory``, or the one given).
- ``inspect --skip-newer`` (with ``--no-verify``, or from ``inspect_journal``) counted a
  record of an unknown type that fails its chain link as one a newer cogfabric wrote
  (``unknown``, exit 0); a record that fails its link is damage, whatever its tag reads as.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from typing import TYPE_CHECKING

import pytest

import cogfabric as cf
from cogfabric import cli
from cogfabric._audit import inspect_journal, written_by_newer
from cogfabric.actors import _runtime
from cogfabric.store import JournalRecordError, LmdbJournal
from tests.test_cli_json_s56_h4 import _run
from tests.test_cli_json_s56_h4 import journal as journal  # noqa: PLC0414 - the fixture, used by name
from tests.test_inspect_unknown_types_s58_h2 import _Budget, _with
from tests.test_interrupt_hold_s58_h1 import (  # autouse: Python's own SIGINT handler, then as found
    _sigint_as_found as _sigint_as_found,  # noqa: PLC0414
)
from tests.test_review_s59_h4 import _damage_record_body, _FailedStarts
from tests.test_review_s59_h4 import failed_starts as failed_starts  # noqa: PLC0414 - the fixture
from tests.test_sigterm_bus_s59 import _Exiting
from tests.test_sigterm_hold_s59_h1 import (  # autouse: SIGTERM's default action, then as found
    _sigterm_as_found as _sigterm_as_found,  # noqa: PLC0414
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

WAIT = 10.0

posix = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


@posix
def test_a_request_the_command_lines_sigterm_stops_leaves_a_letter_naming_sigterm(tmp_path: Path) -> None:
    signal.signal(signal.SIGTERM, cli._on_sigterm)  # as a command (``cogfabric run``) installs it
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), behaviors={"exiting": _Exiting}) as rt:
        rt.spawn("a", behavior="exiting")
        with pytest.raises(cli._Terminated):
            rt.bus.request("app", "a", "ask", 1, timeout=WAIT)
        rt.settle(WAIT)
        (letter,) = rt.bus.dead_letters()
    assert letter.reason == "timeout"
    assert "(SIGTERM while waiting for its reply)" in letter.error
    assert "Ctrl-C" not in letter.error


def test_an_interrupt_closing_one_runtime_at_exit_leaves_the_others_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runtimes = [cf.Runtime.open(None, clock=cf.FakeClock(), name=f"left-{n}") for n in range(3)]
    real = cf.Runtime.close
    interrupted: list[cf.Runtime] = []

    def close(runtime: cf.Runtime) -> None:
        if not interrupted and runtime in runtimes:
            interrupted.append(runtime)
            raise KeyboardInterrupt  # a Ctrl-C at exit, in the first close
        real(runtime)

    monkeypatch.setattr(cf.Runtime, "close", close)
    try:
        with pytest.raises(KeyboardInterrupt):
            _runtime._close_left_open()  # the atexit hook itself
        assert [rt.closed for rt in runtimes if rt not in interrupted] == [True, True]
    finally:
        monkeypatch.undo()
        for rt in runtimes:
            rt.close()


def _no_thread_for(monkeypatch: pytest.MonkeyPatch, prefix: str) -> None:
    """``Thread.start`` fails as at the process's limit for threads named ``prefix``..."""
    real = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        if thread.name.startswith(prefix):
            msg = "can't start new thread"
            raise RuntimeError(msg)
        real(thread)

    monkeypatch.setattr(threading.Thread, "start", start)


def test_an_llm_exchange_whose_thread_cannot_start_raises_runtime_capacity_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider = cf.OpenAICompatibleProvider(cf.LLMConfig(base_url="http://127.0.0.1:9/v1", model="m"))
    _no_thread_for(monkeypatch, "cogfabric-llm-http")

    with pytest.raises(cf.RuntimeCapacityError) as caught:
        provider.generate("hello")

    assert isinstance(caught.value, RuntimeError)  # what threading raises, too
    assert "HTTP exchange" in str(caught.value)


class _Found:
    def retrieve(self, query: str) -> list[cf.Snippet]:
        return [cf.Snippet(source="s", content=query, score=1.0)]


def test_a_retriever_whose_thread_cannot_start_raises_runtime_capacity_error_naming_the_runtime(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with cf.Runtime.open(None, clock=cf.FakeClock(), name="rag") as rt:
        rt.memory.set_retrievers([_Found()])
        session = rt.memory.create_session("u")
        _no_thread_for(monkeypatch, "cogfabric-retriever")
        try:
            with pytest.raises(cf.RuntimeCapacityError) as caught:
                rt.memory.build_context("what", session)
        finally:
            monkeypatch.undo()
    assert caught.value.thread == "retriever"
    assert caught.value.runtime == "rag"


@pytest.mark.parametrize(
    ("role", "journaled", "name", "expected"),
    [
        ("journal writer", True, None, "j"),  # the journal directory's name
        ("session actor", True, "sim-a", "sim-a"),
        ("session actor", False, None, "memory"),
    ],
)
def test_runtime_capacity_error_names_the_runtime(  # noqa: PLR0917 - the fixtures and the cases
    tmp_path: Path,
    failed_starts: Callable[[str, BaseException], _FailedStarts],
    role: str,
    journaled: bool,
    name: str | None,
    expected: str,
) -> None:
    failed_starts(role, RuntimeError("can't start new thread"))

    with pytest.raises(cf.RuntimeCapacityError) as caught:
        cf.Runtime.open(tmp_path / "j" if journaled else None, clock=cf.FakeClock(), name=name)

    assert caught.value.runtime == expected
    assert f"the {role} of runtime {expected!r}:" in str(caught.value)


def test_runtime_capacity_error_names_the_runtime_of_its_session_ticker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_thread_for(monkeypatch, "cogfabric-session-ticker")
    try:
        with pytest.raises(cf.RuntimeCapacityError) as caught:
            cf.Runtime.open(tmp_path / "j", name="sim-b")  # a real clock: the ticker sweeps
    finally:
        monkeypatch.undo()
    assert caught.value.runtime == "sim-b"
    assert "session ticker of runtime 'sim-b'" in str(caught.value)


def _unknown_and_damaged(journal: Path) -> None:
    """``journal`` with a record of a type a newer cogfabric added (seq 7), its body then changed."""
    _with(journal, _Budget(at=9.0, agent="zq", limit=3))
    _damage_record_body(journal, 7, b"\xa2zq", b"\xa2zr")  # as a bad disk would: it fails its link


def test_inspect_skip_newer_takes_a_record_failing_its_link_for_damage_not_a_newer_one(journal: Path) -> None:
    _unknown_and_damaged(journal)

    with LmdbJournal.open(journal, readonly=True) as opened:
        assert not opened.record_intact(7)
        with pytest.raises(JournalRecordError) as caught:
            inspect_journal(opened, journal, skip_newer=True)
    assert caught.value.seq == 7
    assert not written_by_newer(caught.value)
    assert "hash chain link" in str(caught.value)


def test_inspect_no_verify_skip_newer_exits_1_at_a_damaged_record_of_an_unknown_type(journal: Path) -> None:
    _unknown_and_damaged(journal)

    code, stdout, stderr = _run(["inspect", str(journal), "--no-verify", "--skip-newer", "--json"])

    assert code == 1, stdout
    assert "unknown" not in stdout
    error = json.loads(stderr.splitlines()[-1])["error"]
    assert error["seq"] == 7
    assert error["kind"] == "JournalRecordError"
    assert "a damaged record" in error["message"]
    assert "upgrade" not in error["message"]  # not sent to a newer cogfabric
