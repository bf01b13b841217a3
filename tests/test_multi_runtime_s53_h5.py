"""Several runtimes and journals in one long-lived process (helper h5, session 53).

py-lmdb's "already open in this process" guard checks the files, opens the environment
with the GIL released, and only then notes the files: two threads opening one journal at
once both got it. These tests hold the first open between its check and its note of the
files (through py-lmdb's own ``_envid.env_keys``, which its guard calls for both) until
the other thread has passed its check too (and noted its files), or a bound has passed:
before the fix both opens succeed.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import lmdb._envid
import pytest

import cogfabric as cf
from cogfabric.store import Journal, JournalLockedError

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

_BOUND = 1.0
"""How long the first open waits for the second one's check (seconds): the second only
reaches it, within the bound, when nothing serializes the opens."""


def _hold_first_open(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hold the first open of a journal between its check and its note of the files.

    py-lmdb's guard calls ``env_keys`` twice an open: to check, before LMDB opens the
    files, and to note them, after. The first thread to call it waits at its second
    call until another thread has noted its files too (so passed the check), or
    ``_BOUND`` passed (an open that waits for the first's, as it should, never does).
    """
    real: Callable[[object, bool], tuple[object, ...]] = lmdb._envid.env_keys  # py-lmdb's guard
    calls: dict[int, int] = {}
    first: list[int] = []
    other_noted = threading.Event()
    lock = threading.Lock()

    def env_keys(path: object, subdir: bool) -> tuple[object, ...]:  # py-lmdb's signature
        me = threading.get_ident()
        with lock:
            first[:] = first or [me]
            calls[me] = calls.get(me, 0) + 1
            noting = calls[me] == 2  # the second call of an open
            if noting and me != first[0]:
                other_noted.set()
        if noting and me == first[0]:
            other_noted.wait(_BOUND)
        return real(path, subdir)

    monkeypatch.setattr(lmdb._envid, "env_keys", env_keys)


def _race(opens: list[Callable[[], object]]) -> tuple[list[object], list[BaseException]]:
    """Run ``opens`` on threads of their own at once; what opened and what was raised."""
    opened: list[object] = []
    raised: list[BaseException] = []
    start = threading.Barrier(len(opens))

    def run(fn: Callable[[], object]) -> None:
        start.wait(5)
        try:
            opened.append(fn())
        except BaseException as exc:  # noqa: BLE001 - collected for the test
            raised.append(exc)

    threads = [threading.Thread(target=run, args=(fn,)) for fn in opens]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not any(thread.is_alive() for thread in threads)
    return opened, raised


def _close_all(opened: list[object]) -> None:
    for one in opened:
        one.close()  # type: ignore[attr-defined]


def test_two_readonly_opens_at_once_one_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "journal"
    cf.Runtime.open(path).close()
    _hold_first_open(monkeypatch)
    opened, raised = _race([lambda: Journal.open(path, readonly=True)] * 2)
    try:
        assert len(opened) == 1, f"{len(opened)} opens of one journal in one process"
        assert len(raised) == 1
        assert isinstance(raised[0], JournalLockedError)
    finally:
        _close_all(opened)
    with Journal.open(path, readonly=True) as journal:  # the one open let go of everything
        assert journal.verify().ok


def test_a_runtime_and_an_audit_opening_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "journal"
    with cf.Runtime.open(path) as rt:
        rt.spawn("researcher-001")
    _hold_first_open(monkeypatch)
    opened, raised = _race([lambda: cf.Runtime.open(path), lambda: Journal.open(path, readonly=True)])
    try:
        assert len(opened) == 1, f"{len(opened)} opens of one journal in one process"
        assert [type(exc) for exc in raised] == [JournalLockedError], raised
    finally:
        _close_all(opened)
    with cf.Runtime.open(path) as rt:
        assert rt.agents() == ["researcher-001"]


def test_one_open_leaves_the_next_refused_while_it_is_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard still knows a journal whose racing second open was refused."""
    path = tmp_path / "journal"
    cf.Runtime.open(path).close()
    _hold_first_open(monkeypatch)
    opened, _ = _race([lambda: Journal.open(path, readonly=True)] * 2)
    try:
        assert opened
        opened.pop().close()  # type: ignore[attr-defined]
        if opened:  # before the fix: the other one is open still, and the guard forgot it
            with pytest.raises(JournalLockedError):
                Journal.open(path, readonly=True).close()
    finally:
        _close_all(opened)
