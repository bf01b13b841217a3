"""JSON output escapes what a terminal acts on beyond the controls JSON itself escapes (session 52).

msgspec escapes only the characters below U+0020; a journal's text can hold DEL, a C1
control (U+009B is a CSI), a bidi override (U+202E), a zero-width space or a line
separator, which an export or ``--json`` output printed to a terminal would act on
(helper h3's security review). They are written as ``\\uXXXX``: the same values for any
JSON reader, and a verifiable export still verifies.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from cogfabric._audit import encode_json
from cogfabric.cli import main
from cogfabric.events import PrivateSet
from cogfabric.store import LmdbJournal

if TYPE_CHECKING:
    from pathlib import Path

HOSTILE = "x\x1b[2K\x7f\x85\x9b31m\u202eRTL\u200b\u2028\U000e0001 é 😀 ok"
"""Controls msgspec escapes (ESC), others it leaves raw, and printable non-ASCII text."""


def _printed_safely(text: str) -> bool:
    return all(c == "\n" or c.isprintable() for c in text)


@pytest.mark.parametrize("indent", [0, 2])
def test_encode_json_escapes_the_unprintable_and_keeps_the_values(indent: int) -> None:
    value = {"agent/\u202e": [HOSTILE, {"k\x9b": 1}]}

    text = encode_json(value, indent=indent).decode()

    assert _printed_safely(text)
    assert json.loads(text) == value
    assert "é 😀 ok" in text  # printable non-ASCII text is written as it is
    assert "\\u009b31m\\u202eRTL\\u200b\\u2028\\udb40\\udc01" in text
    assert (text.count("\n") > 0) == bool(indent)  # an indented text keeps its line breaks


def test_encode_json_leaves_plain_text_byte_for_byte() -> None:
    value = {"a": "plain ascii", "b": "é 😀", "c": [1.5, None]}
    assert encode_json(value) == b'{"a":"plain ascii","b":"\xc3\xa9 \xf0\x9f\x98\x80","c":[1.5,null]}'


def test_an_export_and_its_verification_of_hostile_text(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with LmdbJournal.open(path) as journal:
        journal.append([PrivateSet(at=1.0, agent=f"a{HOSTILE[:3]}", key=HOSTILE, value={HOSTILE: HOSTILE})])
    out = tmp_path / "export.jsonl"
    runner = CliRunner()

    exported = runner.invoke(main, ["export", str(path), "--verifiable", "--output", str(out)])
    checked = runner.invoke(main, ["verify-export", str(out), "--json"])
    shown = runner.invoke(main, ["replay", str(path), "--json"])

    assert exported.exit_code == 0, exported.output
    text = out.read_text(encoding="utf-8")
    assert _printed_safely(text)
    [line] = [json.loads(line) for line in text.splitlines()]
    assert line["data"]["key"] == HOSTILE
    assert line["data"]["value"] == {HOSTILE: HOSTILE}
    assert checked.exit_code == 0, checked.output
    assert json.loads(checked.stdout)["ok"] is True
    assert shown.exit_code == 0, shown.output
    assert _printed_safely(shown.stdout)
