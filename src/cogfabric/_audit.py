"""What the audit commands do, without the command line: open read-only, rebuild, export."""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import decimal
import errno
import heapq
import logging
import os
import re
import signal
import sys
import tempfile
import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import msgspec

from cogfabric.actors import SessionState, apply_session_event, replay_agent, snapshot_problem
from cogfabric.actors._core import publications
from cogfabric.events import (
    MAX_VALUE_DEPTH,
    AgentFailed,
    AgentSpawned,
    CheckpointTaken,
    ContextLayer,
    Event,
    IpcDeadLettered,
    IpcDelivered,
    IpcMessage,
)
from cogfabric.store import (
    JournalDamagedError,
    JournalError,
    JournalRecordError,
    JournalRecordTypeError,
    JournalRecordVersionError,
    JournalUnavailableError,
    LmdbJournal,
)
from cogfabric.store._journal import UNDECODABLE
from cogfabric.store._lmdb import (
    HEADER_SPAN,
    data_file,
    fsync_file,
    linked_file,
    open_regular,
    used_length,
    write_beside,
)
from cogfabric.store._record import CHAIN_LEN, parts

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterator

    from cogfabric.store import Record, VerifyReport

__all__ = [
    "AuditAccessError",
    "SalvageMismatchError",
    "Trace",
    "agent_view",
    "check_snapshots",
    "encode_json",
    "export_line",
    "export_lines",
    "find_trace",
    "inspect_journal",
    "journal_view",
    "newer_record",
    "open_for_audit",
    "salvage",
    "session_view",
    "trace_effects",
    "trace_view",
    "written_by_newer",
]

_IPC_SHOWN = 20

_FAILURES_SHOWN: Final = 5
"""The latest failures of an agent ``replay --agent`` shows (``failures.latest``); ``count`` is of all."""

log = logging.getLogger(__name__)


class AuditAccessError(JournalError):
    """Raised when a journal cannot be opened read-only in place (LMDB writes its lock file)."""


def _not_writable(path: Path) -> str | None:
    """What LMDB cannot write to take a reader's place in the journal at ``path``, or None."""
    lock = path / "lock.mdb"
    if lock.exists():
        return None if os.access(lock, os.W_OK) else "its lock file (lock.mdb) is not writable"
    return None if os.access(path, os.W_OK) else "this directory is not writable"


@contextlib.contextmanager
def open_for_audit(
    path: Path, *, copy: bool = False, key: bytes | str | None = None
) -> Iterator[LmdbJournal]:
    """Open ``path`` read-only, or a private copy of its data file with ``copy``.

    The data file is never changed. Reading in place works while a writer appends
    (LMDB gives a consistent snapshot). ``copy`` copies the data file, which is
    consistent only if no commit lands meanwhile: it copies again (``_COPY_TRIES``
    times in all) while the file changes under it, and then gives up rather than
    audit a torn copy.

    Every page is first walked and read in a child process (``_check_pages``), so that a
    page LMDB would crash on is reported as damage (``JournalDamagedError``); the
    journal is then opened without walking its pages again, unless the child did not
    get through them (then the open's own walk names the damage). In place, beside a
    writer in another process, what that writer commits after the child's walk is read
    unwalked, as every read after any open reads it: written by LMDB, not damaged at rest.

    Raises:
        AuditAccessError: the directory (or its lock file) is not writable and
            ``copy`` is not set.
        JournalUnavailableError: the data file cannot be read (or copied), or kept
            changing while it was copied.
        JournalError: as the store raises it, naming ``path`` (not the private copy).

    """
    source = data_file(path, refuse_links=False)  # None: no journal there, which opening it says
    if source is not None and not os.access(source, os.R_OK):  # before suggesting --copy, which must read it
        raise JournalUnavailableError(f"{path}: cannot read its data file: permission denied")
    if not copy:
        linked = linked_file(path)
        if linked is not None:
            msg = (
                f"cannot audit {path} in place: its {linked} is a symbolic link, which LMDB would "
                "write through; rerun with --copy to audit a private copy"
            )
            raise AuditAccessError(msg)
        unwritable = None if source is None else _not_writable(path)
        if unwritable is not None:
            msg = (
                f"cannot audit {path} in place: LMDB writes its lock file even when reading, "
                f"and {unwritable}; rerun with --copy to audit a private copy"
            )
            raise AuditAccessError(msg)
        walked = _check_pages(path, path, key)
        with LmdbJournal.open(path, readonly=True, key=key, check_pages=not walked) as journal:
            yield journal
        return
    with tempfile.TemporaryDirectory(prefix="cogfabric-audit-") as tmp:
        tmp_parent = Path(tmp).parent
        target = Path(tmp) / "journal"
        target.mkdir(mode=0o700)
        if source is None:
            with LmdbJournal.open(path, readonly=True, key=key) as journal:  # raises "no journal"
                yield journal
            return
        _quiet_copy(path, target / "data.mdb")
        walked = _check_pages(target, path, key)
        try:
            with LmdbJournal.open(target, readonly=True, key=key, check_pages=not walked) as journal:
                yield journal
        except JournalError as exc:  # name the user's path, not the private copy's
            # but for the storage (no room for LMDB's lock file, an I/O error): that is the
            # temporary directory's, where the journal's own file system may have room
            storage = type(exc) is JournalUnavailableError
            where = f"{path}'s private copy under {tmp_parent} (TMPDIR)" if storage else str(path)
            exc.args = tuple(a.replace(str(target), where) if isinstance(a, str) else a for a in exc.args)
            raise


_CRASHES: Final = frozenset({signal.SIGABRT, signal.SIGBUS, signal.SIGSEGV, signal.SIGILL, signal.SIGFPE})
"""The signals a process dies of when LMDB meets a page it cannot parse (an assertion, a bad address)."""

_STOPS: Final = frozenset({signal.SIGINT, signal.SIGTERM})
"""The signals that stop the audit's page-checking child as they would any process."""


def _check_pages(where: Path, named: Path, key: bytes | str | None) -> bool:
    """Read every page of the journal at ``where`` in a child process first, if LMDB would crash on one.

    LMDB has no checksums and trusts its pages: one damaged in place can make it abort
    the process with an assertion, or a SIGBUS, where an audit must report damage.
    ``Journal.open`` walks every page first (``store/_pages.py``) and refuses what LMDB
    is known to crash on; this is the audit's second line, for whatever that walk does
    not know of: a forked child opens the journal read-only (which walks its pages)
    and reads every key and value of every database; if it dies of one of those
    signals, this raises instead of letting the audit read the same page.
    The child's reads cost about one scan of the file, with nothing decoded. Skipped where
    forking is not safe (other threads running, no ``fork``) or fails (a process
    limit): the audit then reads without it.

    Returns whether the child walked and read every page: the audit's own open need not
    walk them again. False where it was skipped, or where its open failed (damage the
    walk names, a wrong key): the audit's open then walks, and raises that error typed.

    Raises:
        JournalDamagedError: the child crashed (names ``named``).
        JournalUnavailableError: the child was killed from outside (SIGKILL, SIGTERM...),
            which says nothing of the journal.

    """
    if not hasattr(os, "fork") or threading.active_count() > 1 or data_file(where) is None:
        return False
    # The child must die of SIGINT and SIGTERM, not run the parent's Python handlers (the
    # command line's turn them into exceptions that would unwind the parent's stack in the
    # child): every signal is held across the fork (so no handler raises between the
    # fork's return and its pid kept), and in the child a Python handler of those two is
    # put back to the default action before it takes them (one ignored stays ignored).
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, ())  # as it is (a handler may raise in here)
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        pid = os.fork()
    except BaseException as exc:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if not isinstance(exc, OSError):
            raise
        log.warning("cannot fork to read %s's pages first (%s); auditing without that check", named, exc)
        return False
    if pid == 0:  # pragma: no cover - the child; its coverage is not collected
        code = 1  # whatever it meets, the parent's own open (walking the pages) reports it, typed
        try:
            for stop in _STOPS:
                if callable(signal.getsignal(stop)):
                    signal.signal(stop, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            import resource  # noqa: PLC0415 - Unix only, as fork is

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash here is expected: no core dump
            with LmdbJournal.open(where, readonly=True, key=key) as journal:
                _read_every_page(journal)
            code = 0
        finally:
            os._exit(code)
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # one held meanwhile is handled here
        _, status = os.waitpid(pid, 0)
    except BaseException:  # interrupted (Ctrl-C): the child must not scan on, nor stay a zombie
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        _reap(pid)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # raised before the mask was set back
        raise
    if not os.WIFSIGNALED(status):
        return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    number = os.WTERMSIG(status)
    try:
        name = signal.Signals(number).name
    except ValueError:  # a real-time signal has no name
        name = f"signal {number}"
    if number not in _CRASHES:
        msg = f"{named}: the check of its pages was stopped from outside ({name}); audit it again"
        raise JournalUnavailableError(msg)
    msg = (
        f"{named} is damaged: LMDB crashed ({name}) reading a page of its data file, which "
        "holds what LMDB cannot parse (it has no checksums); restore the journal from a copy"
    )
    raise JournalDamagedError(msg)


def _reap(pid: int) -> None:
    """Wait for the killed child ``pid``, whatever interrupts the wait (a second Ctrl-C).

    It dies at once of SIGKILL; left unwaited for, it would stay a zombie.
    """
    while True:
        try:
            os.waitpid(pid, 0)
        except OSError:  # reaped already, or no such child
            return
        except BaseException:  # noqa: BLE001, S112 - the first interrupt is raised once it is reaped
            continue
        return


def _read_every_page(journal: LmdbJournal) -> None:
    """Read every key and value of every database: each page LMDB would read for a reader."""
    env = journal._env  # noqa: SLF001 - the audit's own journal
    with env.begin() as txn:
        names = [bytes(name) for name in txn.cursor().iternext(values=False)]
    for name in names:
        with contextlib.suppress(Exception):  # not a database (a stray key): LMDB refuses it
            db = env.open_db(name, create=False)
            with env.begin(db=db) as txn:
                collections.deque(txn.cursor().iternext(), maxlen=0)


_COPY_TRIES = 5


def _quiet_copy(path: Path, target: Path) -> None:
    """Copy ``path``'s data file to ``target`` (0600) while no commit changes it.

    Only as far as its newest header page names pages (``used_length``), and holes
    stay holes (``_copy_used``): a file made long with a hole (``truncate -s 1T``)
    would otherwise fill the disk with zeros.
    """
    source = path / "data.mdb"
    for _ in range(_COPY_TRIES):
        try:
            before = source.stat()
            _copy_used(source, target)
            after = source.stat()
        except OSError as exc:  # unreadable, or no room for the copy
            msg = f"{path}: cannot copy its data file: {exc.strerror or exc}"
            # no room: the copy's file system (the temporary directory's), not the journal's
            if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                msg = (
                    f"{path}: no room for a private copy of its data file under {target.parents[2]} "
                    f"(the temporary directory: free some there, or set TMPDIR to one with room): "
                    f"{exc.strerror or exc}"
                )
            raise JournalUnavailableError(msg) from exc
        target.chmod(0o600)
        if (before.st_mtime_ns, before.st_size) == (after.st_mtime_ns, after.st_size):
            return  # no commit landed while it was copied: the copy is consistent
    unwritable = _not_writable(path)
    msg = f"{path} changed while it was copied, {_COPY_TRIES} times: a writer is committing to it; " + (
        "audit it in place, or copy it once nothing writes to it"
        if unwritable is None
        # in place, as this user, fails: LMDB writes its lock file even when reading
        else f"copy it once nothing writes to it (in place cannot be audited as you: {unwritable})"
    )
    raise JournalUnavailableError(msg)


def _copy_used(source: Path, target: Path) -> None:
    """Copy what the data file ``source``'s newest header names as used, holes left holes.

    A file whose header names nothing (not LMDB's) is copied only as far as a header
    reaches (``HEADER_SPAN``): enough for the open to say what it is. What the header
    names is copied region by region of data (``SEEK_DATA``/``SEEK_HOLE``), so a hole,
    however long a header names the file, costs the copy no disk and no time; a chunk of
    zeros is left a hole too (where the file system reports no holes, it is read, not
    written).
    """
    with open_regular(source) as src:
        length = used_length(src)
        fd_in = src.fileno()
        end = min(HEADER_SPAN if length is None else length, os.fstat(fd_in).st_size)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            for start, stop in _data_regions(fd_in, end):
                offset = start
                while offset < stop:
                    chunk = os.pread(fd_in, min(stop - offset, _COPY_CHUNK), offset)
                    if not chunk:
                        break  # the file shrank meanwhile: the copy's check of its size says so
                    if chunk != _ZEROS[: len(chunk)]:  # zeros stay a hole: ftruncate below makes them
                        _write_all(fd, chunk, offset)
                    offset += len(chunk)
            os.ftruncate(fd, end)
        finally:
            os.close(fd)


def _write_all(fd: int, data: bytes, offset: int) -> None:
    """Write all of ``data`` at ``offset``: a file system that fills up writes part of it and says nothing.

    The rest is written again, which raises (``ENOSPC``, ``EDQUOT``) once no byte fits:
    a copy cut short there would read as a damaged journal, with its end zeros.
    """
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        if written <= 0:  # no progress, and no error said why
            raise OSError(errno.EIO, f"a write of the copy at offset {offset} wrote nothing")
        view = view[written:]
        offset += written


def _data_regions(fd: int, end: int) -> Iterator[tuple[int, int]]:
    """The ranges of ``fd`` before ``end`` that hold data (all of it where the file system cannot tell)."""
    offset = 0
    while offset < end:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
            stop = os.lseek(fd, start, os.SEEK_HOLE)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                return  # no data past offset: the rest is a hole
            yield offset, end  # no SEEK_DATA here: copy the rest as it reads
            return
        if start >= end:
            return
        yield start, min(stop, end)
        offset = stop


_COPY_CHUNK = 1 << 20
_ZEROS: Final = bytes(_COPY_CHUNK)


def inspect_journal(
    journal: LmdbJournal, path: Path, *, until: int | None = None, skip_newer: bool = False
) -> dict[str, Any]:
    """Format, counts per type and per stream, first and last time, the head, size on disk.

    The head is the last record's seq and its hash-chain link (hex; None when empty):
    keep both elsewhere to detect a later consistent rewrite of the journal. A type is
    named by its type tag, as a record stores it and ``export`` names it (for every
    built-in event type, its class name; a type declared with ``tag=`` by that tag).

    ``skip_newer``: a record this code cannot read because newer code wrote it is
    counted, by its type and stream, rather than raised. One of a version newer than
    this code's (``JournalRecordVersionError``) is listed in ``newer`` (each type and
    stored version: ``type``, ``stored``, ``known``, ``records``, ``first_seq``,
    ``last_seq``); one of a type tag this code does not know (``JournalRecordTypeError``:
    a type a newer cogfabric added, or one of your own code's) in ``unknown`` (each
    tag: ``type``, ``records``, ``first_seq``, ``last_seq``). Its type and versions are
    the codec's error's; its stream and chain link are read from the record's framing,
    nothing of its event decoded. The times are of the records this code reads.
    ``newer`` and ``unknown`` are empty when there are none. Such a record that does not
    match its hash-chain link (read with ``--no-verify``) is damage, not a newer one: it is
    raised (a ``JournalRecordError`` saying so), as ``newer_record`` does not take it for one.

    Raises:
        JournalRecordError: a record cannot be decoded (with ``skip_newer``, one that is
            neither newer nor of an unknown type, an older one with no upcaster
            included, or one of those whose framing is malformed or that fails its
            chain link).

    """
    kinds: Counter[type[Event] | str] = Counter()  # a class read, or the tag of a record not read
    streams: Counter[str] = Counter()
    newer: dict[tuple[str, int], dict[str, Any]] = {}
    unknown: dict[str, dict[str, Any]] = {}
    first = last = None
    head: tuple[int, bytes] | None = None
    count = 0
    end = journal.last_seq if until is None else until
    after, window = 0, max(end, 1)  # all in one read, but just after a record not read
    while after < end:
        stop = min(end, after + window)
        try:
            for record in journal.read(after=after, until=stop):
                head = record.seq, record.chain
                event = record.event
                kinds[type(event)] += 1
                streams[record.stream] += 1
                first = event.at if first is None else first
                last = event.at
                count += 1
        except (JournalRecordVersionError, JournalRecordTypeError) as exc:
            if not skip_newer or not written_by_newer(exc):
                raise  # an older one no upcaster reads is no newer one
            if not journal.record_intact(exc.seq):  # damage, whatever its type tag reads as
                raise _damaged(exc) from exc
            stream, chain = _framing(journal, exc)
            head = exc.seq, chain
            kinds[exc.type_name] += 1
            streams[stream] += 1
            count += 1
            if isinstance(exc, JournalRecordVersionError):
                found = newer.setdefault(
                    (exc.type_name, exc.stored),
                    {"type": exc.type_name, "stored": exc.stored, "known": exc.known, "records": 0},
                )
            else:
                found = unknown.setdefault(exc.type_name, {"type": exc.type_name, "records": 0})
            found["records"] += 1
            found.setdefault("first_seq", exc.seq)
            found["last_seq"] = exc.seq
            after, window = exc.seq, 1  # one at a time while they come in a row
            continue
        after, window = stop, window * 2
    types: Counter[str] = Counter()
    for kind, records in kinds.items():  # in the order each first came: a tie's order
        types[kind if isinstance(kind, str) else str(kind.__struct_config__.tag)] += records
    info = journal.info()
    return {
        "path": os.fsencode(path).decode(errors="backslashreplace"),  # a name that is not UTF-8, too
        "format": info["format"],
        "engine": info["engine"],
        "hash": info["hash"],
        "keyed": info["keyed"],
        "records": count,
        "head_seq": head[0] if head is not None else 0,
        "head_chain": head[1].hex() if head is not None else None,
        "first_time": first,
        "last_time": last,
        "types": dict(types.most_common()),
        "stream_count": len(streams),
        "stream_kinds": dict(Counter(s.split("/", 1)[0] for s in streams.elements()).most_common()),
        "streams": dict(sorted(streams.items())),
        "bytes_on_disk": sum(f.stat().st_size for f in path.glob("*.mdb")),
        "newer": sorted(newer.values(), key=lambda found: found["first_seq"]),
        "unknown": sorted(unknown.values(), key=lambda found: found["first_seq"]),
    }


def _damaged(exc: JournalRecordVersionError | JournalRecordTypeError) -> JournalRecordError:
    """The error of a record that reads as a newer one's (``exc``) but fails its hash-chain link."""
    if isinstance(exc, JournalRecordVersionError):
        what = f"as version {exc.stored} of {exc.type_name!r} (this cogfabric knows {exc.known})"
    else:
        what = f"as of type {exc.type_name!r}, which this cogfabric does not know"
    reason = (
        f"it reads {what}, and does not match its hash chain link: a damaged record, "
        "not one a newer cogfabric wrote"
    )
    return JournalRecordError(exc.seq, reason)


def _framing(
    journal: LmdbJournal, exc: JournalRecordVersionError | JournalRecordTypeError
) -> tuple[str, bytes]:
    """The stream and chain link of the record ``exc`` names, from its framing (its event not decoded).

    Raises:
        JournalRecordVersionError, JournalRecordTypeError: ``exc`` itself, when the
            record is gone or its framing malformed.

    """
    # as record_intact reads it (a map a writer grew meanwhile adopted), the audit's own journal
    with journal._lock:  # noqa: SLF001
        pair = journal._txn_call(lambda: journal._record_and_link_before(exc.seq))  # noqa: SLF001
    framed = None if pair is None else parts(pair[0])
    try:
        stream = None if framed is None else framed.stream.decode()
    except UnicodeDecodeError:
        stream = None
    if pair is None or stream is None:
        raise exc
    return stream, pair[0][-CHAIN_LEN:]


def check_snapshots(journal: LmdbJournal, *, until: int | None = None) -> tuple[int, str | None, int | None]:
    """Compare every agent's snapshot with the state its events make.

    Returns how many agents with a snapshot were checked, why the first that
    disagrees does (or None), and the seq that snapshot covers (None when all agree,
    when it is too damaged to name one, or when its seq names no record up to
    ``until``: a forged one past the last record, or at 0, as ``verify`` reports a
    snapshot whose hash fails). ``verify`` checks a snapshot against its own
    hash, which anyone can recompute for an unkeyed journal; this check is what an
    anchored head then relies on. It replays each such agent twice (from its snapshot,
    and from its events alone).
    """
    checked = 0
    if until is None:
        until = journal.last_seq  # every replay as of one seq, while a writer may append
    published = publications(journal, until=until)  # the runtime stream read once, not twice per agent
    for stream in journal.streams("agent/"):
        seq = None
        with contextlib.suppress(JournalRecordError):  # a damaged one: snapshot_problem says so
            snapshot = journal.load_snapshot(stream)
            if snapshot is None:
                continue
            seq = snapshot.seq if 0 < snapshot.seq <= until else None  # else no record of the range
        checked += 1
        agent_id = stream.removeprefix("agent/")
        problem = snapshot_problem(journal, agent_id, until=until, published=published)
        if problem is not None:
            return checked, f"agent {agent_id!r}: {problem}", seq
    return checked, None, None


def agent_view(journal: LmdbJournal, agent_id: str, at: int | None) -> dict[str, Any] | None:
    """An agent's three layers, cognitive state, checkpoints, IPC, failures and lifecycle at seq ``at``.

    None if it does not exist then. ``at=None`` means the last seq, read once: the view
    is of one seq even while a writer appends.

    ``failures``: how many times its behavior raised since its spawn (``AgentFailed``;
    the runtime restarted it from the journal each time), ``count``, and the latest
    ``_FAILURES_SHOWN`` in journal order, ``latest`` (see ``_failure_of``). Only those
    are kept while the stream is read, as only the latest checkpoint is.
    """
    if at is None:
        at = journal.last_seq
    # From the events alone: they are in the hash chain, a snapshot is not (on an unkeyed
    # journal anyone can rewrite one and its hash; verify compares them with the events).
    state = replay_agent(journal, agent_id, until=at, from_snapshot=False)
    if state is None:
        return None
    spawned = taken = failed = 0
    latest: Record | None = None
    failures: collections.deque[Record] = collections.deque(maxlen=_FAILURES_SHOWN)
    for record in journal.read(until=at, stream="agent/" + agent_id):
        if isinstance(record.event, AgentSpawned):
            spawned = record.seq
            failed = 0  # an earlier agent's of that id are not this one's, as its IPC is not
            failures.clear()
        elif isinstance(record.event, CheckpointTaken):
            taken += 1
            latest = record
        elif isinstance(record.event, AgentFailed):
            failed += 1
            failures.append(record)
    ipc = _ipc_of(journal, agent_id, spawned, at)
    causes = {record.event.cause for record in failures}
    handled = {message["id"]: message for message in ipc if message["id"] in causes}
    return {
        "agent": agent_id,
        "at": at,
        "lifecycle": state.lifecycle,
        "task_id": state.task_id,
        "parent": state.parent,
        "capabilities": list(state.capabilities),
        "priority": state.priority,
        "behavior": state.behavior,
        "topics": list(state.topics),
        "task_shared": state.task_context,
        "private": state.private,
        "cognitive": _builtins(state.cognitive),
        "checkpoints": {"taken": taken, "latest": None if latest is None else _checkpoint_of(latest)},
        "ipc": {
            "messages": len(ipc),
            "latest": ipc[-_IPC_SHOWN:],
        },
        "failures": {"count": failed, "latest": [_failure_of(record, handled) for record in failures]},
    }


def _checkpoint_of(record: Record) -> dict[str, Any]:
    """A ``CheckpointTaken`` record as ``replay --agent`` shows it: its seq, time and state."""
    event = record.event
    assert isinstance(event, CheckpointTaken)
    return {"seq": record.seq, "at": event.at, "state": _builtins(event.state)}


def _failure_of(record: Record, messages: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """An ``AgentFailed`` record as ``replay --agent`` shows it.

    Its ``seq`` and ``at``; ``error`` and ``detail`` as journaled (the exception's type
    name and its message, cut to 1,000 characters); and ``message``, the one its
    behavior was handling: None when the event names none (its ``cause``), else its
    ``id``, with the ``seq``, ``kind``, ``from`` and ``topic`` of that message among the
    agent's IPC (``messages``, by id; all four None when it is not one of them).
    """
    event = record.event
    assert isinstance(event, AgentFailed)
    handled = None
    if event.cause is not None:
        shown = messages.get(event.cause)
        handled = {
            "id": event.cause,
            **{key: None if shown is None else shown[key] for key in ("seq", "kind", "from", "topic")},
        }
    return {
        "seq": record.seq,
        "at": event.at,
        "error": event.error,
        "detail": event.detail,
        "message": handled,
    }


def _ipc_of(journal: LmdbJournal, agent_id: str, spawned: int, at: int | None) -> list[dict[str, Any]]:
    """The messages ``agent_id`` sent or was sent from its spawn at seq ``spawned`` up to ``at``, with fates.

    In journal order: each direct message it sent or was sent, each broadcast it sent,
    and each broadcast delivered or dead-lettered to it (a broadcast names no
    recipient: its deliveries, ``IpcDelivered``, say who got it); not those of an
    earlier agent of that id (killed). A message refused before it was journaled (an
    unknown recipient, a full mailbox) shows by its dead letter, with no kind. Each
    one's ``status`` is ``_Fate.status``'s; a broadcast it sent, ``delivered to N``
    (and ``dead-lettered for M``: each subscriber counted once, by its copy's fate).
    Only the fields shown are kept, not the payloads, so memory follows the count: a
    broadcast of another agent's is looked up when its copy's fate for ``agent_id``
    comes, not kept from its own record on the chance that one will. The fates of the
    copies of a broadcast it sent (one a subscriber) are kept only while it can still be
    among the latest ``_IPC_SHOWN`` shown: once as many entries of higher seqs exist,
    its status is never shown (its ``status`` is None), and they are dropped, so memory
    does not follow broadcasts times subscribers.
    """
    entries: dict[str, tuple[dict[str, Any], dict[str, _Fate]]] = {}  # by message id
    window = _LatestShown(agent_id, entries)
    for record in journal.read(after=spawned, until=at, stream="bus"):
        event = record.event
        if isinstance(event, IpcMessage):
            if agent_id in (event.sender, event.recipient):
                message = _shown_message(record.seq, event, event.kind)
                replaced = entries.get(event.id)  # a second record of the id: a damaged id index
                entries[event.id] = (message, {})
                window.entered(message, replacing=None if replaced is None else replaced[0])
        elif isinstance(event, IpcDelivered | IpcDeadLettered):
            known = len(entries)
            _note_fate(journal, entries, agent_id, event, record.seq, spawned=spawned)
            if len(entries) != known:  # the entry of another's broadcast, or of a dead letter alone
                window.entered(next(reversed(entries.values()))[0])
    shown: list[dict[str, Any]] = []
    for message, fates in entries.values():
        to = message["to"]
        if not to and message["from"] == agent_id:  # a broadcast it sent
            if message["status"] is None:  # below the latest shown: its fates were dropped
                shown.append(message)
                continue
            statuses = [fate.status for fate in fates.values()]
            delivered = sum(status.startswith("delivered") for status in statuses)
            dead = sum(status.startswith("dead-lettered") for status in statuses)
            message["status"] = f"delivered to {delivered}" + (f", dead-lettered for {dead}" if dead else "")
        else:
            fate = fates.get(to or agent_id)
            if fate is None and not to:
                continue  # a broadcast that did not reach it
            message["status"] = _PENDING if fate is None else fate.status
        shown.append(message)
    shown.sort(key=lambda message: message["seq"])  # journal order: another's broadcast joins at its fate
    return shown


_PENDING: Final = "pending"


class _LatestShown:
    """The floor of the latest ``_IPC_SHOWN`` entries' seqs, which drops what falls below it.

    The fates of the copies of a broadcast the agent sent (one a subscriber) are kept
    only while it can still be among the latest shown. Seqs are unique and the floor
    only rises, so an entry below it is never shown: its ``status`` becomes None and its
    fates are dropped (``_note_fate`` keeps no more).
    """

    __slots__ = ("agent_id", "entries", "highest", "sent")

    def __init__(self, agent_id: str, entries: dict[str, tuple[dict[str, Any], dict[str, _Fate]]]) -> None:
        self.agent_id = agent_id
        self.entries = entries
        self.highest: list[int] = []  # the _IPC_SHOWN highest seqs of the entries so far (a min-heap)
        self.sent: collections.deque[dict[str, Any]] = collections.deque()  # its broadcasts, fates kept

    def entered(self, message: dict[str, Any], *, replacing: dict[str, Any] | None = None) -> None:
        """Count a new entry; drop the fates of the agent's broadcasts that can no longer be shown.

        ``replacing``: the entry of the same id it takes the place of (two records of one
        id, read unverified from a journal whose id index lost the first's): that one is
        no longer shown, so its seq is no longer counted.
        """
        highest = self.highest
        seq = message["seq"]
        if replacing is not None and replacing["seq"] in highest:
            highest.remove(replacing["seq"])
            heapq.heapify(highest)
        if len(highest) < _IPC_SHOWN:
            heapq.heappush(highest, seq)
        elif seq > highest[0]:
            heapq.heapreplace(highest, seq)
        if not message["to"] and message["from"] == self.agent_id:
            self.sent.append(message)
        if len(highest) == _IPC_SHOWN:
            sent = self.sent
            while sent and sent[0]["seq"] < highest[0]:
                dropped = sent.popleft()
                entry = self.entries[dropped["id"]]
                if entry[0] is dropped:  # not one a second record of its id replaced
                    dropped["status"] = None
                    entry[1].clear()


class _Fate:
    """What became of one copy of a message: delivered, dead-lettered (why), both, or neither yet."""

    __slots__ = ("delivered", "reason")

    def __init__(self) -> None:
        self.delivered = False
        self.reason = ""

    @property
    def status(self) -> str:
        """What an audit shows: ``delivered``, ``dead-lettered: <reason>`` or ``pending``.

        ``dead-lettered`` also after its delivery, as a handler error is;
        ``delivered (its requester timed out)`` for a request its requester gave up on
        and its recipient handled all the same; ``pending`` when it was not delivered by
        then, or was lost with the process that held it. A request's other letter (its
        recipient refused it, or the close cut its behavior short) wins over its
        ``timeout`` letter in either order (``_note_fate``).
        """
        if self.reason == "timeout" and self.delivered:
            return "delivered (its requester timed out)"
        if self.reason:
            return f"dead-lettered: {self.reason}"
        return "delivered" if self.delivered else _PENDING


def _shown_message(seq: int, event: IpcMessage | IpcDeadLettered, kind: str) -> dict[str, Any]:
    return {
        "seq": seq,
        "id": event.id if isinstance(event, IpcMessage) else event.message_id,
        "from": event.sender,
        "to": event.recipient,
        "topic": event.topic,
        "kind": kind,
        "status": _PENDING,
    }


def _note_fate(
    journal: LmdbJournal,
    entries: dict[str, tuple[dict[str, Any], dict[str, _Fate]]],
    agent_id: str,
    event: IpcDelivered | IpcDeadLettered,
    seq: int,
    *,
    spawned: int,
) -> None:
    """Note a delivery or dead letter (at ``seq``) on the copy of the message it is of.

    Of another agent's broadcast only ``agent_id``'s own copy counts: the broadcast is
    read from the journal at that copy's first fate (if it was sent since ``spawned``).
    """
    entry = entries.get(event.message_id)
    if entry is None and event.recipient == agent_id:
        entry = _broadcast_to(
            journal, entries, event.message_id, spawned, seq, delivered=isinstance(event, IpcDelivered)
        )
    elif entry is not None and event.recipient != agent_id:
        message = entry[0]
        if not message["to"] and message["from"] != agent_id:
            return  # another subscriber's copy of another agent's broadcast
    if entry is None:
        if not isinstance(event, IpcDeadLettered) or agent_id not in (event.sender, event.recipient):
            return
        # refused before it was journaled: its dead letter alone (not an earlier agent's message)
        if journal.seq_of(event.message_id) is not None:
            return
        entry = entries[event.message_id] = (_shown_message(seq, event, ""), {})
    if entry[0]["status"] is None:
        return  # a broadcast it sent, below the latest shown: its fates are not kept
    fate = entry[1].setdefault(event.recipient, _Fate())
    if isinstance(event, IpcDelivered):
        fate.delivered = True
    elif event.reason != "timeout" or not fate.reason:
        # A request's "timeout" letter is its requester's; any other one says what became
        # of the message itself, whichever of the two threads handed its letter over first
        fate.reason = event.reason


def _broadcast_to(
    journal: LmdbJournal,
    entries: dict[str, tuple[dict[str, Any], dict[str, _Fate]]],
    message_id: str,
    spawned: int,
    until: int,
    *,
    delivered: bool,
) -> tuple[dict[str, Any], dict[str, _Fate]] | None:
    """The entry of the broadcast ``message_id`` (stored before ``until``), read from the journal.

    None if it is no broadcast sent since ``spawned`` (a direct message to an earlier
    agent of the id, say).
    """
    seq = journal.seq_of(message_id)
    record = None if seq is None else next(iter(journal.read(after=seq - 1, until=seq)), None)
    misnamed = record is not None and (
        not isinstance(record.event, IpcMessage) or record.event.id != message_id
    )
    if misnamed or (record is None and delivered):
        # the id index disagrees with the records (read unverified, --no-verify), or lost
        # the entry of a message that was delivered, so stored: look on the bus itself
        record = next(
            (
                r
                for r in journal.read(after=spawned, until=until, stream="bus")
                if isinstance(r.event, IpcMessage) and r.event.id == message_id
            ),
            None,
        )
    if record is None or not isinstance(record.event, IpcMessage):
        return None
    if record.seq <= spawned or record.event.recipient:
        return None
    entry = entries[message_id] = (_shown_message(record.seq, record.event, record.event.kind), {})
    return entry


def session_view(journal: LmdbJournal, session_id: str, at: int | None) -> dict[str, Any] | None:
    """A session's messages at seq ``at`` (None if it does not exist then; None: the last seq, read once)."""
    if at is None:
        at = journal.last_seq
    state = _session_at(journal, "session/" + session_id, at)
    if state is None:
        return None
    return {
        "session": session_id,
        "at": at,
        "user_id": state.user_id,
        "agent_id": state.agent_id,
        "created_at": state.created_at,
        "accessed_at": state.accessed_at,
        "messages": _builtins(state.messages),
    }


def _session_at(journal: LmdbJournal, stream: str, at: int) -> SessionState | None:
    """The session of ``stream`` as its events leave it at seq ``at`` (None: not created, or ended)."""
    state = None
    for record in journal.read(until=at, stream=stream):
        state = apply_session_event(state, record.event)
    return state


def journal_view(journal: LmdbJournal, at: int | None) -> dict[str, Any]:
    """Every agent and session that exists at seq ``at``, a line each (None: the last seq, read once).

    An agent: its lifecycle, task, parent, behavior and how many private values it
    holds; a session: its agent, user, message count and last access. From the events
    alone, as ``agent_view`` and ``session_view``, which show one whole. Each stream is
    read once, and the published task contexts once for all: no agent's IPC is gathered
    (that reads the bus once an agent).
    """
    if at is None:
        at = journal.last_seq
    published = publications(journal, 0, at)
    agents = []
    for stream in journal.streams("agent/"):
        agent_id = stream.removeprefix("agent/")
        state = replay_agent(journal, agent_id, until=at, published=published, from_snapshot=False)
        if state is not None:
            agents.append(
                {
                    "agent": agent_id,
                    "lifecycle": state.lifecycle,
                    "task_id": state.task_id,
                    "parent": state.parent,
                    "behavior": state.behavior,
                    "private_values": len(state.private),
                }
            )
    sessions = []
    for stream in journal.streams("session/"):
        session = _session_at(journal, stream, at)
        if session is not None:
            sessions.append(
                {
                    "session": stream.removeprefix("session/"),
                    "agent_id": session.agent_id,
                    "user_id": session.user_id,
                    "messages": len(session.messages),
                    "accessed_at": session.accessed_at,
                }
            )
    return {"at": at, "agents": agents, "sessions": sessions}


def _parent_id(event: Event) -> str | None:
    """The id of the event ``event`` follows from: its ``cause``, else the message it delivers.

    A delivery names its message by ``message_id`` alone; a dead letter names it as its
    cause too (records written before it did name it by ``message_id`` alone).
    """
    if event.cause is not None:
        return event.cause
    if isinstance(event, IpcDelivered | IpcDeadLettered):
        return event.message_id
    return None


def _record_at(journal: LmdbJournal, seq: int) -> Record | None:
    return next(iter(journal.read(after=seq - 1, until=seq)), None)


class Trace(NamedTuple):
    """What ``find_trace`` found: the record, what led to it, and where its effects are."""

    seq: int
    until: int
    record: dict[str, Any]
    """The record as ``export_line`` shows it."""
    causes: list[dict[str, Any]]
    effects: dict[int, tuple[int, int]]
    """Each effect's seq, in seq order, with ``(from, level)``; ``trace_effects`` reads them."""


def trace_view(journal: LmdbJournal, seq: int, *, until: int, depth: int | None = None) -> dict[str, Any]:
    """The causal chain of the record at ``seq``: what led to it, and what it led to.

    An event follows from the one its ``cause`` names (a behavior's changes, sends, LLM
    records and session records name the message it handled; a reply names its
    request), or, for an IPC delivery or dead letter without one, from the message it
    names.

    ``causes``: the record ``seq``'s event follows from, the one that follows from, and
    so on, the root first, each as ``export_line`` shows it. A walk that reaches an id
    no record up to ``until`` holds (a cause given from outside the journal, a message
    refused before it was journaled, a record past ``until``) ends with ``{"id": ...,
    "seq": None}``; one that comes back to a record it passed (events appended by hand
    can name each other) ends with ``{"id": ..., "seq": ..., "loop": True}``.

    ``effects``: every record up to ``until`` that follows from the record, or from one
    of its effects, ``depth`` levels deep (None: every level), in seq order, each with
    ``from`` (the seq of the record it follows from) and ``level`` (1 for the record's
    own effects). A flat list, not a tree: a chain of replies may be thousands deep.

    Returns ``{"seq", "until", "record", "causes", "effects"}``; ``record`` is None when
    no record ``seq`` is up to ``until``. It holds every effect whole: ``find_trace`` and
    ``trace_effects`` hand them out one by one.
    """
    found = find_trace(journal, seq, until=until, depth=depth)
    if found is None:
        return {"seq": seq, "until": until, "record": None, "causes": [], "effects": []}
    return {
        "seq": seq,
        "until": until,
        "record": found.record,
        "causes": found.causes,
        "effects": list(trace_effects(journal, found.effects)),
    }


def find_trace(journal: LmdbJournal, seq: int, *, until: int, depth: int | None = None) -> Trace | None:
    """``trace_view``'s search, keeping only each effect's seq, ``from`` and ``level``.

    None when no record ``seq`` is up to ``until``.

    The runtime stores a record after what it follows from, but a journal does not
    promise it (events appended by hand may name any id as their cause), so the whole
    journal is searched: one pass when nothing follows from the record, two for a
    journal the runtime wrote, three at most whatever the order of its records (see
    ``_effects``). ``trace_effects`` then reads from the first effect to the last.
    """
    record = _record_at(journal, seq) if 0 < seq <= until else None
    if record is None:
        return None
    return Trace(
        seq=seq,
        until=until,
        record=export_line(record),
        causes=_causes(journal, record, until),
        effects=_effects(journal, record, until, depth),
    )


def trace_effects(journal: LmdbJournal, effects: dict[int, tuple[int, int]]) -> Iterator[dict[str, Any]]:
    """Each of ``Trace.effects`` as ``export_line`` shows it, with ``from`` and ``level``, in seq order.

    One read, from the first effect to the last.
    """
    if not effects:
        return
    for candidate in journal.read(after=min(effects) - 1, until=max(effects)):
        shown = effects.get(candidate.seq)
        if shown is not None:
            yield {**export_line(candidate), "from": shown[0], "level": shown[1]}


def _causes(journal: LmdbJournal, record: Record, until: int) -> list[dict[str, Any]]:
    """The records ``record`` follows from, the root first (see ``trace_view``)."""
    chain: list[dict[str, Any]] = []
    seen = {record.event.id}
    parent = _parent_id(record.event)
    while parent is not None:
        seq = journal.seq_of(parent)
        if parent in seen:  # only events appended by hand, with chosen ids, can make a loop
            chain.append({"id": parent, "seq": seq, "loop": True})
            break
        found = _record_at(journal, seq) if seq is not None and seq <= until else None
        if found is None or found.event.id != parent:
            chain.append({"id": parent, "seq": None})
            break
        chain.append(export_line(found))
        seen.add(parent)
        parent = _parent_id(found.event)
    chain.reverse()
    return chain


def _effects(
    journal: LmdbJournal, record: Record, until: int, depth: int | None
) -> dict[int, tuple[int, int]]:
    """The records that follow from ``record`` (see ``trace_view``): seq -> (from, level), in seq order.

    After a pass over every record, a record missed is one read before the record it
    follows from was found, so before the last one found: a second pass reads only
    those. One that finds none ends the search (a journal the runtime wrote: two passes).
    One that finds some means records stored before what they follow from (appended by
    hand), where a pass can find as few as one more each time (a chain stored backwards:
    one pass a record, each over the whole journal): the rest are then found from one
    more pass, which notes every record's cause. At most three passes here, whatever
    the order, and ``trace_effects``'s read.
    """
    found: dict[str, tuple[int, int]] = {record.event.id: (record.seq, 0)}  # id -> (seq, level)
    effects: dict[int, tuple[int, int]] = {}
    last = _find_effects(journal, until, found, effects, depth)
    if last and _find_effects(journal, last - 1, found, effects, depth):
        _find_the_rest(journal, until, found, effects, depth)
    return dict(sorted(effects.items()))


def _find_the_rest(
    journal: LmdbJournal,
    until: int,
    found: dict[str, tuple[int, int]],
    effects: dict[int, tuple[int, int]],
    depth: int | None,
) -> None:
    """Add every effect not found yet, in one pass whatever the order of the records.

    It notes, for each id, the records not found yet that follow from it (their seqs
    and ids: memory for every such record, spent only on a journal appended out of
    order); what follows from the ones found is then walked without the journal.
    """
    waiting: dict[str, list[tuple[int, str]]] = {}
    for candidate in journal.read(until=until):
        event = candidate.event
        parent = _parent_id(event)
        if parent is not None and event.id not in found:
            waiting.setdefault(parent, []).append((candidate.seq, event.id))
    queue = [parent for parent in found if parent in waiting]
    while queue:
        parent = queue.pop()
        parent_seq, parent_level = found[parent]
        level = parent_level + 1
        if depth is not None and level > depth:
            continue
        for seq, event_id in waiting.pop(parent, ()):
            if event_id in found:
                continue
            found[event_id] = (seq, level)
            effects[seq] = (parent_seq, level)
            if event_id in waiting:
                queue.append(event_id)


def _find_effects(
    journal: LmdbJournal,
    end: int,
    found: dict[str, tuple[int, int]],
    effects: dict[int, tuple[int, int]],
    depth: int | None,
) -> int:
    """One pass over the records up to ``end``: add those that follow from one found.

    Returns the last seq it added (0: none).
    """
    last = 0
    for candidate in journal.read(until=end):
        event = candidate.event
        parent = _parent_id(event)
        if parent is None or parent not in found or event.id in found:
            continue
        parent_seq, parent_level = found[parent]
        level = parent_level + 1
        if depth is not None and level > depth:
            continue
        effects[candidate.seq] = (parent_seq, level)
        found[event.id] = (candidate.seq, level)
        last = candidate.seq
    return last


def _ext_as_builtin(value: object) -> object:
    """How audits show a value only msgpack has: an extension type, as its code and bytes.

    ``set_private`` takes any value msgspec encodes, ``msgspec.msgpack.Ext`` included,
    and a crafted record may hold one; JSON has no such type.
    """
    if isinstance(value, msgspec.msgpack.Ext):
        return {"msgpack_ext": value.code, "data": bytes(value.data)}
    msg = f"Encoding objects of type {type(value).__name__} is unsupported"
    raise TypeError(msg)


_json = msgspec.json.Encoder(enc_hook=_ext_as_builtin)


MAP_TAG: Final = "$map"
"""The one key of the object ``encode_json`` writes for a map JSON has no object for."""


def encode_json(value: object, *, indent: int = 0) -> bytes:
    """``value`` as strict JSON, encoded as ``export`` does: NaN and infinities as null, bytes as base64.

    A map with a key that is not a string (a private value may be keyed by ints, None,
    bytes or tuples), or with the key ``"$map"``, is written as ``{"$map": [[key,
    value], ...]}``, each key as its own JSON: ``{1: "a", "1": "b"}`` becomes ``{"$map":
    [[1, "a"], ["1", "b"]]}``. Nothing is merged (an object cannot hold both keys), and
    a plain object never stands for such a map: every object with a ``"$map"`` key is
    one. A key is written as a value is, so a bytes key reads as its base64 text, as
    bytes do everywhere. ``value`` holds events' own values (Structs included), not
    ``msgspec.to_builtins``'s copies, which turn bytes keys into text and merge
    colliding ones.
    """
    if _has_odd_keys(value):
        value = _json_ready_deep(value)
    return _strict_json(value, indent)


def _strict_json(value: object, indent: int = 0) -> bytes:
    """``encode_json(value)`` for a value that holds no map JSON has no object for (``_has_odd_keys``)."""
    encoded = _json.encode(value)
    if indent:
        encoded = msgspec.json.format(encoded, indent=indent)
    if encoded.isascii() and b"\x7f" not in encoded:  # msgspec escapes the rest of ASCII's controls
        return encoded
    return _escaped_unprintable(encoded)


def _escaped_unprintable(encoded: bytes) -> bytes:
    r"""JSON text with each character a terminal acts on (``_ACTED_ON``) as its ``\uXXXX`` escape.

    msgspec escapes only the controls below U+0020; a terminal acts on others a journal's
    text may hold (DEL, the C1 controls such as U+009B, a CSI; a bidi override, U+202E;
    zero-width and line-separator characters), which would move the cursor or hide or
    reorder what a reader sees of an export printed to it. Outside its strings JSON text
    is ASCII, so only strings change, and only in how they are written: the same values.
    """
    text = encoded.decode()
    if _ACTED_ON.search(text) is None:
        return encoded
    return _ACTED_ON.sub(lambda found: _json_escape(found.group()), text).encode()


_ACTED_ON: Final = re.compile(
    "[\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f"
    "\ufeff\ufff9-\ufffb\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e007f]"
)
"""What ``encode_json`` escapes past msgspec's own: DEL and the C1 controls, the soft hyphen,
the zero-width, bidi, line- and paragraph-separator and invisible format characters, the
interlinear annotations, the Egyptian hieroglyph, shorthand and musical format controls
and the tags: the format characters terminals give no width (the ones they show as signs,
such as U+0600-0605, are left as they are). A fixed set, not ``str.isprintable``: that one follows
the interpreter's Unicode database (Python 3.12 reads Unicode 15, 3.11 Unicode 14), and an
export must be written byte for byte alike wherever it is checked (``verify-export``). A
character no terminal acts on (a no-break space, a private-use or newer character) is
written as it is, as every cogfabric before these escapes wrote it."""


def _json_escape(char: str) -> str:
    r"""One character as JSON escapes it: ``\uXXXX``, or a surrogate pair past U+FFFF."""
    code = ord(char)
    if code < _ASTRAL:
        return f"\\u{code:04x}"
    code -= _ASTRAL
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


_ASTRAL: Final = 0x10000
"""The first code point past the Basic Multilingual Plane: JSON writes it as a surrogate pair."""


_SCALARS: Final = frozenset({str, int, float, bool, bytes, type(None)})


def _has_odd_keys(value: object, kept: Callable[[object], bool] | None = None) -> bool:
    """Whether ``value`` holds a map JSON has no object for (see ``encode_json``).

    That is a map with the key ``"$map"``, or with a key that is not a str (with ``kept``,
    a key ``kept`` refuses).

    A walk with a stack of its own (a stored value nests up to ``MAX_VALUE_DEPTH``),
    dispatched on exact types and stepping over scalars: export walks every record's
    values, and a generic walk (isinstance of unions, generators) tripled its time.
    """
    stack: list[Any] = [value]
    pop, push = stack.pop, stack.append
    while stack:
        item = pop()
        kind = type(item)
        if kind is dict:
            if MAP_TAG in item:
                return True
            for key, inner in item.items():
                if (type(key) is not str) if kept is None else not kept(key):
                    return True
                if type(inner) not in _SCALARS:
                    push(inner)
        elif kind is list or kind is tuple:
            for inner in item:
                if type(inner) not in _SCALARS:
                    push(inner)
        elif isinstance(item, msgspec.Struct):
            stack.extend([getattr(item, name) for name in item.__struct_fields__])
        elif isinstance(item, dict):  # a subclass: walked as the dict it is
            push(dict(item))
        elif isinstance(item, list | tuple):
            push(list(item))
    return False


_KEPT_KEYS: Final[frozenset[type]] = frozenset({str, int, float, bool, type(None)})
"""The key types ``msgspec.to_builtins`` keeps as they are (a bytes key it turns into text)."""


def _kept(key: object) -> bool:
    """Whether ``msgspec.to_builtins`` keeps ``key`` as it is.

    One of ``_KEPT_KEYS``, or a tuple of such: a bytes or a datetime inside a tuple it
    turns into text too.
    """
    kind = type(key)
    return kind in _KEPT_KEYS or (isinstance(key, tuple) and kind is tuple and all(map(_kept, key)))


def _builtins(value: object) -> object:
    """``msgspec.to_builtins(value)``, unless a map in it has a bytes key (or ``"$map"``).

    Such a value is kept as it is (``encode_json`` writes its maps as ``{"$map": ...}``):
    ``to_builtins`` would turn the bytes key into text and merge it with a text key.
    """
    if _has_odd_keys(value, _kept):
        return value
    return msgspec.to_builtins(value, enc_hook=_ext_as_builtin)


_KEY_WALK_FRAMES: Final = 4 * MAX_VALUE_DEPTH + 1_000
"""Stack frames ``_json_ready`` may take: two a level, for a value and a key as deep as the
runtime stores, and the caller's own."""


def _json_ready_deep(value: object) -> object:
    """``_json_ready``, with room on the stack for a value nested as deep as one stored."""
    limit = sys.getrecursionlimit()
    if limit >= _KEY_WALK_FRAMES:
        return _json_ready(value)
    sys.setrecursionlimit(_KEY_WALK_FRAMES)
    try:
        return _json_ready(value)
    finally:
        sys.setrecursionlimit(limit)


def _json_ready(value: object) -> object:
    """``value`` with each map JSON has no object for written as ``{"$map": pairs}``."""
    if isinstance(value, dict):
        if MAP_TAG in value or any(type(k) is not str for k in value):
            return {MAP_TAG: [[_json_ready(k), _json_ready(v)] for k, v in value.items()]}
        return {k: _json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(v) for v in value]
    if isinstance(value, msgspec.Struct):  # as msgspec encodes it (its options too), keys kept as they are
        return _json_ready(msgspec.to_builtins(value, builtin_types=_RAW, enc_hook=_ext_as_builtin))
    return value


_RAW: Final = (
    bytes,
    bytearray,
    memoryview,
    dt.datetime,
    dt.date,
    dt.time,
    dt.timedelta,
    uuid.UUID,
    decimal.Decimal,
)
"""Kept by ``to_builtins`` in ``_json_ready``: a bytes or a datetime key (a msgpack
timestamp reads back as one) stays a key of its own, never merged with the text key it
would turn into (the encoder writes each value of these types as ``to_builtins`` would,
bytes as base64, a datetime as RFC 3339 text, after)."""


def _event_data(event: Event) -> dict[str, object]:
    """An event's fields but its tag and version, its values as stored (see ``encode_json``)."""
    data = msgspec.structs.asdict(event)  # in C: its fields in order, the values themselves
    data.pop("v", None)
    return data


_LAYERS_OF: Final[dict[type, list[str]]] = {}
"""Each event type's ``layers``, by name in the layers' order (export's ``layers``)."""


def _layer_names(kind: type[Event]) -> list[str]:
    names = _LAYERS_OF.get(kind)
    if names is None:
        names = _LAYERS_OF[kind] = [layer.name for layer in ContextLayer if layer in kind.layers]
    return names


def export_line(record: Record) -> dict[str, object]:
    """A record as one line of ``cogfabric export``: its fields before ``encode_json``.

    ``seq, time, stream, layer, layers, type, version, data, chain``: ``layer`` is the
    event type's own layer (or None); ``layers`` every layer its fields hold a part of,
    in the layers' order.
    """
    event = record.event
    kind = type(event)
    about = _TYPE_FIELDS.get(kind)
    if about is None:
        event_layer = kind.layer
        about = _TYPE_FIELDS[kind] = (
            event_layer.name if event_layer is not None else None,
            _layer_names(kind),
            kind.__struct_config__.tag,
        )
    layer, layers, tag = about
    return {
        "seq": record.seq,
        "time": event.at,
        "stream": record.stream,
        "layer": layer,
        "layers": layers,
        "type": tag,
        "version": event.v,
        "data": _event_data(event),
        "chain": record.chain.hex(),
    }


_TYPE_FIELDS: Final[dict[type, tuple[str | None, list[str], object]]] = {}
"""Each event type's ``layer``, ``layers`` and ``type`` in an export line (the same for
every record of the type: looked up once, not three attribute walks a line)."""


def export_lines(
    journal: LmdbJournal,
    *,
    stream: str | None = None,
    layer: str | None = None,
    types: Collection[str] | None = None,
    after: int = 0,
    until: int | None = None,
    verifiable: bool = False,
) -> Iterator[bytes]:
    """One JSON line per record up to ``until`` (``export_line``'s fields).

    ``layer`` (the filter) matches a record whose ``layers`` hold it. ``types``: only
    events whose type tag is one of them. ``verifiable``: every record after ``after``
    (no filter), each line with two more fields, ``prev`` (the chain link of the record
    before it, hex; zeros before seq 1) and ``record`` (its bytes as stored, base64),
    which ``cogfabric verify-export`` checks without the journal.

    Raises:
        ValueError: ``verifiable`` with a filter (a verifiable export holds every record of its range).

    """
    if verifiable:
        if stream is not None or layer is not None or types is not None:
            msg = "a verifiable export holds every record of its range: no stream, layer or type filter"
            raise ValueError(msg)
        yield from _verifiable_lines(journal, after, until)
        return
    wanted = None if layer is None else ContextLayer[layer.upper()]
    for record in journal.read(after=after, until=until, stream=stream):
        kind = type(record.event)
        if wanted is not None and wanted not in kind.layers:  # every layer its fields hold
            continue
        if types is not None and kind.__struct_config__.tag not in types:
            continue
        yield _line_json(export_line(record)) + b"\n"


def _verifiable_lines(journal: LmdbJournal, after: int, until: int | None) -> Iterator[bytes]:
    """``export_lines(verifiable=True)``'s lines."""
    prev = bytes(CHAIN_LEN)
    if after > 0:
        before = next(iter(journal.read_stored(after - 1, after)), None)
        if before is None:
            return  # nothing is past ``after``
        prev = before[1][-CHAIN_LEN:]
    for record, stored in journal.read_stored(after, until):
        line = export_line(record)
        line["prev"] = prev.hex()
        line["record"] = stored
        prev = stored[-CHAIN_LEN:]
        yield _line_json(line) + b"\n"


def _line_json(line: dict[str, object]) -> bytes:
    """``encode_json(line)`` for a line ``export_line`` made (``prev`` and ``record`` added or not).

    Only its ``data``'s values can hold a map JSON has no object for: its other fields are
    scalars whatever the event's type (``seq``, ``version`` ints, ``time`` a float, ``stream``,
    ``layer``, ``type``, ``chain`` and ``prev`` text or None, ``record`` bytes) and a list of
    layer names, and ``data``'s keys are the event's field names (text; ``"$map"`` is checked
    all the same). So only those values are walked (``_has_odd_keys``), not every field of
    every line, and a line that holds such a map is walked once, as ``encode_json`` would.
    """
    data: Any = line["data"]
    odd = MAP_TAG in data
    if not odd:
        for value in data.values():
            if type(value) not in _SCALARS and _has_odd_keys(value):
                odd = True
                break
    return _strict_json(_json_ready_deep(line) if odd else line)  # as encode_json does, walked once


_SALVAGE_BATCH: Final = 1_000
"""Records ``salvage`` appends in one commit, and checks against their stored chain link at once."""

_SALVAGE_BYTES: Final = 16 << 20
"""...or fewer, once their stored bytes come to this much: big records are not held by the thousand."""


class SalvageMismatchError(Exception):
    """A salvage whose copy differs from the records it copies: nothing of it is kept.

    ``seq`` is the first record whose copy differs (None: the copy failed its verification,
    with no one record to blame), ``why`` what differs.
    """

    def __init__(self, seq: int | None, why: str) -> None:
        super().__init__(why if seq is None else f"seq {seq}: {why}")
        self.seq = seq
        self.why = why


def written_by_newer(exc: BaseException) -> bool:
    """Whether ``exc`` is a record's error that newer code than this wrote it, rather than damage.

    A record of a version newer than this code's (``JournalRecordVersionError``, its
    ``stored`` past ``known``), or of a type tag this code does not know
    (``JournalRecordTypeError``: a type a newer cogfabric added, or one of code with
    event types of its own). An older version no upcaster reads is no newer one.
    """
    if isinstance(exc, JournalRecordVersionError):
        return exc.stored > exc.known
    return isinstance(exc, JournalRecordTypeError)


def newer_record(
    journal: LmdbJournal, report: VerifyReport
) -> JournalRecordVersionError | JournalRecordTypeError | None:
    """The error of the record ``report`` fails at, where newer code wrote it (``written_by_newer``).

    Only a record whose chain link, framing and stream link verify and whose event
    alone does not decode (``report.reason`` begins with ``UNDECODABLE``) is taken for
    one: a record that fails its chain link is damage, whatever its type tag reads as.
    The record is read again (``journal.read``) for its typed error. None for any other.
    """
    seq = report.first_bad_seq
    if report.ok or seq is None or not report.reason.startswith(UNDECODABLE) or seq > journal.last_seq:
        return None
    try:
        for _ in journal.read(after=seq - 1, until=seq):
            pass
    except (JournalRecordVersionError, JournalRecordTypeError) as exc:
        return exc if written_by_newer(exc) else None
    except JournalError:
        return None
    return None


def salvage(source: LmdbJournal, target: Path, until: int, *, key: bytes | str | None) -> tuple[bytes, int]:
    """Copy ``source``'s records 1 to ``until`` into a new journal at ``target``, chained as stored.

    Each batch of ``_SALVAGE_BATCH`` records (fewer of big ones, ``_SALVAGE_BYTES``) is
    appended (re-encoded, as any append) and the copy's chain link of its last record
    compared with the stored one: the chain
    covers every record before it, so equal links mean the copy holds what was chained.
    The new journal (keyed with ``key``) is verified, then renamed into place
    (``write_beside``: nothing is left under ``target`` on any failure). ``source`` is
    only read, from seq 1 up to ``until`` (never past it: a salvage reads the records
    before a damaged page). Snapshots are not copied: opening the copy replays its events.

    Returns:
        The chain link of seq ``until``, and how many records the copy's verification checked.

    Raises:
        SalvageMismatchError: a copied record differs from the stored one (one stored at an
            older version of its event is copied upcast: its bytes differ), or the copy
            fails its verification.
        FileExistsError, JournalUnavailableError: as ``write_beside`` raises them; also
            a write of the copy's journal that failed (a full disk), named as the salvage's.
        JournalError: reading ``source`` failed (a record that does not decode, say).

    """
    failed = f"cannot salvage {source.path} into {target}"

    def fill(tmp: Path) -> tuple[bytes, int]:
        with _writing_the_copy(failed, tmp, target), LmdbJournal.open(tmp, sync=False, key=key) as copy:
            batch: list[Record] = []  # (the copy's data file is synced once, below)
            size = 0
            for record, stored in source.read_stored(until=until):
                batch.append(record)
                size += len(stored)
                if len(batch) == _SALVAGE_BATCH or size >= _SALVAGE_BYTES or record.seq == until:
                    _copy_batch(source, copy, batch)
                    batch, size = [], 0
            if batch:  # the read ended before ``until``: what it read is copied, checked too
                _copy_batch(source, copy, batch)
            if copy.last_seq != until:  # not reached: the read ended early
                why = f"{source.path} holds no record past seq {copy.last_seq}"
                raise SalvageMismatchError(copy.last_seq + 1, why)
            report = copy.verify(decode=True)
            if not report.ok:
                raise SalvageMismatchError(None, f"the copy fails verification: {report.reason}")
            chain = next(copy.read(after=until - 1)).chain
        fsync_file(tmp / "data.mdb")  # close() syncs too, but says nothing when that fails
        return chain, report.checked

    return write_beside(target, "salvage", failed, fill)


@contextlib.contextmanager
def _writing_the_copy(failed: str, tmp: Path, target: Path) -> Iterator[None]:
    """A failure of the copy's own journal (a full disk): named as the salvage's, not the removed sibling's.

    Its journal's fail-stop is no concern of the user's: the copy is removed
    (``write_beside``), and nothing is left under ``target``.
    """
    try:
        yield
    except JournalError as exc:
        if str(tmp) not in str(exc):  # the source's, as reading it raised it
            raise
        why = _FAIL_STOP.sub("", str(exc).replace(f"{tmp}: ", "").replace(str(tmp), "the copy"))
        msg = f"{failed}: writing the copy failed: {why}; nothing was left under {target}"
        raise JournalUnavailableError(msg) from exc


_FAIL_STOP: Final = re.compile(r"; [^;]*fail-stop until reopened[^;]*$")
"""The end of a failed append's message that says its journal is fail-stop: not so of a removed copy."""


def _copy_batch(source: LmdbJournal, copy: LmdbJournal, batch: list[Record]) -> None:
    """Append ``batch``'s events to ``copy`` and check its last record's chain link against the stored one."""
    seqs = copy.append([record.event for record in batch])
    last = batch[-1]
    copied = next(copy.read(after=seqs[-1] - 1, until=seqs[-1]))
    if copied.seq == last.seq and copied.chain == last.chain:
        return
    raise SalvageMismatchError(*_first_difference(source, copy, batch[0].seq, last.seq))


def _first_difference(source: LmdbJournal, copy: LmdbJournal, first: int, last: int) -> tuple[int, str]:
    """The first record from ``first`` to ``last`` whose copy differs from it as stored, and why."""
    stored_ones = source.read_stored(after=first - 1, until=last)
    copied = copy.read_stored(after=first - 1, until=last)
    for (record, stored), (_, again) in zip(stored_ones, copied, strict=False):
        if again[:-CHAIN_LEN] != stored[:-CHAIN_LEN]:
            return record.seq, _why_it_differs(record, stored)
        if again[-CHAIN_LEN:] != stored[-CHAIN_LEN:]:
            why = (
                "its copy holds the same bytes, but its stored chain link does not match them "
                "(changed after it was written)"
            )
            return record.seq, why
    return last, "its copy's chain link differs from the stored one"  # e.g. an event id stored twice


def _why_it_differs(record: Record, stored: bytes) -> str:
    """Why a record's copy encodes to other bytes than it is stored as: most likely, an upcast."""
    name, version = type(record.event).__name__, record.event.v
    try:
        event = msgspec.msgpack.decode(stored)[1]
        stored_version = event["v"]
    except (msgspec.DecodeError, LookupError, TypeError):
        stored_version = None
    if isinstance(stored_version, int) and stored_version != version:
        return (
            f"it is stored at version {stored_version} of {name} and is copied upcast, at version "
            f"{version}: its bytes differ, so its chain link and every later one would"
        )
    return "its copy encodes to other bytes than it is stored as, so its chain link would differ"
