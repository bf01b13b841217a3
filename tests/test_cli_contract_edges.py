"""The command line at its edges: what a mutation test found no test held."""

from __future__ import annotations

import stat
from typing import TYPE_CHECKING

from click.testing import CliRunner

from cogfabric.cli import main
from cogfabric.events import AgentSpawned
from cogfabric.store import Journal
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from pathlib import Path


def _journal(tmp_path: Path, count: int = 40, *, key: bytes | None = None) -> Path:
    path = tmp_path / "journal"
    with Journal.open(path, key=key) as journal:
        journal.append([AgentSpawned(at=0.0, agent="a0"), *make_events(count - 1)])
    return path


def test_a_key_file_of_the_longest_key_blake2b_takes_is_accepted(tmp_path: Path) -> None:
    # README: --key-file takes "the file's bytes exactly ... any bytes"; BLAKE2b keys go to 64 bytes
    key = bytes(range(1, 65))
    path = _journal(tmp_path, 3, key=key)
    key_file = tmp_path / "key"
    key_file.write_bytes(key)

    result = CliRunner().invoke(main, ["verify", str(path), "--key-file", str(key_file)])

    assert result.exit_code == 0, result.output
    assert result.output.startswith("ok: 3 records verified")


def test_replay_refuses_an_at_one_past_the_last_seq(tmp_path: Path) -> None:
    # "at any seq up to the last (a later --at is refused)": the bound is exact
    path = _journal(tmp_path, 38)
    runner = CliRunner()

    past = runner.invoke(main, ["replay", str(path), "--agent", "a0", "--at", "39", "--json"])
    last = runner.invoke(main, ["replay", str(path), "--agent", "a0", "--at", "38", "--json"])

    assert past.exit_code == 2, past.output
    assert "last seq 38" in past.output
    assert last.exit_code == 0


def test_an_export_through_a_link_to_a_new_file_creates_it_owner_only(tmp_path: Path) -> None:
    # "-o: an owner-only (0600) file: it may hold every private value", also where -o is a
    # link whose target does not exist yet (written in place, through the link)
    path = _journal(tmp_path, 5)
    target = tmp_path / "real.jsonl"
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)

    result = CliRunner().invoke(main, ["export", str(path), "-o", str(link)])

    assert result.exit_code == 0, result.output
    assert len(target.read_text(encoding="utf-8").splitlines()) == 5
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_replay_with_both_an_agent_and_a_session_is_a_usage_error(tmp_path: Path) -> None:
    # "--agent ID | --session ID": exactly one, not the agent silently
    path = _journal(tmp_path, 5)

    result = CliRunner().invoke(main, ["replay", str(path), "--agent", "a0", "--session", "s1"])

    assert result.exit_code == 2, result.output
    assert "give one of --agent or --session, not both" in result.output
