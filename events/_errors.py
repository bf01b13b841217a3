"""Errors of the event layer: encoding, decoding and schema versions."""

from __future__ import annotations

from cogfabric._errors import CogfabricError

__all__ = [
    "CognitiveStateSchemaVersionError",
    "EventDecodeError",
    "EventError",
    "EventVersionError",
    "InvalidEventError",
    "NewerCognitiveStateError",
    "UnencodableValueError",
    "UnknownEventTypeError",
]


def newer_cogfabric_advice() -> str:
    """The advice for a record of a version newer than this cogfabric's, naming its version."""
    import cogfabric  # noqa: PLC0415 - the package is initialised by the time a record is read

    return (
        f"a newer cogfabric than this one ({cogfabric.__version__}) writes such records; "
        "read them with it, or upgrade this one"
    )


class EventError(CogfabricError):
    """Base class of the errors raised by ``cogfabric.events``."""


class EventDecodeError(EventError, ValueError):
    """Raised when bytes do not decode to a known event (truncated, garbage, wrong types).

    Wraps ``msgspec.DecodeError`` and ``RecursionError``; the original is ``__cause__``.
    """


class UnknownEventTypeError(EventDecodeError):
    """Raised when a record's type tag names no event type this code knows."""

    def __init__(self, type_name: str) -> None:
        super().__init__(f"unknown event type {type_name!r}")
        self.type_name = type_name


class EventVersionError(EventDecodeError):
    """Raised when a record's schema version is newer than this code knows.

    Not raised for older versions: those are upcast on read, or, when no upcaster is
    registered for them, reported by the same class with ``stored < known``.
    """

    def __init__(self, type_name: str, stored: int, known: int, detail: str = "") -> None:
        what = "newer than" if stored > known else "not upgradable to"
        msg = f"event type {type_name!r} is at version {stored}, {what} the known version {known}"
        super().__init__(msg + (f": {detail}" if detail else ""))
        self.type_name = type_name
        self.stored = stored
        self.known = known


class UnencodableValueError(EventError, TypeError):
    """Raised when a value crossing a context layer cannot be encoded by msgspec.

    Values are copied between layers by encoding and decoding them, so only what
    msgspec can encode (None, bool, int within 64 bits, float, str, bytes, lists,
    tuples, sets, dicts and other mappings, msgspec Structs) may cross; the task
    layer's keys must be strings.
    """


class InvalidTextError(EventError, TypeError):
    """Raised for an id, key, name, role or topic that is not text UTF-8 can encode.

    Not a ``str``, or one with a lone surrogate: it would go into a journaled event,
    which no reader could then decode. Also a ``TypeError``.
    """


class InvalidEventError(EventError, TypeError, ValueError):
    """Raised when an event holds a field its type's declaration would refuse on read.

    msgspec checks a Struct's field types and constraints when it decodes one, not when
    one is built: ``PrivateSet(key=5)`` encodes, yet no reader could decode it. A
    journal that stored it could never be replayed past it, so appends check that each
    event reads back (``Journal.append(validate=True)``, the default). Both a
    ``TypeError`` (a field of the wrong type) and a ``ValueError`` (a value outside its
    bounds, such as a ``CognitiveState`` of a future schema version).
    """


class CognitiveStateSchemaVersionError(EventError, ValueError):
    """Raised when a CognitiveState claims a schema version this code cannot accept.

    That is a version newer than ``COGNITIVE_STATE_SCHEMA_VERSION``, a
    ``schema_version`` that is not a whole number, or keys other than the six fields
    in a versioned mapping. The message starts with the original's sentinel string,
    ``"agentfabric: cognitive state schema version mismatch"``.

    ``stored`` is the ``schema_version`` the state or mapping gave (as given, when it
    is not a whole number) and ``known`` this code's ``COGNITIVE_STATE_SCHEMA_VERSION``,
    so a program can tell a state from a newer cogfabric (``stored > known``) from a
    malformed one without reading the message. Both are None when the error was
    raised without them.
    """

    def __init__(self, message: str, *, stored: object = None, known: int | None = None) -> None:
        super().__init__(message)
        self.stored = stored
        self.known = known


class NewerCognitiveStateError(EventVersionError, CognitiveStateSchemaVersionError):
    """Raised when a record holds a ``CognitiveState`` of a schema version newer than this code knows.

    As a newer cogfabric would store it: the event at a version this code knows, the
    state inside it at a newer one. Both an ``EventVersionError`` (a journal read
    raises ``JournalRecordVersionError``) and a ``CognitiveStateSchemaVersionError``.
    ``type_name`` is ``"CognitiveState"``, ``stored`` and ``known`` its two versions,
    ``record_type`` and ``field`` where the record holds it.
    """

    stored: int
    known: int

    def __init__(self, record_type: str, field: str, stored: int, known: int) -> None:
        msg = (
            f"agentfabric: cognitive state schema version mismatch: {record_type}.{field} holds a "
            f"CognitiveState at schema version {stored}, newer than the known version {known}: "
            + newer_cogfabric_advice()
        )
        Exception.__init__(self, msg)
        self.type_name = "CognitiveState"
        self.stored = stored
        self.known = known
        self.record_type = record_type
        self.field = field
