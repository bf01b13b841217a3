"""Loading ``Config`` from YAML.

msgspec decodes the YAML into the Struct, so an unknown key or a wrong type is an
error that names it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec
import yaml

from cogfabric.actors import (
    CleanOptions,
    Config,
    InvalidConfigError,
    JournalConfig,
    LLMConfig,
    MemoryConfig,
    RuntimeConfig,
)
from cogfabric.actors._config import config_error

if TYPE_CHECKING:
    from os import PathLike

__all__ = [
    "CleanOptions",
    "Config",
    "InvalidConfigError",
    "JournalConfig",
    "LLMConfig",
    "MemoryConfig",
    "RuntimeConfig",
    "load_config",
    "load_llm_config",
    "parse_config",
]


def _check_text(text: object) -> None:
    if not isinstance(text, str | bytes | bytearray):
        msg = f"text is the YAML as str or bytes, got {type(text).__name__}"
        raise TypeError(msg)


def parse_config(text: str | bytes, *, source: str = "<config>") -> Config:
    """Decode YAML ``text`` into a validated ``Config``.

    Raises:
        InvalidConfigError: malformed YAML, an unknown key, a wrong type, or a value
            out of range; the message names the key (e.g. ``$.memory.max_history``).
        TypeError: ``text`` is neither str nor bytes.

    """
    _check_text(text)
    _refuse_aliases(text, source)
    try:
        # An empty file, or one of comments only (YAML's null), means every default.
        decoded = msgspec.yaml.decode(text, type=Config | None) if text.strip() else None
        config = Config() if decoded is None else decoded.validated()
    except msgspec.ValidationError as exc:
        msg = f"{source}: {config_error(exc)}"
        raise InvalidConfigError(msg) from exc
    except msgspec.DecodeError as exc:  # not YAML at all
        msg = f"{source}: {exc}"
        raise InvalidConfigError(msg) from exc
    except InvalidConfigError as exc:
        msg = f"{source}: {exc}"
        raise InvalidConfigError(msg) from exc
    return config


_EVENT_LOADER: Final = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's parser where PyYAML has it: the pure-Python one takes ~1 ms a byte on nested text."""


def _refuse_aliases(text: str | bytes | bytearray, source: str) -> None:
    """Refuse YAML aliases: a few hundred bytes of nested ones expand to billions of values.

    The parser's events are read without building anything, so this costs as much as
    the file is long. A configuration has no use for them.

    Raises:
        InvalidConfigError: the text holds an alias (``*name``).

    """
    try:
        events = yaml.parse(bytes(text) if isinstance(text, bytearray) else text, Loader=_EVENT_LOADER)
        alias = next((event for event in events if isinstance(event, yaml.AliasEvent)), None)
    except yaml.YAMLError:
        return  # malformed: the decoder says how
    if alias is not None:
        mark = alias.start_mark
        where = f" (line {mark.line + 1})" if mark is not None else ""
        msg = f"{source}: YAML aliases (*{alias.anchor}) are not accepted in a configuration{where}"
        raise InvalidConfigError(msg)


def load_config(path: str | PathLike[str]) -> Config:
    """Read and decode a YAML configuration file (see ``parse_config``).

    Raises:
        InvalidConfigError: as ``parse_config``; the message starts with the path.
        OSError: the file cannot be read.

    """
    where = Path(path)
    return parse_config(where.read_bytes(), source=str(where))


def load_llm_config(text: str | bytes, *, source: str = "<llm config>") -> LLMConfig:
    """Decode the original's LLM YAML keys into ``LLMConfig``; an empty text gives the defaults.

    Raises:
        InvalidConfigError: malformed YAML, an unknown key, a wrong type or a
            ``base_url`` that is not http(s); the message names ``source`` and the key.
        TypeError: ``text`` is neither str nor bytes.

    """
    _check_text(text)
    _refuse_aliases(text, source)
    try:
        decoded = msgspec.yaml.decode(text, type=LLMConfig | None) if text.strip() else None
    except msgspec.DecodeError as exc:  # a ValidationError too
        msg = f"{source}: {exc}"
        raise InvalidConfigError(msg) from exc
    return LLMConfig() if decoded is None else decoded
