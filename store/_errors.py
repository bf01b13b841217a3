"""The journal's error tree; LMDB's own errors are translated into it in one place."""

from __future__ import annotations

from cogfabric._errors import CogfabricError
from cogfabric.events import EventDecodeError, EventVersionError, UnknownEventTypeError

__all__ = [
    "InvalidStreamError",
    "JournalClosedError",
    "JournalConflictError",
    "JournalError",
    "JournalFailedError",
    "JournalFormatError",
    "JournalFullError",
    "JournalHeaderError",
    "JournalIntegrityError",
    "JournalKeyError",
    "JournalLockedError",
    "JournalNotFoundError",
    "JournalReadOnlyError",
    "JournalRecordDecodeError",
    "JournalRecordError",
    "JournalRecordTypeError",
    "JournalRecordVersionError",
    "JournalStillFullError",
    "JournalUnavailableError",
]


class JournalError(CogfabricError):
    """Base class of the errors raised by ``cogfabric.store``."""


class JournalClosedError(JournalError):
    """Raised when a journal is used after ``close()``."""


class JournalNotFoundError(JournalError, FileNotFoundError):
    """Raised when a journal opened read-only does not exist."""


class JournalFormatError(JournalError):
    """Raised when a path is not a cogfabric journal, or a journal of another format.

    A newer format is read by a newer cogfabric; an older one (the development
    formats before this one) by the version that wrote it. The message names both
    format versions. The data file is left as it was.

    ``stored`` is the journal's format version and ``known`` this code's
    (``FORMAT_VERSION``) for a journal of another format; both are None when the path
    is no journal at all, so a program can tell "upgrade cogfabric" (``stored >
    known``) from "not a journal" without reading the message.
    """

    def __init__(self, message: str, *, stored: int | None = None, known: int | None = None) -> None:
        super().__init__(message)
        self.stored = stored
        self.known = known


class JournalLockedError(JournalError):
    """Raised when another writer holds the journal, or it is already open in this process.

    A journal is open once per process (LMDB's rule), read-only opens included: while
    a ``Runtime`` or a ``Journal`` in this process holds it, read it from another process.
    """


class JournalReadOnlyError(JournalError):
    """Raised when a journal opened with ``readonly=True`` is asked to write."""


class InvalidStreamError(JournalError, ValueError):
    """Raised when an event's stream name or id cannot be stored (empty, NUL, > 255 bytes)."""


class JournalConflictError(JournalError, ValueError):
    """Raised when an append carries an event whose id is stored (or repeated) with other content.

    A retry of the same event is acknowledged with its existing seq; a different event
    under a stored id is not a retry, and storing nothing for it would lose it silently.
    ``event_id`` and ``seq`` (the stored one's, 0 for a repeat within the batch) name it.
    """

    def __init__(self, event_id: str, seq: int) -> None:
        where = f"stored at seq {seq}" if seq else "given twice in the batch"
        super().__init__(f"event id {event_id!r} is {where} with other content: not a retry")
        self.event_id = event_id
        self.seq = seq


class JournalIntegrityError(JournalError):
    """Raised when a journal fails verification (see ``Journal.verify``).

    ``report`` holds the ``VerifyReport`` when the error comes from a verification.
    """

    def __init__(self, message: str, report: object = None) -> None:
        super().__init__(message)
        self.report = report


class JournalHeaderError(JournalIntegrityError):
    """Raised at open when the journal's header contradicts this format (a label changed).

    The chain does not cover the header; its labels are checked instead. At the
    right format version, a label that differs means the header was changed after
    the journal was written.
    """


class JournalKeyError(JournalIntegrityError):
    """Raised when a journal is opened with a chain key other than the one it was written with."""


class JournalDamagedError(JournalIntegrityError):
    """Raised when LMDB meets a damaged page of the data file while reading it.

    LMDB has no checksums: most damage is found by ``verify``'s hash chain instead, but
    a damaged page of the B-tree itself can make LMDB refuse to read on. A damaged
    header page makes LMDB refuse the file as a whole (``JournalFormatError``).

    ``first_seq`` is the first seq a damaged page of the records may hold, where the
    walk of the pages at open knows it (the records before it are on other pages: what
    ``cogfabric salvage`` copies), else None.
    """

    def __init__(self, message: str, report: object = None, *, first_seq: int | None = None) -> None:
        super().__init__(message, report)
        self.first_seq = first_seq


class JournalRecordError(JournalIntegrityError, ValueError):
    """Raised when a stored record cannot be read: malformed, unknown type, or newer schema.

    ``seq`` names the record; ``__cause__`` is the event layer's error, if any.
    """

    def __init__(self, seq: int, reason: str) -> None:
        super().__init__(f"record at seq {seq}: {reason}")
        self.seq = seq
        self.reason = reason


class JournalRecordDecodeError(JournalRecordError, EventDecodeError):
    """A stored record whose bytes do not decode to an event (also an ``EventDecodeError``)."""

    def __init__(self, seq: int, cause: EventDecodeError) -> None:
        # Not super().__init__: the two parents' initialisers take different arguments.
        Exception.__init__(self, f"record at seq {seq}: {cause}")
        self.seq = seq
        self.reason = str(cause)
        self.report = None


class JournalRecordTypeError(JournalRecordDecodeError, UnknownEventTypeError):
    """A stored record whose type tag this code does not know (also an ``UnknownEventTypeError``).

    Its message says what writes such records (``unknown_type_advice``), as a newer
    version's does; ``reason`` is the codec's error alone.
    """

    def __init__(self, seq: int, cause: UnknownEventTypeError) -> None:
        super().__init__(seq, cause)
        Exception.__init__(self, f"record at seq {seq}: {cause}: {unknown_type_advice()}")
        self.type_name = cause.type_name


class JournalRecordVersionError(JournalRecordDecodeError, EventVersionError):
    """A stored record of a version this code cannot read (also an ``EventVersionError``).

    ``type_name``, ``stored`` and ``known`` are as on ``EventVersionError``.
    """

    def __init__(self, seq: int, cause: EventVersionError) -> None:
        super().__init__(seq, cause)
        self.type_name = cause.type_name
        self.stored = cause.stored
        self.known = cause.known


def unknown_type_advice() -> str:
    """What writes a record of a type tag this code does not know, as a newer version's error says it.

    A type a newer cogfabric added, or one of code with event types of its own (a
    journal opened with its codec): ``verify``'s reason for such a record ends with this.
    """
    import cogfabric  # noqa: PLC0415 - the package is initialised by the time a record is read

    return (
        f"a newer cogfabric than this one ({cogfabric.__version__}), or code with event types of "
        "its own, writes such records; read them with it, or upgrade this one"
    )


def record_error(seq: int, cause: Exception) -> JournalRecordError:
    """The error for record ``seq`` that failed to decode with ``cause``: of both layers' types."""
    if isinstance(cause, EventVersionError):
        return JournalRecordVersionError(seq, cause)
    if isinstance(cause, UnknownEventTypeError):
        return JournalRecordTypeError(seq, cause)
    if isinstance(cause, EventDecodeError):
        return JournalRecordDecodeError(seq, cause)
    return JournalRecordError(seq, str(cause))


class JournalUnavailableError(JournalError):
    """Raised when an append fails in the storage (an I/O error, a full disk).

    The journal is then fail-stop: it refuses every later append with
    ``JournalFailedError`` until it is closed and reopened, because after a failed
    write or sync a retry could "succeed" without the data (PITFALLS.md §1.10).
    ``__cause__`` is the LMDB error. A damaged page met by an append raises
    ``JournalDamagedError`` instead (as a read there does), and is fail-stop too.
    """


class JournalFullError(JournalUnavailableError):
    """Raised when an append needs more room than ``max_map_size`` allows; fail-stop too."""


class JournalFailedError(JournalUnavailableError):
    """Raised by every append after an earlier append failed; reopen the journal."""


class JournalStillFullError(JournalFullError, JournalFailedError):
    """Raised by every append after a ``JournalFullError``: both a full and a failed journal.

    Reopen the journal with a larger ``max_map_size`` (or none) to append again.
    """
