"""The journal: an append-only, tamper-evident event log on LMDB.

``cogfabric.store.testing`` (not imported here) holds ``JournalContract``, the tests
every journal backend must pass.
"""

from __future__ import annotations

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
    JournalRecordDecodeError,
    JournalRecordError,
    JournalRecordTypeError,
    JournalRecordVersionError,
    JournalStillFullError,
    JournalUnavailableError,
)
from ._journal import Journal, Record, Snapshot, VerifyReport
from ._lmdb import FORMAT_VERSION, LmdbJournal

__all__ = [
    "FORMAT_VERSION",
    "InvalidStreamError",
    "Journal",
    "JournalClosedError",
    "JournalConflictError",
    "JournalDamagedError",
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
    "LmdbJournal",
    "Record",
    "Snapshot",
    "VerifyReport",
]
