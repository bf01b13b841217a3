"""README's table of contents and cross-references, held against the README itself and the CLI.

A README of two thousand lines is read by its contents list: every section and subsection
must be in it, in order, each linked to the fragment GitHub gives its heading. The other
checks catch what drifted before (helper h13, session 54): a file named that the
repository does not hold, and a list of the commands that refuse an unverified journal
that left one of them out.
"""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from cogfabric.cli import main

_README = Path(__file__).resolve().parents[1] / "README.md"


def _anchor(heading: str) -> str:
    """The fragment GitHub gives a Markdown heading (as tests/test_readme.py computes it)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _headings(text: str) -> list[tuple[int, str]]:
    """Every ``##`` and ``###`` heading outside fenced code, as (level, title), in order."""
    found, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"(#{2,3}) (.+)$", line)):
            found.append((len(match.group(1)), match.group(2)))
    return found


def _contents(text: str) -> list[tuple[int, str, str]]:
    """The contents list's entries as (level, title, fragment), in order."""
    start = text.index("\n**Contents**\n")
    block = text[start : text.index("\n## ", start)]
    entries = re.findall(r"^( *)- \[(.+?)\]\(#([^)]+)\)", block, flags=re.MULTILINE)
    return [(2 + len(indent) // 2, title, fragment) for indent, title, fragment in entries]


def test_the_contents_come_before_the_first_section() -> None:
    text = _README.read_text(encoding="utf-8")
    assert text.index("\n**Contents**\n") < text.index("\n## ")


def test_the_contents_list_every_section_and_subsection_in_order() -> None:
    text = _README.read_text(encoding="utf-8")
    listed = _contents(text)

    assert [(level, title) for level, title, _ in listed] == _headings(text)
    assert [fragment for _, _, fragment in listed] == [_anchor(title) for _, title, _ in listed]


def test_every_markdown_file_the_readme_names_is_in_the_repository() -> None:
    text = _README.read_text(encoding="utf-8")
    named = set(re.findall(r"[\w./-]+\.md\b", text))

    assert named
    assert sorted(name for name in named if not (_README.parent / name).exists()) == []


def test_guarantees_name_every_command_that_refuses_an_unverified_journal() -> None:
    # The audit commands whose --no-verify reads a journal that fails its chain (backup's
    # --no-verify skips checking the copy instead: it is not among them).
    runner = CliRunner()
    readers = []
    for command in ("inspect", "verify", "replay", "export", "trace"):
        result = runner.invoke(main, [command, "--help"])
        assert result.exit_code == 0, result.output
        if "--no-verify" in result.output:
            readers.append(command)
    assert readers == ["inspect", "replay", "export", "trace"]

    text = " ".join(_README.read_text(encoding="utf-8").split())
    guarantees = text.split("## Guarantees", 1)[1]
    sentence = re.search(r"((?:`\w+`, )*`\w+` and `\w+`) refuse it unless `--no-verify`", guarantees)
    assert sentence is not None
    assert sorted(re.findall(r"`(\w+)`", sentence.group(1))) == sorted(readers)
