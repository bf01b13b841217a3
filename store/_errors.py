"""The journal's error tree; LMDB's own errors are translated into it in one place."""

from __future__ import annotations

from cogfabric._errors import CogfabricError

__all__ = [
    "InvalidStreamError",
    "JournalClosedError",
    "JournalError",
    "JournalFailedError",
    "JournalFormatError",
    "JournalFullError",
    "JournalIntegrityError",
    "JournalKeyError",
    "JournalLockedError",
    "JournalNotFoundError",
    "JournalReadOnlyError",
    "JournalRecordError",
    "JournalUnavailableError",
]


class JournalError(CogfabricError):
    """Base class of the errors raised by ``cogfabric.store``."""


class JournalClosedError(JournalError):
    """Raised when a journal is used after ``close()``."""


class JournalNotFoundError(JournalError, FileNotFoundError):
    """Raised when a journal opened read-only does not exist."""


class JournalFormatError(JournalError):
    """Raised when a path is not a cogfabric journal, or one of a newer format."""


class JournalLockedError(JournalError):
    """Raised when another writer (process or open journal) already holds the journal."""


class JournalReadOnlyError(JournalError):
    """Raised when a journal opened with ``readonly=True`` is asked to write."""


class InvalidStreamError(JournalError, ValueError):
    """Raised when an event's stream name or id cannot be stored (empty, NUL, > 255 bytes)."""


class JournalIntegrityError(JournalError):
    """Raised when a journal fails verification (see ``Journal.verify``).

    ``report`` holds the ``VerifyReport`` when the error comes from a verification.
    """

    def __init__(self, message: str, report: object = None) -> None:
        super().__init__(message)
        self.report = report


class JournalKeyError(JournalIntegrityError):
    """Raised when a journal is opened with a chain key other than the one it was written with."""


class JournalDamagedError(JournalIntegrityError):
    """Raised when LMDB meets a damaged page of the data file while reading it.

    LMDB has no checksums: most damage is found by ``verify``'s hash chain instead, but
    a damaged page of the B-tree itself can make LMDB refuse to read on. A damaged
    header page makes LMDB refuse the file as a whole (``JournalFormatError``).
    """


class JournalRecordError(JournalIntegrityError, ValueError):
    """Raised when a stored record cannot be read: malformed, unknown type, or newer schema.

    ``seq`` names the record; ``__cause__`` is the event layer's error, if any.
    """

    def __init__(self, seq: int, reason: str) -> None:
        super().__init__(f"record at seq {seq}: {reason}")
        self.seq = seq
        self.reason = reason


class JournalUnavailableError(JournalError):
    """Raised when an append fails in the storage (an I/O error, a full disk).

    The journal is then fail-stop: it refuses every later append with
    ``JournalFailedError`` until it is closed and reopened, because after a failed
    write or sync a retry could "succeed" without the data (PITFALLS.md §1.10).
    ``__cause__`` is the LMDB error.
    """


class JournalFullError(JournalUnavailableError):
    """Raised when an append needs more room than ``max_map_size`` allows; fail-stop too."""


class JournalFailedError(JournalUnavailableError):
    """Raised by every append after an earlier append failed; reopen the journal."""
