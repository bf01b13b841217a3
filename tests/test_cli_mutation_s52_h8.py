"""Mutation round s52 (h8): what the session's terminal and symlink defences left unpinned.

- ``_shown``: a journal path holding both a quote (or a backslash) and a character a
  terminal acts on is a ``$'...'`` word, in which the quote must be escaped too, or the
  suggested command names another path (or does not parse).
- ``_sink``: a name that was no link at the check is opened with ``O_NOFOLLOW``, so a
  link put there in between is refused, never written through.
- ``encode_json``: DEL is escaped in output that is otherwise plain ASCII too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from cogfabric._audit import encode_json
from cogfabric.cli import _shown, _sink, main
from cogfabric.events import PrivateSet
from cogfabric.store import LmdbJournal


@pytest.mark.skipif(shutil.which("bash") is None, reason="the $'...' word is bash's")
@pytest.mark.parametrize(
    "name",
    ["it's\x1b[2K", "back\\nslash\r", "'\x9b'", "-'\n"],
    ids=["quote and ESC", "backslash and CR", "quotes around a CSI", "dash, quote, newline"],
)
def test_a_quote_or_backslash_beside_a_control_is_escaped_in_the_shown_word(name: str) -> None:
    word = _shown(Path(name))
    printed = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, check=True).stdout

    assert word.startswith("$'")
    assert word.isprintable()
    assert printed == os.fsencode(name if not name.startswith("-") else f"./{name}")


def test_a_link_put_where_no_link_was_seen_is_not_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the race _sink's check leaves: the name is no link when looked at, a link when opened
    victim = tmp_path / "victim"
    victim.write_text("the auditor's own\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    out.symlink_to(victim)
    looked_at = Path.is_symlink
    monkeypatch.setattr(Path, "is_symlink", lambda self: False if self == out else looked_at(self))

    with pytest.raises(SystemExit) as exited:
        _sink(out, out)

    assert exited.value.code == 2
    assert victim.read_text(encoding="utf-8") == "the auditor's own\n"


def test_encode_json_escapes_del_in_otherwise_plain_ascii_output() -> None:
    assert encode_json({"k": "a\x7fb"}) == b'{"k":"a\\u007fb"}'
    assert encode_json(["\x7f"], indent=2) == b'[\n  "\\u007f"\n]'


def test_an_export_of_ascii_text_holding_del_writes_it_escaped(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with LmdbJournal.open(path) as journal:
        journal.append([PrivateSet(at=1.0, agent="a", key="k\x7f", value="v\x7f")])

    exported = CliRunner().invoke(main, ["export", str(path)])

    assert exported.exit_code == 0, exported.output
    assert "\x7f" not in exported.stdout
    assert "\\u007f" in exported.stdout
    [line] = [json.loads(line) for line in exported.stdout.splitlines()]
    assert (line["data"]["key"], line["data"]["value"]) == ("k\x7f", "v\x7f")
