"""The one place that knows how events and values are encoded: msgpack via msgspec.

Never pickle: a journal handed to an auditor is untrusted input, and msgspec decodes
only the types it is told to.
"""

from __future__ import annotations

import functools
import math
import reprlib
import threading
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, NoReturn, TypeVar, Union

import msgspec

from ._base import Event
from ._cognitive import COGNITIVE_STATE_SCHEMA_VERSION
from ._errors import (
    EventDecodeError,
    EventError,
    EventVersionError,
    InvalidEventError,
    InvalidTextError,
    NewerCognitiveStateError,
    UnencodableValueError,
    UnknownEventTypeError,
    newer_cogfabric_advice,
)
from ._events import BUILTIN_UPCASTERS, EVENT_TYPES, AgentSpawned, SessionCreated, SessionMessageAdded

__all__ = [
    "DEFAULT_CODEC",
    "MAX_VALUE_DEPTH",
    "EventCodec",
    "Upcaster",
    "admit_mapping",
    "admit_value",
    "copy_mapping",
    "copy_value",
    "decode",
    "encode",
    "encode_value",
    "journal_repr",
    "journal_text",
    "nests_too_deeply",
    "register_upcaster",
    "require_str",
    "unregister_upcaster",
    "validated",
]

_S = TypeVar("_S", bound=msgspec.Struct)

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
"""Turns the raw mapping of a record at version N into the mapping at version N+1."""


def _other_mappings_as_dicts(value: object) -> object:
    """Encode any other ``Mapping`` as a dict (msgspec's hook for the types it cannot encode).

    So the read-only layers of a ``ContextView`` (``MappingProxyType``), or a
    ``ChainMap``, can be stored as they are; they come back as dicts, as every copy
    does. A ``str`` subclass (``numpy.str_``) is encoded as its text and comes back a
    plain ``str``. Anything else is still refused, with msgspec's own words.
    """
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, Mapping):
        try:
            return dict(value)
        except Exception as exc:  # a broken mapping: one error type for every caller to catch
            msg = f"cannot encode {type(value).__name__}: {exc!r}"
            raise TypeError(msg) from exc
    msg = f"Encoding objects of type {type(value).__name__} is unsupported"
    raise TypeError(msg)


_encoder: Final = msgspec.msgpack.Encoder(enc_hook=_other_mappings_as_dicts)
_any_decoder: Final = msgspec.msgpack.Decoder()
_mapping_decoder: Final = msgspec.msgpack.Decoder(dict[str, Any])

# Exceptions msgspec raises for a value it cannot encode: an unsupported type
# (TypeError), an int outside 64 bits (OverflowError), nesting past its limit.
_ENCODE_ERRORS: Final = (TypeError, OverflowError, RecursionError, ValueError)
_DECODE_ERRORS: Final = (msgspec.DecodeError, RecursionError)

_FINITE_BESIDES_AT: Final[tuple[tuple[type[Event], Callable[[Any], float | None], str], ...]] = (
    (SessionMessageAdded, lambda event: event.message.time, "its message's time must be finite seconds"),
    (
        SessionCreated,
        lambda event: None if event.seed is None else event.seed.time,
        "its message's time must be finite seconds",
    ),
    (AgentSpawned, lambda event: event.priority, "its priority must be a finite number"),
)
"""The events (and their subclasses) holding a number besides ``at`` that must be finite,
which the runtime refuses as it is given (a session message's ``time``, a spawn's
``priority``): how to read it (None: no such number), and what an error says of it."""


def _version_of(cls: type[Event]) -> int:
    for field in msgspec.structs.fields(cls):
        if field.name == "v":
            return int(field.default)
    msg = f"{cls.__name__} has no version field"  # pragma: no cover - every Event has one
    raise TypeError(msg)


def _is_pinned(info: msgspec.inspect.StructType) -> bool:
    """Whether the typed decoder refuses every version of the type ``info`` describes but the current one."""
    for field in info.fields:
        if field.name == "v":
            kind = field.type
            return bool(getattr(kind, "ge", None) == getattr(kind, "le", None) == field.default)
    return False  # pragma: no cover - every Event has a version field


def _tag_of(cls: type[Event]) -> str:
    # the Struct's own config (msgspec.inspect.type_info would say the same, at some ms a type)
    return str(cls.__struct_config__.tag)


def _check_types(type_list: tuple[object, ...]) -> None:
    """Refuse no types at all, or one that is no ``Event`` subclass (a list, unhashable, too)."""
    if not type_list:
        msg = "an EventCodec needs at least one event type"
        raise TypeError(msg)
    for cls in type_list:
        if not (isinstance(cls, type) and issubclass(cls, Event)):
            msg = f"an EventCodec's types are Event subclasses, got {cls!r}"
            raise TypeError(msg)


def _types_by_tag(type_list: tuple[type[Event], ...]) -> dict[str, type[Event]]:
    """The codec's types by tag; refuse what msgspec's union would refuse in words of its own.

    msgspec refuses a union of two Structs of one tag, but names neither: it lists the
    whole union, every built-in event type with it.
    """
    by_tag: dict[str, type[Event]] = {}
    for cls in type_list:
        tag = _tag_of(cls)
        other = by_tag.setdefault(tag, cls)
        if other is not cls:
            msg = (
                f"two event types of the type tag {tag!r}: {other.__module__}.{other.__qualname__} "
                f"and {cls.__module__}.{cls.__qualname__} (the tag is the class name, unless "
                "given as tag=: a record names its type by it, so each needs its own)"
            )
            raise TypeError(msg)
    return by_tag


class EventCodec:
    """Encodes events to msgpack and decodes them back through one typed decoder.

    Decoding checks each record's schema version: the current version takes the fast
    path (one typed decode); an older one is decoded raw, passed through the
    registered upcasters one version at a time, and then decoded as the current type;
    a newer one, or an unknown type tag, raises an error that names them.
    """

    def __init__(
        self,
        types: Iterable[type[Event]] = EVENT_TYPES,
        upcasters: Mapping[tuple[str, int], Upcaster] | None = None,
    ) -> None:
        """Build a codec for ``types``, with optional ``{(type_name, from_version): fn}``.

        The built-in types' own upcasters (``BUILTIN_UPCASTERS``) come with them; those
        given here are added, or replace them.

        Raises:
            TypeError: ``types`` is empty, or holds something that is no ``Event``
                subclass, or two classes of one type tag (two events named alike, or
                one of yours named as one of this package's: the message names the tag
                and both classes).
            UnknownEventTypeError, TypeError, ValueError: an upcaster given here, as
                ``register_upcaster`` would (but that it replaces a built-in one).

        """
        type_list = tuple(types)
        _check_types(type_list)
        type_list = tuple(dict.fromkeys(type_list))  # one class given twice is one type
        self._types: dict[str, type[Event]] = _types_by_tag(type_list)
        self._versions: dict[type[Event], int] = {cls: _version_of(cls) for cls in type_list}
        self._decoder = msgspec.msgpack.Decoder(Union[type_list])  # noqa: UP007
        # by exact type (the typed decoder makes this codec's own classes): one dict lookup
        # an event validated, where an isinstance of a union made each time cost more
        self._finite: dict[type[Event], tuple[Callable[[Any], float | None], str]] = {
            cls: (read, rule)
            for cls in type_list
            for base, read, rule in _FINITE_BESIDES_AT
            if issubclass(cls, base)
        }
        builtin = {_tag_of(cls): cls for cls in EVENT_TYPES}
        self._upcasters: dict[tuple[str, int], Upcaster] = {
            key: upcaster
            for key, upcaster in BUILTIN_UPCASTERS.items()
            if self._types.get(key[0]) is builtin.get(key[0])
        }
        for (type_name, from_version), upcaster in (upcasters or {}).items():
            self._upcasters.pop((type_name, from_version), None)  # a built-in one: replaced
            self.register_upcaster(type_name, from_version, upcaster)
        # one inspection of all the types (one a type took most of ``import cogfabric.events``)
        self._pinned = all(_is_pinned(info) for info in msgspec.inspect.multi_type_info(type_list))  # type: ignore[arg-type]

    @property
    def types(self) -> Mapping[str, type[Event]]:
        """The event types this codec knows, by type name (a read-only view).

        Read-only: the codec decodes and checks by this very mapping, so a change to it
        would change what ``decode`` and ``encode_many`` accept without the typed
        decoder built with the codec. A codec of other types is a new ``EventCodec``.
        """
        return types.MappingProxyType(self._types)

    @property
    def pinned(self) -> bool:
        """Whether a typed decode of the union alone refuses every version but the current one.

        Then a stored event that is not current fails that decode and can take the
        slow path (``decode``); otherwise every event must go through ``decode``.
        """
        return self._pinned

    def current_version(self, type_name: str) -> int:
        """The version this code writes for ``type_name``.

        Raises:
            UnknownEventTypeError: ``type_name`` is no type of this codec.

        """
        cls = self._types.get(type_name)
        if cls is None:
            raise UnknownEventTypeError(type_name)
        return self._versions[cls]

    def register_upcaster(self, type_name: str, from_version: int, upcaster: Upcaster) -> None:
        """Register ``upcaster`` to turn ``type_name`` records at ``from_version`` into the next.

        The upcaster takes the record as a dict and returns the next version's dict. A
        record's type, version and id are its own: whatever the upcaster returns for
        them is replaced by the record's type, the version reached and the stored id.
        Its stream is its own too, but that is made of the event's fields (``Event.stream``):
        an upcaster keeps what names it, or a journal read refuses the record as one filed
        under another stream (``JournalRecordError``), as ``verify(decode=True)`` does.
        Keys that the type at the version reached does not declare are dropped, as
        msgspec drops unknown fields (so a field can be removed by leaving it in): a
        misspelt name of a defaulted field reads back as its default, silently.

        Raises:
            UnknownEventTypeError: ``type_name`` is no type of this codec.
            TypeError: ``upcaster`` is not callable, or ``from_version`` not an int.
            ValueError: ``from_version`` is not a version before the current one (0 to
                the current version - 1: a negative one is refused too), or an
                upcaster of that step is registered already (``unregister_upcaster``
                first, to replace it: one registered by this package too).

        """
        current = self.current_version(type_name)
        if not callable(upcaster):
            msg = f"an upcaster is a function of a record's dict, got {type(upcaster).__name__}"
            raise TypeError(msg)
        if isinstance(from_version, bool) or not isinstance(from_version, int):
            msg = f"from_version must be an int, got {type(from_version).__name__}"
            raise TypeError(msg)
        if not 0 <= from_version < current:
            msg = f"{type_name} is at version {current}; an upcaster must start from 0 to {current - 1}"
            raise ValueError(msg)
        if (type_name, from_version) in self._upcasters:
            msg = (
                f"an upcaster of {type_name} from version {from_version} is registered already "
                "(unregister_upcaster first, to replace it)"
            )
            raise ValueError(msg)
        self._upcasters[(type_name, from_version)] = upcaster

    def unregister_upcaster(self, type_name: str, from_version: int) -> None:
        """Remove an upcaster; a no-op when none is registered for that step.

        Raises:
            UnknownEventTypeError: ``type_name`` is no type of this codec (a misspelt
                name would otherwise remove nothing, silently).
            TypeError: ``from_version`` is not an int (``True`` would remove the
                upcaster from version 1).

        """
        self.current_version(type_name)
        if isinstance(from_version, bool) or not isinstance(from_version, int):
            msg = f"from_version must be an int, got {type(from_version).__name__}"
            raise TypeError(msg)
        self._upcasters.pop((type_name, from_version), None)

    def encode(self, event: Event) -> bytes:
        """Encode one event.

        Raises:
            UnencodableValueError: a field holds a value msgspec cannot encode.
            TypeError: ``event`` is not an ``Event``. (An event of a type this codec does
                not know, or not at its type's version, is encoded all the same: ``decode``
                refuses it, or upcasts one of an older version that upcasters lead from;
                ``encode_many``, which ``Journal.append`` uses, refuses both.)

        """
        if not isinstance(event, Event):
            msg = f"only events are encoded here, not {type(event).__name__}"
            raise TypeError(msg)
        try:
            return _encoder.encode(event)
        except _ENCODE_ERRORS as exc:
            msg = f"cannot encode {type(event).__name__}: {exc}"
            raise UnencodableValueError(msg) from exc

    def encode_many(self, events: list[Event], *, validate: bool = False) -> list[bytes]:
        """Encode a batch of events to store, in one tight loop (the append hot path).

        Refuses an event this codec could not read back: one of a type it does not
        know, or whose ``v`` is not its type's current version (msgspec checks ``v``
        when it decodes, not when an event is built, so ``PrivateSet(..., v=2)`` would
        otherwise be stored and then refused by every replay). With ``validate``, also
        one whose fields do not decode as declared (``PrivateSet(key=5)``): each
        payload is decoded back once, which costs about as much as encoding it; and
        one whose ``at`` is not finite (NaN or an infinity): msgpack stores it and every
        reader decodes it, yet it orders and expires nothing (a session stamped with it
        never expires), and strict JSON, ``cogfabric export``'s, has no such number; so
        is a session message (``SessionMessageAdded``'s, a ``SessionCreated``'s seed)
        whose ``time`` is, and an ``AgentSpawned`` whose ``priority`` is, which the
        runtime refuses as it is given them.

        Raises:
            TypeError: an item is not an ``Event``, or not of the class this codec
                decodes its type tag into.
            UnknownEventTypeError: an event's type tag is not one of this codec's.
            EventVersionError: an event's ``v`` is not its type's current version.
            UnencodableValueError: as ``encode``, for the first event that cannot be encoded.
            InvalidEventError: with ``validate``, an event whose fields would not decode
                (it names the event's position and type, and the field), or whose ``at``
                (a session message's ``time``, a spawn's ``priority``) is NaN or infinite.

        """
        versions = self._versions
        try:
            # ``type(v) is not int``: True and 1.0 equal 1, yet no reader decodes them as a version
            stray = [e for e in events if versions.get(type(e)) != e.v or type(e.v) is not int]
        except AttributeError:  # something that is not an event at all
            stray = [event for event in events if not isinstance(event, Event)]
        if stray:
            self._refuse(stray[0])
        enc = _encoder.encode
        try:
            payloads = [enc(event) for event in events]
        except _ENCODE_ERRORS:
            payloads = [self.encode(event) for event in events]  # names the bad one
        if validate:
            self._check_readable(events, payloads)
        return payloads

    def _check_readable(self, events: list[Event], payloads: list[bytes]) -> None:
        """Decode each payload back with the union's typed decoder; raise for the first that fails.

        Also refuse one nesting values deeper than ``MAX_VALUE_DEPTH`` (and the few levels
        of the event around them): how deep a reader can decode depends on its stack; and
        one whose ``at`` is NaN or infinite, which reads back but orders and expires nothing,
        and a session message whose ``time`` is, or a spawn whose ``priority`` is (JSON has
        no NaN: an export shows ``null``, and an event holding one is not equal to itself
        read back).
        """
        typed = self._decoder.decode
        isfinite = math.isfinite
        finite = self._finite
        for index, payload in enumerate(payloads):
            try:
                read: Event = typed(payload)
                if len(payload) > MAX_VALUE_DEPTH and nests_too_deeply(payload):
                    msg = f"it nests lists and maps deeper than {MAX_VALUE_DEPTH} levels"
                    raise msgspec.ValidationError(msg)  # noqa: TRY301 - refused as the others are
            except (msgspec.ValidationError, *_DECODE_ERRORS) as exc:
                msg = f"event {index} ({type(events[index]).__name__}) would not read back: {exc}"
                raise InvalidEventError(msg) from exc
            if not isfinite(read.at):
                msg = (
                    f"event {index} ({type(events[index]).__name__}): its time `at` must be finite "
                    f"seconds since the epoch, got {read.at!r}"
                )
                raise InvalidEventError(msg)
            check = finite.get(type(read))
            if check is not None:
                value = check[0](read)
                if value is not None and not isfinite(value):
                    msg = f"event {index} ({type(events[index]).__name__}): {check[1]}, got {value!r}"
                    raise InvalidEventError(msg)

    def _refuse(self, event: Event) -> NoReturn:
        """Raise the error for an event that ``encode_many`` will not store."""
        cls = type(event)
        if not isinstance(event, Event):
            msg = f"only events can be stored, not {cls.__name__}"
            raise TypeError(msg)
        tag = _tag_of(cls)
        own = self._types.get(tag)
        if own is None:
            raise UnknownEventTypeError(tag)
        known = self._versions[own]
        if type(event.v) is not int:
            msg = f"{cls.__qualname__}'s version v must be an int, got {type(event.v).__name__} {event.v!r}"
            raise TypeError(msg)
        if event.v == known:  # not the codec's class for the tag, yet at its version
            msg = f"{cls.__qualname__} is not the class this codec decodes {tag!r} into ({own.__qualname__})"
            raise TypeError(msg)
        detail = "an event is stored at its type's current version"
        raise EventVersionError(tag, event.v, known, detail)

    def decode(self, data: bytes | memoryview) -> Event:
        """Decode one event, upcasting an older version.

        Raises:
            UnknownEventTypeError: the type tag names no known event type.
            EventVersionError: the version is newer than known, or older with no
                upcaster path to the current one.
            EventDecodeError: anything else that is not a valid event.

        """
        try:
            event: Event = self._decoder.decode(data)
        except msgspec.ValidationError as exc:
            return self._decode_slow(data, exc)
        except _DECODE_ERRORS as exc:
            msg = f"not a valid event record: {exc}"
            raise EventDecodeError(msg) from exc
        if event.v != self._versions[type(event)]:
            return self._decode_slow(data, None)
        return event

    def decode_many(self, payloads: list[bytes]) -> list[Event]:
        """Decode a batch of payloads, in one tight loop (the replay hot path).

        Raises:
            EventError: as ``decode``, for the first bad payload; its ``index``
                attribute is that payload's position in ``payloads``.

        """
        if self._pinned:
            typed = self._decoder.decode
            try:
                return [typed(payload) for payload in payloads]
            except (msgspec.ValidationError, *_DECODE_ERRORS):
                pass  # one by one below: upcasts old versions, names the bad record
        out: list[Event] = []
        try:
            for payload in payloads:
                out.append(self.decode(payload))  # noqa: PERF401 - len(out) names the bad record
        except EventError as exc:
            exc.index = len(out)  # type: ignore[attr-defined]
            raise
        return out

    def _decode_slow(self, data: bytes | memoryview, cause: Exception | None) -> Event:
        try:
            raw = _any_decoder.decode(data)
        except _DECODE_ERRORS as exc:
            msg = f"not a valid event record: {exc}"
            raise EventDecodeError(msg) from exc
        tag = raw.get("type") if isinstance(raw, dict) else None
        if not isinstance(tag, str):
            msg = "not a valid event record: no type tag"
            raise EventDecodeError(msg) from cause
        cls = self._types.get(tag)
        if cls is None:
            raise UnknownEventTypeError(tag) from cause
        current = self._versions[cls]
        # No ``v`` (every writer stores one): the current version, as the typed decode
        # reads it, so a malformed record is refused here, not upcast into shape.
        stored = raw.get("v", current)
        if isinstance(stored, bool) or not isinstance(stored, int):
            msg = f"{tag} record has a version that is not an integer: {stored!r}"
            raise EventDecodeError(msg) from cause
        if stored > current:
            raise EventVersionError(tag, stored, current, _newer_writer(cls)) from cause
        if stored == current:
            newer = _newer_cognitive_state(tag, raw)
            if newer is not None:
                raise newer from cause
            msg = f"not a valid {tag} record: {cause}"
            raise EventDecodeError(msg) from cause
        raw = self._upcast(tag, raw, stored, current, cause)
        try:
            return self._decoder.decode(_encoder.encode(raw))  # type: ignore[no-any-return]
        except (*_DECODE_ERRORS, *_ENCODE_ERRORS) as exc:
            if current - stored == 1:
                steps = f"the upcaster from version {stored}"
            else:  # only the last result is typed: an earlier step's error shows only there
                steps = (
                    f"the upcasters from versions {stored} to {current - 1}, the last one's result checked"
                )
            msg = f"{tag} record upcast from version {stored} is not valid at version {current}: {exc}"
            msg += f" ({steps})"
            raise EventDecodeError(msg) from exc

    def _upcast(
        self, tag: str, raw: dict[str, Any], stored: int, current: int, cause: Exception | None
    ) -> dict[str, Any]:
        """Run a record's upcasters from ``stored`` to ``current``; keep its type, version and id."""
        event_id = raw.get("id")
        for version in range(stored, current):
            upcaster = self._upcasters.get((tag, version))
            if upcaster is None:
                raise EventVersionError(
                    tag, stored, current, f"no upcaster from version {version}"
                ) from cause
            try:
                raw = upcaster(raw)
            except Exception as exc:  # an upcaster is user code fed untrusted records
                msg = (
                    f"{tag} record stored at version {stored} could not be upcast to {current}: "
                    f"the upcaster from version {version} raised {exc!r}"
                )
                raise EventDecodeError(msg) from exc
            if not isinstance(raw, dict):
                msg = (
                    f"{tag} record stored at version {stored} could not be upcast to {current}: the "
                    f"upcaster from version {version} returned {type(raw).__name__}, not a dict"
                )
                raise EventDecodeError(msg)
        raw["type"] = tag
        raw["v"] = current
        if event_id is not None:
            raw["id"] = event_id  # its identity: a retry or a cause names the stored id
        return raw


def _newer_writer(cls: type[Event]) -> str:
    """What to do about a record of a version newer than ``cls``: who writes such records."""
    if cls in EVENT_TYPES:
        return newer_cogfabric_advice()
    return "newer code of this event type writes such records; read them with it"


def _newer_cognitive_state(tag: str, raw: dict[str, Any]) -> NewerCognitiveStateError | None:
    """The error for a record whose CognitiveState is of a newer schema version, if it is that."""
    for field in _COGNITIVE_FIELDS:
        state = raw.get(field)
        version = state.get("schema_version") if isinstance(state, dict) else None
        if type(version) is int and version > COGNITIVE_STATE_SCHEMA_VERSION:
            return NewerCognitiveStateError(tag, field, version, COGNITIVE_STATE_SCHEMA_VERSION)
    return None


_COGNITIVE_FIELDS: Final = ("state", "cognitive")
"""The fields in which the built-in events hold a CognitiveState."""


DEFAULT_CODEC: Final = EventCodec()
"""The codec for the events of this package; the journal uses it unless given another."""


def encode(event: Event) -> bytes:
    """Encode one event with the default codec (see ``EventCodec.encode``)."""
    return DEFAULT_CODEC.encode(event)


def decode(data: bytes | memoryview) -> Event:
    """Decode one event with the default codec (see ``EventCodec.decode``)."""
    return DEFAULT_CODEC.decode(data)


def register_upcaster(type_name: str, from_version: int, upcaster: Upcaster) -> None:
    """Register an upcaster on the default codec (see ``EventCodec.register_upcaster``)."""
    DEFAULT_CODEC.register_upcaster(type_name, from_version, upcaster)


def unregister_upcaster(type_name: str, from_version: int) -> None:
    """Remove an upcaster from the default codec (see ``EventCodec.unregister_upcaster``).

    Also one this package registered (``IpcSubscribed`` and ``PromptRejected`` from
    version 1): to replace it, unregister it, then ``register_upcaster`` your own. Until
    then, a record of that step no longer decodes on this codec (an ``EventVersionError``).
    """
    DEFAULT_CODEC.unregister_upcaster(type_name, from_version)


MAX_VALUE_DEPTH: Final = 512
"""How deeply a value entering a context layer or an IPC payload may nest lists and maps.

msgspec's nesting limit is the interpreter's recursion limit, counted from wherever it
runs: a value the caller's shallow stack could encode could fail in the journal
writer's encoding, a level deeper in its event, or in a reader's decoding, from a
deeper stack (``verify`` took such a record for a malformed one). A fixed limit, far
inside the default recursion limit of 1000, leaves every writer and reader room."""

# The msgpack headers of arrays and maps (fix, 16 and 32 bit): a value holds at most as
# many lists and maps as its encoding has bytes of these values.
_NOT_CONTAINER_HEADERS: Final = bytes(
    b
    for b in range(256)
    if not (0x80 <= b < 0xA0 or 0xDC <= b <= 0xDF)  # noqa: PLR2004
)
_CONTAINERS: Final = frozenset({list, dict, tuple})  # what a decoded value nests (tuples: map keys)


def encode_value(value: object) -> bytes:
    """Encode any msgspec-encodable value.

    Raises:
        UnencodableValueError: a value msgspec cannot encode (also a ``TypeError``).

    """
    try:
        return _encoder.encode(value)
    except _ENCODE_ERRORS as exc:
        if isinstance(exc, RecursionError):
            msg = (
                f"value of type {type(value).__name__} cannot cross a context layer: it nests lists "
                f"and maps too deeply to encode from this call's stack (values may nest "
                f"{MAX_VALUE_DEPTH} levels deep)"
            )
        else:
            msg = f"value of type {type(value).__name__} cannot cross a context layer: {exc}"
            at, key = _unencodable_part(value, MAX_VALUE_DEPTH)
            if at:  # a part of it: name where, as a subscript of the value given
                msg += f" - at `${_shown_path(at)}`" + (" (its key)" if key else "")
        raise UnencodableValueError(msg) from exc


_SHOWN_SUBSCRIPTS: Final = 8
"""How many subscripts of a deep part's path a message shows at each end."""


def _shown_path(at: list[str]) -> str:
    """``at`` joined; past ``2 * _SHOWN_SUBSCRIPTS`` subscripts (values nest 512 deep), less the middle."""
    if len(at) <= 2 * _SHOWN_SUBSCRIPTS:
        return "".join(at)
    left_out = len(at) - 2 * _SHOWN_SUBSCRIPTS
    return f"{''.join(at[:_SHOWN_SUBSCRIPTS])}...{left_out} more...{''.join(at[-_SHOWN_SUBSCRIPTS:])}"


def _unencodable_part(value: object, depth: int) -> tuple[list[str], bool]:
    """Where in ``value`` (a list's or dict's) msgspec fails: ``["['notes']", "[2]"]``; [] for ``value``.

    The flag is True when it is the key of the last subscript that fails, not its value.

    Only called once ``value`` failed to encode. Each step encodes the items of one
    list or mapping until one fails, then looks into that one; a key that fails is
    named by its own subscript. The items are taken one at a time (no copy of a long
    list's). A value whose own methods raise (a mapping's ``items()``) ends the search
    where it is: the message then names no part below it.
    """
    if depth <= 0 or not isinstance(value, Mapping | list | tuple):
        return [], False
    try:
        items = value.items() if isinstance(value, Mapping) else enumerate(value)
        for key, item in items:
            if isinstance(value, Mapping):
                try:
                    _encoder.encode(key)
                except _ENCODE_ERRORS:
                    return [f"[{reprlib.repr(key)}]"], True
            try:
                _encoder.encode(item)
            except _ENCODE_ERRORS:
                inner, is_key = _unencodable_part(item, depth - 1)
                return [f"[{reprlib.repr(key)}]", *inner], is_key
    except Exception:  # noqa: BLE001 - a value's own failing methods: no part to name
        return [], False
    return [], False


def _nested_deeper_than(value: object, limit: int) -> bool:
    """Whether a decoded value nests more than ``limit`` lists, maps and tuples (map keys).

    Level by level, without recursion: the point is values too deep to recurse into.
    """
    level: list[Any] = [value] if type(value) in _CONTAINERS else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list[Any] = []
        for container in level:
            if type(container) is dict:
                below += [v for v in container.values() if type(v) in _CONTAINERS]
                below += [k for k in container if type(k) is tuple]
            else:
                below += [v for v in container if type(v) in _CONTAINERS]
        level = below
    return False


_EVENT_LEVELS: Final = 4
"""The levels an event adds around the values it holds (its map; a cognitive state's)."""


def nests_too_deeply(encoded: bytes, *, around: int = 0) -> bool:
    """Whether an encoded event nests values deeper than ``MAX_VALUE_DEPTH`` allows.

    ``around``: the levels the encoding wraps the event in (a stored record's array: 1).
    A byte count in C; a decode and a walk only for an encoding with more bytes that
    could head a list or a map than that limit.
    """
    limit = MAX_VALUE_DEPTH + _EVENT_LEVELS + around
    if len(encoded.translate(None, _NOT_CONTAINER_HEADERS)) <= limit:
        return False
    try:
        return _nested_deeper_than(_any_decoder.decode(encoded), limit)
    except RecursionError:
        return True


def _check_depth(data: bytes, copy: object) -> None:
    """Refuse a value nested deeper than ``MAX_VALUE_DEPTH``, given its encoding and its copy.

    For an encoding longer than that (a shorter one cannot nest so deep; the callers
    test that, the hot case): a byte count in C for one with at most that many bytes
    that could head a list or a map, a walk of its lists and maps (not of their other
    items' contents) otherwise.
    """
    if len(data.translate(None, _NOT_CONTAINER_HEADERS)) <= MAX_VALUE_DEPTH:
        return
    if _nested_deeper_than(copy, MAX_VALUE_DEPTH):
        msg = (
            f"value of type {type(copy).__name__} cannot cross a context layer: it nests lists and "
            f"maps deeper than {MAX_VALUE_DEPTH} levels"
        )
        raise UnencodableValueError(msg)


def copy_value(value: object) -> Any:  # noqa: ANN401 - values of the layers are any encodable value
    """Return a deep copy of ``value`` made by encoding and decoding it.

    Tuples come back as lists and Structs as dicts, as any journal replay returns them.
    For a value that enters a layer, ``admit_value``.

    Raises:
        UnencodableValueError: a value msgspec cannot encode (also a ``TypeError``).

    """
    try:
        return _any_decoder.decode(encode_value(value))
    except _DECODE_ERRORS as exc:  # pragma: no cover - what encodes, decodes
        raise UnencodableValueError(str(exc)) from exc


def admit_value(value: object) -> Any:  # noqa: ANN401 - values of the layers are any encodable value
    """``copy_value`` for a value entering a context layer or an IPC payload, to be journaled.

    Raises:
        UnencodableValueError: as ``copy_value``, and for a value that nests lists and
            maps deeper than ``MAX_VALUE_DEPTH`` levels.

    """
    data = encode_value(value)
    try:
        copy = _any_decoder.decode(data)
    except _DECODE_ERRORS as exc:  # pragma: no cover - what encodes, decodes
        raise UnencodableValueError(str(exc)) from exc
    if len(data) > MAX_VALUE_DEPTH:
        _check_depth(data, copy)
    return copy


def copy_mapping(value: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return a deep copy of a mapping with string keys; None becomes ``{}``.

    For a mapping that enters a layer, ``admit_mapping``.

    Raises:
        UnencodableValueError: a key that is not a string or a value msgspec cannot encode.

    """
    return _copy_mapping(value, admit=False)


def admit_mapping(value: Mapping[str, Any] | None) -> dict[str, Any]:
    """``copy_mapping`` for a mapping entering a context layer, to be journaled.

    Raises:
        UnencodableValueError: as ``copy_mapping``, and for a mapping that nests lists
            and maps deeper than ``MAX_VALUE_DEPTH`` levels (itself the first).

    """
    return _copy_mapping(value, admit=True)


def _copy_mapping(value: Mapping[str, Any] | None, *, admit: bool) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        msg = f"expected a mapping with string keys, got {type(value).__name__}"
        raise UnencodableValueError(msg)
    if not isinstance(value, dict):
        try:
            value = dict(value)
        except Exception as exc:  # a Mapping whose own methods fail, as a nested one would in encoding
            msg = f"cannot copy the mapping: {type(exc).__name__}: {journal_text(exc, 200)}"
            raise UnencodableValueError(msg) from exc
    data = encode_value(value)
    try:
        copy = _mapping_decoder.decode(data)
    except _DECODE_ERRORS as exc:
        msg = f"expected a mapping with string keys: {exc}"
        raise UnencodableValueError(msg) from exc
    if admit and len(data) > MAX_VALUE_DEPTH:
        _check_depth(data, copy)
    return copy


def require_str(value: object, what: str) -> str:
    """Return ``value`` as a plain ``str`` if UTF-8 can encode it; raise ``InvalidTextError`` otherwise.

    msgspec checks a Struct's field types only when it decodes one, so a journaled field
    of the wrong type would be written, and then refuse to decode on replay: every
    string that goes into an event from the public API is checked here first, and the
    event is built from what this returns. A ``str`` subclass (``numpy.str_``, a
    ``StrEnum`` member) comes back as its text in a plain ``str``: msgspec encodes no
    other subclass, and none of its methods (``__len__``, ``__eq__``) runs later.

    Raises:
        InvalidTextError: not a ``str``, or one with a lone surrogate (which UTF-8 cannot
            encode); also a ``TypeError``.

    """
    if type(value) is not str:
        if not isinstance(value, str):
            msg = f"{what} must be a string, got {type(value).__name__}"
            raise InvalidTextError(msg)
        value = str.__str__(value)
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError as exc:
            msg = f"{what} is not valid Unicode text: {exc}"
            raise InvalidTextError(msg) from exc
    return value


def journal_text(value: object, limit: int | None = None) -> str:
    """``str(value)`` made storable: for a label or detail taken from the user's objects.

    A lone surrogate (which UTF-8 cannot encode) becomes its backslash escape, and a
    ``__str__`` that raises gives the type's name instead, so such text never makes an
    event unencodable (or one a writer refuses). At most ``limit`` characters.
    """
    return _storable(value, str, limit)


def journal_repr(value: object, limit: int | None = 1000) -> str:
    """``repr(value)`` made storable, as ``journal_text`` makes ``str(value)``."""
    return _storable(value, repr, limit)


def _storable(value: object, show: Callable[[object], str], limit: int | None) -> str:
    try:
        text = str.__str__(show(value))  # a plain str: a subclass's own methods are not run
    except Exception:  # noqa: BLE001 - the object's own __str__ or __repr__ failed
        text = f"<{type(value).__name__} whose {show.__name__}() failed>"
    except BaseException:  # a CancelledError, a sys.exit(): fatal to Pykka on an actor's thread
        if threading.current_thread() is threading.main_thread():
            raise  # a Ctrl-C must stop the caller
        text = f"<{type(value).__name__} whose {show.__name__}() failed>"
    if not text.isascii():
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text[:limit]


@functools.cache
def _text_fields(cls: type[msgspec.Struct]) -> tuple[tuple[str, bool], ...]:
    """A Struct type's text fields: each name, and whether it may be None."""
    fields = msgspec.structs.fields(cls)
    return tuple((f.name, f.type is not str) for f in fields if f.type in (str, str | None))


def validated(value: _S) -> _S:
    """Return a copy of a Struct built by a caller, checked against its own field types.

    For Structs that go into events whole (a session ``Message``): see ``require_str``.

    Raises:
        InvalidTextError: a text field holds no ``str``, or one UTF-8 cannot encode.
        InvalidEventError: a field holds a value of the wrong type, or one msgspec
            cannot encode (also a ``TypeError`` and a ``ValueError``).

    """
    plain: dict[str, str] = {}
    for name, optional in _text_fields(type(value)):
        text = getattr(value, name)
        if text is not None or not optional:
            checked = require_str(text, f"{type(value).__name__}.{name}")
            if checked is not text:  # a str subclass: its text, which msgspec encodes
                plain[name] = checked
    if plain:
        value = msgspec.structs.replace(value, **plain)
    try:
        return msgspec.msgpack.decode(_encoder.encode(value), type=type(value))
    except (msgspec.ValidationError, *_ENCODE_ERRORS) as exc:
        msg = f"not a valid {type(value).__name__}: {exc}"
        raise InvalidEventError(msg) from exc
