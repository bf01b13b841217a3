"""README states each of four explanations once and points to it: the pointers' targets hold them.

Session 55, helper h4: the ``ctx`` methods, the durability modes, the audit commands' exit
statuses and anchoring a head were each explained two to four times, the copies drifting
apart (one list of ``ctx`` methods left four out). Each is now stated in one section that
the other places link to; these tests hold that every link of that kind still leads to a
section that states it whole, so moving the statement means moving the links with it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import cogfabric as cf

_README = Path(__file__).resolve().parents[1] / "README.md"


def _anchor(heading: str) -> str:
    """The fragment GitHub gives a Markdown heading (as tests/test_readme.py computes it)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _sections() -> dict[str, str]:
    """Each ``##``/``###`` section's text up to the next heading, by its fragment (fences skipped)."""
    sections: dict[str, list[str]] = {}
    current, fenced = "", False
    for line in _README.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{2,3} (.+)$", line)):
            current = _anchor(match.group(1))
            sections[current] = []
            continue
        sections.setdefault(current, []).append(line)
    return {name: " ".join(" ".join(lines).split()) for name, lines in sections.items()}


# What each full statement holds, in the section the pointers name.
_HOLDS = {
    "embedding-the-runtime": [
        "A behavior acts through `ctx`",
        '`handoff-task` whose payload is `{"task_id": ..., "context": snapshot, "artifacts": []}`',
        "to answer later a request it returned None for",
    ],
    "guarantees": [
        "persist-then-apply",
        "each time `journal.group_commit_max` of them wait",
        "Two calls are durable first in either durability: `kill`",
        "and `publish_task_context`, which returns once its event is durable",
        "`Journal.open(path, sync=...)`",
    ],
    "auditing-a-journal": [
        "exit 0 means clean, 1 a problem in the journal",
        "2 a usage error, a path that is not a journal (or a journal of another format)",
        "a failed verdict that stdout cannot take, `verify J | true` or a full disk, exits 1",
        "130 a command stopped by Ctrl-C (143 by SIGTERM)",
    ],
    "handing-over-an-export": [
        "`--anchor SEQ:CHAIN`",
        "Anchor the head where the exporter cannot change it",
        "`head_seq` and `head_chain` from `inspect --json`",
        "the last record's `Record.chain`",
    ],
}


@pytest.mark.parametrize("fragment", sorted(_HOLDS))
def test_a_pointed_to_section_states_the_explanation_whole(fragment: str) -> None:
    sections = _sections()
    text = _README.read_text(encoding="utf-8")

    assert f"](#{fragment})" in text  # something points here
    assert [said for said in _HOLDS[fragment] if said not in sections[fragment]] == []


def test_the_ctx_statement_names_every_public_member_of_agent_context() -> None:
    section = _sections()["embedding-the-runtime"]
    start = section.index("A behavior acts through `ctx`")
    statement = section[start : section.index("A session is an agent's only when made so", start)]
    members = sorted(name for name in vars(cf.AgentContext) if not name.startswith("_"))

    assert members  # read from the class, not a list of ours
    assert [m for m in members if f"`{m}`" not in statement and f"`{m}(" not in statement] == []


def test_each_statement_is_made_once() -> None:
    text = " ".join(_README.read_text(encoding="utf-8").split())

    for said in (
        "Two calls are durable first in either durability",
        "`ctx` in short",
        "exit 0 when clean, 1 naming the first bad seq",
        "its seq and chain link, `head_seq` and `head_chain`",
    ):
        assert text.count(said) <= 1, said
    assert "## Durability, in short" not in text  # merged into "Guarantees"
