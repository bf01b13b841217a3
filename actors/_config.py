"""``Config``: one msgspec Struct, every field defaulted, durations in seconds."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

import msgspec
import msgspec.inspect

from ._clock import MAX_WAIT
from ._errors import InvalidConfigError
from ._llm import LLMConfig
from ._memory_config import MemoryConfig

__all__ = ["Config", "JournalConfig", "RuntimeConfig", "config_error"]

_Positive = Annotated[int, msgspec.Meta(gt=0)]
_MapSize = Annotated[int, msgspec.Meta(gt=0, le=2**63 - 1)]
_Timeout = Annotated[float, msgspec.Meta(gt=0, le=MAX_WAIT)]


class JournalConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How the runtime journals."""

    durability: Literal["sync", "batch"] = "sync"
    """``sync``: a change is applied, and its call returns, after its commit
    (persist-then-apply). ``batch``: applied at once, handed to the writer, made
    durable by the next group commit; ``Runtime.flush()`` waits."""
    fsync: bool = True
    """Sync every group commit to disk; false leaves it to the OS (see ``Journal.open``)."""
    map_size: _MapSize | None = None
    """The initial LMDB map size in bytes (default 1 GiB, sparse)."""
    max_map_size: _MapSize | None = None
    """The map grows up to this size; past it appends fail (fail-stop). Not less than
    ``map_size`` when both are given (a default ``map_size`` above it is lowered to it)."""
    check_pages: bool = True
    """Walk every page of the journal's file when it is opened, so that a damaged page
    raises ``JournalDamagedError`` instead of crashing the process (LMDB has no
    checksums); it reads the whole file: 0.47 s to 1.5 s a million records on the
    development VMs (docs/performance.md). False skips it, for a file you trust (see
    ``Journal.open``)."""
    snapshot_interval: _Positive = 200
    """An agent's state is snapshotted after this many of its own events (a task context
    published to it, applied, is not one of them), as it hands them to the writer: in
    batch durability at a message's end or send, not at each group of a long run of
    changes within one message (each would encode the whole state)."""
    group_commit_max: _Positive = 4096
    """At most this many events in one write transaction, but for one change larger than
    it (a ``spawn_many``, say), which is never split: it is a commit of its own. The
    writer's queue holds about four times this many events; past that, agents and
    callers wait for room (at most ``runtime.call_timeout``), so a burst cannot outrun
    the journal without limit. In batch durability an agent hands its changes to the
    writer when its message is done, or once this many of them wait (a behavior's long
    loop of changes within one message)."""


class RuntimeConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Actor limits."""

    mailbox_size: _Positive = 10_000
    """Messages an agent's mailbox holds before senders wait."""
    call_timeout: _Timeout = 30.0
    """Seconds a blocking call waits (an actor's answer, room in a full mailbox); at most 1e9."""


class Config(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The runtime's configuration."""

    journal: JournalConfig = JournalConfig()
    runtime: RuntimeConfig = RuntimeConfig()
    memory: MemoryConfig = MemoryConfig()
    llm: LLMConfig = LLMConfig()

    def validated(self) -> Config:
        """Return this config after checking its constraints.

        The ``memory`` section checks itself as it is made; the other sections' ranges
        (``msgspec.Meta``) are checked here, as msgspec checks them only when decoding.

        Raises:
            InvalidConfigError: a field is out of range, or holds text UTF-8 cannot encode
                (a lone surrogate), or ``journal.map_size`` is larger than
                ``journal.max_map_size``; the message names it and its path (e.g.
                ``$.journal.snapshot_interval``).

        """
        try:
            builtins = msgspec.to_builtins(self)
            converted = msgspec.convert(builtins, Config)
        except msgspec.ValidationError as exc:
            raise config_error(exc) from exc
        except _UNWRITABLE as exc:  # a value no config file could hold
            raise _unwritable(exc) from exc
        where = _unencodable_text(builtins, "$")
        if where is not None:  # a model name or an extra parameter no provider request could send
            msg = f"text UTF-8 cannot encode (a lone surrogate) - at {where}"
            raise InvalidConfigError(msg)
        journal = converted.journal
        limit = journal.max_map_size
        if journal.map_size is not None and limit is not None and journal.map_size > limit:
            msg = (
                f"map_size ({journal.map_size} bytes) is larger than max_map_size "
                f"({limit} bytes), the most the map may grow to - at `$.journal.map_size`"
            )
            raise InvalidConfigError(msg)
        return converted

    @classmethod
    def of(cls, config: Config | Mapping[str, Any] | None) -> Config:
        """``config`` checked: a ``Config``, a mapping of its sections, or None (the defaults).

        A mapping is read as a YAML configuration file is (``parse_config``).

        Raises:
            InvalidConfigError: a field is unknown, of the wrong type or out of range, or
                holds text UTF-8 cannot encode (the message names its path), or ``config``
                is none of the three.

        """
        if config is None:
            return cls()
        if isinstance(config, Config):
            return config.validated()
        if isinstance(config, Mapping):
            try:
                converted = msgspec.convert(config, Config)
            except msgspec.ValidationError as exc:
                raise config_error(exc) from exc
            except UnicodeEncodeError as exc:  # msgspec's, for a lone surrogate anywhere
                try:
                    where = _unencodable_text(config, "$") or "$"
                except RecursionError:  # a recursive value beside it
                    where = "$"
                msg = f"text UTF-8 cannot encode (a lone surrogate) - at {where}"
                raise InvalidConfigError(msg) from exc
            except _UNWRITABLE as exc:  # a section that is no mapping msgspec can read, say
                raise _unwritable(exc) from exc
            return converted.validated()  # sections given as objects are checked too
        msg = f"config must be a cogfabric.Config, a mapping or None, got {type(config).__name__}"
        if isinstance(config, str | os.PathLike):
            msg += " (a YAML file's path? read it with cogfabric.load_config(path))"
        elif isinstance(config, bytes | bytearray):
            msg += " (YAML text? read it with cogfabric.config.parse_config(text); a path, with load_config)"
        raise InvalidConfigError(msg)


_UNWRITABLE: Final = (TypeError, ValueError, OverflowError, RecursionError)
"""What msgspec raises, beside its ValidationError, for a value no configuration file could hold
(a recursive or too deeply nested one: RecursionError)."""


def _unwritable(exc: BaseException) -> InvalidConfigError:
    kind = "a value nested too deeply" if isinstance(exc, RecursionError) else str(exc)
    return InvalidConfigError(f"the configuration holds a value it cannot be written with: {kind}")


def _unencodable_text(value: object, where: str) -> str | None:
    """The path of the first key or string in ``value`` that UTF-8 cannot encode, or None."""

    def bad(text: object) -> bool:
        if not isinstance(text, str):
            return False
        try:
            text.encode()
        except UnicodeEncodeError:
            return True
        return False

    if bad(value):
        return where
    if isinstance(value, Mapping):
        for key, item in value.items():
            if bad(key):
                return f"{where}.{key!r}"
            found = _unencodable_text(item, f"{where}.{key}")
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _unencodable_text(item, f"{where}[{index}]")
            if found is not None:
                return found
    return None


def config_error(exc: msgspec.ValidationError) -> InvalidConfigError:
    """Turn msgspec's error into ``InvalidConfigError``; a ``memory`` limit keeps its own message.

    msgspec wraps an error raised while a section is made (``MemoryConfig``'s checks)
    and adds the section's path; that error already names the field's whole path.
    """
    cause = exc.__cause__
    if isinstance(cause, InvalidConfigError):
        return cause
    text = str(exc)
    return InvalidConfigError(text + _hint(text))


_AT: Final = re.compile(r" - at `\$((?:\.\w+)*)`$")
"""The path msgspec's message ends with (``- at `$.journal.durability```), as ``.journal.durability``."""

_PATTERNS: Final = {r"^(https?://|$)": "an http:// or https:// URL, or empty for none"}
"""What a field's ``pattern`` asks for, in words (msgspec's message shows the regex)."""


def _hint(message: str) -> str:
    """What msgspec's ``message`` leaves the reader to find out: the choices, the keys, the pattern's meaning.

    An unknown key is named with the keys its section has (and the nearest one, for a
    misspelling), an invalid choice with the choices, a pattern with what it means, and
    a file that is no mapping with the sections it may hold. "" when none applies.
    """
    at = _AT.search(message)
    path = [] if at is None else at[1].split(".")[1:]
    where: Any = msgspec.inspect.type_info(Config)
    for name in path:  # down to the field (or section) the message names (no section is optional)
        fields = getattr(where, "fields", ())
        where = next((field.type for field in fields if field.name == name), None)
        if where is None:  # a key of a free mapping (llm.extra): no declared keys to offer
            return ""
    if message.startswith("Object contains unknown field `") and isinstance(
        where, msgspec.inspect.StructType
    ):
        unknown = message.split("`", 2)[1]
        keys = [field.name for field in where.fields]
        near = difflib.get_close_matches(unknown, keys, n=1)
        section = f"`{at[1][1:]}`" if at is not None else "a configuration"
        return f" (the keys of {section}: {', '.join(keys)}" + (
            f"; did you mean `{near[0]}`?)" if near else ")"
        )
    if message.startswith("Invalid enum value ") and isinstance(where, msgspec.inspect.LiteralType):
        return f" (one of {', '.join(map(repr, where.values))})"
    if "matching regex" in message and isinstance(where, msgspec.inspect.StrType):
        meaning = _PATTERNS.get(where.pattern or "")
        return f" ({meaning})" if meaning else ""
    if (
        at is None
        and isinstance(where, msgspec.inspect.StructType)
        and message.startswith("Expected `object")
    ):
        return f" (a configuration is a mapping of sections: {', '.join(f.name for f in where.fields)})"
    return ""
