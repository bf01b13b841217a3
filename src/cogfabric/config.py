"""Loading ``Config`` from YAML.

msgspec decodes the YAML into the Struct, so an unknown key or a wrong type is an
error that names it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Hashable
from dataclasses import dataclass
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


def _check_text(text: object, source: str) -> None:
    if not isinstance(text, str | bytes | bytearray):
        msg = f"text is the YAML as str or bytes, got {type(text).__name__}"
        raise TypeError(msg)
    if isinstance(text, str):
        try:
            text.encode()  # before libyaml, which would raise a bare UnicodeEncodeError
        except UnicodeEncodeError as exc:
            msg = f"{source}: text UTF-8 cannot encode (a lone surrogate at position {exc.start})"
            raise InvalidConfigError(msg) from None
    elif not text.startswith(_UTF16_BOMS):  # YAML reads UTF-16 with its mark too
        # No YAML holds a NUL byte; UTF-16 without its mark holds one beside each ASCII letter.
        if (nul := text.find(b"\x00")) >= 0:
            msg = (
                f"{source}: a NUL byte (0x00), which no YAML holds, at {_line_and_column(text, nul)} "
                "(saved as UTF-16 without its byte order mark? save it as UTF-8)"
            )
            raise InvalidConfigError(msg)
        try:
            text.decode()
        except UnicodeDecodeError as exc:  # libyaml names neither the line nor the byte ("#x0074")
            where = _line_and_column(text, exc.start)
            msg = (
                f"{source}: not UTF-8 text: byte 0x{text[exc.start]:02x} at {where} "
                "(saved in another encoding, such as Latin-1 or Windows-1252? save it as UTF-8)"
            )
            raise InvalidConfigError(msg) from None


def _line_and_column(text: bytes | bytearray, at: int) -> str:
    """Where byte ``at`` of ``text`` is, as libyaml counts: lines from 1, columns in characters from 1."""
    line = text.count(b"\n", 0, at) + 1
    column = len(text[text.rfind(b"\n", 0, at) + 1 : at].decode(errors="replace")) + 1
    return f"line {line}, column {column}"


def parse_config(text: str | bytes, *, source: str = "<config>") -> Config:
    """Decode YAML ``text`` into a validated ``Config``.

    Raises:
        InvalidConfigError: malformed YAML, an unknown key, a wrong type, a value out of
            range, a key given twice in one mapping, a YAML alias (``*name``), text
            UTF-8 cannot encode, or bytes that are neither UTF-8 nor UTF-16 with its byte
            order mark; the message names the key (e.g. ``$.memory.max_history``), or the
            line and column. Text where a number goes (``5s``, ``"100"``, ``1e3``) and a
            tab in the indentation are told what to write instead.
        TypeError: ``text`` is neither str nor bytes.

    """
    _check_text(text, source)
    _refuse_aliases_and_repeated_keys(text, source)
    try:
        # An empty file, or one of comments only (YAML's null), means every default.
        decoded = None if _blank(text) else msgspec.yaml.decode(text, type=Config | None)
        config = Config() if decoded is None else decoded.validated()
    except msgspec.ValidationError as exc:
        msg = f"{source}: {config_error(exc)}"
        if (text_for_number := _TEXT_FOR_NUMBER.search(msg)) is not None:
            msg += _number_hint(text, text_for_number[2], whole=text_for_number[1] == "int")
        elif (empty := _EMPTY_SECTION.search(msg)) is not None:  # its keys all commented out, say
            msg += f" (a section with no keys: leave it out, or write `{empty[1]}: {{}}`)"
        raise InvalidConfigError(msg) from exc
    except msgspec.DecodeError as exc:  # not YAML at all: PyYAML's lines made one, as every error here
        detail = " ".join(str(exc).split())
        for name in ("<byte string>", "<unicode string>"):  # bytes or str: which text it was, not where
            detail = detail.replace(f'in "{name}", ', "at ")
        msg = f"{source}: {detail}{_tab_hint(text, detail)}"
        raise InvalidConfigError(msg) from exc
    except InvalidConfigError as exc:
        msg = f"{source}: {exc}"
        raise InvalidConfigError(msg) from exc
    return config


_BLANKS: Final = " \t\n\r"
"""YAML's white space and line breaks: a form feed or vertical tab, YAML refuses anywhere."""


def _blank(text: str | bytes | bytearray) -> bool:
    """Whether ``text`` is spaces, tabs and line breaks alone (every default), as str or bytes alike.

    ``str.strip()`` would also drop a U+3000 or a no-break space, which YAML (and the
    same text as bytes) refuses as a value that is not a mapping, and both strips a
    form feed, which YAML refuses anywhere: followed by a comment, it was an error.
    """
    return not (text.strip(_BLANKS) if isinstance(text, str) else text.strip(_BLANKS.encode()))


_UTF16_BOMS: Final = (b"\xff\xfe", b"\xfe\xff")
"""The byte order marks of UTF-16, which YAML (and PyYAML) reads beside UTF-8."""

_TEXT_FOR_NUMBER: Final = re.compile(r"Expected `(int|float)(?: \| null)?`, got `str` - at `\$((?:\.\w+)+)`$")
"""msgspec's error for text where a number goes; the groups: ``int`` or ``float``, and the key's path
(``.runtime.call_timeout``)."""

_EXPONENT_WITHOUT_DOT: Final = re.compile(r"[-+]?[0-9]+[eE][-+]?[0-9]+")
_NUMBER_AND_UNIT: Final = re.compile(r"[-+]?[0-9][0-9_.]*\s*[A-Za-z]+")
_NUMBER: Final = re.compile(r"[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def _number_hint(text: str | bytes | bytearray, path: str, *, whole: bool) -> str:
    """What to write instead of the text at ``path`` (``.runtime.call_timeout``) where a number goes.

    YAML 1.1 reads ``1e3`` (no dot) as text, ``5s`` is text (no unit is read), and
    ``"100"`` is text (quoted): each gets its own hint, "" for any other text. A
    ``whole`` number (an ``int`` key) is not told to write ``1.0e+3``, a float it refuses.
    """
    try:
        value: object = msgspec.yaml.decode(bytes(text) if isinstance(text, bytearray) else text)
    except msgspec.DecodeError:
        return ""
    for key in path.split(".")[1:]:
        value = value.get(key) if isinstance(value, dict) else None
    if not isinstance(value, str):
        return ""
    if _EXPONENT_WITHOUT_DOT.fullmatch(value):
        instead = (
            "this key takes a whole number: write it in digits, 1e3 as 1000" if whole else "write 1.0e+3"
        )
        return f" (YAML 1.1 reads a number such as 1e3, with no dot, as text: {instead})"
    if _NUMBER_AND_UNIT.fullmatch(value):
        return (
            f" ({value!r} is text: write a plain number, with no unit; times are in seconds, sizes in bytes)"
        )
    if _NUMBER.fullmatch(value.strip()):
        return f" ({value!r} is text: write the number without quotes)"
    return ""


_TAB_AT: Final = re.compile(r" at line ([0-9]+), column ([0-9]+)$")


def _tab_hint(text: str | bytes | bytearray, detail: str) -> str:
    """The hint for a YAML error ``detail`` that points at a tab without naming it; else ""."""
    at = _TAB_AT.search(detail)
    if at is None or re.search(r"\btab\b", detail):  # libyaml names it in some errors
        return ""
    try:
        lines = (text if isinstance(text, str) else bytes(text).decode()).splitlines()
        char = lines[int(at[1]) - 1][int(at[2]) - 1]
    except (UnicodeDecodeError, IndexError):
        return ""
    return " (a tab: YAML indents with spaces only)" if char == "\t" else ""


_EMPTY_SECTION: Final = re.compile(r"Expected `object`, got `null` - at `\$(?:\.\w+)*\.(\w+)`$")
"""msgspec's error for a mapping given no value (``journal:`` alone); the group is its key."""

_EVENT_LOADER: Final = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's parser where PyYAML has it: the pure-Python one takes ~1 ms a byte on nested text."""


@dataclass
class _Collection:
    """A mapping or sequence the YAML parser has open: where it is, what it has seen."""

    path: str
    keys: set[object] | None  # a mapping's keys so far, as the decoder reads them; None for a sequence
    expect_key: bool = True
    key: str = ""
    index: int = 0

    def child(self, event: yaml.NodeEvent, source: str) -> str:
        """The path of the node ``event`` starts in this collection; checks a mapping's key."""
        if self.keys is None:
            self.index += 1
            return f"{self.path}[{self.index - 1}]"
        if not self.expect_key:
            self.expect_key = True
            return f"{self.path}.{self.key}"
        self.expect_key = False
        self.key = event.value if isinstance(event, yaml.ScalarEvent) else "?"  # "?": a complex key
        identity = _key_identity(event) if isinstance(event, yaml.ScalarEvent) else _UNCHECKED
        if identity is not _UNCHECKED:  # neither a complex key nor a merge key
            if identity in self.keys:
                msg = (
                    f"{source}: the key {self.key!r} is given twice in one mapping (the first value "
                    f"would be dropped) - at {self.path}.{self.key}{_line(event)}"
                )
                raise InvalidConfigError(msg)
            self.keys.add(identity)
        return f"{self.path}.{self.key}"


_RESOLVER: Final = yaml.resolver.Resolver()
_STR: Final = "tag:yaml.org,2002:str"
_MERGE: Final = "tag:yaml.org,2002:merge"
_UNCHECKED: Final = object()
"""The identity of a key that may be given more than once (a merge key), or is not checked."""


def _key_identity(event: yaml.ScalarEvent) -> object:
    """The key a scalar makes as the decoder reads it, or ``_UNCHECKED`` for a merge key (``<<``).

    Built with its tag, as the loader builds it: ``1`` and ``'1'`` are two keys, ``1``,
    ``1.0``, ``!!int 1`` and ``true`` one (a dict's), ``yes`` and ``true`` one (YAML
    1.1); a date is its ISO text, as msgspec turns it into. A merge key may be given
    more than once.
    """
    if event.tag not in (None, "!"):
        tag = event.tag
    elif event.implicit[0]:  # plain: its tag follows from its text
        tag = _RESOLVER.resolve(yaml.ScalarNode, event.value, (True, False))  # type: ignore[no-untyped-call]
    else:  # quoted
        tag = _STR
    if tag == _MERGE:
        return _UNCHECKED
    node = yaml.ScalarNode(tag, event.value, style=event.style)
    try:
        key = yaml.constructor.SafeConstructor().construct_object(node)
    except Exception:  # noqa: BLE001 - PyYAML's constructors raise ValueError, KeyError...
        return (tag, event.value)  # a key the decoder refuses anyway
    if isinstance(key, dt.date):
        return msgspec.to_builtins(key)
    return key if isinstance(key, Hashable) else (tag, event.value)


def _line(event: yaml.Event) -> str:
    mark = event.start_mark
    return f" (line {mark.line + 1})" if mark is not None else ""


def _refuse_aliases_and_repeated_keys(text: str | bytes | bytearray, source: str) -> None:
    """Refuse YAML aliases and a key given twice in one mapping.

    A few hundred bytes of nested aliases expand to billions of values, and a
    configuration has no use for them. Of a key given twice the decoder keeps the last
    value and drops the first without a word: a whole section, or a timeout, the user
    believes set. The parser's events are read without building anything, so this
    costs as much as the file is long.

    Raises:
        InvalidConfigError: the text holds an alias (``*name``) or a repeated key.

    """
    open_collections: list[_Collection] = []
    try:
        for event in yaml.parse(bytes(text) if isinstance(text, bytearray) else text, Loader=_EVENT_LOADER):
            if isinstance(event, yaml.AliasEvent):
                what = f"YAML aliases (*{event.anchor}) are not accepted in a configuration"
                msg = f"{source}: {what}{_line(event)}"
                raise InvalidConfigError(msg)
            if isinstance(event, yaml.CollectionEndEvent):
                open_collections.pop()
            elif isinstance(event, yaml.NodeEvent):
                path = open_collections[-1].child(event, source) if open_collections else "$"
                if isinstance(event, yaml.MappingStartEvent):
                    open_collections.append(_Collection(path, set()))
                elif isinstance(event, yaml.SequenceStartEvent):
                    open_collections.append(_Collection(path, None))
    except yaml.YAMLError:
        return  # malformed: the decoder says how


def load_config(path: str | PathLike[str]) -> Config:
    """Read and decode a YAML configuration file (see ``parse_config``).

    At most ``MAX_CONFIG_BYTES`` (1 MiB) are read: a configuration is a few hundred
    bytes, and ``/dev/zero`` or a pipe that never ends would fill the memory.

    Raises:
        InvalidConfigError: as ``parse_config``, or the file is longer than
            ``MAX_CONFIG_BYTES``; the message starts with the path.
        OSError: the file cannot be read.

    """
    where = Path(path)
    with where.open("rb") as file:
        text = file.read(MAX_CONFIG_BYTES + 1)
    if len(text) > MAX_CONFIG_BYTES:
        msg = f"{where}: a configuration file holds at most {MAX_CONFIG_BYTES:,} bytes; this one holds more"
        raise InvalidConfigError(msg)
    return parse_config(text, source=str(where))


MAX_CONFIG_BYTES: Final = 1 << 20
"""The most bytes ``load_config`` reads of a file."""


def load_llm_config(text: str | bytes, *, source: str = "<llm config>") -> LLMConfig:
    """Decode the original's LLM YAML keys into ``LLMConfig``; an empty text gives the defaults.

    Raises:
        InvalidConfigError: malformed YAML, an unknown key, a wrong type or a
            ``base_url`` that is not http(s); the message names ``source`` and the key.
        TypeError: ``text`` is neither str nor bytes.

    """
    _check_text(text, source)
    _refuse_aliases_and_repeated_keys(text, source)
    try:
        decoded = None if _blank(text) else msgspec.yaml.decode(text, type=LLMConfig | None)
    except msgspec.DecodeError as exc:  # a ValidationError too
        msg = f"{source}: {exc}"
        raise InvalidConfigError(msg) from exc
    return LLMConfig() if decoded is None else decoded
