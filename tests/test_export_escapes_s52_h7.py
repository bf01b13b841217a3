"""JSON output escapes a fixed set of characters, the same on every Python (session 52, helper h7).

``verify-export`` requires each line byte for byte as export writes it. Escaping what
``str.isprintable`` refuses made those bytes follow the interpreter's Unicode database
(Python 3.11 reads Unicode 14, 3.12 Unicode 15: U+1FA77, a pink heart, is unassigned, so
escaped, on one and written as it is on the other): an export made on one Python failed
its verification on the other. It also escaped characters no terminal acts on (a no-break
space, a private-use character), which every earlier export wrote as they are.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

import msgspec
from click.testing import CliRunner

from cogfabric._audit import encode_json
from cogfabric.cli import main
from cogfabric.events import PrivateSet
from cogfabric.store import LmdbJournal

if TYPE_CHECKING:
    from pathlib import Path

ESCAPED = [
    (0x7F, 0x9F),  # DEL, the C1 controls
    (0xAD, 0xAD),  # soft hyphen
    (0x61C, 0x61C),  # Arabic letter mark
    (0x180E, 0x180E),  # Mongolian vowel separator
    (0x200B, 0x200F),  # zero-width characters, LRM, RLM
    (0x2028, 0x202E),  # line and paragraph separators, bidi embeddings and overrides
    (0x2060, 0x206F),  # word joiner, invisible operators, bidi isolates, deprecated format characters
    (0xFEFF, 0xFEFF),  # zero-width no-break space (BOM)
    (0xFFF9, 0xFFFB),  # interlinear annotations
    (0x13430, 0x1343F),  # Egyptian hieroglyph format controls (13439-1343F: Unicode 15)
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical symbol format controls
    (0xE0000, 0xE007F),  # tags
]
_STRING = re.compile(rb'"((?:[^"\\]|\\.)*)"')


def _escaped_beyond_msgspec(chars: list[str]) -> set[int]:
    ours = [m.group(1) for m in _STRING.finditer(encode_json(chars))]
    plain = [m.group(1) for m in _STRING.finditer(msgspec.json.encode(chars))]
    assert len(ours) == len(plain) == len(chars)
    return {ord(c) for c, a, b in zip(chars, ours, plain, strict=True) if a != b}


def test_encode_json_escapes_exactly_a_fixed_set_past_msgspecs_own() -> None:
    every = [chr(code) for code in range(0x20, 0x110000) if not 0xD800 <= code < 0xE000]
    escaped: set[int] = set()
    for start in range(0, len(every), 65536):
        escaped |= _escaped_beyond_msgspec(every[start : start + 65536])

    assert escaped == {code for low, high in ESCAPED for code in range(low, high + 1)}


def test_a_character_no_terminal_acts_on_is_written_as_it_is() -> None:
    # a no-break space, an ideographic space, a private-use character, a Unicode 15 emoji
    text = "5\u00a0€ 東京\u3000大阪 \ue000 \U0001fa77"
    assert encode_json({"t": text}) == b'{"t":"' + text.encode() + b'"}'
    assert encode_json({"t": text}, indent=2) == b'{\n  "t": "' + text.encode() + b'"\n}'


def test_an_export_of_such_text_verifies_and_keeps_it_as_earlier_exports_wrote_it(tmp_path: Path) -> None:
    text = "prix\u00a0: 5\u00a0€ \U0001fa77 \u202e"
    path = tmp_path / "j"
    with LmdbJournal.open(path) as journal:
        journal.append([PrivateSet(at=1.0, agent="a", key="k", value=text)])
    runner = CliRunner()

    exported = runner.invoke(main, ["export", str(path), "--verifiable"])
    checked = runner.invoke(main, ["verify-export", "-", "--json"], input=exported.stdout_bytes)

    assert exported.exit_code == 0, exported.output
    assert "prix\u00a0: 5\u00a0€ \U0001fa77 \\u202e" in exported.stdout
    assert json.loads(exported.stdout)["data"]["value"] == text
    assert checked.exit_code == 0, checked.output
