"""Hold a Ctrl-C (or a SIGTERM) that lands in a short critical section until the section ends.

A ``KeyboardInterrupt`` raised between two lines of the runtime's own bookkeeping (a
mailbox slot taken and not yet handed to its message, an agent stored and not yet
reachable, one step of ``close()`` half done, a ``with lock:`` left at its last line
with the lock kept) would leave the runtime broken. Python runs a signal's handler on
the main thread, between two bytecodes of whatever runs there: so while runtimes are
open, a SIGINT handler that chains to the one it replaced is installed (once, not per
call: a ``signal.signal`` pair costs microseconds), and the runtime marks its critical
sections on the main thread with ``hold()`` / ``release()`` (or ``with HELD:``). A
SIGINT that lands inside one is noted, and the handler it replaced is called once the
outermost section ends: the ``KeyboardInterrupt`` is raised there, after the
bookkeeping, with any exception in flight as its context. Outside a section, the
handler it replaced is called at once.

SIGTERM (``kill``, systemd, ``docker stop``) is held the same way, by the same handler,
when its own handler is a Python callable too: the command line's, which raises an
interrupt of its own, or a program's ``sys.exit(143)``, whose ``SystemExit`` would break
the runtime just as well. A SIGTERM left to its default action ends the process with no
Python code run, and an ignored one does nothing: neither is touched. Both signals held in
one section are delivered at its end, SIGINT's handler first: a SIGTERM's exception is
the one raised, with the interrupt's as its context.

A held section holds no blocking wait: each wait in it is made through ``wait()``, so
that a Ctrl-C that lands while a call waits (for a commit, a reply, room in a mailbox,
an actor's stop) stops the wait at once, as before; an interrupt held so far is
delivered as the wait begins. One that lands just as the wait in C begins (after
Python's last look for a signal's handler to run) does not stop it: a request's wait for
its reply, a call's wait for its commit, and the waits of ``settle()``, ``flush()`` and
``close()`` (for room, agents, futures, threads) are made through ``wait_sliced`` (``get``,
``join``, ``Condition``, ``Event``), in slices of ``SLICE`` s, so that such a one is raised
when the slice ends, not after the whole timeout. ``threading.Condition.wait`` (which
``threading.Event.wait`` makes) lets its lock go a few lines before the ``try`` that takes
it back: an interrupt there came out as a ``RuntimeError``. ``Condition`` and ``Event``
keep such books held, and unhold their one blocking call only.

Only the main thread is held (other threads never run a signal's handler), so on any
other thread ``hold()`` costs a comparison of thread idents. The handler is installed,
for each of the two signals, only when a runtime opens on the main thread while that
signal's handler is a Python callable (``signal.default_int_handler``, asyncio's, a
program's own): a runtime opened on another thread installs nothing, nor one opened while
the signal is ignored or left to the default action. A program that installs its own
handler after a runtime opened replaces this one: its handler is called directly, at any
line, and the runtime no longer holds anything for it. The handler is put back when the
last runtime that installed it closes on the main thread, only if it is still the
installed one (the command line's SIGTERM handler installs the default action once it
is called, so that a second SIGTERM kills at once: that stays).

A replaced handler that returns instead of raising (asyncio's at a first Ctrl-C, a "press
Ctrl-C again to quit") leaves a wait it landed in waiting, still unheld: the next Ctrl-C in
that wait reaches the handler at once too.
"""

from __future__ import annotations

import _thread
import functools
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

import pykka

from ._clock import MAX_WAIT

if TYPE_CHECKING:
    import collections
    from collections.abc import Callable
    from types import FrameType, TracebackType

__all__ = [
    "HELD",
    "SLICE",
    "Condition",
    "Event",
    "enter",
    "get",
    "hold",
    "install",
    "join",
    "main_ident",
    "put_back",
    "release",
    "uninstall",
    "wait",
    "wait_sliced",
]

_T = TypeVar("_T")

main_ident: int | None = threading.main_thread().ident
"""The main thread's ident: the only thread a signal's handler runs on (reset in a forked child)."""

_depth = 0
"""How deep the main thread is in held sections."""
_waiting = False
"""The main thread waits inside a held section (``wait``): a signal is not held."""
_pending: dict[int, FrameType | None] | Literal[False] = False
"""The signals that landed in a held section, each with the frame it landed in, until delivered."""
_replaced: dict[int, Callable[[int, FrameType | None], Any]] = {}
"""The handler ``install`` replaced, by signal: the one each signal is delivered to."""
_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
"""The signals held, in the order a section delivers them (a SIGTERM's exception is raised last)."""
_installs = 0
"""How many open runtimes installed the handler (``install`` returned True)."""
_install_lock = threading.Lock()
SLICE: Final = 0.25
"""The longest one call of ``wait_sliced`` waits: how late a signal its wait missed is raised."""


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """The installed SIGINT and SIGTERM handler: note the signal inside a held section, else deliver it."""
    global _pending, _waiting  # noqa: PLW0603 - the main thread's own state
    # one assignment (a handler can run inside another); one of this signal held already goes with it
    _pending = {**_pending, signum: frame} if _pending is not False else {signum: frame}
    if _depth > 0 and not _waiting:
        return
    # Raised, it ends the wait (if any): what the section does about it is held again, also
    # when the wait's own clean-up line is not reached.
    waiting, _waiting = _waiting, False
    while _pending is not False:
        landed, _pending = _pending, False
        _deliver(landed, frame)
        # The handlers returned (asyncio's at a first Ctrl-C, a "press again to quit"): the
        # wait goes on, and the next signal in it reaches its handler at once too; one that
        # came while a handler ran (held, as the wait was not) is the wait's too.
        if not waiting:
            break
    _waiting = waiting


def _deliver(landed: dict[int, FrameType | None], frame: FrameType | None) -> None:
    """Call the handler each signal ``landed`` replaced (``frame``: where, if it has none).

    SIGINT's first; both are called when both landed, also if the first raises: the
    exception then raised is the second's, with the first's as its context.
    """
    first, *rest = [signum for signum in _SIGNALS if signum in landed]
    # never installed (a hold's own bookkeeping): as Python's own SIGINT handler does
    replaced = _replaced.get(first, signal.default_int_handler)
    try:
        replaced(first, landed[first] or frame)
    finally:
        if rest:
            _deliver({signum: landed[signum] for signum in rest}, frame)


def install() -> bool:
    """Install the chaining SIGINT and SIGTERM handler for a runtime opening now; whether it counts this one.

    Only on the main thread, and for each signal only when its installed handler is a
    Python callable (or this module's own, installed by another runtime): True when either
    has it. Each True must be matched by one ``uninstall()``.
    """
    global _installs  # noqa: PLW0603
    if threading.get_ident() != main_ident:
        return False
    held = enter()  # a Ctrl-C as the lock is let go would keep it
    try:
        with _install_lock:
            chained = False
            for signum in _SIGNALS:
                current = signal.getsignal(signum)
                if current is not _on_signal:
                    if not callable(current):  # SIG_IGN, SIG_DFL, or None (installed outside Python)
                        continue
                    _replaced[signum] = current  # first: a signal is delivered to it from now on
                    signal.signal(signum, _on_signal)
                chained = True
            if chained:
                _installs += 1
            return chained
    finally:
        release(held)


def uninstall() -> bool:
    """A runtime that ``install`` counted closed: True if it was the last, on the main thread.

    Then call ``put_back()`` once out of every held section. A last close on another
    thread (``signal.signal`` works on the main thread only) leaves this handler
    installed, which then only delivers.
    """
    global _installs  # noqa: PLW0603
    held = hold()  # a Ctrl-C as the lock is let go would keep it
    try:
        with _install_lock:
            _installs = max(0, _installs - 1)
            return not _installs and held
    finally:
        release(held)


def put_back() -> None:
    """Put back each handler ``install`` replaced, where this module's is still the installed one.

    A program's own, installed since, stays (so does the default action the command line's
    SIGTERM handler installs once called). The last thing a ``close()`` does: from here on
    a signal goes to that handler at once, and no section is held. If a signal comes
    before, this handler stays installed, and only delivers.
    """
    held = hold()  # a Ctrl-C as the lock is let go would keep it
    try:
        with _install_lock:
            # each stays in _replaced: a later install replaces it
            ours = (
                {} if _installs else {n: h for n, h in _replaced.items() if signal.getsignal(n) is _on_signal}
            )
    finally:
        release(held)
    if held:
        for signum, replaced in ours.items():
            signal.signal(signum, replaced)


def hold() -> bool:
    """Begin a held section: True on the main thread (pass it to ``release``), else False."""
    global _depth  # noqa: PLW0603
    if threading.get_ident() != main_ident:
        return False
    _depth += 1
    return True


def enter() -> bool:
    """``hold()`` for a caller that compared ``threading.get_ident()`` to ``main_ident`` itself (True)."""
    global _depth  # noqa: PLW0603
    _depth += 1
    return True


def release(held: bool) -> None:
    """End a held section ``hold()`` began (``held``: its answer).

    At the outermost section's end, an interrupt held meanwhile is delivered: the handler
    it replaced is called, and raises ``KeyboardInterrupt`` here (for a SIGTERM, what its
    handler raises: ``SystemExit``, say).
    """
    global _depth, _pending, _waiting  # noqa: PLW0603
    if not held:
        return
    _depth -= 1
    if _depth > 0:
        return
    _waiting = False  # a wait interrupted before its done_waiting
    if _pending is not False:
        landed, _pending = _pending, False
        _deliver(landed, sys._getframe(1))  # noqa: SLF001


def wait(blocking: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:  # noqa: ANN401
    """Call ``blocking(*args, **kwargs)``, a blocking wait, unheld: a Ctrl-C stops it at once.

    Inside a held section on the main thread, an interrupt held so far is delivered
    first (raised here, before the wait), and one that lands during the wait is raised
    from it, as outside any section; what the section does about it is held again.
    Elsewhere it is the plain call. Pass the one blocking call, not a function that also
    keeps books: a ``with lock:`` left by the interrupt at its last line would keep the
    lock.
    """
    global _waiting, _pending  # noqa: PLW0603
    if _depth <= 0 or threading.get_ident() != main_ident:
        return blocking(*args, **kwargs)
    # one that lands as a handler delivered here runs (held: the wait has not begun), if it
    # returns (asyncio's at a first Ctrl-C, a SIGTERM handler that sets a flag), goes too;
    # so does one that lands after the loop and before _waiting is set (held too: without
    # this second look the wait would begin with it pending, and last its whole timeout)
    while True:
        while _pending is not False:
            landed, _pending = _pending, False
            _deliver(landed, sys._getframe(1))  # noqa: SLF001
        _waiting = True  # from here one that lands is raised at once (the handler sees it)
        if _pending is False:
            break
        _waiting = False
    try:
        return blocking(*args, **kwargs)
    finally:
        _waiting = False  # (a Ctrl-C that lands here is raised at once, and clears it itself)


def wait_sliced(wait_for: Callable[[float], bool], timeout: float) -> bool:
    """``wait(wait_for, timeout)`` for a wait that returns True once done, in ``SLICE`` s slices.

    Python runs a signal's handler between two bytecodes: a signal that lands after the
    last of them and before the lock wait in C begins (microseconds, but a thread woken
    as the main thread lets the GIL go to wait sends it just then) does not stop that
    wait, which then lasts its whole timeout (outside the runtime too: CPython's own).
    Inside a held section on the main thread, ``wait_for(seconds)`` is called a slice at
    a time, and the handler of a signal so missed runs as that slice ends: a Ctrl-C or
    SIGTERM comes at most ``SLICE`` s late, not after a request's whole timeout. Elsewhere
    it is the one call ``wait_for(timeout)``. ``timeout`` is finite (``bounded_wait``'s).
    """
    if _depth <= 0 or threading.get_ident() != main_ident:
        return wait_for(timeout)
    # Counted, not timed: a slice that returns False waited it out, and a clock that stands
    # still (freezegun without tick) cannot make the wait last longer than one call would.
    slices, left = divmod(max(0.0, timeout), SLICE)
    for _ in range(int(slices)):
        if wait(wait_for, SLICE):
            return True
    return wait(wait_for, left) if left > 0 or not slices else False


def get(future: pykka.Future[_T], timeout: float) -> _T:
    """``future.get(timeout=timeout)`` through ``wait_sliced``; ``pykka.Timeout`` as it raises it."""
    got: list[_T] = []

    def wait_for(seconds: float) -> bool:
        try:
            got.append(future.get(timeout=seconds))
        except pykka.Timeout:
            return False
        return True

    if not wait_sliced(wait_for, timeout):
        msg = f"{timeout} seconds"
        raise pykka.Timeout(msg)
    return got[0]


def join(thread: threading.Thread, timeout: float) -> bool:
    """``thread.join(timeout)`` through ``wait_sliced``: whether the thread ended."""

    def wait_for(seconds: float) -> bool:
        thread.join(seconds)
        return not thread.is_alive()

    return wait_sliced(wait_for, timeout)


class Condition(threading.Condition):
    """A ``threading.Condition`` of a ``threading.Lock`` whose wait a Ctrl-C leaves sane.

    ``threading.Condition.wait`` releases its lock a few lines before the ``try`` that
    takes it back (python/cpython#78667), and keeps its books in Python: a
    ``KeyboardInterrupt`` raised there leaves the lock released, and the caller's ``with
    lock:`` then raises ``RuntimeError: release unlocked lock`` instead (or, if another
    thread took the lock meanwhile, releases that thread's). Here a wait on the main
    thread is a held section but for its one blocking call, the ``acquire`` of a lock of
    the waiter's own (which ``notify`` releases), made through ``wait_sliced``: an
    interrupt comes out of that call only (or at the section's end), and the lock is
    taken back, the waiter forgotten, before it goes on; a waiter that ``notify`` chose
    and that leaves by such an exception passes its wake-up on to the next. Call it
    directly, not through ``wait()`` (which would unhold those books too), and hold the
    lock with ``with lock:``, not ``with condition:`` (a Python ``__enter__``, where an
    interrupt can land with the lock taken).
    """

    _waiters: collections.deque[_thread.LockType]
    """threading.Condition's own (its ``_at_fork_reinit`` and ``repr`` see them): the waiters' locks."""

    def __init__(self, lock: threading.Lock) -> None:
        """A condition of ``lock``: each method is called with it held."""
        super().__init__(lock)
        self._mutex = lock

    def notify(self, n: int = 1) -> None:
        """Wake ``n`` waiters (the longest waiting first)."""
        sleepers = self._waiters
        while sleepers and n > 0:
            sleepers.popleft().release()
            n -= 1

    def notify_all(self) -> None:
        """Wake every waiter."""
        self.notify(len(self._waiters))

    def wait_for(self, predicate: Callable[[], _T], timeout: float | None = None) -> _T:
        """Wait until ``predicate()`` is true, ``timeout`` seconds at most; its last answer.

        As ``threading.Condition.wait_for`` (None: ``MAX_WAIT``), except that a wait that
        times out ends it: ``time.monotonic`` standing still (freezegun without tick)
        cannot make it last longer.
        """
        held = hold()
        try:
            deadline = time.monotonic() + (MAX_WAIT if timeout is None else min(timeout, MAX_WAIT))
            while not (ready := predicate()):
                left = deadline - time.monotonic()
                if left <= 0 or not self.wait(left):
                    return predicate()
            return ready
        finally:
            release(held)

    def wait(self, timeout: float | None = None) -> bool:
        """Release the lock, wait to be notified (``timeout`` s at most), take it back: whether notified.

        A ``timeout`` of 0 or less (NaN too) only looks, as ``threading.Condition.wait``'s.
        """
        wait = MAX_WAIT if timeout is None else max(0.0, min(timeout, MAX_WAIT))
        held = hold()
        try:
            sleeper = _thread.allocate_lock()
            sleeper.acquire()
            self._waiters.append(sleeper)
            self._mutex.release()
            try:
                notified = wait_sliced(functools.partial(sleeper.acquire, True), wait)
            except BaseException:
                self._mutex.acquire()  # held: an interrupt is raised once it is taken back
                if not self._forget(sleeper):  # notified, and leaving: the next waiter has it
                    self.notify()
                raise
            self._mutex.acquire()  # held: an interrupt is raised once it is taken back
            self._forget(sleeper)
            return notified
        finally:
            release(held)

    def _forget(self, sleeper: _thread.LockType) -> bool:
        """Take ``sleeper`` off the waiters: False if ``notify`` took it first."""
        try:
            self._waiters.remove(sleeper)
        except ValueError:
            return False
        return True


class Event(threading.Event):
    """A ``threading.Event`` whose wait a Ctrl-C leaves sane: its condition is a ``Condition``.

    ``threading.Event``'s methods take their lock with ``with self._cond:``, whose
    ``__enter__`` and ``__exit__`` are Python: a Ctrl-C that lands in them just after the
    lock is taken or just before it is let go leaves it taken, and every later ``set``
    or ``wait``, on any thread, waits for good. Here ``wait``, ``set`` and ``clear``
    are held sections on the main thread, but for the wait's one blocking call, unheld
    and sliced. Wait on this one directly, not through ``wait()`` (which would unhold
    its bookkeeping).
    """

    def __init__(self) -> None:
        """Not set."""
        # threading.Event.__init__'s two attributes, without the condition it would make and drop
        self._cond = Condition(threading.Lock())
        self._flag = False

    def set(self) -> None:
        """Set the flag, and wake every waiter."""
        held = hold()
        try:
            with self._cond._mutex:  # noqa: SLF001 - its own condition
                self._flag = True
                self._cond.notify_all()
        finally:
            release(held)

    def clear(self) -> None:
        """Clear the flag."""
        held = hold()
        try:
            with self._cond._mutex:  # noqa: SLF001 - its own condition
                self._flag = False
        finally:
            release(held)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the flag is set (``timeout`` seconds at most, None: ``MAX_WAIT``): the flag."""
        held = hold()
        try:
            with self._cond._mutex:  # noqa: SLF001 - its own condition
                if not self._flag:
                    self._cond.wait(timeout)
                return self._flag  # set as the wait timed out: True, not threading.Event's False
        finally:
            release(held)


class _Held:
    """``with HELD:``: a held section (reentrant; a no-op off the main thread)."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _depth  # noqa: PLW0603
        if threading.get_ident() == main_ident:
            _depth += 1

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        release(threading.get_ident() == main_ident)


HELD: Final = _Held()
"""A held section as a ``with`` block: ``with HELD: ...``."""


def _forked() -> None:
    """In a forked child, the forking thread is the main thread, in no section."""
    global main_ident, _depth, _waiting, _pending, _installs  # noqa: PLW0603
    main_ident = threading.get_ident()
    _depth, _waiting, _pending, _installs = 0, False, False, 0


os.register_at_fork(after_in_child=_forked)
