"""``Config``: one msgspec Struct, every field defaulted, durations in seconds."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from ._llm import LLMConfig
from ._memory_config import MemoryConfig

__all__ = ["Config", "JournalConfig", "RuntimeConfig"]

_Positive = Annotated[int, msgspec.Meta(gt=0)]
_PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]


class JournalConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How the runtime journals."""

    durability: Literal["sync", "batch"] = "sync"
    """``sync``: a change is applied, and its call returns, after its commit
    (persist-then-apply). ``batch``: applied at once, handed to the writer, made
    durable by the next group commit; ``Runtime.flush()`` waits."""
    fsync: bool = True
    """Sync every group commit to disk; false leaves it to the OS (see ``Journal.open``)."""
    map_size: _Positive | None = None
    """The initial LMDB map size in bytes (default 1 GiB, sparse)."""
    max_map_size: _Positive | None = None
    """The map grows up to this size; past it appends fail (fail-stop)."""
    snapshot_interval: _Positive = 200
    """An agent's state is snapshotted after this many of its events."""
    group_commit_max: _Positive = 4096
    """At most this many events in one write transaction. The writer's queue holds about
    four times this many events; past that, agents and callers wait for room (at most
    ``runtime.call_timeout``), so a burst cannot outrun the journal without limit."""


class RuntimeConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Actor limits."""

    mailbox_size: _Positive = 10_000
    """Messages an agent's mailbox holds before senders wait."""
    call_timeout: _PositiveFloat = 30.0
    """Seconds a blocking call waits (an actor's answer, room in a full mailbox)."""


class Config(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The runtime's configuration."""

    journal: JournalConfig = JournalConfig()
    runtime: RuntimeConfig = RuntimeConfig()
    memory: MemoryConfig = MemoryConfig()
    llm: LLMConfig = LLMConfig()

    def validated(self) -> Config:
        """Return this config after checking its constraints (constructors do not).

        Raises:
            msgspec.ValidationError: a field is out of range; the message names it.
            InvalidConfigError: a ``memory`` limit is out of range; the message names it.

        """
        checked = msgspec.convert(msgspec.to_builtins(self), Config)
        checked.memory.validate(at="$.memory")
        return checked
