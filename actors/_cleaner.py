"""The turn-aware context cleaner applied when building prompt messages (spec §5.4).

Lengths are counted in code points (Go's runes). Cleaning shortens contents and, for
finished turns, summarises tool traffic; it never drops a message (only
``max_summarized_turns`` drops whole turns).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Final

import msgspec

from cogfabric.events import (
    ROLE_ASSISTANT,
    ROLE_SYSTEM,
    ROLE_TOOL_CALL,
    ROLE_TOOL_RESULT,
    ROLE_USER,
    Message,
    ToolCall,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = [
    "GO_SPACE",
    "CleanOptions",
    "active_turn_start",
    "clean",
    "clean_with_turns",
    "extract_gist",
    "summarise_tool_calls",
    "with_ellipsis",
]

GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
)
"""What Go's ``strings.TrimSpace`` trims (``unicode.IsSpace``): ``str.strip()`` without
arguments also trims U+001C to U+001F, which Go keeps."""

_CODE_BLOCK = re.compile(r"```([^`]*)```")
_SENTENCE_END = re.compile(r"[.!?\n]+[\t\n\f\r ]*")  # Go's \s: ASCII only
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# The original's lines stating a code runner's exit code and an HTTP response's status.
_EXIT_PREFIXES: Final = ("exit code:", "Exit code:")
_STATUS_PREFIXES: Final = ("Status:", "status:")
# Where the output has no such line, a whole line stating the exit code another way:
# "exit_code=0", "exit status 1", "Exited with code 137", "returncode: 1".
_EXIT_LINE = re.compile(
    r"""(?:exit(?:ed with)?(?:[ _]?(?:code|status))?|return[ _]?code)[\s:='"]{0,4}(-?\d+)""",
    re.IGNORECASE,
)
_EXIT_KEYS: Final = ("exit_code", "returncode", "exit_status")
# A raw HTTP response's status line: "HTTP/1.1 404 Not Found".
_STATUS_LINE = re.compile(r"HTTP/\d(?:\.\d)?\s+([1-5]\d\d\b.*)", re.IGNORECASE)
_STATUS_KEYS: Final = ("status_code", "status")
_GIST_ANY_TOOL = 200
_FILE_ERROR = 150
_PREVIEW = 100
_GIST_TOOL_CALL = 100
_RESULTS_PREVIEW = 120
_UNKNOWN_URL = "<unknown-url>"
_SHOWN_ARG = 20


class CleanOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How much of each message the cleaner keeps (spec §5.2 defaults)."""

    max_user_len: int = 200
    max_assistant_len: int = 150
    max_tool_len: int = 50
    max_system_len: int = 500
    max_summarized_turns: int = 0
    """Keep only the last N turns; 0 keeps every turn."""


def with_ellipsis(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` code points, the last three replaced by ``...`` when cut."""
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    if limit <= 3:  # noqa: PLR2004 - no room for an ellipsis
        return text[:limit]
    return text[: limit - 3] + "..."


def _code_block_label(match: re.Match[str]) -> str:
    lang = match.group(1).split("\n", 1)[0].strip(GO_SPACE)
    return f"<code block [{lang}]>" if lang else "<code block>"


def extract_gist(content: str, limit: int) -> str:
    """The first sentence of ``content`` (code removed) if it fits ``limit``, else a cut.

    Content that is nothing but code keeps its code, as in the original.
    """
    trimmed = _CODE_BLOCK.sub("", content).strip(GO_SPACE) or content.strip(GO_SPACE)
    match = _SENTENCE_END.search(trimmed)
    first = trimmed[: match.end()].strip(GO_SPACE) if match else trimmed
    if len(first) <= limit:
        return first
    return with_ellipsis(trimmed, limit)


def _rebuilt(message: Message, content: str) -> Message:
    # Clean keeps only role, content, time, turn id, tool call id and tool calls.
    return Message(
        role=message.role,
        content=content,
        time=message.time,
        turn_id=message.turn_id,
        tool_call_id=message.tool_call_id,
        tool_calls=message.tool_calls,  # shared: the caller gets copies (_own_copies)
    )


def _clean_one(message: Message, options: CleanOptions) -> Message:
    role, content = message.role, message.content
    if role == ROLE_USER:
        text = with_ellipsis(content, options.max_user_len)
    elif role == ROLE_ASSISTANT and message.tool_calls:
        text = extract_gist(content, options.max_tool_len)
    elif role == ROLE_ASSISTANT:
        text = with_ellipsis(_CODE_BLOCK.sub(_code_block_label, content), options.max_assistant_len)
    elif role == ROLE_SYSTEM:
        text = with_ellipsis(content, options.max_system_len)
    elif role in (ROLE_TOOL_CALL, ROLE_TOOL_RESULT):
        text = extract_gist(content, options.max_tool_len)
    else:
        text = with_ellipsis(content, options.max_assistant_len)
    return _rebuilt(message, text)


def clean(messages: Sequence[Message], options: CleanOptions) -> list[Message]:
    """Shorten every message by its role (spec §5.4 ``Clean``)."""
    return [_clean_one(m, options) for m in messages]


def active_turn_start(messages: Sequence[Message]) -> int:
    """The index of the first message of ``messages``' last turn, as ``clean_with_turns`` splits them."""
    turns = _turns(messages)
    return len(messages) - len(turns[-1]) if turns else 0


def _turns(messages: Sequence[Message]) -> list[list[Message]]:
    if not messages:
        return []
    turns: list[list[Message]] = [[]]
    if any(m.turn_id for m in messages):
        current = None  # the first turn id names the turn open already: what came before joins it
        for m in messages:
            if m.turn_id and m.turn_id != current:
                if current is not None:
                    turns.append([])
                current = m.turn_id
            turns[-1].append(m)
        return turns
    if any(m.role == ROLE_USER for m in messages):
        for m in messages:
            if m.role == ROLE_USER and any(x.role == ROLE_USER for x in turns[-1]):
                turns.append([])
            turns[-1].append(m)
        return turns
    # Structural fallback: no turn ids and no user message: one turn.
    return [list(messages)]


def _arguments(call: ToolCall) -> dict[str, Any]:
    text = call.function.arguments or "{}"
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):  # a model's text: malformed, or nested past the stack
        return {}
    if not isinstance(parsed, dict):
        return {}
    if "\\u" in text:  # an escaped lone surrogate reads as U+FFFD, as Go's decoder reads it
        parsed = {_valid(k): _valid(v) if isinstance(v, str) else v for k, v in parsed.items()}
    return parsed


def _valid(text: str) -> str:
    """``text`` with each lone surrogate (from a JSON escape) replaced by U+FFFD."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def _count_results(content: str) -> int:
    try:
        parsed = json.loads(content)
    except (ValueError, RecursionError):  # a tool's text: not JSON, or nested past the stack
        return sum(1 for line in content.split("\n") if line.strip(GO_SPACE))
    if isinstance(parsed, dict):
        parsed = parsed.get("results", [parsed])
    return len(parsed) if isinstance(parsed, list) else 1


def _file_summary(args: dict[str, Any], content: str) -> str:
    """A file tool's result, as the original's ``summarizeFileToolResult``."""
    operation = args.get("operation")
    operation = operation if isinstance(operation, str) else ""
    path = args.get("path")
    path = path if isinstance(path, str) else ""
    if content.startswith(("Error:", "error:")):
        return f"File {path} ({operation}): {with_ellipsis(content, _FILE_ERROR)}"
    if operation == "read":
        lines = content.split("\n", 2)
        preview = lines[0].strip(GO_SPACE)
        if not preview and len(lines) > 1:
            preview = lines[1].strip(GO_SPACE)
        if preview:
            return f"Read {path}: {with_ellipsis(preview, _PREVIEW)}"
        return f"Read {path} ({len(content.encode())} bytes)"
    if operation == "write":
        return f"Wrote {path} ({len(content.encode())} bytes)"
    if operation == "list":
        return f"Listed {path} ({len(content.split(chr(10)))} entries)"
    return _any_tool_summary(content)


def _tool_summary(call: ToolCall, content: str) -> str:
    """A finished turn's tool result, as the original's ``SummarizeToolResultWithCall``.

    Each tool's summary names what was done and keeps a short preview of what came
    back (the original's previews: a line of 100 code points, or the first 120 of a
    scraped page or a search's results), so the model still sees a finished turn's
    findings, only shorter.
    """
    name = call.function.name
    args = _arguments(call)
    if name == "file_tools" or name.startswith("file_"):
        return _file_summary(args, content)
    if name == "code_runner":
        return _code_summary(args, content)
    if name == "http_request":
        return _http_summary(args, content)
    if name == "web_scraper":
        return f"Scraped {_url(args)}: {with_ellipsis(content, _RESULTS_PREVIEW)}"
    if name in ("knowledge_search", "memory_search"):
        query = args.get("query")  # the original's args["query"].(string): "" for any other value
        quoted = _go_quote(query if isinstance(query, str) else "")
        preview = with_ellipsis(content, _RESULTS_PREVIEW)
        return f"Search {quoted} ({_count_results(content)} results): {preview}"
    return _any_tool_summary(content)


def _any_tool_summary(content: str) -> str:
    """Any other tool's result, as the original's ``SummarizeToolResult``: its gist of 200.

    Where the gist is empty (output of white space only), the output cut to 200, as
    the original falls back to, rather than nothing.
    """
    return extract_gist(content, _GIST_ANY_TOOL) or with_ellipsis(content, _GIST_ANY_TOOL)


def _code_summary(args: dict[str, Any], content: str) -> str:
    # the original's command; without one, the code ARES's own code runner takes
    command = next((c for c in (args.get("command"), args.get("code")) if isinstance(c, str) and c), "")
    command = with_ellipsis(command, 60)
    language = args.get("language")
    if isinstance(language, str) and language:
        command = f"{command} ({language})"
    lines = [line.strip(GO_SPACE) for line in content.split("\n")]
    stated = [line for line in lines if line.startswith(_EXIT_PREFIXES)]
    if stated:  # the original's: the last such line, whatever follows its colon
        code = stated[-1].removeprefix(_EXIT_PREFIXES[0]).removeprefix(_EXIT_PREFIXES[1]).strip(GO_SPACE)
        preview = _preview(line for line in lines if not line.startswith(_EXIT_PREFIXES))
    else:
        said = [match.group(1) for match in map(_EXIT_LINE.fullmatch, lines) if match]
        code = said[-1] if said else _json_field(content, _EXIT_KEYS) or "?"
        preview = _preview(line for line in lines if not _EXIT_LINE.fullmatch(line))
    head = f"Exec `{command}` exit={code}"
    return f"{head}: {preview}" if preview else f"{head} ({len(content.encode())} bytes)"  # Go's len


def _http_summary(args: dict[str, Any], content: str) -> str:
    method = args.get("method")
    head = f"{method if isinstance(method, str) and method else 'GET'} {_url(args)}"
    lines = [line.strip(GO_SPACE) for line in content.split("\n", 4)]  # the original reads five
    # the original's: the first line holding "Status:", whatever follows its first colon
    stated = (line for line in lines if "Status:" in line or "status:" in line)
    status = next((line.split(":", 1)[1].strip(GO_SPACE) for line in stated), "")
    raw = _STATUS_LINE.fullmatch(lines[0]) if not status else None
    if raw is not None:
        status, lines = raw.group(1), lines[1:]
    elif not status:
        status = _json_field(content, _STATUS_KEYS)
    preview = _preview(line for line in lines if not line.startswith(_STATUS_PREFIXES))
    if status:
        head = f"{head} → {status}"
        if preview:
            return f"{head}: {preview}"
    return f"{head} ({len(content.encode())} bytes)"


def _json_field(content: str, keys: Sequence[str]) -> str:
    """The first of ``keys`` that a JSON object's top level holds as a number or text; "" if none."""
    if not content.lstrip(GO_SPACE).startswith("{"):
        return ""
    try:
        parsed = json.loads(content)
    except (ValueError, RecursionError):  # a tool's text: not JSON, or nested past the stack
        return ""
    if not isinstance(parsed, dict):
        return ""
    for key in keys:
        value = parsed.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
            return str(value)
    return ""


def _url(args: dict[str, Any]) -> str:
    """The call's ``url`` (or the older ``URL``), as the original shows it."""
    for key in ("url", "URL"):
        url = args.get(key)
        if isinstance(url, str) and url:
            return url
    return _UNKNOWN_URL


def _preview(lines: Iterable[str]) -> str:
    """The first of ``lines`` (each trimmed) with text, cut to 100 code points; "" if none."""
    return next((with_ellipsis(line, _PREVIEW) for line in lines if line), "")


_GO_ESCAPES: Final = {
    "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
    "\\": "\\\\", '"': '\\"',
}  # fmt: skip


def _go_quote(text: str) -> str:
    """``text`` quoted as Go's ``%q`` (``strconv.Quote``) quotes it."""
    out = ['"']
    for ch in text:
        escaped = _GO_ESCAPES.get(ch)
        if escaped is not None:
            out.append(escaped)
        elif ch.isprintable():  # Go's unicode.IsPrint: no space but U+0020 is printable
            out.append(ch)
        elif ord(ch) < 0x80:  # noqa: PLR2004 - ASCII
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:  # noqa: PLR2004 - the basic multilingual plane
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def _summarise_call(message: Message) -> str:
    if not message.tool_calls:
        return extract_gist(message.content, _GIST_TOOL_CALL)
    return summarise_tool_calls(message.tool_calls)


def summarise_tool_calls(calls: Sequence[ToolCall]) -> str:
    """Tool calls as an earlier turn's ``tool_call`` message shows them (spec §5.4).

    ``<id>: call <name>(k1, k2="v")`` each, joined with ``"; "``: the arguments' keys,
    with the string values of at most 20 characters.
    """
    parts = []
    for call in calls:
        shown = []
        for key, value in _arguments(call).items():
            if isinstance(value, str) and len(value) <= _SHOWN_ARG:  # characters, as spec §5.4 counts
                shown.append(f"{key}={_go_quote(value)}")
            else:
                shown.append(key)
        summary = f"call {call.function.name}({', '.join(shown)})"
        parts.append(f"{call.id}: {summary}" if call.id else summary)
    return "; ".join(parts)


def _finished_turn(turn: list[Message], options: CleanOptions) -> list[Message]:
    calls = {call.id: call for m in turn for call in m.tool_calls}
    out = []
    for m in turn:
        if m.role == ROLE_TOOL_RESULT:
            call = calls.get(m.tool_call_id)  # "" too: the original's map matches a call without id
            if call is None:
                summary = extract_gist(m.content, options.max_tool_len)
            else:  # an empty result stays empty, as in the original: nothing to summarise
                summary = _tool_summary(call, m.content) if m.content else m.content
            out.append(msgspec.structs.replace(m, content=summary))
        elif m.role == ROLE_TOOL_CALL:
            out.append(msgspec.structs.replace(m, content=_summarise_call(m)))
        else:
            out.append(_clean_one(m, options))
    return out


def _active_turn(turn: list[Message], options: CleanOptions) -> list[Message]:
    out = []
    for m in turn:
        keep = m.role in (ROLE_TOOL_CALL, ROLE_TOOL_RESULT) or (m.role == ROLE_ASSISTANT and m.tool_calls)
        out.append(m if keep else _clean_one(m, options))
    return out


def clean_with_turns(messages: Sequence[Message], options: CleanOptions) -> list[Message]:
    """Clean a window turn by turn (spec §5.4 ``CleanWithTurns``).

    Turns: where any message has a turn id, a new turn starts at each turn id other
    than the current one (the first one names the turn open already, so the messages
    before it join it; an untagged message stays in the current turn); else at each
    user message once the turn holds one; else the window is one turn. The last turn is
    active: its tool traffic is kept exactly. Earlier turns have tool results and tool
    calls summarised, everything else cleaned.
    """
    turns = _turns(messages)
    if options.max_summarized_turns > 0:
        turns = turns[-options.max_summarized_turns :]
    out: list[Message] = []
    for index, turn in enumerate(turns):
        last = index == len(turns) - 1
        out.extend(_active_turn(turn, options) if last else _finished_turn(turn, options))
    return out
