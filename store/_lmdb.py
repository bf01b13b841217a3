"""The LMDB journal: group-committed appends, a linked stream index, snapshots and a hash chain.

Layout (named databases; nothing in LMDB's main database but their descriptors):

* ``events``: 8-byte big-endian seq -> record. A record is one msgpack array,
  ``[seq, event, trailer]``, whose trailer holds the stream, the seq of the stream's
  previous record (0 for its first), and last the chain link
  ``BLAKE2b-128(previous chain | every byte before this chain)``, keyed when the
  journal has a key (the byte layout is in ``store/_record.py``). Replay decodes a
  record straight into a ``Record`` in one msgspec call (with the built-in event
  types; a custom codec's records are taken apart first). The chain makes every
  record's bytes, their order and the stream links tamper-evident; LMDB itself has
  no checksums (PITFALLS.md §1.11).
* ``heads``: ``stream`` -> ``last seq(8) | count(8) | first seq(8)``: where each stream
  ends and where it starts.
* ``anchors``: ``stream | NUL | seq`` -> empty, for every 64th record of a stream.
  A stream is read by walking the back links from the next anchor (or the head) down
  to where the reader is, 64 records at most, so memory stays bounded.
* ``ids``: event id -> seq, so a retried append is acknowledged, not duplicated.
* ``snapshots``: stream -> ``hash(16) | seq(8) | data``.
* ``meta``: format version, engine version, hash name, key check, chain head.

Why a linked index: an index entry per record (``stream | seq``, format 1) puts one
key into each stream's range of the B-tree per commit, so a commit over 100 streams
dirties ~100 scattered pages beside the events it appends; the anchors touch 1/64
of that, and the heads are one small database. bench/journal_append.py measures it.

One record's chain is one BLAKE2b call on a copy of a prepared hasher.
``bench/journal_append.py`` measures it beside a per-commit chain with a CRC32 per record
(the scheme that names a damaged record by its CRC), both holding one commit's stored
values at a time. In its run at commit 1996a0c (``--repeat 5``) the per-record chain was
the faster, 0.42 against 0.48 us per record with the stored value built, and the
per-commit hash on a helper thread slower still (0.62 us); the per-record chain also
names the bad seq for every kind of tampering, not only for accidental damage.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import itertools
import logging
import operator
import os
import reprlib
import resource
import shutil
import stat
import struct
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Self, TypeVar

import lmdb
import msgspec

from cogfabric.events import DEFAULT_CODEC, EVENT_TYPES, EventCodec, EventError

from . import _pages
from ._errors import (
    InvalidStreamError,
    JournalClosedError,
    JournalConflictError,
    JournalDamagedError,
    JournalError,
    JournalFailedError,
    JournalFormatError,
    JournalFullError,
    JournalHeaderError,
    JournalIntegrityError,
    JournalKeyError,
    JournalLockedError,
    JournalNotFoundError,
    JournalReadOnlyError,
    JournalRecordError,
    JournalStillFullError,
    JournalUnavailableError,
    record_error,
)
from ._journal import Journal, Record, Snapshot, VerifyReport
from ._record import (
    CHAIN_LEN,
    HEAD_LEN,
    MAX_NAME,
    PREFIX,
    head_value,
    is_name,
    last_seq_of,
    link_of,
    of_stream,
    parts,
    stream_part,
)
from ._verify import unnamed_stream, verify_journal

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from os import PathLike
    from typing import BinaryIO

    from cogfabric.events import Event

__all__ = ["FORMAT_VERSION", "LmdbJournal"]

_T = TypeVar("_T")

log = logging.getLogger(__name__)

FORMAT_VERSION: Final = 5
"""The on-disk format this code reads and writes; a journal of another format is refused.

Formats 1 to 4 are development formats: 1 kept one index entry per record (before the
linked stream index), 2 put the chain and the stream header before the event, so
replay had to cut every record apart in Python, 3 (the record layout of today)
did not keep each stream's first seq in its head, and 4's chain head had no tag, so
a keyed journal could be cut short without the key. Read such a journal with the
version that wrote it."""

HASH_NAME: Final = "blake2b-128"
_DEFAULT_MAP_SIZE: Final = 1 << 30  # sparse on 64-bit: costs no disk until used
_READ_CHUNK: Final = 1024  # records per read transaction: bounds memory and txn length
_READ_BYTES: Final = 16 << 20  # ... and about this many bytes of them, for records of megabytes too
_BACK_CHUNK: Final = 256  # records per read transaction of a walk back (``read_back``)
_ZERO_CHAIN: Final = bytes(16)
_SEQ_LEN: Final = 8
_SNAPSHOT_HEADER: Final = 24  # hash(16) | seq(8)
_STREAM_HEAD_LEN: Final = 24  # a stream's head: last seq(8) | count(8) | first seq(8)
_MAX_SEQ: Final = 2**64 - 1
_SEQ_KEY: Final = struct.Struct(">Q").pack  # a seq's key; mapped over a batch's seqs, the fastest way
_CANONICAL: Final = msgspec.msgpack.Encoder(order="sorted")
"""Encodes a decoded event with its keys sorted and every value's type kept (``_same``)."""
_IN_ORDER: Final = msgspec.msgpack.Encoder()

_DB_EVENTS: Final = b"events"
_DB_HEADS: Final = b"heads"
_DB_ANCHORS: Final = b"anchors"
_ANCHOR_EVERY: Final = 64  # a power of two: the writer tests ``count & (_ANCHOR_EVERY - 1)``
_HEADS_CACHE: Final = 65_536  # streams whose head the writer keeps in memory
_MAX_READERS: Final = 254  # LMDB's reader table: one slot per read transaction running
_READER_CHECK_EVERY: Final = 60.0
"""Seconds between a journal's sweeps of LMDB's reader table for slots of killed readers (a
writer's at an append, a read-only one's at a read; PITFALLS.md §1.5: such a slot pins the
pages its snapshot saw, so the file grows)."""
_DB_IDS: Final = b"ids"
_DB_SNAPSHOTS: Final = b"snapshots"
_DB_META: Final = b"meta"
_DATA_DBS: Final = (_DB_EVENTS, _DB_HEADS, _DB_ANCHORS, _DB_IDS, _DB_SNAPSHOTS)

_META_FORMAT: Final = b"format"
_META_ENGINE: Final = b"engine"
_META_HASH: Final = b"hash"
_META_KEYCHECK: Final = b"key_check"
_META_HEAD: Final = b"head"
_FORMAT_LEN: Final = 4  # the format version's bytes, big-endian


def _canonical(event: Event) -> bytes:
    """``event`` encoded with its mappings' keys sorted; in their own order where a key is no str."""
    try:
        return _CANONICAL.encode(event)
    except TypeError:  # msgspec sorts str keys only: a retry with such keys must keep their order
        return _IN_ORDER.encode(event)


def _seq_key(seq: int) -> bytes:
    return seq.to_bytes(8, "big")


def _pair_size(pair: tuple[bytes, bytes]) -> int:
    return len(pair[1])


def _take(
    items: Iterator[_T], want: int, size_of: Callable[[_T], int], *, big: bool
) -> tuple[list[_T], bool]:
    """Up to ``want`` items, fewer once they hold ``_READ_BYTES``; and whether that cut them.

    ``big``: the database holds records too big for a page (LMDB's overflow pages). Only
    then are the items counted one by one: 1,024 records that fit in pages hold at
    most a few MiB, and are taken in one C call.
    """
    if not big:
        return list(itertools.islice(items, want)), False
    taken: list[_T] = []
    size = 0
    for item in items:
        taken.append(item)
        size += size_of(item)
        if len(taken) >= want:
            break
        if size >= _READ_BYTES:
            return taken, True
    return taken, False


def _has_big_records(txn: lmdb.Transaction[bytes], db: lmdb._Database) -> bool:
    """Whether ``db`` holds a value on overflow pages (one bigger than about half a page)."""
    return bool(txn.stat(db)["overflow_pages"])


def _full_message(
    path: Path, limit: int | None, current: int, payloads: Sequence[bytes], snapshots: Sequence[Snapshot]
) -> str:
    """The error of a commit the map at ``max_map_size`` cannot hold: its size; a reopen alone does not help.

    A commit larger than the whole limit (one oversized value) is told apart from a
    journal that filled up by the commit's size beside the limit. A journal opened with
    a ``max_map_size`` below its data file's size has a map of that file's size (LMDB
    never maps less than the file): the error names that size, the one to raise past.
    """
    size = sum(map(len, payloads)) + sum(_data_size(snapshot) for snapshot in snapshots)
    records = f"{len(payloads)} record{'s' if len(payloads) != 1 else ''}"
    held = f" and {len(snapshots)} snapshot{'s' if len(snapshots) != 1 else ''}" if snapshots else ""
    past = (
        f"; its data file is {current:,} bytes already, more than that limit: raise max_map_size above it"
        if limit is not None and current > limit
        else ""
    )
    return (
        f"{path} reached max_map_size ({limit} bytes): a commit of {records}{held} ({size:,} bytes) did not "
        "fit; the journal is fail-stop until reopened, and a reopen with the same max_map_size has no more "
        f"room than before (raise it){past}"
    )


def _data_size(snapshot: object) -> int:
    """The bytes a snapshot's data holds (a memoryview's ``len`` counts items); 0 for no buffer.

    The map may fill with the records before the snapshots are checked (``_put_snapshot``):
    a snapshot that would be refused must not turn ``JournalFullError`` into its own error.
    """
    try:
        return memoryview(getattr(snapshot, "data", b"")).nbytes
    except TypeError:
        return 0


def _grown_size(current: int, limit: int | None) -> int | None:
    """The map size to grow a full map of ``current`` bytes to; None at ``limit``."""
    if limit is not None and current >= limit:
        return None
    return current * 2 if limit is None else min(current * 2, limit)


class _WriterLock:
    """The descriptor of a journal's ``writer.lock``, closed once (``release``).

    A ``flock`` belongs to the open file, which ``fork`` shares: while a forked child
    (of ``multiprocessing``'s fork start, say) kept its copy, the lock would outlive
    the parent's ``close()`` and refuse every later writer. So every lock this process
    holds is known from the moment its file is opened, and a forked child closes its
    copies as it starts (it may not use the parent's journals anyway: LMDB forbids it).
    """

    __slots__ = ("fd", "locked")

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd
        self.locked = False  # set once its flock is taken: a concurrent open's is not yet
        _HELD.add(self)

    def release(self, *, forked: bool = False) -> None:
        """Close the descriptor (the lock goes once no process holds a copy); idempotent.

        A lock this process took has its pid cleared from the file first, so no later
        refusal names a process that let go; a forked child's copy (``forked``) leaves it.

        A Ctrl-C (or SIGTERM) that stops it leaves it to a later call: the descriptor is
        forgotten only in the same step as it is closed (no call between the two, where a
        signal's handler could run), so it is neither kept open for good nor closed twice.
        """
        if self.fd is not None and self.locked and not forked:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, 0)
        fd, self.fd = self.fd, None
        if fd is not None:
            try:  # noqa: SIM105 - not contextlib.suppress: its __init__ is a call, where a signal lands
                os.close(fd)
            except OSError:
                pass
        _HELD.discard(self)


_HELD: set[_WriterLock] = set()


def _holder_of(fd: int) -> str:
    """`` (process N)`` as the writer that holds the lock wrote it in ``writer.lock``; else ``""``.

    The writer writes its pid there once it holds the lock (in its own PID namespace). A
    writer that exited unclosed (killed, say) left its pid with its lock gone; a holder
    that took the lock by other means then writes none, so a pid no process has is no one's.
    """
    try:
        text = os.pread(fd, 32, 0)
    except OSError:
        return ""
    pid = text.strip()
    if not (pid.isdigit() and text.endswith(b"\n")) or not _alive(int(pid)):
        return ""
    return f" (process {int(pid)}, as its writer.lock says)"


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (``_holder_of`` says why it asks)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:  # another user's
        return True
    except (OSError, OverflowError):  # ProcessLookupError: gone
        return False
    return True


def _lock_file_writable(where: Path) -> bool:
    """Whether LMDB could open the journal's lock file to read it: writable, or creatable."""
    lock = where / "lock.mdb"
    return os.access(lock if lock.exists() else where, os.W_OK)


_COPY_ADVICE: Final = (
    "read a copy of its data file (cogfabric verify --copy; replay, inspect, export, trace take "
    "--copy too; from Python, copy data.mdb into a directory of your own and open that)"
)


def _hold_off_writers(where: Path) -> _WriterLock | None:
    """A shared lock on ``writer.lock`` while ``where`` is read from a read-only file system, or None.

    LMDB keeps its reader table in ``lock.mdb``; on a read-only file system it cannot open
    that, and reads without one (MDB_RDONLY's fallback): a writer reaching the same file
    through another mount (a read-only bind mount of a live journal) then never learns
    of the reader, reuses the pages it reads, and the reader sees damage that is not
    there, or LMDB aborts the process on a page rewritten under it. So the journal is
    read there only while no writer holds ``writer.lock``, and its shared lock keeps a
    writer from starting until it is closed. A journal without ``writer.lock`` (a data
    file copied alone onto the medium) has no writer to hold off.

    Raises:
        JournalLockedError: a writer holds the journal (this process's own: LMDB's
            "already open in this process", as without this lock).
        JournalFormatError: ``writer.lock`` is no regular file (a FIFO would block the open).
        JournalUnavailableError: ``writer.lock`` cannot be read (another user's), so
            whether a writer holds the journal cannot be told.

    """
    try:
        read_only = bool(os.statvfs(where).f_flag & os.ST_RDONLY)
    except OSError:
        return None  # the open says what is wrong with the directory
    if not read_only:
        return None  # LMDB registers the reader in lock.mdb: a writer leaves its pages alone
    try:
        # O_NONBLOCK: a FIFO in its place (a medium anyone may have made) would block the open
        fd = os.open(where / "writer.lock", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        msg = (
            f"{where} is on a read-only file system, where LMDB keeps no record of its readers, and "
            f"its writer.lock cannot be read to make sure no writer appends to it meanwhile "
            f"({exc.strerror or exc}): {_COPY_ADVICE}"
        )
        raise JournalUnavailableError(msg) from exc
    lock = _WriterLock(fd)  # locked stays False: a shared lock, no writer's
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        regular = False
    if not regular:
        lock.release()
        raise JournalFormatError(f"{where} is refused: its writer.lock is not a regular file")
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        mine = _held_here(fd)
        holder = _holder_of(fd)
        lock.release()
        if mine:  # this process's own writer, through another mount: LMDB's refusal, as before
            raise JournalLockedError(_open_here_message(where)) from exc
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            msg = (
                f"{where} is held by a writer{holder}, and is on a read-only file system, where LMDB "
                "keeps no record of its readers: the writer would reuse pages while they are read. "
                f"Read it through a mount where its lock.mdb is writable, or {_COPY_ADVICE}"
            )
            raise JournalLockedError(msg) from exc
        raise JournalUnavailableError(f"cannot lock {where}: {exc}") from exc
    return lock


def _create_lock_file_as_owner(where: Path) -> None:
    """Make sure a read-only open does not leave ``lock.mdb`` to a user other than the journal's owner.

    LMDB creates its lock file, owner-only, even to read: made by an auditor (root, or a
    user the directory lets write), it would lock the journal's owner, who owns
    ``data.mdb``, out of the journal (LMDB needs write access to it). Root creates it
    here, empty, and gives it to the data file's owner; another user is refused.

    Raises:
        JournalUnavailableError: the open would create the lock file for another user
            than the data file's owner.

    """
    try:  # one directory for every step: a name swapped for a link meanwhile is not followed
        dir_fd = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return  # LMDB says what is wrong
    try:
        _create_lock_file_in(where, dir_fd)
    finally:
        os.close(dir_fd)


def _create_lock_file_in(where: Path, dir_fd: int) -> None:
    """``_create_lock_file_as_owner`` in the directory ``dir_fd`` (``where``, as named in messages)."""
    try:
        data = os.stat("data.mdb", dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return  # LMDB says what is wrong
    try:
        os.stat("lock.mdb", dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        pass  # none yet: LMDB would create it, as this user
    except OSError:
        return
    else:
        return  # in use already
    if not os.access(".", os.W_OK, dir_fd=dir_fd):
        return  # not creatable: LMDB says what is wrong
    uid = os.geteuid()
    if data.st_uid == uid or not stat.S_ISREG(data.st_mode):
        return
    if uid != 0:
        msg = (
            f"reading {where} here would create its lock file, lock.mdb, which LMDB writes even to "
            f"read, owned by you: it would lock the journal's owner (uid {data.st_uid}, who owns its "
            f"data.mdb) out of it. Let the owner open it once (which creates lock.mdb), or {_COPY_ADVICE}"
        )
        raise JournalUnavailableError(msg)
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open("lock.mdb", flags, 0o600, dir_fd=dir_fd)
    except OSError:
        return  # made meanwhile (by its writer, say), or not creatable: LMDB opens what is there
    try:
        os.fchown(fd, data.st_uid, data.st_gid)
    except OSError as exc:
        with contextlib.suppress(OSError):  # left root's, it would lock the owner out
            os.unlink("lock.mdb", dir_fd=dir_fd)
        msg = (
            f"cannot give {where}'s new lock file to the journal's owner (uid {data.st_uid}): {exc}; "
            f"{_COPY_ADVICE}"
        )
        raise JournalUnavailableError(msg) from exc
    finally:
        os.close(fd)


def _lock_file_taken(where: Path) -> int | None:
    """The owner of ``lock.mdb`` when another user made it in a journal this process's user owns, or None."""
    try:
        lock_owner = (where / "lock.mdb").lstat().st_uid
        data_owner = (where / "data.mdb").stat().st_uid
    except OSError:
        return None
    return lock_owner if data_owner == os.geteuid() != lock_owner else None


def _only_readers_hold(where: Path) -> bool | None:
    """Whether ``writer.lock`` is held shared (by ``_hold_off_writers``' readers), not by a writer.

    Read from ``/proc/locks`` (Linux), not by taking a shared lock to see: a lock taken
    for a moment would refuse another writer opening the journal meanwhile, with this
    message. False where that cannot be read; None where it shows no lock on the file at
    all: none is held, or its holder runs outside this ``/proc``'s PID namespace (a
    container's), whose locks Linux leaves out (``_shared_lock_free`` then tells).
    """
    try:
        held = (where / "writer.lock").lstat()
        table = _PROC_LOCKS.read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    file_id = f"{os.major(held.st_dev):02x}:{os.minor(held.st_dev):02x}:{held.st_ino}"
    shared = False
    for line in table.splitlines():
        fields = line.split()  # "1: FLOCK  ADVISORY  READ  1234 fd:01:5678 0 EOF"; a waiter's has "->"
        if fields[1:2] == ["FLOCK"] and fields[5:6] == [file_id]:
            if fields[3] != "READ":
                return False  # a writer's
            shared = True
    return True if shared else None


_PROC_LOCKS: Final = Path("/proc/locks")


def _shared_lock_free(where: Path) -> bool:
    """Whether a shared lock on ``writer.lock`` can be taken (for a moment): no writer holds it."""
    try:
        fd = os.open(where / "writer.lock", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return False
    else:
        return True
    finally:
        os.close(fd)


def _prepare_to_read(where: Path) -> _WriterLock | None:
    """Check a read-only open of ``where`` before LMDB opens it; the shared lock it holds, if any.

    Raises:
        JournalNotFoundError: there is no journal at ``where``.
        JournalError: as ``data_file``, ``_create_lock_file_as_owner`` and ``_hold_off_writers``.

    """
    if data_file(where) is None:
        raise JournalNotFoundError(f"no journal at {where}")
    _create_lock_file_as_owner(where)
    return _hold_off_writers(where)


def _held_here(fd: int) -> bool:
    """Whether a writer lock this process holds is on the file ``fd`` names."""
    try:
        st = os.fstat(fd)
    except OSError:
        return False
    for lock in list(_HELD):
        if lock.fd is None or lock.fd == fd or not lock.locked:
            continue
        with contextlib.suppress(OSError):
            other = os.fstat(lock.fd)
            if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
                return True
    return False


def _release_in_forked_child() -> None:
    for lock in list(_HELD):
        lock.release(forked=True)


os.register_at_fork(after_in_child=_release_in_forked_child)


_RECORD_DECODE_ERRORS: Final = (msgspec.ValidationError, msgspec.DecodeError, RecursionError)


def _record_decoder(codec: EventCodec) -> Callable[[bytes], Record] | None:
    """A decoder of a stored record straight into a ``Record``, or None to take records apart.

    A record is the msgpack array ``[seq, event, trailer]``, the shape of a ``Record``,
    whose event msgspec decodes as the built-in events' union. So this works for a
    codec of exactly the built-in types whose versions the typed decode pins (an older
    version fails it, and the chunk takes the checked path); any other codec takes
    every record apart and decodes its event with the codec.
    """
    if not codec.pinned or set(codec.types.values()) != set(EVENT_TYPES):
        return None
    decoder: msgspec.msgpack.Decoder[Record] = msgspec.msgpack.Decoder(Record)
    return decoder.decode


def _first_of_another_stream(
    seqs: Sequence[int], events: list[Event], streams: list[bytes]
) -> tuple[int, JournalRecordError] | None:
    """The first decoded event not of the stream its record is filed under: its index, its error.

    Such an event is one an upcaster moved to another stream (it changed a field the
    event type's ``stream`` is made of), or whose type's ``stream`` was changed since it
    was written: the journal files it under the stream it had then. One whose type's
    ``stream`` raises (for the fields an upcaster gave it, say) is such a one too.
    """
    for index, (seq, event, stream_raw) in enumerate(zip(seqs, events, streams)):  # noqa: B905 - events may be fewer
        try:
            stream = event.stream
            filed = stream.encode() == stream_raw
        except Exception as exc:  # noqa: BLE001 - an event type's stream is its own code: named
            error = JournalRecordError(seq, unnamed_stream(event, exc))
            error.__cause__ = exc
            return index, error
        if not filed:
            why = (
                f"the record is filed under stream {stream_raw.decode('utf-8', 'backslashreplace')!r}, "
                f"but its event is of {stream!r} ({type(event).__name__} at version {event.v}: an "
                "upcaster, or a change of its type's stream, moved it, or the record was changed; an "
                "upcaster must keep what names an event's stream)"
            )
            return index, JournalRecordError(seq, why)
    return None


def _not_of_stream(seq: int, record: bytes) -> JournalRecordError:
    """The error for a record a stream walk reached that is not of the stream."""
    if parts(record) is None:
        return JournalRecordError(seq, "the record is malformed")
    return JournalRecordError(seq, "the stream index names a record of another stream")


def _anchor_from(
    anchors: lmdb.Cursor[bytes] | lmdb.Cursor[memoryview], stream_raw: bytes, seq: int, last: int
) -> int:
    """The stream's first anchor at or after ``seq`` (0: its first of all), at most ``last``.

    ``last`` (the stream's head) where there is none, or where the first key there is
    not one of this stream's anchors (another stream's, or one of a changed length).
    """
    prefix = stream_raw + b"\0"
    # seq 0 seeks the bare prefix: a changed key sorted first (shorter than an anchor's) gives last
    if anchors.set_range(prefix + _seq_key(seq) if seq else prefix):
        key = bytes(anchors.key())
        if key.startswith(prefix) and len(key) == len(prefix) + _SEQ_LEN:
            return min(int.from_bytes(key[-8:], "big"), last)
    return last


def _check_flags(env: lmdb.Environment, db: lmdb._Database, name: bytes, where: Path) -> None:
    """Refuse a database whose LMDB flags the journal never sets (reverse keys, duplicates...).

    The flags are file structure outside the hash chain: a database re-created with
    reversed keys holds the same records, yet orders them otherwise for every reader.
    """
    with env.begin() as txn:
        _check_flags_in(txn, db, name, where)


def _existing_db(env: lmdb.Environment, name: bytes, where: Path) -> lmdb._Database:
    """A database of a journal with a header: missing, it was removed (tampering or damage).

    Raises:
        JournalIntegrityError: the database is missing.

    """
    try:
        return env.open_db(name, create=False)
    except lmdb.NotFoundError as exc:
        msg = (
            f"{where}: its {name.decode()} database is missing: it was removed after the journal was written"
        )
        raise JournalIntegrityError(msg) from exc


def _entries(env: lmdb.Environment, name: bytes) -> int:
    """How many entries the named database holds."""
    db = env.open_db(name, create=False)
    with env.begin() as txn:
        return int(txn.stat(db)["entries"])


def _check_flags_in(txn: lmdb.Transaction, db: lmdb._Database, name: bytes, where: Path) -> None:
    """``_check_flags`` inside a transaction the caller holds."""
    flags = sorted(flag for flag, on in db.flags(txn).items() if on)  # type: ignore[call-arg]
    if flags:
        msg = f"{where}: its {name.decode()} database has LMDB flags {flags} no journal sets: it was changed"
        raise JournalHeaderError(msg)


def _normalise_key(key: bytes | str | None) -> bytes:
    """The chain key's bytes (b"" for none).

    Raises:
        TypeError: ``key`` is neither bytes nor str (``bytes(16)`` would make an int
            a key of 16 NUL bytes).
        ValueError: it is empty, longer than BLAKE2b takes, or a str UTF-8 cannot encode.

    """
    if key is None:
        return b""
    if isinstance(key, str):
        try:
            raw = key.encode()
        except UnicodeEncodeError:
            msg = "a chain key given as a str must be text UTF-8 can encode"
            raise ValueError(msg) from None
    elif isinstance(key, bytes | bytearray | memoryview):
        raw = bytes(key)
    else:
        msg = f"a chain key is bytes or str, not {type(key).__name__}"
        raise TypeError(msg)
    if not 0 < len(raw) <= hashlib.blake2b.MAX_KEY_SIZE:
        msg = f"a chain key must be 1 to {hashlib.blake2b.MAX_KEY_SIZE} bytes, got {len(raw)}"
        raise ValueError(msg)
    return raw


def _check_open_arguments(path: str | PathLike[str], map_size: int | None, max_map_size: int | None) -> None:
    """Refuse an empty path (``Path("")`` is the working directory) and a map size out of range.

    A ``map_size`` above ``max_map_size`` is refused too; the default one (1 GiB) above a
    smaller ``max_map_size`` is lowered to it by the caller.
    """
    if not os.fspath(path):
        msg = "a journal's path must not be empty (Path('') would be the working directory)"
        raise ValueError(msg)
    for name, value in (("map_size", map_size), ("max_map_size", max_map_size)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            msg = f"{name} is a number of bytes, got {type(value).__name__}"
            raise TypeError(msg)
        if not 0 < value < 2**63:
            msg = f"{name} must be 1 to 2**63 - 1 bytes, got {value}"
            raise ValueError(msg)
    if map_size is not None and max_map_size is not None and map_size > max_map_size:
        msg = (
            f"map_size ({map_size} bytes) is larger than max_map_size ({max_map_size} bytes), "
            "the most the map may grow to"
        )
        raise ValueError(msg)


def _require_bools(**flags: object) -> None:
    """Refuse a flag that is no bool: a string "false" is true."""
    for name, flag in flags.items():
        if not isinstance(flag, bool):
            msg = f"{name} is a bool, got {type(flag).__name__} {reprlib.repr(flag)}"  # bounded
            raise TypeError(msg)


def _key_check(key: bytes) -> bytes:
    if not key:
        return b""
    return hashlib.blake2b(b"cogfabric key check", digest_size=16, key=key).digest()


def _without_stored(
    batch: list[Event], payloads: list[bytes], id_raws: list[bytes], known: dict[bytes, int], first: int
) -> tuple[list[Event], list[bytes], list[bytes], list[int]]:
    """The events whose ids are not stored (nor repeated in the batch), and every event's seq."""
    kept: list[int] = []
    seqs: list[int] = []
    seen: dict[bytes, int] = {}
    for index, id_raw in enumerate(id_raws):
        existing = known.get(id_raw) or seen.get(id_raw)
        if existing:
            seqs.append(existing)
            continue
        seen[id_raw] = seq = first + len(kept)
        seqs.append(seq)
        kept.append(index)
    return [batch[i] for i in kept], [payloads[i] for i in kept], [id_raws[i] for i in kept], seqs


def _seq_arg(value: object, what: str) -> int:
    """A seq argument: an int (not a bool; a numpy int is one), clamped into what a seq key can hold."""
    if isinstance(value, bool):
        msg = f"{what} is a seq (an int), got bool"
        raise TypeError(msg)
    try:
        seq = operator.index(value)  # type: ignore[arg-type]  # refused below when it is no int
    except TypeError:
        msg = f"{what} is a seq (an int), got {type(value).__name__}"
        raise TypeError(msg) from None
    return min(max(seq, 0), _MAX_SEQ)


def _text_bytes(text: str, what: str) -> bytes:
    if not isinstance(text, str):
        msg = f"{what} is a str, got {type(text).__name__}"
        raise TypeError(msg)
    try:
        return text.encode()
    except UnicodeEncodeError as exc:  # a lone surrogate
        raise InvalidStreamError(f"{what} {text!r} is not valid UTF-8 text") from exc


def _name_bytes(name: str, what: str) -> bytes:
    raw = _text_bytes(name, what)
    if not is_name(raw):
        msg = f"{what} {name!r} must be 1 to {MAX_NAME} UTF-8 bytes without NUL"
        raise InvalidStreamError(msg)
    return raw


@contextlib.contextmanager
def _translated(path: Path) -> Iterator[None]:
    """Translate LMDB's errors to the journal's tree (``_journal_error``)."""
    try:
        yield
    except lmdb.Error as exc:
        raise _journal_error(path, exc) from exc


_FORK_ADVICE: Final = (
    "py-lmdb refuses to open its files again in a process that inherited them open, so open the "
    "journal in a process that did not (multiprocessing's 'spawn' or 'forkserver' start method), "
    "or fork before opening it"
)
_OPEN_JOURNALS: Final[weakref.WeakSet[LmdbJournal]] = weakref.WeakSet()
"""Every journal this process opened (or a forked child inherited), to name a fork's refusal."""


_ENV_OPENS_LOCK: Final = threading.RLock()
"""Guards ``_ENV_OPENS``; held a moment, never across an open (re-entrant: a signal
handler that forks or opens a journal may run while its thread holds it)."""
_ENV_OPENS: Final[dict[object, tuple[threading.Lock, list[int]]]] = {}
"""A lock per directory some thread opens LMDB in now (``_open_env``), and its users' count."""


def _forget_env_opens() -> None:
    """In a forked child: the threads that held those locks are not there."""
    _ENV_OPENS.clear()
    _ENV_OPENS_LOCK.release()


# held across a fork: a child's copy is consistent, and no lock is left held by a thread it does not have
os.register_at_fork(
    before=_ENV_OPENS_LOCK.acquire,
    after_in_parent=_ENV_OPENS_LOCK.release,
    after_in_child=_forget_env_opens,
)


def _open_env(where: Path, **options: Any) -> lmdb.Environment:  # noqa: ANN401 - lmdb.open's keywords
    """``lmdb.open(where, **options)``, one at a time for a directory in this process.

    py-lmdb refuses an environment this process has open already ("already open in
    this process"), but checks before it opens the files and notes them after, with
    the GIL released in between: two threads opening one journal at once (a runtime
    and an audit, two audits) could both get it. LMDB's locks are the process's, so
    the second open then takes the lock file for the first user's, re-initializing its
    reader table under the first's readers (whose pages a writer may then reuse), and
    closing either releases the other's locks and makes py-lmdb forget both.

    One directory's, not the process's: an open LMDB holds up (another process holds
    the lock file's exclusive lock, as LMDB's opener does while it sets up: one stopped
    there, say; a stalled network file system) holds up the opens of that directory
    only, not every journal's of the process, nor its ``os.fork()``.
    """
    try:
        st = where.stat()
        key: object = (st.st_dev, st.st_ino)  # the directory however it is reached
    except OSError:
        key = os.fsencode(where)  # lmdb.open says what is wrong
    with _ENV_OPENS_LOCK:
        lock, users = _ENV_OPENS.setdefault(key, (threading.Lock(), [0]))
        users[0] += 1
    try:
        with lock:
            return lmdb.open(os.fsencode(where), **options)
    finally:
        with _ENV_OPENS_LOCK:
            users[0] -= 1
            if not users[0] and _ENV_OPENS.get(key, (None,))[0] is lock:
                del _ENV_OPENS[key]


@contextlib.contextmanager
def _inherited_by_fork(where: Path) -> Iterator[None]:
    """Say so when LMDB refuses ``where`` because this process inherited it open from its parent.

    Raises:
        JournalLockedError: with what to do instead, when a journal of the parent process
            (which forked this one) has the same files open.

    """
    try:
        yield
    except JournalLockedError as exc:
        here = os.path.realpath(where)
        parent = next(
            (j for j in list(_OPEN_JOURNALS) if j._pid != os.getpid() and j._real_path == here),  # noqa: SLF001
            None,
        )
        if parent is None:
            raise
        msg = f"{where} was opened by process {parent._pid}, which forked this one: {_FORK_ADVICE}"  # noqa: SLF001
        raise JournalLockedError(msg) from exc


def refuse_target(target: Path, doing: str = "back up to", source: Path | None = None) -> None:
    """Refuse a new journal's destination that exists, but for an empty directory (no link).

    A destination inside ``source``'s directory (the journal copied) is refused too: a
    journal directory holds its own files only, and moving it (a salvage swapped in)
    would move the copy with it.

    ``doing`` names the command in the messages (``cannot back up to DEST: ...``): a
    backup's, or a salvage's (``salvage into``: ``cogfabric salvage`` writes its journal
    the same way, ``write_beside``).

    Raises:
        FileExistsError: ``target`` exists and is not an empty directory.
        JournalUnavailableError: ``target`` cannot be looked at, or is a mount point.

    """
    if source is not None and _inside(target, source):
        msg = f"cannot {doing} {target}: it is inside the journal's directory {source}; give one outside it"
        raise JournalUnavailableError(msg)
    try:
        mode = target.lstat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise JournalUnavailableError(f"cannot {doing} {target}: {exc.strerror or exc}") from exc
    if not stat.S_ISDIR(mode):
        raise FileExistsError(f"cannot {doing} {target}: it exists, and is no directory")
    try:
        with os.scandir(target) as entries:
            empty = next(entries, None) is None
    except OSError as exc:
        raise JournalUnavailableError(f"cannot {doing} {target}: {exc.strerror or exc}") from exc
    if not empty:
        raise FileExistsError(f"cannot {doing} {target}: it exists and is not empty")
    try:
        mount_point = target.lstat().st_dev != target.parent.stat().st_dev
    except OSError:
        return  # the sibling's creation in its parent says why
    if mount_point:  # the copy would fill the parent's file system, then not rename onto it (EBUSY)
        msg = (
            f"cannot {doing} {target}: it is a mount point, which nothing can be renamed onto; "
            f"{doing} a new directory inside it (e.g. {target / 'journal'})"
        )
        raise JournalUnavailableError(msg)


def _inside(target: Path, directory: Path) -> bool:
    """Whether ``target`` (which may not exist yet) lies in ``directory``, links resolved."""
    try:
        return directory.resolve() in target.resolve().parents
    except (OSError, RuntimeError):  # a loop of links: the checks after this one say why
        return False


_SIBLING_NAME: Final = 200
"""The bytes of ``target``'s name its sibling's keeps (``write_beside``): with the rest, under 255."""


def write_beside(target: Path, kind: str, failed: str, fill: Callable[[Path], _T]) -> _T:
    """Make the directory ``target`` whole or not at all: filled beside it, synced, renamed into place.

    ``fill`` writes the new journal into a temporary sibling (``.NAME.KIND-`` and a
    random suffix, 0700; NAME cut to ``_SIBLING_NAME`` bytes), syncs what it wrote,
    and returns what the caller wants back; then the sibling's entries are synced,
    the sibling is renamed to ``target`` (onto an empty directory, or nothing: never
    over a journal) and the rename synced.
    Whatever ``fill`` raises (an interrupt too), or a failure of the sync or the
    rename, removes the sibling: nothing is left under ``target``. A crash can leave
    the sibling, hidden beside ``target``. ``failed`` begins the messages
    (``cannot back up J to DEST``). ``Journal.backup`` and ``cogfabric salvage`` write
    their journals so.

    Raises:
        FileExistsError: ``target`` was created meanwhile.
        JournalUnavailableError: the sibling cannot be made (a missing or unwritable
            parent, no room), a file cannot be written or synced (an ``OSError`` of
            ``fill``'s too), ``target`` is in use (a mount point), or the rename's
            sync failed (``target`` is then whole, its entry maybe not on disk).
        JournalError: as ``fill`` raises it (the sibling removed).

    """
    # a DEST named near the file system's limit (255 bytes) leaves no room for the rest
    name = os.fsdecode(os.fsencode(target.name)[:_SIBLING_NAME])
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.{kind}-", dir=target.parent))
    except OSError as exc:  # its parent missing, not writable, full
        raise JournalUnavailableError(f"{failed}: {target.parent}: {exc.strerror or exc}") from exc
    try:
        result = fill(tmp)
        _fsync_directory(tmp)
        tmp.rename(target)  # onto an empty directory, or nothing: never over a journal
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError) and not isinstance(exc, JournalError):
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                raise FileExistsError(f"{failed}: it was created meanwhile") from exc
            if exc.errno == errno.EBUSY:  # a bind mount of the same file system, or ".": in use
                msg = (
                    f"{failed}: it is in use (a mount point, or the working directory); "
                    "write to a new directory inside it"
                )
                raise JournalUnavailableError(msg) from exc
            raise JournalUnavailableError(f"{failed}: {exc.strerror or exc}") from exc
        raise
    try:
        _fsync_directory(target.parent)  # the rename itself on disk
    except OSError as exc:
        msg = f"{failed}: {target} is complete, but its directory's entry could not be synced: {exc}"
        raise JournalUnavailableError(msg) from exc
    return result


def _last_seq_in(copy: Path) -> int:
    """The last seq in the journal LMDB has just copied to ``copy`` (read without a lock file)."""
    env = lmdb.open(os.fsencode(copy), readonly=True, lock=False, max_dbs=8, subdir=True)
    try:
        with env.begin(db=env.open_db(_DB_EVENTS, create=False)) as txn:
            cursor = txn.cursor()
            return last_seq_of(cursor.key(), copy) if cursor.last() else 0
    finally:
        env.close()


def _txn_valid(txn: lmdb.Transaction) -> bool:
    """Whether ``txn`` is still usable: py-lmdb invalidates every transaction when the map is replaced."""
    try:
        txn.id()
    except lmdb.Error:
        return False
    return True


def _fsync(path: Path, flags: int) -> None:
    """Open ``path`` read-only with ``flags`` added, sync it to disk, close it."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    """Sync the file at ``path`` (its data and size) to disk."""
    _fsync(path, os.O_NOFOLLOW)


def _fsync_directory(where: Path) -> None:
    """Sync ``where``'s entries (a file created in it, a rename into it) to disk."""
    _fsync(where, os.O_DIRECTORY)


def _open_here_message(path: Path, suffix: str = "") -> str:
    """Why ``path`` cannot be opened again in this process, which has it open (LMDB's refusal)."""
    return (
        f"{path} is already open in this process{suffix} (LMDB allows one open of a journal per "
        "process: read it through the Journal that holds it, after the Runtime holding it is closed, "
        "or from another process, e.g. cogfabric export)"
    )


def _journal_error(path: Path, exc: lmdb.Error, suffix: str = "") -> JournalError:
    """The journal's error for an LMDB error: the one place that maps them.

    ``suffix`` is added to the message (an append's says the journal is fail-stop).
    """
    msg = str(exc)
    # EACCES opening its files (the message names the path) is a ReadonlyError too, below
    if isinstance(exc, lmdb.ReadonlyError) and not msg.startswith(f"{path}: "):
        return JournalReadOnlyError(f"{path} is open read-only{suffix}")
    if isinstance(exc, lmdb.MapFullError):  # the writer grows the map, or fails-stop, first
        return JournalFullError(f"{path} is full{suffix}")
    # MDB_BAD_TXN: a read transaction that met a damaged page earlier, and set it aside
    page = isinstance(exc, lmdb.CorruptedError | lmdb.PageNotFoundError | lmdb.BadTxnError)
    # MDB_INVALID with both header pages LMDB's: a field of its newest header (a page size,
    # a database's flags) is damaged, not a file that is no journal
    if page or (isinstance(exc, lmdb.InvalidError) and _headers_whole(path)):
        what = (
            "a page of its data file"
            if page
            else "its header, whose pages both hold LMDB's magic and version"
        )
        return JournalDamagedError(f"{path} is damaged: LMDB cannot read {what} ({msg}){suffix}")
    if "already open in this process" in msg:
        return JournalLockedError(_open_here_message(path, suffix))
    if isinstance(exc, lmdb.InvalidError | lmdb.VersionMismatchError | lmdb.IncompatibleError):
        # MDB_INCOMPATIBLE: a journal's database name holds a plain value
        what = (
            "a cogfabric journal"
            if isinstance(exc, lmdb.IncompatibleError)
            else "an LMDB journal this code can open"
        )
        return JournalFormatError(f"{path} is not {what}: {msg}{suffix}")
    msg = msg.removeprefix(f"{path}: ")  # LMDB names the path of an open's error itself
    if isinstance(exc, lmdb.ReadonlyError):  # nothing is open yet: not "open read-only"
        msg += " (LMDB writes its lock file, lock.mdb, even to read: this user needs write access to it)"
    elif "Input/output error" in msg:
        msg += _free_space_note(path)
    elif "File too large" in msg:  # EFBIG: a write that starts at ulimit -f (a page-aligned one)
        msg += _free_space_note(path, short=False)
    elif "Cannot allocate memory" in msg:
        msg += " (its map size may be more than this process can map"
        space = resource.getrlimit(resource.RLIMIT_AS)[0]
        if space != resource.RLIM_INFINITY:  # ulimit -v: LMDB maps map_size whole, at open and as it grows
            msg += (
                f": ulimit -v limits its address space to {space:,} bytes, and LMDB maps the whole map "
                "(map_size, or the data file's size if larger), doubling it up to max_map_size as it fills"
            )
        msg += ")"
    elif isinstance(exc, lmdb.ReadersFullError):  # LMDB's advice, max_readers=, is no option of ours
        msg = (
            f"every slot of its lock file's reader table ({_MAX_READERS}) is taken, each by a read "
            "running in some process, or left by a reader killed inside one (kill -9) until a process "
            "that has the journal open frees it (one reading it does at its next read, one appending "
            "within a minute): try again"
        )
    elif isinstance(exc, lmdb.LockError) and msg.startswith("mdb_txn_begin"):  # EAGAIN: no "try again"
        # another process holds the byte of lock.mdb LMDB locks for this pid: seen from here, a
        # process of this PID namespace never has this pid, so one of another namespace (or of
        # another machine: network file systems lock across machines), or a program not LMDB
        msg = (
            "LMDB tells the processes that read a journal apart by their process id, and could not take "
            f"the lock of this one's ({os.getpid()}): most likely a process with the same id, in another "
            "PID namespace (another container's), has it open, and as long as that one does, this "
            "process cannot read it. Run them in one PID namespace, "
            "or so that their ids differ (not each as its container's first process, pid 1). Else "
            "a process with that id on another machine has it open through a network file system "
            "(LMDB does not support one), or a program other than LMDB locks lock.mdb"
        )
    return JournalUnavailableError(f"{path}: {msg}{suffix}")


def _free_space_note(path: Path, *, short: bool = True) -> str:
    """What the file system holding ``path`` has free, for an I/O error LMDB reports.

    LMDB reports a write the disk cut short (a full disk, or a quota) as EIO, not ENOSPC:
    the free space tells a full disk from a failing one. A write past ``ulimit -f`` is
    cut short too (EIO), or refused whole (EFBIG, ``short=False``) when it starts at the
    limit; the limit is named when the data file has reached it, not when far below it.
    """
    try:
        fs = os.statvfs(path)
    except OSError:
        return ""
    free = fs.f_bavail * fs.f_frsize
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    try:
        size: int | None = (path / "data.mdb").stat().st_size
    except OSError:
        size = None
    # a commit's write past the limit leaves the file at it (or short of it by the pages
    # LMDB freed within the commit and does not write)
    if limit != resource.RLIM_INFINITY and (size is None or size + _FILE_SIZE_SLACK >= limit):
        of = "" if size is None else f", and its data file is {size:,}"
        if not short:
            return f" (this process may write no file past {limit:,} bytes, ulimit -f{of})"
        return (
            f" (this process may write no file past {limit:,} bytes, ulimit -f{of}; its file system "
            f"has {free:,} bytes free: LMDB reports a write that that limit or a full disk cut short "
            "as an I/O error)"
        )
    if not short:
        return f" (its data file is {size or 0:,} bytes, more than its file system allows one file)"
    return (
        f" (its file system has {free:,} bytes free: LMDB reports a write that a full disk "
        "cut short as an I/O error)"
    )


_FILE_SIZE_SLACK: Final = 1 << 20
"""How far below ``ulimit -f`` a data file may end when a commit's write passed it."""


_PAGE_SIZES: Final = frozenset(1 << n for n in range(8, 17))
"""The page sizes LMDB may write: powers of two up to its MAX_PAGESIZE, 64 KiB."""
_PAGE_HEADER: Final = 16
_P_META: Final = 0x08
"""The flag of a meta page in an LMDB page header's ``mp_flags`` (at its byte 10)."""


_JOURNAL_FILES: Final = ("data.mdb", "lock.mdb", "writer.lock")


def linked_file(where: Path) -> str | None:
    """The name of a file of the journal at ``where`` that is a symbolic link, if one is.

    A path that cannot be reached (a name too long) has none: the caller's next use of
    it says what is wrong.
    """
    for name in _JOURNAL_FILES:
        try:
            if stat.S_ISLNK((where / name).lstat().st_mode):
                return name
        except OSError:
            continue
    return None


def data_file(where: Path, *, refuse_links: bool = True) -> Path | None:
    """The journal's data file at ``where``, or None when there is none.

    Refuses a journal whose files are symbolic links (unless ``refuse_links`` is false,
    for a caller that only copies the data file): LMDB opens its lock file to write,
    even to read, and writes its header into it, so a journal someone else made could
    point one at a file of whoever opens it (the data file and ``writer.lock`` alike).

    Raises:
        JournalFormatError: ``data.mdb`` is not a regular file (a FIFO would hang the
            open), nor ``lock.mdb`` where it exists (unless ``refuse_links`` is false), or
            one of the journal's files is a symbolic link.
        JournalUnavailableError: the path cannot be reached (permission denied on a
            directory on the way, a name too long).

    """
    linked = linked_file(where) if refuse_links else None
    if linked is not None:
        msg = f"{where} is refused: its {linked} is a symbolic link (LMDB would read or write through it)"
        raise JournalFormatError(msg)
    data = where / "data.mdb"
    try:
        mode = data.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise JournalUnavailableError(f"{where}: cannot reach its data file: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(mode):
        raise JournalFormatError(f"{where} is not a journal: its data.mdb is not a regular file")
    if refuse_links:  # LMDB opens the lock file as well (a copy's reader does not): a FIFO,
        # a directory or a device there fails with only "Illegal seek", "Is a directory"...
        with contextlib.suppress(OSError):
            if not stat.S_ISREG((where / "lock.mdb").lstat().st_mode):
                msg = f"{where} is refused: its lock.mdb is not a regular file (LMDB opens it as its lock)"
                raise JournalFormatError(msg)
    return data


def _short_by(where: Path, *, readonly: bool) -> tuple[int, int]:
    """The data file's length and how many bytes it lacks of what its header names.

    LMDB maps the file and trusts its meta pages (its first two pages): reading a page
    past the end of the file is a SIGBUS that kills the process, not an error. The
    newer meta page names the last page allocated, so how long the file may need to
    be. A shorter file is not always damaged: pages allocated and freed within one
    transaction are never written, and sit in the free list. A file without a header
    page of LMDB's is refused before LMDB opens it, and so writes no lock file beside it.

    Raises:
        JournalFormatError: ``readonly`` and the data file is empty; or no page of it
            where a header page can be holds LMDB's magic number.
        JournalDamagedError: a header page holds a transaction LMDB writes to the other
            one (its readers would read other trees); the header names an impossible
            page size or length, or the file is too short to hold both meta pages
            (nothing is padded then).
        JournalUnavailableError: the data file cannot be read.

    """
    data = where / "data.mdb"
    try:
        with open_regular(data) as file:
            head = file.read(HEADER_SPAN)  # both meta pages, whatever the page size
            size = os.fstat(file.fileno()).st_size  # after the meta: the file only grows meanwhile
    except FileNotFoundError:
        return 0, 0  # a new journal
    except OSError as exc:
        raise JournalUnavailableError(f"{where}: cannot read its data file: {exc}") from exc
    if not head:
        if readonly:
            raise JournalFormatError(f"{where} is not a journal: its data file is empty")
        # a crash as LMDB created it, or a file emptied since: nothing is left to keep
        log.warning("%s: its data file is empty; a new journal is started in it", where)
    elif not any(_has_lmdb_magic(head, offset) for offset in (0, *_PAGE_SIZES)):
        # No header page with LMDB's magic at any page size: refused here, before LMDB
        # adds its lock file beside a file that is no journal (one damaged header, or
        # another LMDB data version, is named below or by LMDB)
        msg = f"{where} is not an LMDB journal this code can open: its data file holds no LMDB header"
        raise JournalFormatError(msg)
    if len(head) < _pages.META_END:
        return size, 0  # empty (LMDB writes a new header): a non-empty file this short was refused above
    first = _pages.meta_at(head, 0)
    page = first.page_size
    if first.magic != _pages.META_MAGIC or page < _pages.META_END:
        # The first header page is not LMDB's, so its page size is no guide: where the
        # second one is whole at a page size, the file is a journal whose first header is
        # damaged (named here, before LMDB refuses it as no LMDB file); else LMDB says.
        for second in sorted(_PAGE_SIZES):
            if _holds_lmdb_meta(head, second) and _is_second_meta(head, second):
                _check_headers_agree(head, second, where)
        return size, 0
    if page not in _PAGE_SIZES:
        raise JournalDamagedError(f"{where} is damaged: its header names a page size of {page} bytes")
    if not _is_second_meta(head, page):
        msg = f"{where} is damaged: LMDB's second header page, at byte {page:,}, is not one"
        raise JournalDamagedError(msg)
    _check_headers_agree(head, page, where)
    newest = _newest_header(head, page, where)
    needed: int = (newest.last_page + 1) * page
    if size < 2 * page or needed > max(size, newest.map_size, 2 * page):
        # A file without both meta pages, or one to pad past its map: padding would write
        # over a header LMDB needs, or grow the file without bound. (LMDB itself takes
        # the map size as advisory, so a file that holds its pages is left to it.)
        msg = (
            f"{where} is damaged: its data file is {size:,} bytes and its header names "
            f"{needed:,} bytes in a map of {newest.map_size:,}"
        )
        raise JournalDamagedError(msg)
    return size, max(0, needed - size)


def used_length(data: BinaryIO) -> int | None:
    """How many bytes of an LMDB data file its newest header page names as used; None if it cannot tell.

    LMDB reads the newer of its two meta pages (the higher transaction id) and no page
    past the last one it names: a copy of the file up to there opens as the whole does.
    A file holes make long (``truncate -s``) is not copied whole, then.
    """
    head = data.read(HEADER_SPAN)
    if len(head) < _pages.META_END:
        return None
    first = _pages.meta_at(head, 0)
    page = first.page_size
    if first.magic != _pages.META_MAGIC or page not in _PAGE_SIZES or len(head) < page + _pages.META_END:
        return None
    second = _pages.meta_at(head, page)
    newest = second if second.magic == _pages.META_MAGIC and second.txnid > first.txnid else first
    return (newest.last_page + 1) * page


HEADER_SPAN: Final = 2 * 65536
"""Both meta pages of an LMDB data file, whatever its page size: all a header check reads."""


def _os_reason(exc: OSError, where: Path) -> str:
    """``exc`` as a message's reason: its ``strerror``, and the path it names if not ``where`` itself.

    ``str(exc)`` would repeat the path a message names already (``[Errno 2] No such file
    or directory: '/x/j'``); a parent that is missing (``mkdir(parents=True)``) is named.
    """
    if not exc.strerror:
        return str(exc)
    named = exc.filename
    if named is None or os.fsdecode(named) == str(where):
        return exc.strerror
    return f"{exc.strerror}: {os.fsdecode(named)}"


def open_regular(path: Path) -> BinaryIO:
    """Open ``path`` to read, refusing what is not a regular file without blocking on it.

    ``O_NONBLOCK``: a FIFO put where a data file was checked would hang a plain open.

    Raises:
        JournalFormatError: ``path`` is not a regular file.
        OSError: as the open raises it.

    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise JournalFormatError(f"{path.parent} is not a journal: its {path.name} is not a regular file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _headers_whole(where: Path) -> bool:
    """Whether both header pages of ``where``'s data file hold LMDB's magic number and data version.

    Then LMDB's ``MDB_INVALID`` is of a damaged journal, not of a file that is none.
    """
    try:
        with open_regular(where / "data.mdb") as file:
            head = file.read(HEADER_SPAN)
    except OSError:
        return False
    # the first page's page size may be the damaged field: look for the second at each size
    return _holds_lmdb_meta(head, 0) and any(
        _holds_lmdb_meta(head, page) and _is_second_meta(head, page) for page in _PAGE_SIZES
    )


_LMDB_DATA_VERSION: Final = 1
"""The data format version LMDB 0.9 writes in its header pages (``MDB_DATA_VERSION``)."""


def _holds_lmdb_meta(head: bytes, offset: int) -> bool:
    """Whether ``head`` holds at ``offset`` a meta record with LMDB's magic number and data version."""
    if len(head) < offset + _pages.META_END:
        return False
    meta = _pages.meta_at(head, offset)
    return (meta.magic, meta.version) == (_pages.META_MAGIC, _LMDB_DATA_VERSION)


def _has_lmdb_magic(head: bytes, offset: int) -> bool:
    """Whether ``head`` holds at ``offset`` a meta record with LMDB's magic number (any data version)."""
    return len(head) >= offset + _pages.META_END and _pages.meta_at(head, offset).magic == _pages.META_MAGIC


def _check_headers_agree(head: bytes, page: int, where: Path) -> None:
    """Refuse a file one of whose two header pages holds LMDB's magic and version and the other not.

    LMDB refuses such a file as not its own (``MDB_INVALID``) or of another version
    (``MDB_VERSION_MISMATCH``), which would read as a path that is no journal: with
    the other header whole, it is a damaged journal. (Both of another version is a
    file of another LMDB: LMDB's own refusal stands.)

    Raises:
        JournalDamagedError: the header page that disagrees.

    """
    if len(head) < page + _pages.META_END:
        return  # too short to hold both: the length check refuses it
    bad = [number for number in (0, 1) if not _holds_lmdb_meta(head, number * page)]
    if len(bad) == 1:
        number = bad[0]
        meta = _pages.meta_at(head, number * page)
        msg = (
            f"{where} is damaged: LMDB's header page {number} (at byte {number * page:,}) holds the "
            f"magic number {meta.magic:#x} and data version {meta.version}, the other header page "
            f"LMDB's {_pages.META_MAGIC:#x} and {_LMDB_DATA_VERSION}"
        )
        raise JournalDamagedError(msg)


def _newest_header(head: bytes, page: int, where: Path) -> _pages.Meta:
    """The newer of the meta records in ``head`` (the first one's magic matched).

    Raises:
        JournalDamagedError: a meta page holds a transaction LMDB writes to the other one:
            its readers would read another record than its writer.

    """
    newest = _pages.meta_at(head, 0)
    for number, offset in enumerate((0, page)):
        if len(head) >= offset + _pages.META_END:
            meta = _pages.meta_at(head, offset)
            problem = _pages.misplaced(meta, number)
            if problem is not None:
                raise JournalDamagedError(f"{where} is damaged: {problem}")
            if meta.magic == _pages.META_MAGIC and meta.txnid > newest.txnid:
                newest = meta
    return newest


_LOCK_FILE_ROOM: Final = 64 << 10
"""More than LMDB's lock file takes with this journal's 254 reader slots (about 16 KiB)."""


def _check_room_for_locks(where: Path) -> None:
    """Refuse to open where LMDB could not write its lock file, rather than die there.

    LMDB writes its lock file through a memory map: on a file system with no free
    block, its first write to a page of the file not yet on disk kills the process
    (SIGBUS), in a read-only open too. A lock file used before has its first page on
    disk, which holds the header and the first 62 reader slots: that one is opened.

    Raises:
        JournalUnavailableError: the file system has less than ``_LOCK_FILE_ROOM`` free.

    """
    try:
        free = os.statvfs(where)
    except OSError:
        return  # LMDB says what is wrong with the directory
    if free.f_flag & os.ST_RDONLY or free.f_bavail * free.f_frsize >= _LOCK_FILE_ROOM:
        return  # read-only media report no room, and LMDB opens them without a lock file
    try:
        lock = (where / "lock.mdb").stat()
    except OSError:
        lock = None
    if lock is not None and lock.st_blocks * 512 >= min(lock.st_size, 4096) > 0:
        return
    msg = f"{where}: no space left on its file system for LMDB's lock file; free some, then open it again"
    raise JournalUnavailableError(msg)


def _is_second_meta(head: bytes, page: int) -> bool:
    """Whether LMDB's second meta page starts at ``page`` (page number 1, the meta flag).

    Where the file is too short to tell, the length check refuses it anyway.
    """
    if len(head) < page + _PAGE_HEADER:
        return True
    return int.from_bytes(head[page : page + 8], "little") == 1 and bool(head[page + 10] & _P_META)


def _check_length(where: Path, *, readonly: bool) -> tuple[int, int]:
    """Make sure LMDB never maps a page past the end of the data file; return (length, bytes short).

    Writing, a short file is padded with zero pages up to the length its header names
    (under the writer lock; LMDB would write those pages itself), and (length, 0) is
    returned: pages that are free are never read, and a page in use that a truncation
    cut off then reads as an empty page, which LMDB reports as damage
    (``JournalDamagedError``) or, on some pages, aborts the process on (an assertion):
    no worse than reading past the file's end. Reading, the file is never changed: a
    short one is healthy only if every page past its end is free (allocated and freed
    in one transaction, never written, as LMDB leaves them), which only a walk of its
    pages tells, so the caller walks them (``_walk_pages``) before LMDB reads one.

    Raises:
        JournalUnavailableError: the file cannot be padded.

    """
    size, missing = _short_by(where, readonly=readonly)
    if not missing or readonly:
        return size, missing
    log.warning("%s: the data file is %d bytes short of what its header names; padding it", where, missing)
    try:
        os.truncate(where / "data.mdb", size + missing)
    except OSError as exc:
        raise JournalUnavailableError(f"{where}: cannot pad its short data file: {exc}") from exc
    return size + missing, 0


def _free_stale_slots(env: lmdb.Environment, where: Path, *, readonly: bool) -> None:
    """Free the reader slots of killed processes (``reader_check``), as an open does first.

    A reader killed inside a read transaction keeps its slot while any process has the
    journal open; once they fill the table (``_MAX_READERS``), every read transaction
    fails, a writer's open too. A read-only open does not fail for want of this (on a
    read-only file system LMDB keeps no reader table): only its reads could.
    """
    if readonly:
        with contextlib.suppress(lmdb.Error):
            env.reader_check()
        return
    with _translated(where):
        env.reader_check()


def _walk_pages(env: lmdb.Environment, where: Path, short: tuple[int, int] = (0, 0)) -> None:
    """Check every B-tree page of the file before LMDB reads one (``store/_pages.py``).

    ``short`` is the file's length and how many bytes it lacks of what its header names
    (``_check_length``, read-only): the walk then also proves that every page past its
    end is free, or names the file as truncated.

    Raises:
        JournalDamagedError: a page LMDB would misread or crash on.
        JournalUnavailableError: the data file cannot be read.

    """
    size, missing = short
    try:
        _walk_pages_once(env, where)
    except JournalDamagedError as exc:
        if not missing:
            raise
        found = str(exc).removeprefix(f"{where} is damaged: ")  # named once, not twice
        msg = (
            f"{where} is damaged: its data file is {size:,} bytes, {missing:,} short of what its "
            f"header names, and not only free pages lie past its end (it was truncated): {found}"
        )
        raise JournalDamagedError(msg, first_seq=exc.first_seq) from exc


def _walk_pages_once(env: lmdb.Environment, where: Path) -> None:
    try:
        with _translated(where):
            try:
                txn = env.begin()  # pins the pages walked (see store/_pages.py)
            except lmdb.MapResizedError:  # a writer grew the map meanwhile: adopt its size, once
                env.set_mapsize(0)
                txn = env.begin()
            with txn:
                _pages.check_pages(where, int(env.stat()["psize"]))
    except OSError as exc:
        raise JournalUnavailableError(f"{where}: cannot read its data file: {exc}") from exc


def _call(blocking: Callable[..., object], *args: object) -> object:
    """A wait made as it is (``close()``'s own; the runtime passes one a Ctrl-C stops)."""
    return blocking(*args)


class LmdbJournal(Journal):
    """The journal on an embedded LMDB environment (a directory of two files).

    One process writes (a lock file enforces it; a forked child lets go of its copy
    of the lock as it starts, so the lock is the parent's alone); any number of
    processes read, also while the writer appends, each seeing a consistent snapshot. The object itself is
    thread-safe: every write transaction begins and ends inside one ``append`` call,
    on the calling thread, as LMDB requires (PITFALLS.md §1.6).
    """

    def __init__(
        self,
        env: lmdb.Environment,
        path: Path,
        *,
        readonly: bool,
        max_map_size: int | None,
        key: bytes,
        writer_lock: _WriterLock | None,
        codec: EventCodec,
    ) -> None:
        """Use ``LmdbJournal.open`` or ``Journal.open``; this wraps an opened environment."""
        self._env = env
        self._path = path
        self._readonly = readonly
        self._max_map_size = max_map_size
        self._key = key
        self._codec = codec
        self._writer_lock = writer_lock
        self._unclosed: weakref.finalize[..., Any] | None = None
        """Lets go of the writer lock of a journal collected unclosed; detached by a close."""
        self._hasher = hashlib.blake2b(digest_size=16, key=key)
        """An empty keyed hash: copied per record, cheaper than a new one (bench/journal_append.py)."""
        self._record_decoder = _record_decoder(codec)
        self._lock = threading.Lock()
        self._closed = False
        self._released = False
        """Closed and let go of its environment and writer lock (``_close``): ``_closed`` comes first."""
        self._backups = 0
        """Backups copying from the environment now: ``close()`` waits for them (``_backups_done``)."""
        self._backups_done = threading.Condition(self._lock)
        self._pid = os.getpid()  # LMDB's environment must not be used by a forked child
        self._real_path = os.path.realpath(path)  # now: a forked child may change directory
        _OPEN_JOURNALS.add(self)
        self._failed: BaseException | None = None
        self._readers_checked = time.monotonic()  # open cleared them
        self._db_events = env.open_db(_DB_EVENTS, create=False)
        self._db_heads = env.open_db(_DB_HEADS, create=False)
        self._db_anchors = env.open_db(_DB_ANCHORS, create=False)
        self._db_ids = env.open_db(_DB_IDS, create=False)
        self._db_snapshots = env.open_db(_DB_SNAPSHOTS, create=False)
        self._db_meta = env.open_db(_DB_META, create=False)
        self._head_seq, self._head_chain = self._stored_tail()
        self._disagreement = None if readonly else self._head_disagreement()
        """Why appends are refused: the stored chain head and the records disagree (or None)."""
        self._heads: dict[str, list[Any]] = {}
        """stream -> its entry of ``heads`` and more (see ``_load_head``): the writer's cache."""
        if writer_lock is not None:  # let go of when closed, or when collected unclosed
            # not at exit: a runtime left open is closed then, and must still hold the lock
            self._unclosed = weakref.finalize(self, writer_lock.release)
            self._unclosed.atexit = False

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        path: str | PathLike[str],
        *,
        readonly: bool = False,
        sync: bool = True,
        map_size: int | None = None,
        max_map_size: int | None = None,
        key: bytes | str | None = None,
        codec: EventCodec | None = None,
        check_pages: bool = True,
    ) -> LmdbJournal:
        """Open the journal in directory ``path``, creating it unless ``readonly``.

        Args:
            path: the journal's directory; created with mode 0700, its files 0600 (parent
                directories it has to create as well follow the umask, as ``mkdir -p``'s).
            readonly: open for reading only. The data file is never changed (LMDB
                still writes its lock file, so the directory must be writable; audit
                a copy otherwise). Works while another process appends. A lock file it
                creates in another user's journal is given to that user (as root; any
                other user is refused, rather than lock the journal's owner out). On a
                read-only file system, where LMDB keeps no record of its readers, it is
                refused while a writer holds ``writer.lock`` (a read-only mount of a live
                journal), or when that file cannot be read (so that cannot be told), and
                holds writers off until closed.
            sync: ``True`` syncs every commit to disk before ``append`` returns.
                ``False`` leaves syncing to the OS: a process crash loses nothing,
                but a power cut or OS crash can lose the last commits (and, on file
                systems that reorder writes, damage the file); for simulations that
                accept that. ``close()`` still syncs.
            map_size: the initial LMDB map size in bytes (default 1 GiB, sparse, or
                ``max_map_size`` if that is less).
            max_map_size: when the map fills, it is doubled and the append retried,
                invisibly, up to this size (so is the creation of a new journal in a
                map too small for it); past it appends raise ``JournalFullError``.
                None means no limit but the disk.
            key: makes the hash chain keyed (BLAKE2b MAC); a journal written with a
                key must be opened with the same key. Give each journal its own: a
                snapshot's keyed hash names its stream and seq, not its journal.
            codec: the event codec (default: every event type of cogfabric.events).
            check_pages: walk every B-tree page of the file before LMDB reads one
                (``store/_pages.py``), so that a damaged page raises
                ``JournalDamagedError``: LMDB has no checksums and aborts the process on
                some damaged pages. It reads the whole file: 0.47 s for a million records
                on the first development VM, 0.8 to 1.5 s on a slower one
                (``bench/fabric.py``; docs/performance.md).
                ``False`` skips it, for a file you trust
                (one this process has just checked, on a disk you trust).

        Raises:
            JournalNotFoundError: ``readonly`` and there is no journal at ``path`` (nor
                anything committed to an LMDB file there: a creation that failed leaves
                such a file, and opening it for writing creates the journal).
            JournalFormatError: not a cogfabric journal (a file in its place, too), or of
                another format, newer or older (the file is left as it was).
            JournalHeaderError: its header names a hash other than this format's (also a
                ``JournalIntegrityError``: the header was changed).
            JournalKeyError: the key differs from the one the journal was written with.
            JournalLockedError: another writer holds the journal (named by the pid a
                writer keeps in ``writer.lock`` while it holds it), or this process has
                it open already (LMDB allows one open of a file per process: share
                the open journal instead), or inherited it open from the parent that
                forked it (the message says how to open it instead), or, ``readonly`` on
                a read-only file system, a writer holds it (or, for writing, a reader
                holds it from one).
            JournalUnavailableError: the directory cannot be created or written to, its
                lock file (lock.mdb, which LMDB writes even to read) is not writable (or,
                ``readonly``, would be created for another user than the owner of its
                data file), its
                file system has no room left for LMDB's lock file (LMDB would die of
                SIGBUS), the map size is more than the process can map, its lock file's
                reader table is full (254 reads at once, or readers killed inside one that
                no process that has the journal open has freed yet: try again), a process
                with this one's pid in another PID namespace (a container's) has it open
                (LMDB tells readers apart by pid; or one on another machine, through a
                network file system), or the storage failed (an I/O error names the file
                system's free space).
            JournalFullError: ``max_map_size`` is too small to create a new journal in.
            JournalDamagedError: ``readonly`` and the data file is shorter than its header
                names, past pages in use (truncated; a file short only by pages LMDB freed
                before writing them is healthy, and its pages are walked to prove it, even
                with ``check_pages=False``); or a page of the file is damaged where LMDB
                could crash on it: every B-tree page is checked before LMDB reads one
                (``store/_pages.py``).
            TypeError: ``key`` is not bytes or str; a map size is not an int; ``readonly``,
                ``sync`` or ``check_pages`` is not a bool.
            ValueError: ``path`` is empty; ``key`` is empty or too long; a map size is
                not 1 to 2**63 - 1 bytes, or ``map_size`` is larger than ``max_map_size``.

        """
        _check_open_arguments(path, map_size, max_map_size)
        _require_bools(readonly=readonly, sync=sync, check_pages=check_pages)
        where = Path(path)
        raw_key = _normalise_key(key)
        size = map_size or _DEFAULT_MAP_SIZE
        if max_map_size is not None and max_map_size < size:
            size = max_map_size
        writer_lock: _WriterLock | None = None
        if readonly:
            writer_lock = _prepare_to_read(where)  # a reader's shared lock, on read-only media only
        else:
            cls._make_directory(where)
            data_file(where)  # a data.mdb that is no regular file is refused before anything opens it
            writer_lock = cls._take_writer_lock(where)
            for name in ("data.mdb", "lock.mdb"):  # else LMDB says only that it is read-only
                if (where / name).exists() and not os.access(where / name, os.W_OK):
                    writer_lock.release()
                    how = (
                        "to read it, open it readonly, or run an audit command: cogfabric verify, "
                        "replay, inspect"
                        if _lock_file_writable(where)
                        # LMDB writes its lock file even to read: a read-only open fails as well
                        else "LMDB writes lock.mdb even to read: to read the journal, audit a private "
                        "copy, cogfabric verify --copy (replay, inspect, export, trace take --copy too)"
                    )
                    msg = f"cannot open {where} for writing: its {name} is not writable ({how})"
                    taken = _lock_file_taken(where) if name == "lock.mdb" else None
                    if taken is not None:
                        msg = (
                            f"cannot open {where} for writing: its lock.mdb belongs to uid {taken}, not "
                            "to you who own its data.mdb (a reader running as that user created it); once "
                            "no process has the journal open, remove lock.mdb (LMDB makes it anew)"
                        )
                    raise JournalUnavailableError(msg)
        try:
            cls._refuse_before_padding(where, raw_key, size, readonly=readonly)
            short = _check_length(where, readonly=readonly)
            _check_room_for_locks(where)
            with _inherited_by_fork(where), _translated(where):
                env = _open_env(
                    where,  # any name the file system holds, UTF-8 or not
                    map_size=size,
                    subdir=True,
                    readonly=readonly,
                    create=not readonly,
                    sync=sync,
                    mode=0o600,
                    max_dbs=8,
                    max_readers=_MAX_READERS,
                    readahead=False,
                )
            try:
                # Before the page walk's read transaction: slots of killed readers pin
                # pages (PITFALLS §1.5), and once they fill the table no process can read.
                _free_stale_slots(env, where, readonly=readonly)
                if check_pages or short[1]:  # a short file is read only once its pages are proven free
                    _walk_pages(env, where, short)
                with _translated(where):
                    if readonly:
                        cls._check_existing(env, where, raw_key)
                    else:
                        cls._init_growing(env, where, raw_key, max_map_size)
                    return cls(
                        env,
                        where,
                        readonly=readonly,
                        max_map_size=max_map_size,
                        key=raw_key,
                        writer_lock=writer_lock,
                        codec=codec or DEFAULT_CODEC,
                    )
            except BaseException:
                env.close()
                raise
        except BaseException:
            if writer_lock is not None:
                writer_lock.release()
            raise

    @classmethod
    def _refuse_before_padding(cls, where: Path, key: bytes, size: int, *, readonly: bool) -> None:
        """Refuse a journal of another format, header or key before padding its short file.

        A writable open pads a data file shorter than its header names
        (``_check_length``); a journal that is then refused must be left as it was. So a
        short file is first opened read-only (its pages walked, as a read-only open
        walks them) and its header, where it has one, checked as the writable open would.
        A file the walk finds truncated (live pages past its end) is refused here too:
        padded, it would only be refused by the writable open's walk, for zeroed pages,
        with the evidence of the cut gone. Anything else (one without a header, which
        the writable open may take over) is left to the writable open, as before.

        Raises:
            JournalFormatError, JournalHeaderError, JournalKeyError: as ``open``; the
                file is unchanged.
            JournalDamagedError: the file was truncated (it is unchanged).

        """
        if readonly:
            return  # nothing is padded
        try:
            if not (where / "data.mdb").stat().st_size:
                return  # a new journal (or an emptied file): nothing to pad
            _, missing = _short_by(where, readonly=True)
        except (OSError, JournalError):
            return  # the writable open says what is wrong, as before
        if not missing:
            return
        _check_room_for_locks(where)
        with _inherited_by_fork(where), _translated(where):
            env = _open_env(
                where,
                map_size=size,
                subdir=True,
                readonly=True,
                mode=0o600,  # LMDB creates its lock file even to read: owner-only, as the open's
                max_dbs=8,
                max_readers=_MAX_READERS,
                readahead=False,
            )
        try:
            _free_stale_slots(env, where, readonly=True)
            _walk_pages(env, where, _short_by(where, readonly=True))  # truncated: refused as it is
            try:
                with _translated(where):
                    meta = cls._stored_meta(env)
            except JournalError:
                return  # a header LMDB cannot read as one: the writable open says so, as before
            if meta:
                cls._check_meta(meta, where, key)
        finally:
            env.close()

    @staticmethod
    def _stored_meta(env: lmdb.Environment) -> dict[bytes, bytes]:
        """The header's records, read-only; empty when the file has no header database."""
        with env.begin() as txn:
            if txn.get(_DB_META) is None:
                return {}
        meta_db = env.open_db(_DB_META, create=False)
        with env.begin(db=meta_db) as txn:
            return {bytes(k): bytes(v) for k, v in txn.cursor().iternext()}

    @staticmethod
    def _make_directory(where: Path) -> None:
        """Create the journal's directory (0700) unless it exists; refuse a file in its place."""
        try:
            where.mkdir(mode=0o700, parents=True, exist_ok=True)
        except FileExistsError as exc:  # exist_ok covers directories only
            msg = f"{where} is not a journal: a journal is a directory, and a file is in its place"
            raise JournalFormatError(msg) from exc
        except OSError as exc:
            raise JournalUnavailableError(
                f"cannot create the journal directory {where}: {_os_reason(exc, where)}"
            ) from exc

    @staticmethod
    def _take_writer_lock(where: Path) -> _WriterLock:
        try:
            fd = os.open(where / "writer.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:  # a directory this process may not write to
            raise JournalUnavailableError(
                f"cannot open {where} for writing: {_os_reason(exc, where)}"
            ) from exc
        lock = _WriterLock(fd)  # known at once: a fork from here on leaves the child no copy
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            mine = _held_here(fd)
            holder = _holder_of(fd)
            lock.release()
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                readers = False if mine else _only_readers_hold(where)
                if readers is None:  # a holder /proc/locks does not show (a container's, say): see
                    readers = _shared_lock_free(where)
                if readers:
                    msg = (
                        f"{where} is being read from a read-only file system (a read-only mount of "
                        "it), where LMDB keeps no record of its readers, so its reader holds writers "
                        "off: open it for writing once that reader has closed it"
                    )
                    raise JournalLockedError(msg) from exc
                if mine:
                    msg = (
                        f"{where} is already open for writing in this process (a journal has one "
                        "writer: use the Runtime or Journal that holds it, or close it first)"
                    )
                    raise JournalLockedError(msg) from exc
                raise JournalLockedError(f"{where} is held by another writer{holder}") from exc
            raise JournalUnavailableError(f"cannot lock {where}: {exc}") from exc
        lock.locked = True
        with contextlib.suppress(OSError):  # a full disk: the lock holds all the same
            os.ftruncate(fd, 0)
            os.pwrite(fd, b"%d\n" % os.getpid(), 0)
        return lock

    @staticmethod
    def _check_meta(meta: dict[bytes, bytes], where: Path, key: bytes) -> None:
        fmt = meta.get(_META_FORMAT)
        if fmt is None:
            raise JournalFormatError(f"{where} is not a cogfabric journal")
        if len(fmt) != _FORMAT_LEN:  # every format wrote 4 bytes: b"5" is no version 53
            shown = bytes(fmt).hex() or "empty"
            msg = f"{where} holds a format of {len(fmt)} bytes ({shown}), not 4: header changed"
            raise JournalHeaderError(msg)
        version = int.from_bytes(fmt, "big")
        if version > FORMAT_VERSION:
            msg = (
                f"{where} is at format version {version}, newer than this code's {FORMAT_VERSION}: "
                "read it with the newer cogfabric that wrote it (upgrade this one)"
            )
            raise JournalFormatError(msg, stored=version, known=FORMAT_VERSION)
        if version < FORMAT_VERSION:
            msg = (
                f"{where} is at format version {version}, older than this code's {FORMAT_VERSION} "
                "(a development format); read it with the version that wrote it"
            )
            raise JournalFormatError(msg, stored=version, known=FORMAT_VERSION)
        hash_name = meta.get(_META_HASH, b"").decode(errors="replace")
        if hash_name != HASH_NAME:
            # The chain does not cover the header; a label that lies is refused here instead.
            msg = f"{where} names its hash {hash_name!r}, not this format's {HASH_NAME!r}: header changed"
            raise JournalHeaderError(msg)
        stored_check = meta.get(_META_KEYCHECK, b"")
        if stored_check != _key_check(key):
            if not stored_check:
                msg = f"{where} was written without a chain key, but a key was given"
            elif not key:
                msg = f"{where} was written with a chain key; open it with that key"
            else:
                msg = f"{where} was written with a different chain key"
            raise JournalKeyError(msg)

    @classmethod
    def _check_existing(cls, env: lmdb.Environment, where: Path, key: bytes) -> None:
        try:
            cls._check_existing_once(env, where, key)
        except lmdb.MapResizedError:  # a writer grew the map meanwhile: adopt its size, once
            env.set_mapsize(0)
            cls._check_existing_once(env, where, key)

    @classmethod
    def _check_existing_once(cls, env: lmdb.Environment, where: Path, key: bytes) -> None:
        with env.begin() as txn:
            if txn.get(_DB_META) is None:
                if not int(env.info()["last_txnid"]) and not env.stat()["entries"]:
                    # What a creation that failed leaves (a map too small for the journal's
                    # databases, say): opening it for writing creates the journal there.
                    msg = f"no journal at {where}: nothing was ever committed to its LMDB file"
                    raise JournalNotFoundError(msg)
                raise JournalFormatError(f"{where} is not a cogfabric journal")
        meta_db = env.open_db(_DB_META, create=False)
        _check_flags(env, meta_db, _DB_META, where)  # duplicates would keep an old head beside the new
        with env.begin(db=meta_db) as txn:
            cls._check_meta(dict(txn.cursor().iternext()), where, key)
        for name in _DATA_DBS:
            _check_flags(env, _existing_db(env, name, where), name, where)

    @classmethod
    def _init_growing(cls, env: lmdb.Environment, where: Path, key: bytes, limit: int | None) -> None:
        """``_init_or_check``, growing the map as an append does when it is too small to create.

        Raises:
            JournalFullError: even ``limit`` bytes cannot hold a new journal's databases.

        """
        while True:
            try:
                cls._init_or_check(env, where, key)
            except lmdb.MapFullError as exc:
                size = _grown_size(int(env.info()["map_size"]), limit)
                if size is None:
                    msg = f"{where}: max_map_size ({limit} bytes) cannot hold a new journal"
                    raise JournalFullError(msg) from exc
                env.set_mapsize(size)
            else:
                return

    @classmethod
    def _init_or_check(cls, env: lmdb.Environment, where: Path, key: bytes) -> None:
        with env.begin() as txn:
            is_new = txn.get(_DB_META) is None
        if is_new:
            cls._create(env, where, key)
            return
        meta_db = env.open_db(_DB_META, create=False)
        _check_flags(env, meta_db, _DB_META, where)
        with env.begin(db=meta_db) as txn:  # check before creating anything
            meta = dict(txn.cursor().iternext())
        if not meta:  # a header never written: the journal is as new, or not a journal
            cls._create(env, where, key)
            return
        cls._check_meta(meta, where, key)
        for name in _DATA_DBS:  # never re-created empty: that would hide what was removed
            _check_flags(env, _existing_db(env, name, where), name, where)

    @classmethod
    def _create(cls, env: lmdb.Environment, where: Path, key: bytes) -> None:
        """Create every database and the header in one write transaction.

        One transaction, so a crash leaves either no journal or a whole one. Databases
        it finds empty and named as the journal's (left by a version that created them
        one by one, and a crash before its header) are taken over; anything else
        is refused, untouched.
        """
        with env.begin() as txn:
            found = [bytes(name) for name, _ in txn.cursor()]
        if any(name not in (*_DATA_DBS, _DB_META) for name in found) or any(
            _entries(env, name) for name in found
        ):
            raise JournalFormatError(f"{where} holds an LMDB database that is not a cogfabric journal")
        commits = int(env.info()["last_txnid"])
        if commits > len(_DATA_DBS) + 1:  # more than creating the databases one by one took
            # A journal whose header database was cut off its file's main database (the
            # page walk names such damage; check_pages=False skips it): creating a new
            # journal over it would orphan every record.
            msg = f"{where} holds {commits} commits but no journal header: it is damaged, or not a journal"
            raise JournalFormatError(msg)
        with env.begin(write=True) as txn:
            for name in _DATA_DBS:
                _check_flags_in(txn, env.open_db(name, txn=txn, create=True), name, where)
            meta_db = env.open_db(_DB_META, txn=txn, create=True)
            txn.put(_META_FORMAT, FORMAT_VERSION.to_bytes(_FORMAT_LEN, "big"), db=meta_db)
            txn.put(_META_ENGINE, ".".join(map(str, lmdb.version())).encode(), db=meta_db)
            txn.put(_META_HASH, HASH_NAME.encode(), db=meta_db)
            txn.put(_META_KEYCHECK, _key_check(key), db=meta_db)
            txn.put(_META_HEAD, head_value(_seq_key(0), _ZERO_CHAIN, key), db=meta_db)

    def _stored_tail(self) -> tuple[int, bytes]:
        """The last stored record's seq and chain: where the next append links on."""
        with self._env.begin(db=self._db_events) as txn:
            cursor = txn.cursor()
            if not cursor.last():
                return 0, _ZERO_CHAIN
            return last_seq_of(cursor.key(), self._path), bytes(cursor.value()[-CHAIN_LEN:])

    def _head_disagreement(self) -> str | None:
        """Why the stored chain head does not name the last record, or None when it does.

        One commit writes both, so they disagree only when the file was changed outside
        the journal: records cut off the end (a rolled-back journal), or a head moved.
        The next append would overwrite the head, the only evidence of it.
        """
        with self._env.begin(db=self._db_meta) as txn:
            stored = txn.get(_META_HEAD)
        expected = head_value(_seq_key(self._head_seq), self._head_chain, self._key)
        if stored is not None and bytes(stored) == expected:
            return None
        if stored is None or len(stored) != HEAD_LEN:
            return "its chain head is missing or malformed"
        named = int.from_bytes(stored[:8], "big")
        if named != self._head_seq:
            return f"its chain head names seq {named}, but its records end at seq {self._head_seq}"
        if stored[:-CHAIN_LEN] == expected[:-CHAIN_LEN]:
            return "its chain head's tag does not match it: the head was set without the journal's key"
        return f"its chain head does not match the chain link of its last record, seq {named}"

    # ------------------------------------------------------------------ properties

    @property
    def path(self) -> Path:
        """The journal's directory."""
        return self._path

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    @property
    def readonly(self) -> bool:
        """Whether the journal was opened read-only."""
        return self._readonly

    @property
    def last_seq(self) -> int:
        """The seq of the newest record (read from disk when read-only)."""
        self._check_open()
        if self._readonly:
            with self._lock, _translated(self._path):
                return self._txn_call(lambda: self._stored_tail()[0])
        return self._head_seq

    @property
    def is_failed(self) -> bool:
        """Whether appends are refused until the journal is reopened.

        An append failed (fail-stop), or the journal's chain head contradicts its
        records, or a stream's head names no record of it (``check_appendable`` says why).
        """
        return self._failed is not None or self._disagreement is not None

    @property
    def map_size(self) -> int:
        """The current LMDB map size in bytes."""
        self._check_open()
        with self._lock, _translated(self._path):
            return self._txn_call(lambda: int(self._env.info()["map_size"]))

    def _check_open(self) -> None:
        if self._closed:
            raise JournalClosedError(f"{self._path} is closed")
        if os.getpid() != self._pid:
            msg = f"{self._path} was opened by process {self._pid}; LMDB forbids using it in a forked child: "
            raise JournalUnavailableError(msg + _FORK_ADVICE)

    # ------------------------------------------------------------------ writing

    def append(
        self, events: Iterable[Event], *, snapshots: Sequence[Snapshot] = (), validate: bool = True
    ) -> list[int]:
        """Append ``events`` in one write transaction; return their seqs.

        All or nothing: on any error nothing of the batch is stored. Encoding happens
        before the transaction, so an unencodable event fails the call with
        ``UnencodableValueError`` and leaves the journal usable; so does an event this
        journal's codec could not read back (of an unknown type, or not at its type's
        current version ``v``) and, with ``validate`` (the default), one whose fields
        do not decode as declared: msgspec checks field types when it decodes, not when
        an event is built, so ``PrivateSet(key=5)`` would be stored and then refused by
        every replay. The check decodes each event once. ``validate=False`` skips it,
        for events built from values checked already: the runtime's journal writer
        passes it, as the runtime checks every value at its boundary.

        Raises:
            JournalClosedError: after ``close()``.
            JournalReadOnlyError: the journal is read-only.
            JournalIntegrityError: the stored chain head and the last record disagreed when
                the journal was opened (records cut off, or the head changed), or a
                stream's head names no record of that stream: appending would build on
                the damage, or overwrite the evidence ``verify()`` names (fail-stop). Also
                when the last seq leaves no room for the batch below 2**64 (a record moved
                there by hand; nothing is written, and the journal is not fail-stop).
            InvalidStreamError: an event's stream is empty, has NUL or is longer than
                ``MAX_NAME`` (255) UTF-8 bytes; or its id is empty or longer than that (an id
                is an opaque key: it may hold NUL).
            JournalConflictError: an event's id is stored, or given twice in the batch, with
                other content (a retry of the same event is acknowledged with its seq).
            UnencodableValueError: an event holds a value msgspec cannot encode.
            InvalidEventError: with ``validate``, an event's field does not decode as its
                declared type or bounds, or its ``at`` is NaN or infinite (also a
                ``TypeError`` and a ``ValueError``).
            TypeError: an item is not an ``Event``, or not of the codec's class for its tag;
                a snapshot is not a ``Snapshot`` of an int seq and bytes data.
            ValueError: a snapshot's seq is outside 1 to the new last seq.
            UnknownEventTypeError: an event's type tag is not one of the codec's.
            EventVersionError: an event's ``v`` is not its type's current version.
            JournalFullError: the map cannot grow past ``max_map_size`` (fail-stop: every
                later append raises ``JournalStillFullError``, both a ``JournalFullError``
                and a ``JournalFailedError``).
            JournalUnavailableError: the storage failed (fail-stop): a full disk, the
                data file at ``ulimit -f``, or a map that cannot grow within ``ulimit -v``
                (the message names the free space, or the limit).
            JournalDamagedError: LMDB met a damaged page of the data file (fail-stop; the
                same error a read gets there).
            JournalFailedError: an earlier append failed; reopen the journal.

        """
        self._check_open()
        if self._readonly:
            raise JournalReadOnlyError(f"{self._path} is open read-only")
        batch = events if isinstance(events, list) else list(events)
        payloads = self._codec.encode_many(batch, validate=validate)
        with self._lock:
            self._check_appendable_locked()  # an empty append too: it says what a real one would
            if not batch and not snapshots:
                return []
            return self._append_locked(batch, payloads, snapshots)

    def check_appendable(self) -> None:
        """Raise what an append would raise before writing anything; return if it would write.

        Raises:
            JournalClosedError, JournalReadOnlyError, JournalIntegrityError,
            JournalFailedError: as ``append``.

        """
        self._check_open()
        if self._readonly:
            raise JournalReadOnlyError(f"{self._path} is open read-only")
        with self._lock:
            self._check_appendable_locked()

    def _check_appendable_locked(self) -> None:
        if self._closed:
            raise JournalClosedError(f"{self._path} is closed")
        if self._disagreement is not None:
            msg = (
                f"{self._path} refuses appends: {self._disagreement} (records were cut off or the "
                "head was changed; verify() names it). An append would overwrite that evidence"
            )
            raise JournalIntegrityError(msg)
        if self._failed is not None:
            if isinstance(self._failed, lmdb.MapFullError):
                msg = (
                    f"{self._path} reached max_map_size ({self._max_map_size} bytes) earlier; "
                    "reopen it with a larger one"
                )
                raise JournalStillFullError(msg) from self._failed
            msg = f"{self._path} is fail-stop after an earlier append failed; reopen it"
            raise JournalFailedError(msg) from self._failed

    def _append_locked(
        self, batch: list[Event], payloads: list[bytes], snapshots: Sequence[Snapshot]
    ) -> list[int]:
        known: dict[bytes, int] | None = None  # None: no id is known to be stored already
        now = time.monotonic()
        if now - self._readers_checked >= _READER_CHECK_EVERY:
            self._readers_checked = now
            self._clear_stale_readers()
        while True:
            try:
                outcome = self._write(batch, payloads, snapshots, known)
            except lmdb.MapFullError as exc:
                self._grow(exc, payloads, snapshots)
                continue
            except lmdb.MapResizedError:
                self._env.set_mapsize(0)  # another process grew the map: adopt its size
                continue
            except lmdb.Error as exc:
                self._failed = exc
                raise _journal_error(
                    self._path, exc, "; the append failed, the journal is fail-stop until reopened"
                ) from exc
            except Exception:
                raise  # refused before anything was written (a bad stream name, snapshot, id)
            except BaseException as exc:
                # KeyboardInterrupt and the like can land after the commit and before this
                # object has taken its new position: whether the batch is stored is unknown
                # here, so stop; reopening reads the truth from the file.
                self._failed = exc
                raise
            if isinstance(outcome, list):
                return outcome
            known = outcome  # some ids were stored already, or repeated: write again without them
            with _translated(self._path):
                self._txn_call(functools.partial(self._check_retries, batch, payloads, outcome))

    def _check_retries(self, batch: list[Event], payloads: list[bytes], known: dict[bytes, int]) -> None:
        """Refuse an event whose id is stored, or repeated in the batch, with other content.

        Only on the path where some id is known already: an append of new ids never
        reads here.

        Raises:
            JournalConflictError: the first such event.

        """
        first: dict[bytes, bytes] = {}
        with self._env.begin(db=self._db_events) as txn:
            for event, payload in zip(batch, payloads, strict=True):
                id_raw = event.id.encode()
                seq = known.get(id_raw)
                if seq is not None:
                    taken = parts(bytes(txn.get(_seq_key(seq)) or b""))
                    if taken is None or not self._same(taken.event, payload):
                        raise JournalConflictError(event.id, seq)
                elif not self._same(first.setdefault(id_raw, payload), payload):
                    raise JournalConflictError(event.id, 0)

    def _same(self, stored: bytes, payload: bytes) -> bool:
        """Whether two encoded events are the same event: equal bytes, or equal decoded.

        An event read back (``at=0`` stored as an int reads as 0.0) or a mapping built in
        another key order encodes to other bytes, yet a retry of it is the same event.
        Decoded, they are compared encoded again with sorted keys, not with ``==``, which
        takes ``True`` for ``1`` and ``1.0``, and ``-0.0`` for ``0.0``.
        """
        if stored == payload:
            return True
        try:
            return _canonical(self._codec.decode(stored)) == _canonical(self._codec.decode(payload))
        except EventError:  # a stored record that no longer decodes is no match
            return False

    def _clear_stale_readers(self) -> int:
        """Free the reader slots of killed processes (PITFALLS.md §1.5); how many were freed.

        A killed reader's slot keeps the pages of its snapshot from reuse, so the file
        grows: open clears them, then an append every ``_READER_CHECK_EVERY`` seconds, and
        a full map before it grows (read-only: a read, that often, and a full reader table,
        ``_txn_call``). A failure here fails no append nor read: it is logged.
        """
        try:
            return int(self._env.reader_check())
        except lmdb.Error:
            log.warning("%s: its reader table could not be checked", self._path, exc_info=True)
            return 0

    def _grow(self, cause: lmdb.Error, payloads: Sequence[bytes], snapshots: Sequence[Snapshot]) -> None:
        if self._clear_stale_readers():
            return  # pages a killed reader pinned are free again: try once more at this size
        limit = self._max_map_size
        current = int(self._env.info()["map_size"])
        new_size = _grown_size(current, limit)
        if new_size is None:
            self._failed = cause
            raise JournalFullError(_full_message(self._path, limit, current, payloads, snapshots)) from cause
        try:
            self._env.set_mapsize(new_size)
        except lmdb.Error as exc:
            self._failed = exc
            raise _journal_error(
                self._path, exc, "; it could not grow its map and is fail-stop until reopened"
            ) from exc

    def _write(
        self,
        batch: list[Event],
        payloads: list[bytes],
        snapshots: Sequence[Snapshot],
        known: dict[bytes, int] | None,
    ) -> list[int] | dict[bytes, int]:
        """One write transaction. Returns the seqs, or the stored seqs of duplicate ids.

        The first attempt writes every event and lets the id index report a repeated
        id; only then is the batch written again without the ids stored already
        (``known`` not None).
        """
        first = self._head_seq + 1
        id_raws = [event.id.encode() for event in batch]
        seqs: list[int] | None = None
        if known is not None:
            batch, payloads, id_raws, seqs = _without_stored(batch, payloads, id_raws, known, first)
        if id_raws and not 0 < min(map(len, id_raws)) <= max(map(len, id_raws)) <= MAX_NAME:
            bad = next(e.id for e, i in zip(batch, id_raws, strict=True) if not 0 < len(i) <= MAX_NAME)
            raise InvalidStreamError(f"event id {bad!r} must be 1 to {MAX_NAME} UTF-8 bytes")
        if first + len(batch) - 1 > _MAX_SEQ:
            msg = (
                f"{self._path} holds a record at seq {self._head_seq}: no seq is left for {len(batch)} "
                f"more (no writer gets near {_MAX_SEQ}: the file was changed; verify() names it)"
            )
            raise JournalIntegrityError(msg)
        keys = list(map(_SEQ_KEY, range(first, first + len(batch))))
        with self._env.begin(write=True) as txn:
            values, prev, anchors, touched = self._records(txn, batch, payloads, keys)
            # zip hands putmulti one reused pair after another: no thousand tuples a
            # commit for the garbage collector to count and scan
            ids = zip(id_raws, keys, strict=True)
            if keys and not self._put_records(txn, ids, zip(keys, values, strict=True), anchors, touched):
                txn.abort()
                return self._stored_seqs(id_raws, known or {})
            if keys:
                txn.put(_META_HEAD, head_value(keys[-1], prev, self._key), db=self._db_meta)
            last = first + len(keys) - 1
            for snapshot in snapshots:
                self._put_snapshot(txn, snapshot, last)
        self._committed(last, prev, touched)
        return list(range(first, last + 1)) if seqs is None else seqs

    def _records(
        self,
        txn: lmdb.Transaction[bytes],
        batch: list[Event],
        payloads: list[bytes],
        keys: list[bytes],
    ) -> tuple[list[bytes], bytes, list[tuple[bytes, bytes]], dict[str, list[Any]]]:
        """Each record as stored, the last one's chain link, the anchors, the moved heads.

        One loop frames each record and chains it. The heads are copies, adopted by
        the cache only once the transaction commits.
        """
        touched: dict[str, list[Any]] = {}
        cached = self._heads
        values: list[bytes] = []
        append = values.append
        anchors: list[tuple[bytes, bytes]] = []
        join = b"".join
        copy = self._hasher.copy
        prev = self._head_chain
        for event, key, payload in zip(batch, keys, payloads, strict=True):
            stream = event.stream
            head = touched.get(stream)
            if head is None:
                base = cached.get(stream)
                head = touched[stream] = list(base) if base is not None else self._load_head(txn, stream)
                if not head[2]:
                    head[4] = key  # a new stream: this record is its first
            # [seq, event, bin16(stream | len(stream) | link | chain)], all but the chain
            body = join((PREFIX, key, payload, head[0], head[1]))
            h = copy()
            h.update(prev)
            h.update(body)
            prev = h.digest()
            append(body + prev)
            head[1] = key
            count = head[2] = head[2] + 1
            if not count & (_ANCHOR_EVERY - 1):
                anchors.append((head[3] + key, b""))
        return values, prev, anchors, touched

    def _committed(self, seq: int, chain: bytes, touched: dict[str, list[Any]]) -> None:
        """Adopt a committed transaction's head and stream heads."""
        self._head_seq = seq
        self._head_chain = chain
        cached = self._heads
        if len(cached) + len(touched) > _HEADS_CACHE:
            cached.clear()  # bounded memory; heads are reloaded from the database on use
        cached.update(touched)

    def _put_records(
        self,
        txn: lmdb.Transaction[bytes],
        ids: Iterable[tuple[bytes, bytes]],
        records: Iterable[tuple[bytes, bytes]],
        anchors: list[tuple[bytes, bytes]],
        touched: dict[str, list[Any]],
    ) -> bool:
        """Put a commit's records and index entries; False if an id is stored already."""
        consumed, added = txn.cursor(db=self._db_ids).putmulti(ids, overwrite=False)
        if added != consumed:
            return False
        consumed, added = txn.cursor(db=self._db_events).putmulti(records, append=True)
        if added != consumed:  # never silently skip a record: the file is ahead of this object
            msg = f"{self._path} holds records past this journal's last seq {self._head_seq}; reopen it"
            self._failed = JournalUnavailableError(msg)
            raise self._failed
        if anchors:
            txn.cursor(db=self._db_anchors).putmulti(anchors)
        heads = sorted(
            (head[3][:-1], b"%s%s%s" % (head[1], head[2].to_bytes(8, "big"), head[4]))
            for head in touched.values()
        )
        txn.cursor(db=self._db_heads).putmulti(heads)
        return True

    def _load_head(self, txn: lmdb.Transaction[bytes], stream: str) -> list[Any]:
        """A stream's cache entry, from the ``heads`` database (a new stream: no records).

        ``[what its records hold before their link (see store/_record.py), last seq key,
        count, stream | NUL, first seq key]``; checks the name.
        """
        stream_raw = _name_bytes(stream, "stream")
        part = stream_part(stream_raw)
        stored = txn.get(stream_raw, db=self._db_heads)
        if stored is None:
            last, count, first = bytes(8), 0, bytes(8)
        else:
            last, count, first = stored[:8], int.from_bytes(stored[8:16], "big"), stored[16:24]
            record = txn.get(last, db=self._db_events) if len(stored) == _STREAM_HEAD_LEN else None
            # a stream cannot hold more records than the journal up to its last one
            possible = 0 < count <= int.from_bytes(last, "big")
            if record is None or not possible or not of_stream(record, part):
                # Linking a new record onto it would build the damage into the hash chain.
                self._disagreement = f"its stream index's head of {stream!r} names no record of that stream"
                raise JournalIntegrityError(
                    f"{self._path} refuses appends: {self._disagreement} (verify() names it)"
                )
        return [part, bytes(last), count, stream_raw + b"\0", bytes(first)]

    def _stored_seqs(self, id_list: list[bytes], known: dict[bytes, int]) -> dict[bytes, int]:
        """The stored seqs of those of ``id_list`` that the id index holds, beside ``known``.

        Raises:
            JournalIntegrityError: the index holds no seq of this journal for one of them.

        """
        found = dict(known)
        with self._env.begin(db=self._db_ids) as txn:
            for id_raw in id_list:
                stored = txn.get(id_raw)
                if stored is None:
                    continue
                seq = int.from_bytes(stored, "big")
                if len(stored) != _SEQ_LEN or not 0 < seq <= self._head_seq:
                    msg = (
                        f"{self._path}: its event id index holds no seq of this journal for id "
                        f"{id_raw.decode(errors='replace')!r} ({bytes(stored).hex() or 'empty'}): it was "
                        "changed or damaged (verify() names it)"
                    )
                    raise JournalIntegrityError(msg)
                found[id_raw] = seq
        return found

    def _snapshot_hash(self, stream_raw: bytes, seq_raw: bytes, data: bytes) -> bytes:
        body = stream_raw + b"\0" + seq_raw + data
        return hashlib.blake2b(body, digest_size=16, key=self._key).digest()

    def _put_snapshot(self, txn: lmdb.Transaction, snapshot: Snapshot, head: int) -> None:
        if not isinstance(snapshot, Snapshot):
            msg = f"a snapshot is a Snapshot, got {type(snapshot).__name__}"
            raise TypeError(msg)
        if isinstance(snapshot.seq, bool) or not isinstance(snapshot.seq, int):
            msg = f"a snapshot's seq is an int, got {type(snapshot.seq).__name__}"
            raise TypeError(msg)
        if not isinstance(snapshot.data, bytes | bytearray | memoryview):
            msg = (
                f"a snapshot's data is bytes, got {type(snapshot.data).__name__}"  # bytes(5) would be 5 NULs
            )
            raise TypeError(msg)
        if not 0 < snapshot.seq <= head:
            msg = f"a snapshot of {snapshot.stream!r} covers seq {snapshot.seq}, outside 1..{head}"
            raise ValueError(msg)
        stream_raw = _name_bytes(snapshot.stream, "stream")
        seq_raw = _seq_key(snapshot.seq)
        data = bytes(snapshot.data)
        txn.put(
            stream_raw, self._snapshot_hash(stream_raw, seq_raw, data) + seq_raw + data, db=self._db_snapshots
        )

    # ------------------------------------------------------------------ reading

    def _txn_call(self, fn: Callable[[], _T]) -> _T:
        """Run a read-only step, adopting a map another process grew meanwhile.

        Called under ``_lock``, it checks again that the journal is open: a ``close()``
        by another thread since the method's own check (``_check_open``, made before
        taking the lock) would otherwise leave the step an environment closed under it,
        and LMDB's refusal ("Attempt to operate on closed/deleted/dropped object") would
        read as a storage failure (``JournalUnavailableError``).

        The reader table holds a slot for each read transaction running in any process,
        and one for each reader killed inside one (kill -9), until ``reader_check``: a
        read-only journal frees those at a read every ``_READER_CHECK_EVERY`` seconds,
        as a writer does at an append, and whenever the table is full, so that readers
        killed over the hours a dashboard stays open neither pin pages for good nor fill
        the table (LMDB's ``MDB_READERS_FULL``), which would refuse every reader.

        Raises:
            JournalClosedError: the journal was closed meanwhile.

        """
        if self._closed:
            raise JournalClosedError(f"{self._path} is closed")
        if self._readonly:
            now = time.monotonic()
            if now - self._readers_checked >= _READER_CHECK_EVERY:
                self._readers_checked = now
                self._clear_stale_readers()
        resized = freed = False
        while True:  # LMDB finds the table full before it finds the map grown: both, once each
            try:
                return fn()
            except lmdb.MapResizedError:
                if resized:
                    raise
                resized = True
                self._env.set_mapsize(0)
            except lmdb.ReadersFullError:
                if freed or not self._clear_stale_readers():
                    raise  # live readers hold every slot (_journal_error says so)
                freed = True  # slots of killed readers (a dashboard under kill -9) were freed

    def read(self, after: int = 0, until: int | None = None, stream: str | None = None) -> Iterator[Record]:
        """Iterate records with ``after < seq <= until`` (optionally of one ``stream``), in seq order.

        Reads in chunks of 1,024 records (fewer of big ones: where the journal holds a
        record bigger than a page, a chunk stops at about 16 MiB), each in its own short
        read transaction, so memory stays bounded and no transaction pins pages for long. ``until``
        defaults to the last seq at the time of the call. It does not check the hash
        chain (``verify`` does; the runtime and the audit commands verify first): a
        changed record that still decodes is returned as it is, unless it takes the
        checked path (a record to upcast, or a codec of event types of your own, and the
        records read with it) and its event is of another stream than it is filed under.

        Raises:
            JournalRecordError: a record cannot be decoded (names the seq; raised when
                the iterator reaches it), or, on the checked path, its event is of another
                stream than it is filed under (an upcaster moved it, or it was changed).
                For a record of a newer version or an unknown type it is also the event
                layer's ``EventVersionError`` or ``UnknownEventTypeError``
                (``JournalRecordVersionError``, ``JournalRecordTypeError``).
            InvalidStreamError: ``stream`` is no stream name the journal writes (also a
                ``ValueError``).
            TypeError: ``after`` or ``until`` is not an int (one below 0 counts as 0).

        """
        self._check_open()
        after = _seq_arg(after, "after")
        end = self.last_seq if until is None else min(_seq_arg(until, "until"), self.last_seq)
        stream_raw = None if stream is None else _name_bytes(stream, "stream")
        # A flat iterator over chunk lists: each record is handed out in C, not by
        # resuming a generator frame per record.
        return itertools.chain.from_iterable(self._iter_chunks(max(after, 0), end, stream_raw))

    def read_back(self, stream: str, before: int | None = None) -> Iterator[Record]:
        """Iterate ``stream``'s records with ``seq < before`` (all by default), newest first.

        Walks the stream's links back from its head (or from the stream's anchor at or
        after ``before``: at most 64 of its records later than it), in chunks of 256
        records (fewer of big ones), each in its own short read transaction. Stop
        iterating, and no older record is read: finding a stream's latest record of a
        kind costs the records after it, not the stream's length. Like ``read``, it sees
        the journal as it was when called, and does not check the hash chain.

        Raises:
            JournalRecordError: a record cannot be decoded, is missing, or is not of the
                stream its index or link says (names the seq; raised once the iterator
                has handed out every newer record).
            InvalidStreamError: ``stream`` is no stream name the journal writes (also a
                ``ValueError``).
            TypeError: ``before`` is not an int (one below 1 reads nothing).

        """
        self._check_open()
        stream_raw = _name_bytes(stream, "stream")
        newer = self.last_seq + 1  # what is appended after the call is not read
        limit = newer if before is None else min(_seq_arg(before, "before"), newer)
        return itertools.chain.from_iterable(self._iter_back(stream_raw, limit))

    def _iter_back(self, stream_raw: bytes, before: int) -> Iterator[list[Record]]:
        position: tuple[int, str] | None = None  # None: the head, or the anchor at or after ``before``
        while True:
            self._check_open()
            step = functools.partial(self._read_back_txn, stream_raw, before, position)
            with self._lock, _translated(self._path):
                seqs, values, position, error = self._txn_call(step)
            if values:
                yield from self._decoded(seqs, values)
            del values  # read on: not two chunks of big records in memory at once
            if error is not None:
                raise error
            if position is None:
                return

    def _read_back_txn(
        self, stream_raw: bytes, before: int, position: tuple[int, str] | None
    ) -> tuple[list[int], list[bytes], tuple[int, str] | None, JournalRecordError | None]:
        """Up to ``_BACK_CHUNK`` records of a stream from ``position`` down, by their links.

        Their seqs and values, newest first; where to go on from (the seq, and what
        named it), None once the stream's first record was reached; and the error that
        stopped the walk, if one did.
        """
        seqs: list[int] = []
        values: list[bytes] = []
        with self._env.begin() as txn:
            if position is None:
                seq, named_by = self._back_start(txn, stream_raw, before), "the stream index"
            else:
                seq, named_by = position
            part = stream_part(stream_raw)
            get = txn.get
            events_db = self._db_events
            size = 0
            while seq and len(values) < _BACK_CHUNK and size < _READ_BYTES:
                record = get(_seq_key(seq), db=events_db)
                if record is None:
                    return (
                        seqs,
                        values,
                        None,
                        JournalRecordError(seq, f"{named_by} names a record that is missing"),
                    )
                if not of_stream(record, part):
                    other = f"{named_by} names a record of another stream"
                    why = "the record is malformed" if parts(record) is None else other
                    return seqs, values, None, JournalRecordError(seq, why)
                back = link_of(record)
                if back >= seq:
                    return (
                        seqs,
                        values,
                        None,
                        JournalRecordError(seq, "the record's stream link does not point back"),
                    )
                if seq < before:
                    seqs.append(seq)
                    values.append(record)
                    size += len(record)
                seq, named_by = back, f"the stream link of record {seq}"
        return seqs, values, (seq, named_by) if seq else None, None

    def _back_start(self, txn: lmdb.Transaction[bytes], stream_raw: bytes, before: int) -> int:
        """The seq a walk back starts at: the stream's head, or its first anchor at or after ``before``."""
        head = txn.get(stream_raw, db=self._db_heads)
        last = 0 if head is None else int.from_bytes(head[:8], "big")
        if last < before:
            return last
        if before <= 1:
            return 0
        return _anchor_from(txn.cursor(db=self._db_anchors), stream_raw, before, last)

    def read_stored(self, after: int = 0, until: int | None = None) -> Iterator[tuple[Record, bytes]]:
        """Iterate ``read(after, until)``'s records, each with its bytes exactly as stored.

        The bytes are what the hash chain covers (the layout is in README.md, "The
        journal's bytes", and ``store/_record.py``):
        with the chain link of the record before, anyone can check a record against its
        link without the journal (``cogfabric export --verifiable``). Chunked as ``read``;
        no stream filter, as a record's link chains it to the record before it in seq
        order, of whichever stream.

        Raises:
            JournalRecordError: as ``read``.
            TypeError: ``after`` or ``until`` is not an int (one below 0 counts as 0).

        """
        self._check_open()
        after = _seq_arg(after, "after")
        end = self.last_seq if until is None else min(_seq_arg(until, "until"), self.last_seq)
        return self._iter_stored(max(after, 0), end)

    def _iter_stored(self, after: int, end: int) -> Iterator[tuple[Record, bytes]]:
        while after < end:
            seqs, values, cut = self._read_chunk(after, end, None)
            if not values:
                return
            done = 0
            for records in self._decoded(seqs, values):
                yield from zip(records, values[done : done + len(records)], strict=True)
                done += len(records)
            if len(values) < _READ_CHUNK and not cut:
                return
            after = seqs[-1]
            del values

    def _iter_chunks(self, after: int, end: int, stream_raw: bytes | None) -> Iterator[list[Record]]:
        while after < end:
            seqs, values, cut = self._read_chunk(after, end, stream_raw)
            if not values:
                return
            yield from self._decoded(seqs, values)
            if len(values) < _READ_CHUNK and not cut:
                return  # a short chunk is the end: no second, empty read transaction
            after = seqs[-1]
            del values  # read on: not two chunks of big records in memory at once

    def _decoded(self, seqs: Sequence[int], values: list[bytes]) -> Iterator[list[Record]]:
        """A chunk's records: in one msgspec call each where it can, else one by one (checked)."""
        decode_record = self._record_decoder
        if decode_record is not None:
            try:
                records = [decode_record(value) for value in values]
            except _RECORD_DECODE_ERRORS:
                pass  # an older version to upcast, or a bad record: one by one
            else:
                # a record's seq is stored in it: it must be its key's, in order
                if [record.seq for record in records] == list(seqs):
                    yield records
                    return
        yield from self._records_one_by_one(seqs, values)

    def _records_one_by_one(self, seqs: Sequence[int], values: list[bytes]) -> Iterator[list[Record]]:
        """Records through the codec's checked decode: upcasts old versions, names a bad record.

        Yields the good records before a bad one, then raises ``JournalRecordError`` for it.
        A record whose event (as an upcaster made it) is of another stream than the one
        it is filed under is such a one: read by its stream, it would be handed out as
        another stream's record (``verify(decode=True)`` refuses it alike).
        """
        decode_many = self._codec.decode_many
        payloads: list[bytes] = []
        trailers: list[bytes] = []
        streams: list[bytes] = []
        malformed: JournalRecordError | None = None
        for seq, value in zip(seqs, values, strict=True):
            record = parts(value)
            if record is None or record.seq != seq:
                why = "the record is malformed" if record is None else "the record's seq is not its key's"
                malformed = JournalRecordError(seq, why)
                break
            payloads.append(record.event)
            trailers.append(record.trailer)
            streams.append(record.stream)
        error: JournalRecordError | None = malformed
        try:
            events = decode_many(payloads)
        except EventError as exc:
            events = decode_many(payloads[: getattr(exc, "index", 0)])
            error = record_error(seqs[len(events)], exc)
            error.__cause__ = exc
        stray = _first_of_another_stream(seqs, events, streams)
        if stray is not None:
            del events[stray[0] :]
            error = stray[1]
        yield [Record(seq, event, tail) for seq, event, tail in zip(seqs, events, trailers)]  # noqa: B905
        if error is not None:
            raise error

    def _read_chunk(
        self, after: int, end: int, stream_raw: bytes | None
    ) -> tuple[range | list[int], list[bytes], bool]:
        self._check_open()
        with self._lock, _translated(self._path):
            return self._txn_call(lambda: self._read_chunk_txn(after, end, stream_raw))

    def _read_chunk_txn(
        self, after: int, end: int, stream_raw: bytes | None
    ) -> tuple[range | list[int], list[bytes], bool]:
        """Up to ``_READ_CHUNK`` records after ``after`` (fewer of big ones: ``_READ_BYTES``).

        Their seqs, their raw values, and whether the byte budget cut the chunk short.
        """
        with self._env.begin() as txn:
            if stream_raw is None:
                return self._read_range(txn, after, end)
            if not _has_big_records(txn, self._db_events):
                return self._read_stream(txn, after, end, stream_raw, big=False)
        with self._env.begin(buffers=True) as buffered:  # in place: only what it hands out is copied
            return self._read_stream(buffered, after, end, stream_raw, big=True)

    def _read_range(
        self, txn: lmdb.Transaction[bytes], after: int, end: int
    ) -> tuple[range, list[bytes], bool]:
        want = min(_READ_CHUNK, end - after)
        cursor = txn.cursor(db=self._db_events)
        if want <= 0 or not cursor.set_range(_seq_key(after + 1)):
            return range(0), [], False
        big = _has_big_records(txn, self._db_events)
        values, cut = _take(cursor.iternext(keys=False, values=True), want, len, big=big)
        if cut:
            want = len(values)
        # Seqs are gapless by contract; check it once per chunk instead of per record.
        last = int.from_bytes(cursor.key(), "big") if len(values) == want else 0
        if last != after + len(values):
            expected = after + 1
            scan = txn.cursor(db=self._db_events)
            scan.set_range(_seq_key(expected))
            for key in scan.iternext(keys=True, values=False):
                if len(key) != _SEQ_LEN:
                    why = f"a key that is no seq, {bytes(key).hex()}, stands before it: it was changed"
                    raise JournalRecordError(expected, why)
                if int.from_bytes(key, "big") != expected:
                    break
                expected += 1
            raise JournalRecordError(expected, "the record is missing")
        return range(after + 1, last + 1), values, cut

    def _read_stream(
        self,
        txn: lmdb.Transaction[bytes] | lmdb.Transaction[memoryview],
        after: int,
        end: int,
        stream_raw: bytes,
        *,
        big: bool,
    ) -> tuple[list[int], list[bytes], bool]:
        """About ``_READ_CHUNK`` records of one stream after ``after``, walking its back links.

        Between one anchor (or the stream's head) and the record after the reader's
        position lie at most ``_ANCHOR_EVERY`` records: each step walks them down,
        then hands them out in seq order. Where the journal holds records bigger than a
        page (``big``), the transaction gives buffers into the map (valid while it is
        open), so a step holds no copy of a record it does not hand out; and only then
        are the bytes handed out counted, to stop at about ``_READ_BYTES`` (in the middle
        of a step: the next chunk goes on from the last record handed out).
        """
        seqs: list[int] = []
        values: list[bytes] = []
        head = txn.get(stream_raw, db=self._db_heads)
        last = 0 if head is None else int.from_bytes(head[:8], "big")
        stop = min(last, end)
        anchors = txn.cursor(db=self._db_anchors)
        get = txn.get
        events_db = self._db_events
        part = stream_part(stream_raw)
        position = after
        size = 0  # bytes handed out: counted only if big
        while position < stop and len(values) < _READ_CHUNK and size < _READ_BYTES:
            top = _anchor_from(anchors, stream_raw, position + 1, last)
            walked: list[tuple[int, bytes | memoryview]] = []
            seq = top
            while seq > position:
                record = get(_seq_key(seq), db=events_db)
                if record is None:
                    raise JournalRecordError(seq, "the stream index names a record that is missing")
                if not of_stream(record, part):
                    raise _not_of_stream(seq, bytes(record))
                walked.append((seq, record))
                back = link_of(record)
                if back >= seq:
                    raise JournalRecordError(seq, "the record's stream link does not point back")
                seq = back
            position = top
            for seq, record in reversed(walked):
                if seq > end:
                    break
                seqs.append(seq)
                values.append(bytes(record) if big else record)  # type: ignore[arg-type]  # bytes: not buffered
                if big:
                    size += len(record)
                    if size >= _READ_BYTES:
                        position = seq  # the next chunk goes on from here
                        break
        return seqs, values, size >= _READ_BYTES and position < stop

    def _read_pairs(self, after: int) -> list[tuple[bytes, bytes]]:
        """Up to ``_READ_CHUNK`` (key, value) pairs after seq ``after`` (fewer big ones), stray keys too."""
        self._check_open()
        with self._lock, _translated(self._path):
            return self._txn_call(lambda: self._read_pairs_txn(after))

    def _read_pairs_txn(self, after: int) -> list[tuple[bytes, bytes]]:
        with self._env.begin(db=self._db_events) as txn:
            cursor = txn.cursor()
            # From the first key past seq ``after``'s own: a stray key sorted right after
            # it (its key and more bytes) is read too, not jumped over to seq after + 1.
            if not cursor.set_range(_seq_key(after) + b"\0"):
                return []
            big = _has_big_records(txn, self._db_events)
            pairs: list[tuple[bytes, bytes]] = _take(cursor.iternext(), _READ_CHUNK, _pair_size, big=big)[0]
            return pairs

    def stream_head(self, stream: str) -> int:
        """The seq of ``stream``'s newest record, 0 when it has none: one lookup.

        Raises:
            InvalidStreamError: ``stream`` is no stream name the journal writes (empty,
                with NUL, or longer than 255 UTF-8 bytes; also a ``ValueError``).

        """
        self._check_open()
        with self._lock:
            head = self._heads.get(stream)
            if head is not None:
                return int.from_bytes(head[1], "big")
            stream_raw = _name_bytes(stream, "stream")
            with _translated(self._path):
                stored = self._txn_call(lambda: self._get(self._db_heads, stream_raw))
        return 0 if stored is None else int.from_bytes(stored[:8], "big")

    def seq_of(self, event_id: str) -> int | None:
        """The seq of the stored event whose id is ``event_id``; None when none is: one lookup.

        (An IPC message's id is its event's, so an audit finds a message a dead letter
        names this way.)

        Raises:
            TypeError: ``event_id`` is not a str.
            JournalIntegrityError: the id index names no seq of this journal for it (it
                was changed or damaged).

        """
        self._check_open()
        if not isinstance(event_id, str):
            msg = f"an event id is a str, not {type(event_id).__name__}"
            raise TypeError(msg)
        raw = event_id.encode(errors="surrogatepass")  # no stored id has a lone surrogate
        if not 0 < len(raw) <= MAX_NAME:
            return None  # no event of such an id can be stored
        with self._lock, _translated(self._path):
            return self._txn_call(lambda: self._stored_seqs([raw], {}).get(raw))

    def record_intact(self, seq: int) -> bool:
        """Whether record ``seq`` matches its hash-chain link (False when it is missing).

        Two lookups and one hash: the record's body, chained to the link of the record
        before it, must give its own link (keyed, when the journal is).
        """
        self._check_open()
        seq = _seq_arg(seq, "seq")
        if seq <= 0:
            return False
        with self._lock, _translated(self._path):
            pair = self._txn_call(lambda: self._record_and_link_before(seq))
        if pair is None:
            return False
        record, prev = pair
        h = self._hasher.copy()
        h.update(prev)
        h.update(record[:-CHAIN_LEN])
        return len(record) > CHAIN_LEN and h.digest() == record[-CHAIN_LEN:]

    def _record_and_link_before(self, seq: int) -> tuple[bytes, bytes] | None:
        with self._env.begin(db=self._db_events) as txn:
            record = txn.get(_seq_key(seq))
            before = txn.get(_seq_key(seq - 1)) if seq > 1 else _ZERO_CHAIN
        if record is None or before is None:
            return None
        return bytes(record), bytes(before[-CHAIN_LEN:])

    def stream_start(self, stream: str) -> int:
        """The seq of ``stream``'s first record, 0 when it has none.

        Two lookups: the stream's head names its first seq, and the record there must
        be of this stream with no back link. Should it not be (a damaged index), walks
        the back links down from the stream's first anchor (or its last record): 64
        lookups at most. Nothing is decoded.

        Raises:
            JournalRecordError: the stream's links name a missing record, a record of
                another stream, or do not point back.
            InvalidStreamError: ``stream`` is no stream name the journal writes.

        """
        self._check_open()
        stream_raw = _name_bytes(stream, "stream")
        with self._lock, _translated(self._path):
            return self._txn_call(lambda: self._stream_start_txn(stream_raw))

    def _stream_start_txn(self, stream_raw: bytes) -> int:
        with self._env.begin() as txn:
            head = txn.get(stream_raw, db=self._db_heads)
            if head is None:
                return 0
            part = stream_part(stream_raw)
            first = txn.get(head[16:24], db=self._db_events) if len(head) == _STREAM_HEAD_LEN else None
            if first is not None and of_stream(first, part) and not link_of(first):
                # the head's first seq holds a record of this stream with no back link
                return int.from_bytes(head[16:24], "big")
            last = int.from_bytes(head[:8], "big")
            seq = _anchor_from(txn.cursor(db=self._db_anchors), stream_raw, 0, last)
            while True:
                record = txn.get(_seq_key(seq), db=self._db_events)
                if record is None:
                    raise JournalRecordError(seq, "the stream index names a record that is missing")
                if not of_stream(record, part):
                    raise _not_of_stream(seq, record)
                back = link_of(record)
                if back == 0:
                    return seq
                if back >= seq:
                    raise JournalRecordError(seq, "the record's stream link does not point back")
                seq = back

    def streams(self, prefix: str = "") -> list[str]:
        """Return the names of the streams that hold records, sorted, optionally by prefix.

        One entry per stream (the ``heads`` database), whatever the number of records.

        Raises:
            TypeError: ``prefix`` is not a str.
            InvalidStreamError: ``prefix`` is not valid UTF-8 text.
            JournalIntegrityError: the index holds a name no writer makes (not UTF-8, empty,
                too long, or with a NUL): it was changed.

        """
        self._check_open()
        prefix_raw = _text_bytes(prefix, "prefix")
        with self._lock, _translated(self._path):
            return self._txn_call(lambda: self._streams_txn(prefix_raw))

    def _streams_txn(self, prefix: bytes) -> list[str]:
        names: list[str] = []
        with self._env.begin(db=self._db_heads) as txn:
            cursor = txn.cursor()
            if not cursor.set_range(prefix):
                return names
            for key in cursor.iternext(keys=True, values=False):
                if not key.startswith(prefix):
                    break
                try:
                    name = key.decode()
                except UnicodeDecodeError:  # no writer makes one: verify names its record
                    name = None
                if name is None or not is_name(key):
                    msg = f"{self._path}: the stream index holds a name no stream can have, {bytes(key)!r}"
                    raise JournalIntegrityError(msg)
                names.append(name)
        return names

    def load_snapshot(self, stream: str) -> Snapshot | None:
        """Return the latest snapshot of ``stream``, or None.

        Raises:
            JournalRecordError: the stored snapshot does not match its hash (its seq
                is named; the caller may fall back to a full replay of the stream).
            InvalidStreamError: ``stream`` is no stream name the journal writes.

        """
        self._check_open()
        stream_raw = _name_bytes(stream, "stream")
        with self._lock, _translated(self._path):
            value = self._txn_call(lambda: self._get(self._db_snapshots, stream_raw))
        if value is None:
            return None
        if len(value) < _SNAPSHOT_HEADER:
            raise JournalRecordError(0, f"the snapshot of {stream!r} is truncated")
        digest, seq_raw, data = value[:16], value[16:24], value[24:]
        seq = int.from_bytes(seq_raw, "big")
        if digest != self._snapshot_hash(stream_raw, seq_raw, data):
            raise JournalRecordError(seq, f"the snapshot of {stream!r} does not match its hash")
        return Snapshot(stream, seq, data)

    def info(self) -> dict[str, object]:
        """The journal's header: format version, engine, hash, whether keyed, chain head.

        ``engine`` is the LMDB version that created the file: a label for audits, which
        nothing acts on and the chain does not cover. ``hash`` is checked when the
        journal is opened (``JournalHeaderError`` if it is not this format's).
        """
        self._check_open()
        with self._lock, _translated(self._path):
            meta = self._txn_call(self._all_meta)
            map_size = int(self._env.info()["map_size"])  # under the lock: no close() since the check
        head = meta.get(_META_HEAD, bytes(HEAD_LEN))
        return {
            "format": int.from_bytes(meta.get(_META_FORMAT, b"\0"), "big"),
            "engine": meta.get(_META_ENGINE, b"").decode(errors="replace"),
            "hash": meta.get(_META_HASH, b"").decode(errors="replace"),
            "keyed": bool(meta.get(_META_KEYCHECK)),
            "head_seq": int.from_bytes(head[:8], "big"),
            "map_size": map_size,
        }

    def _all_meta(self) -> dict[bytes, bytes]:
        with self._env.begin(db=self._db_meta) as txn:
            return {bytes(k): bytes(v) for k, v in txn.cursor().iternext()}

    def _get(self, db: lmdb._Database, key: bytes) -> bytes | None:
        with self._env.begin(db=db) as txn:
            value = txn.get(key)
            return None if value is None else bytes(value)

    # ------------------------------------------------------------------ verifying

    def verify(self, *, after: int = 0, decode: bool = False) -> VerifyReport:
        """Check the journal against its hash chain, head, indexes and snapshot hashes.

        Detects a changed byte in any record (and names its seq), a deleted, inserted
        or reordered record, a chain head that does not match the records (a rolled
        back or truncated journal), a stream index or id index that disagrees with the
        records, and a snapshot that does not match its hash. With a key, a journal
        re-chained, or cut short (its head pointed at the last record left), by someone
        without the key fails: the head's tag is keyed. It cannot detect a journal
        consistently rebuilt, head included, by someone who holds the key (or of an
        unkeyed journal, by anyone), nor one put back whole to an earlier state of its
        own (an old copy; LMDB's previous header page made current): anchor the head
        elsewhere for that.

        Args:
            after: start after this seq, trusting its chain link (a tail check). A tail
                check also holds the head of every stream it sees records of (where a
                reader starts to walk the stream) against them, and the first record of a stream in
                the tail to a record of that stream before it (or, linking to none, to
                the stream's first); not to its last one before the tail: a link that
                skips some of its records there is found by a full check only (a stream
                read from before it leaves them out; a recovery, which reads from after
                the tail's start, does not need them). The head of a stream with no
                record in the tail, as every head, must name a record of that stream, its
                first seq one that links to none, the stream must have no anchor past it
                and one at its 64th record exactly when it counts 64 or more, and the
                records its count puts after its last anchor must fit at the seqs below
                it (a stream that starts in the tail: its count is its records in the
                tail); and the heads' counts must add up to the journal's records (a few
                lookups per stream: a head removed, set back, or pointed at another
                stream's record fails, naming the stream's last record, as a full check
                does). A head set back to a record still after the stream's last anchor
                with its count kept, where that count still fits, and counts moved
                between the heads of streams that start before the tail where each still
                fits, are found by a full check only (a read of the stream leaves out the
                records after the head, and an append to it links past them, for good).
                The other indexes and the snapshots are only checked when ``after`` is 0.
            decode: also decode every record (type known, schema version known).

        """
        self._check_open()
        after = _seq_arg(after, "after")
        with _translated(self._path):
            return verify_journal(self, after, decode=decode)

    # ------------------------------------------------------------------ backing up

    def backup(self, dest: str | PathLike[str], *, compact: bool = True) -> int:
        """Write a consistent copy of the journal to ``dest``, a new journal directory.

        The copy is LMDB's own (``mdb_env_copy``), taken from one read transaction: it
        holds every record up to the seq returned, whatever a writer (this object, or a
        ``Runtime`` in another process) commits meanwhile. Copying the directory's files
        instead (``cp``, ``tar``, ``rsync``) is not safe while a writer commits: LMDB
        reuses freed pages in place, and such a copy is torn. Works on a journal opened
        ``readonly`` too (also on a read-only file system).

        ``dest`` must not exist, or be an empty directory. The copy is written to a
        temporary sibling (``.NAME.backup-*``, 0700, its data file 0600), synced, and
        renamed to ``dest``: a crash or an error leaves no partial backup under ``dest``
        (an error removes the sibling; a crash leaves it, hidden, beside ``dest``). It
        holds the same bytes: a keyed journal's copy needs the same key. ``compact``
        leaves out free pages (a smaller file; LMDB's ``MDB_CP_COMPACT``), ``False``
        copies every page (faster). While it copies, a writer cannot reuse the pages
        freed meanwhile (the file may grow by them), a commit of this object that must
        grow the map waits for the copy's end (py-lmdb holds a remap off while it copies),
        and ``close()`` waits for it.

        Returns:
            The last seq the backup holds.

        Raises:
            FileExistsError: ``dest`` exists and is not an empty directory.
            JournalUnavailableError: ``dest`` cannot be written (its parent missing or not
                writable, no room left, a mount point): nothing is left under ``dest``.
            JournalDamagedError: LMDB could not read a page of this journal.
            JournalClosedError: the journal is closed.
            TypeError: ``compact`` is not a bool.
            ValueError: ``dest`` is empty.

        """
        _require_bools(compact=compact)
        if not os.fspath(dest):
            msg = "a backup's destination must not be empty"
            raise ValueError(msg)
        target = Path(dest)
        self._check_open()
        refuse_target(target, source=self._path)
        with self._lock:
            self._check_open()  # not closed since the check above
            self._backups += 1
        try:
            return self._backup_to(target, compact=compact)
        finally:
            with self._lock:
                self._backups -= 1
                self._backups_done.notify_all()

    def _backup_to(self, target: Path, *, compact: bool) -> int:
        """Copy into a temporary sibling of ``target``, sync it and rename it to ``target``."""
        failed = f"cannot back up {self._path} to {target}"
        return write_beside(target, "backup", failed, functools.partial(self._backup_into, failed, compact))

    def _backup_into(self, failed: str, compact: bool, tmp: Path) -> int:
        """Copy the journal into ``tmp``'s data file (synced): the last seq it holds."""
        try:
            fd = os.open(
                tmp / "data.mdb", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
            )
            try:
                if self._closed:
                    raise JournalClosedError(f"{self._path} is closed")
                try:
                    seq = self._copy_to(fd, compact=compact)
                except lmdb.MapResizedError:  # another process grew the map: adopt its size
                    with self._lock:  # as every other remap: no reader of this process has a transaction
                        self._env.set_mapsize(0)
                    seq = self._copy_to(fd, compact=compact)
                os.fsync(fd)
            finally:
                os.close(fd)
            return _last_seq_in(tmp) if seq is None else seq  # None: LMDB took its own transaction
        except lmdb.Error as exc:
            error = _journal_error(self._path, exc)
            if isinstance(error, JournalIntegrityError):  # a page of this journal LMDB cannot read
                raise error from exc
            # a full reader table: what it is and what frees it, not LMDB's max_readers= advice
            full = isinstance(exc, lmdb.ReadersFullError)
            detail = str(error).removeprefix(f"{self._path}: ") if full else exc
            raise JournalUnavailableError(f"{failed}: {detail}") from exc

    def _copy_to(self, fd: int, *, compact: bool) -> int | None:
        """LMDB's copy of one read transaction to ``fd``: the last seq it holds (None: not known).

        py-lmdb takes the transaction to copy only for a compacting copy; a plain one
        begins its own. Run again when another process grew the map: the file starts over.
        The transaction begins and ends under ``_lock``, as every other one of this object:
        py-lmdb's begin or end racing a remap in this process (an append growing the map,
        in another thread) failed (``mdb_txn_begin: Invalid argument``). The copy itself
        runs outside the lock (py-lmdb holds the remap off while it copies). A remap
        between the seq's read and the copy invalidates the transaction, and py-lmdb then
        copies from a transaction of its own, a later state than the seq read: the seq is
        then read from the copy (None), as is a plain copy's. A reader table full with
        slots of killed readers is swept and the copy's transaction begun again, once, as
        ``_txn_call`` does (a backup does not go through it: ``close()`` waits for a backup).
        """
        while True:
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            if not compact:
                try:
                    self._env.copyfd(fd)
                except lmdb.ReadersFullError:
                    with self._lock:
                        if not self._clear_stale_readers():
                            raise
                    self._env.copyfd(fd)  # killed readers' slots were freed (``_txn_call``)
                return None
            with self._lock:  # open (close() waits for this backup): not through _txn_call
                try:
                    txn = self._env.begin()
                except lmdb.ReadersFullError:
                    if not self._clear_stale_readers():
                        raise
                    txn = self._env.begin()  # killed readers' slots were freed (``_txn_call``)
            try:
                cursor = txn.cursor(db=self._db_events)
                seq = last_seq_of(cursor.key(), self._path) if cursor.last() else 0
                self._env.copyfd(fd, compact=True, txn=txn)
            except lmdb.Error:
                if _txn_valid(txn):
                    raise
                continue  # invalidated before the copy began: the copy may be partial
            finally:
                with self._lock:
                    valid = _txn_valid(txn)
                    txn.abort()
            return seq if valid else None

    # ------------------------------------------------------------------ closing

    def _release_writer_lock(self) -> None:
        if self._writer_lock is not None:
            self._writer_lock.release()
        if self._unclosed is not None:
            # nothing left for it to do: a closed journal's collection runs no code of ours,
            # where a Ctrl-C (or SIGTERM) raised would be lost ("Exception ignored in")
            self._unclosed.detach()
            self._unclosed = None

    def close(self) -> None:
        """Sync (when ``sync=False``), close the environment and release the writer lock; idempotent.

        The writer's cache of stream heads (up to 65,536 of them) goes too: it serves
        appends only, and a closed journal may stay referenced (by its closed runtime).
        A Ctrl-C that stops it (as it waits for a backup, syncs, or lets go of the writer
        lock) leaves the journal closed to its users but its path still open in this
        process: a ``close()`` after it finishes.
        """
        self._close(_call)

    def _close(self, wait: Callable[..., object]) -> None:
        """``close()``, its wait for a backup under way made by ``wait(blocking, *args)`` (the runtime's).

        A ``wait`` that raises (a Ctrl-C the runtime lets stop it) leaves the journal closed
        to its users, its environment open and locked: a later ``close()`` waits again and
        finishes. So does a Ctrl-C raised before the environment is closed (in a plain
        ``close()``, one pressed during the final sync), the writer lock released already,
        or one raised as the writer lock is let go.
        """
        with self._lock:
            if self._released:
                return
            self._closed = True  # no backup starts now; one copying holds a read transaction
            self._heads = {}
            if self._backups and os.getpid() == self._pid:  # only then a wait (where a held Ctrl-C is raised)
                wait(self._backups_done.wait_for, lambda: not self._backups or os.getpid() != self._pid)
            if os.getpid() != self._pid:  # a forked child: the environment is the parent's
                self._release_writer_lock()  # released as it started, if it holds one
                self._released = True
                return
            try:
                if not self._readonly and self._failed is None:
                    with contextlib.suppress(lmdb.Error):  # (a closed one's, after an interrupted close)
                        self._env.sync(True)
                self._env.close()
            finally:
                self._release_writer_lock()
            self._released = True  # only now: a Ctrl-C before it leaves a later close() to finish

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("read-only" if self._readonly else "open")
        return f"<LmdbJournal {str(self._path)!r} {state}>"

    def __enter__(self) -> Self:
        """Raises ``JournalClosedError`` after ``close()``, as any other use of it."""
        self._check_open()
        return self
