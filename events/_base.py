"""The event base, the context layers and event ids."""

from __future__ import annotations

import enum
import itertools
import os
from typing import Annotated, Any, ClassVar

import msgspec

__all__ = [
    "BUS_STREAM",
    "RUNTIME_STREAM",
    "ContextLayer",
    "Event",
    "agent_stream",
    "new_event_id",
    "session_stream",
]

BUS_STREAM = "bus"
"""The stream of IPC messages, deliveries and dead letters."""
RUNTIME_STREAM = "runtime"
"""The stream of runtime-wide facts (task context published to many agents)."""


def agent_stream(agent_id: str) -> str:
    """The stream name of one agent: ``agent/<id>``."""
    return "agent/" + agent_id


def session_stream(session_id: str) -> str:
    """The stream name of one session: ``session/<id>``."""
    return "session/" + session_id


class ContextLayer(enum.IntEnum):
    """The three context layers of an agent (spec §2.1).

    Each event type records the layer it touches (``Event.layer``), so an audit can
    filter a journal by layer; events that touch none (lifecycle, sessions) say None.
    ``Event.layers`` adds the other layers a type's fields hold (an agent's spawn holds
    its task layer and its first, private, cognitive state).
    """

    TASK_SHARED = 0
    AGENT_PRIVATE = 1
    IPC = 2


# Ids are a per-process random prefix plus a counter: unique across processes and
# restarts, cheap to make (no uuid4 syscall per event), and close to sorted within a
# process, which keeps the journal's id index appends local in its B-tree.
_ID_FORMAT = os.urandom(8).hex() + "-%012x"  # fixed width: byte order is counter order
_id_counter = itertools.count(1)


def _new_prefix() -> None:
    """Give a forked child ids of its own.

    A copied prefix and counter would repeat the parent's ids, and the journal would
    take a child's event for a retry of the parent's.
    """
    global _ID_FORMAT, _id_counter  # noqa: PLW0603 - the per-process id state
    _ID_FORMAT = os.urandom(8).hex() + "-%012x"
    _id_counter = itertools.count(1)


os.register_at_fork(after_in_child=_new_prefix)


def new_event_id() -> str:
    """Return a new, process-unique event id."""
    return _ID_FORMAT % next(_id_counter)


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag=True, gc=False):
    """Base class of every journaled fact.

    Events are frozen msgspec Structs in one tagged union; the tag is the class
    name, so renaming an event class is a schema change. ``v`` is the schema
    version of the type: a type at version 2 redeclares
    ``v: Annotated[int, msgspec.Meta(ge=2, le=2)] = 2`` (subclasses are declared
    ``frozen=True, kw_only=True``, which that needs) and registers an upcaster from 1
    (see ``EventCodec``). A plain ``v: int = 2`` works too, on a slower checked path.
    A type of your own also defines the ``stream`` property.

    Events are not tracked by Python's cyclic garbage collector (``gc=False``): they are
    immutable values whose fields hold encodable data, which cannot lead back to the
    event, so the collector does not traverse the events a runtime holds in flight (the
    dicts and lists inside them are still tracked). The one thing not to do is to build
    a cycle through an event, such as appending a received message to a list inside its
    own payload: such a cycle is never freed.
    """

    at: float
    """When it happened, in wall seconds from the runtime's clock."""
    id: str = msgspec.field(default_factory=new_event_id)
    """Unique id; appending an event whose id is stored already writes nothing."""
    cause: str | None = None
    """The id of the event that caused this one, for causal provenance."""
    v: Annotated[int, msgspec.Meta(ge=1, le=1)] = 1
    """The schema version this event was written at.

    Pinned with a constraint (``ge=le=`` the version), so the typed decoder itself
    refuses any other version and replay needs no check per record in Python."""

    layer: ClassVar[ContextLayer | None] = None
    """The context layer this event type touches, or None."""
    layers: ClassVar[frozenset[ContextLayer]] = frozenset()
    """Every context layer its fields hold a part of: ``layer``'s, and any other (a spawn
    holds the task layer and the agent's first cognitive state, which is private; an
    agent's death snapshot its cognitive state). An audit that filters by layer matches
    any of them, so a layer's data is found wherever it is."""

    def __init_subclass__(cls, **kwargs: Any) -> None:  # noqa: ANN401 - msgspec's Struct options
        """Give ``layers`` the type's own ``layer`` when it declares no more."""
        super().__init_subclass__(**kwargs)
        if "layers" not in cls.__dict__:
            cls.layers = frozenset() if cls.layer is None else frozenset({cls.layer})

    @property
    def stream(self) -> str:
        """The stream this event belongs to; an event type of your own defines it (a property).

        Computed from the event's fields: a record is filed under its event's stream when
        it is appended, and must still be of it when read (after an upcast too).
        """
        msg = f"{type(self).__qualname__} does not define stream: each event type names its events' stream"
        raise NotImplementedError(msg)
