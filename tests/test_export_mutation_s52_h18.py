"""Mutation round s52 (h18): what the export's escapes and its partial file left unpinned.

- ``_json_escape``: a character past U+FFFF that a terminal acts on is written as the
  surrogate pair JSON has for it, both halves whole; only the tags (U+E0000-E007F) were
  checked, whose low ten bits fit in eight, so a low half cut to eight bits passed
  (U+1D173, a musical format control, is ``\\ud834\\udd73``, not ``\\ud834\\udc73``).
- ``_export_target``: the partial file is flushed before it is renamed over the output,
  so the name never shows a part of the export (one who opens it the moment it appears
  reads it whole).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from cogfabric._audit import _ACTED_ON, encode_json
from cogfabric.cli import _export_target

if TYPE_CHECKING:
    import pytest

_EVERY_CHARACTER = "".join(chr(code) for code in range(0x110000) if not 0xD800 <= code <= 0xDFFF)
_ESCAPED = _ACTED_ON.findall(_EVERY_CHARACTER)


def test_the_escapes_cover_astral_characters() -> None:
    assert "\U0001d173" in _ESCAPED
    assert "\U000e0001" in _ESCAPED


def test_every_escaped_character_is_written_as_json_escapes_it() -> None:
    for char in _ESCAPED:
        text = f"a{char}b"
        written = encode_json(text)
        assert written == json.dumps(text).encode(), hex(ord(char))
        assert json.loads(written) == text


def test_the_renamed_export_is_whole_when_its_name_appears(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out.jsonl"
    body = b'{"seq":1}\n' * 100  # far less than the partial file's buffer
    seen: list[bytes] = []
    rename = Path.replace

    def replace(self: Path, target: Path) -> Path:
        seen.append(self.read_bytes())
        return rename(self, target)

    monkeypatch.setattr(Path, "replace", replace)
    with _export_target(out) as sink:
        sink.write(body)

    assert seen == [body]
    assert out.read_bytes() == body
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]
