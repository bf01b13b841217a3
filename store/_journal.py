"""The journal interface: what every backend provides, and the values it returns."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Final, Self

import msgspec

from cogfabric.events import Event

from ._errors import JournalClosedError, JournalReadOnlyError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from os import PathLike
    from types import TracebackType

    from cogfabric.events import EventCodec

    _StoredEvent = Event
else:
    # What msgspec decodes a Record's event as: the union of the built-in event types,
    # so the LMDB journal decodes a stored record straight into a Record. To type
    # checkers (and to code that builds a Record) the field is any Event.
    from cogfabric.events import AnyEvent as _StoredEvent

__all__ = ["Journal", "Record", "Snapshot", "VerifyReport"]


class Record(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One stored event with its global sequence number and the bytes stored beside it.

    msgspec encodes a Record as the array ``[seq, event, raw]`` (the LMDB journal
    stores its records in that shape and decodes them straight into Records).
    """

    seq: int
    event: _StoredEvent
    raw: bytes = b""
    """What the backend stores beside the event, empty where it keeps nothing. The
    LMDB journal's is the record's trailer: the stream, the stream link and, last, the
    16-byte hash-chain link (layout in ``store/_record.py``)."""

    @property
    def chain(self) -> bytes:
        """The hash-chain link of this record (BLAKE2b-128), empty where a backend has none."""
        return self.raw[-16:]

    @property
    def stream(self) -> str:
        """The stream of the event."""
        return self.event.stream


class Snapshot(msgspec.Struct, frozen=True):
    """The latest saved state of one stream, covering its events up to ``seq``."""

    stream: str
    seq: int
    data: bytes


UNDECODABLE: Final = "the record does not decode"
"""How a ``VerifyReport``'s reason begins for a record whose chain holds but whose event
does not decode (an unknown type, a newer version): ``Journal.read`` names its typed error."""


class VerifyReport(msgspec.Struct, frozen=True):
    """The outcome of ``Journal.verify``."""

    ok: bool
    checked: int
    """How many records were checked."""
    first_bad_seq: int | None = None
    """The first record found bad, or None when ``ok`` (or when no seq applies).

    At most ``head_seq``, but for records found missing at the end: when the chain head
    names a later seq than the last record (records were removed), or ``verify(after=)``
    starts past the last record, it is the first seq missing, past ``head_seq``. An
    index entry that names a seq past the records checked names none (None).
    """
    reason: str = ""
    """Why the journal is not ok; empty when it is."""
    head_seq: int = 0
    """The last seq the journal holds."""


class Journal(abc.ABC):
    """An append-only, tamper-evident event journal.

    Sequence numbers are global, gapless and start at 1. ``Journal.open`` opens the
    default (LMDB) backend; other backends subclass this, give their own ``open`` (a
    subclass inherits none: ``Journal.open`` refuses to open any other class) and pass
    ``cogfabric.store.testing.JournalContract``. ``Runtime.open`` and the audit
    commands open the LMDB journal only (by path): another backend serves code that
    calls it itself.

    Every method may be called from any thread, concurrently: the runtime appends on
    its writer's thread while its callers read, and a read's iterator may be consumed
    while appends go on (it sees the journal as it was when called).

    After ``close()``, every method that reads or writes raises ``JournalClosedError``
    (``last_seq`` too); ``close``, ``closed`` and ``readonly`` still answer. A stream
    name a method takes must be a ``str`` (any other type raises ``TypeError``) of 1 to
    255 UTF-8 bytes without NUL: any other str raises ``InvalidStreamError`` (also a
    ``ValueError``).
    """

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
    ) -> Journal:
        """Open (or create) the LMDB journal in directory ``path``.

        ``readonly`` never changes the data file and works while another process
        appends. ``sync=True`` syncs every commit to disk before ``append`` returns;
        ``sync=False`` leaves syncing to the OS: a process crash loses nothing, but a
        power cut or OS crash can lose the last commits, for simulations that accept
        that. ``map_size`` is the initial map; when it fills, it grows invisibly up to
        ``max_map_size`` (None: no limit but the disk), past which appends raise
        ``JournalFullError``. ``key`` makes the hash chain keyed. ``codec`` (an
        ``EventCodec``) holds event types of your own; by default, this package's.
        ``check_pages`` walks every page of the file first, so that a damaged one raises
        ``JournalDamagedError`` instead of crashing the process. Every argument and error
        in full: ``LmdbJournal.open``.

        Raises:
            TypeError: called on a subclass that does not define its own ``open`` (it
                would otherwise get an LMDB journal, not one of its class).

        """
        if cls is not Journal:
            msg = f"{cls.__qualname__} does not define open(): Journal.open opens the LMDB journal only"
            raise TypeError(msg)
        from ._lmdb import LmdbJournal  # noqa: PLC0415 - the ABC must not import its backend eagerly

        return LmdbJournal.open(
            path,
            readonly=readonly,
            sync=sync,
            map_size=map_size,
            max_map_size=max_map_size,
            key=key,
            codec=codec,
            check_pages=check_pages,
        )

    @property
    @abc.abstractmethod
    def last_seq(self) -> int:
        """The seq of the newest record, 0 when empty."""

    @property
    @abc.abstractmethod
    def closed(self) -> bool:
        """Whether ``close()`` was called."""

    @property
    @abc.abstractmethod
    def readonly(self) -> bool:
        """Whether the journal was opened read-only."""

    @abc.abstractmethod
    def append(
        self, events: Iterable[Event], *, snapshots: Sequence[Snapshot] = (), validate: bool = True
    ) -> list[int]:
        """Append ``events`` atomically and return their seqs, in order.

        An event whose id is stored already is not written again: its existing seq is
        returned, so retrying after an unknown outcome is safe. A different event under
        a stored (or repeated) id is no retry: the batch is refused whole with
        ``JournalConflictError``. Two events are the same when their encodings are
        equal, or when both, decoded, encode equal with their mappings' keys sorted
        (``msgspec.msgpack.Encoder(order="sorted")``; in their own order where a key is
        no str): an event read back (``at=0`` reads as ``0.0``) or a mapping built in
        another key order is a retry, while ``==`` is no test (it takes ``True`` and
        ``1.0`` for ``1``, ``-0.0`` for ``0.0``). ``snapshots`` are
        saved in the same transaction (each ``seq`` from 1 to the new last seq). A batch
        with an event that could not be read back (not an ``Event``, of a type the
        codec lacks, or not at its type's current version) is refused whole, as one
        with a value msgspec cannot encode is; with ``validate`` (the default), so is
        one with an event whose fields do not decode as their declared types, or whose
        ``at`` (or, in a session's, whose message's ``time``; in an ``AgentSpawned``,
        whose ``priority``) is NaN or infinite (``InvalidEventError``).
        ``validate=False`` skips that check, for a caller that builds its events from
        values it checked already (the runtime does).
        ``EventCodec.encode_many(events, validate=validate)`` (``cogfabric.events``)
        makes every one of these checks and raises their errors, with the messages
        ``JournalContract`` expects.

        Raises:
            JournalClosedError, JournalReadOnlyError: closed, or opened read-only.
            JournalConflictError: another event under a stored or repeated id.
            InvalidStreamError: an event's stream is no stream name (see the class).
            ValueError: a snapshot's seq is outside 1 to the new last seq (nothing of
                the batch is stored).
            UnencodableValueError, InvalidEventError: an event that could not be read
                back (both also ``TypeError``).
            JournalFullError: the journal reached the size it may grow to (the LMDB
                journal's ``max_map_size``; fail-stop where the backend says so). A full
                disk is a storage failure: ``JournalUnavailableError``.
            JournalFailedError: an earlier append failed; reopen the journal.
            JournalError: any other refusal of the backend (``LmdbJournal.append``
                lists every case).

        """

    def check_appendable(self) -> None:
        """Raise what an append would raise before writing anything (closed, read-only, fail-stop).

        This default checks only ``closed`` and ``readonly``; a backend with more reasons
        to refuse (the LMDB journal's fail-stop) overrides it.
        """
        if self.closed:
            msg = "the journal is closed"
            raise JournalClosedError(msg)
        if self.readonly:
            msg = "the journal is open read-only"
            raise JournalReadOnlyError(msg)

    @abc.abstractmethod
    def read(self, after: int = 0, until: int | None = None, stream: str | None = None) -> Iterator[Record]:
        """Iterate the records with ``after < seq <= until``, optionally of one stream.

        Streams in bounded memory whatever the journal's size, and sees the journal as
        it was when called: records appended later are not returned. It does not check
        the hash chain (``verify`` does).

        Raises:
            JournalRecordError: a record cannot be decoded, or is missing (names its
                seq; raised when the iterator reaches it).
            InvalidStreamError: ``stream`` is no stream name the journal writes (empty,
                with NUL, or longer than 255 UTF-8 bytes).
            TypeError: an argument of the wrong type.

        """

    def read_back(self, stream: str, before: int | None = None) -> Iterator[Record]:
        """Iterate ``stream``'s records with ``seq < before`` (all by default), newest first.

        For the latest record of a kind (an agent's last checkpoint): stop early and the
        older records are never read. This default reads the stream forward and holds
        its records in memory; backends that link a stream's records override it.

        Raises:
            JournalRecordError: as ``read``.
            InvalidStreamError: as ``read``.
            TypeError: ``before`` is not an int.

        """
        if before is not None and (isinstance(before, bool) or not isinstance(before, int)):
            msg = f"before is a seq (an int), got {type(before).__name__}"
            raise TypeError(msg)
        # before=1 or less reads nothing, yet through read: it refuses a closed journal and a bad stream
        records = list(self.read(until=None if before is None else max(before - 1, 0), stream=stream))
        return reversed(records)

    def stream_head(self, stream: str) -> int:
        """The seq of ``stream``'s newest record, 0 when it has none.

        This default reads the whole stream; backends with an index override it.
        """
        last = 0
        for record in self.read(stream=stream):
            last = record.seq
        return last

    def record_intact(self, seq: int) -> bool:
        """Whether record ``seq`` matches its hash-chain link (False when it is missing).

        A check of one record against the one before it, for a decision taken on a
        record outside a verified range. This default verifies from ``seq`` to the end
        (a backend that can check one record overrides it): the record is intact when
        the first bad one ``verify`` finds, if any, is a later one.
        """
        last = self.last_seq  # first: a closed journal raises, whatever seq is
        if not 0 < seq <= last:
            return False
        report = self.verify(after=seq - 1)
        return report.ok or (report.first_bad_seq is not None and report.first_bad_seq > seq)

    def stream_start(self, stream: str) -> int:
        """The seq of ``stream``'s first record, 0 when it has none.

        This default reads the stream's first record; backends with an index override it.
        """
        return next((record.seq for record in self.read(stream=stream)), 0)

    @abc.abstractmethod
    def streams(self, prefix: str = "") -> list[str]:
        """Return the names of the streams that hold records, sorted, optionally by prefix.

        Raises:
            TypeError: ``prefix`` is not a str.

        """

    @abc.abstractmethod
    def load_snapshot(self, stream: str) -> Snapshot | None:
        """Return the latest snapshot of ``stream``, or None.

        Raises:
            InvalidStreamError: ``stream`` is no stream name the journal writes.

        """

    @abc.abstractmethod
    def verify(self, *, after: int = 0, decode: bool = False) -> VerifyReport:
        """Check every stored byte against the hash chain and the indexes.

        Damage is reported, not raised: the report's ``ok`` is False and it names the
        first bad seq and why. (A records database whose last key is no seq raises
        ``JournalIntegrityError``, as opening the journal does.) ``after``: check only
        the records past it (a tail), chained from the stored one at ``after``;
        ``decode``: decode every record too.
        """

    def backup(self, dest: str | PathLike[str], *, compact: bool = True) -> int:
        """Write a consistent copy of the journal to the new directory ``dest``; return its last seq.

        A backend that can make one overrides this (``LmdbJournal.backup``).

        Raises:
            NotImplementedError: this backend has no backup.

        """
        raise NotImplementedError(f"{type(self).__name__} cannot make a backup")

    @abc.abstractmethod
    def close(self) -> None:
        """Release the journal; idempotent."""

    def _close(self, wait: Callable[..., object]) -> None:  # noqa: ARG002 - a backend may wait for nothing
        """``close()``, with what it waits for (a backup under way) waited for by ``wait``.

        The runtime's hook (not a public API): ``wait(blocking, *args)`` makes each blocking
        wait (the runtime passes one that a Ctrl-C or SIGTERM stops at once, where its
        ``close()`` holds them). A ``wait`` that raises leaves the journal closed to its
        users and still to be released: a later ``close()`` finishes it. A backend whose
        ``close()`` waits for nothing closes.
        """
        self.close()

    def save_snapshot(self, snapshot: Snapshot) -> None:
        """Save ``snapshot`` as the latest of its stream."""
        self.append((), snapshots=(snapshot,))

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
