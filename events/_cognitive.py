"""The versioned, checkpointable cognitive state of an agent (spec §2.1, §2.3)."""

from __future__ import annotations

import numbers
import operator
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Final, cast

import msgspec

from ._errors import CognitiveStateSchemaVersionError

if TYPE_CHECKING:
    from typing import SupportsInt

__all__ = [
    "COGNITIVE_STATE_FIELDS",
    "COGNITIVE_STATE_SCHEMA_VERSION",
    "CognitiveState",
    "decode_cognitive_state",
    "upgrade_cognitive_state",
]

COGNITIVE_STATE_SCHEMA_VERSION: Final = 1
"""The newest ``CognitiveState.schema_version`` this code reads and writes."""

COGNITIVE_STATE_FIELDS: Final = (
    "context",
    "observation",
    "working_memory",
    "decision",
    "tool_state",
    "checkpoint",
)
"""The six content fields, by their snake_case keys (the only key style accepted)."""

_FIELDS_AND_VERSION: Final = frozenset(("schema_version", *COGNITIVE_STATE_FIELDS))


class CognitiveState(msgspec.Struct, frozen=True, kw_only=True):
    """What an agent thinks, as durable state: nothing depends on hidden reasoning.

    ``schema_version`` 0 is the legacy (pre-versioning) form, as the zero value of the
    original; storing such a state upgrades it to ``COGNITIVE_STATE_SCHEMA_VERSION``.
    The six fields hold any msgspec-encodable value. The struct is frozen, and the
    runtime hands out deep copies, so changing a nested value in a state you were
    given never changes an agent.
    """

    schema_version: Annotated[int, msgspec.Meta(ge=-(2**63), le=COGNITIVE_STATE_SCHEMA_VERSION)] = 0
    """Checked on decode (a stored state of a newer version is refused, naming its path)."""
    context: Any = None
    """Active reasoning context (task goal and constraints)."""
    observation: Any = None
    """The latest observation from the environment or tools."""
    working_memory: Any = None
    """Intermediate reasoning scratchpad."""
    decision: Any = None
    """The current decision or hypothesis."""
    tool_state: Any = None
    """State of active tools."""
    checkpoint: Any = None
    """A durable progress pointer (a task checkpoint, when executing a task)."""


_LEAST_VERSION: Final = -(2**63)
"""The least ``schema_version`` msgpack can store (an int64); the original accepts any negative."""

_MISMATCH: Final = "agentfabric: cognitive state schema version mismatch"
"""The original's sentinel string (spec §2.1); every refusal's message starts with it."""


class _VersionTypeError(CognitiveStateSchemaVersionError, TypeError):
    """A ``schema_version`` that is not an int: a schema version mismatch and a ``TypeError``."""


def _check_version(version: int) -> None:
    # Only newer versions are refused: the original accepts negative ones (spec §2.3).
    # A version that is not an int (True, 1.0) would be journaled and then refused by
    # the typed decoder on every read: the journal could not be replayed.
    if type(version) is not int:  # not a bool, nor an int subclass msgspec cannot encode
        msg = f"{_MISMATCH}: schema_version must be an int, got {type(version).__name__} {version!r}"
        raise _VersionTypeError(msg, stored=version, known=COGNITIVE_STATE_SCHEMA_VERSION)
    if version > COGNITIVE_STATE_SCHEMA_VERSION:
        msg = f"{_MISMATCH}: got {version}, this code reads up to {COGNITIVE_STATE_SCHEMA_VERSION}"
        raise CognitiveStateSchemaVersionError(msg, stored=version, known=COGNITIVE_STATE_SCHEMA_VERSION)
    if version < _LEAST_VERSION:  # negative is fine, but it must fit the stored int64
        msg = f"{_MISMATCH}: got {version}, below the least version a journal can store ({_LEAST_VERSION})"
        raise CognitiveStateSchemaVersionError(msg, stored=version, known=COGNITIVE_STATE_SCHEMA_VERSION)


def upgrade_cognitive_state(state: CognitiveState) -> CognitiveState:
    """Return ``state`` ready to store: version 0 becomes the current version.

    Raises:
        CognitiveStateSchemaVersionError: the version is newer than this code knows.
            cogfabric refuses it on write as well as on decode, so a journal never
            holds a state it cannot replay (a deliberate difference from the
            original, which stores it). A negative version is stored as it is, as
            in the original, down to -2**63 (what msgpack stores; one below is refused).
        TypeError: ``state`` is not a ``CognitiveState``, or of a subclass with fields
            of its own (a stored state would lose them).

    """
    if not isinstance(state, CognitiveState):
        msg = f"expected a CognitiveState, got {type(state).__name__}"
        if isinstance(state, Mapping):  # a checkpoint kept in a layer or as JSON reads back as a dict
            msg += (
                " (a checkpoint kept in a context layer, an IPC payload or JSON reads back as a "
                "mapping: decode_cognitive_state(value) makes a CognitiveState of it)"
            )
        raise TypeError(msg)
    own = [name for name in state.__struct_fields__ if name not in _FIELDS_AND_VERSION]
    if own:
        msg = (
            f"a {type(state).__name__} has fields of its own ({', '.join(own)}), which a stored "
            "CognitiveState would lose: store a CognitiveState (an extra value goes in one of its six fields)"
        )
        raise TypeError(msg)
    _check_version(state.schema_version)
    if state.schema_version == 0:
        return msgspec.structs.replace(state, schema_version=COGNITIVE_STATE_SCHEMA_VERSION)
    return state


def _mapping_version(raw: object) -> int:
    # bool is an int subclass, but True is not a version: refuse it like any non-number.
    # Any real number type counts (a NumPy integer, a Fraction), as long as it is whole.
    if isinstance(raw, bool) or not isinstance(raw, numbers.Real):
        msg = f"{_MISMATCH}: schema_version must be a number, got {type(raw).__name__} {raw!r}"
        raise CognitiveStateSchemaVersionError(msg, stored=raw, known=COGNITIVE_STATE_SCHEMA_VERSION)
    whole = _whole(raw)
    if whole is None or whole != raw:
        msg = f"{_MISMATCH}: schema_version {raw!r} is not whole"
        raise CognitiveStateSchemaVersionError(msg, stored=raw, known=COGNITIVE_STATE_SCHEMA_VERSION)
    return whole


def _whole(raw: numbers.Real) -> int | None:
    """``raw`` as an int, truncated; None for inf, NaN or a type that cannot say."""
    try:
        if isinstance(raw, numbers.Integral):
            return operator.index(raw)  # NumPy's integers have __index__, not __trunc__
        return int(cast("SupportsInt", raw))  # a float, a Fraction, a NumPy float truncate
    except (OverflowError, ValueError, TypeError):
        return None


def decode_cognitive_state(value: object) -> CognitiveState:
    """Turn a stored or legacy value into a ``CognitiveState`` (spec §2.3).

    Accepted inputs, as in the original:

    * ``None``: the zero state (version 0).
    * a ``CognitiveState``: returned as it is (version 0 is *not* upgraded here).
    * a mapping with a ``schema_version`` key (e.g. after a JSON round trip): the six
      fields are read from their snake_case keys.
    * a mapping without ``schema_version``: a legacy state, put whole into ``context``.
    * anything else: a legacy opaque state, put whole into ``context``.

    Stricter than the original (see README, "Where cogfabric differs"): a
    ``schema_version`` that is not a whole number, and unknown keys in a versioned
    mapping, are errors instead of being read as 0 or dropped.

    Raises:
        CognitiveStateSchemaVersionError: a version newer than
            ``COGNITIVE_STATE_SCHEMA_VERSION``, a non-numeric ``schema_version``, or
            a versioned mapping with keys other than the six fields (it is a
            ``ValueError`` too). A negative version is accepted, as in the original,
            down to -2**63 (what msgpack stores: one below it is refused, as newer ones are).

    """
    if value is None:
        return CognitiveState()
    if isinstance(value, CognitiveState):
        _check_version(value.schema_version)
        return value
    if isinstance(value, Mapping):
        if "schema_version" not in value:
            return CognitiveState(context=value)
        version = _mapping_version(value["schema_version"])
        _check_version(version)
        unknown = sorted(str(k) for k in value if k != "schema_version" and k not in COGNITIVE_STATE_FIELDS)
        if unknown:
            msg = (
                f"{_MISMATCH}: unknown cognitive state keys {unknown} at schema_version {version}; "
                f"expected {list(COGNITIVE_STATE_FIELDS)}"
            )
            raise CognitiveStateSchemaVersionError(msg, stored=version, known=COGNITIVE_STATE_SCHEMA_VERSION)
        fields = {name: value[name] for name in COGNITIVE_STATE_FIELDS if name in value}
        return CognitiveState(schema_version=version, **fields)
    return CognitiveState(context=value)
