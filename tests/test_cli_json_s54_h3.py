"""The commands' --json as a script reads it (helper h3, session 54).

``backup --json`` printed nothing for a damaged journal (exit 1) where ``verify --json``
prints a verdict; the README's table of every command's fields is checked against what
each command prints, and the failure contract (a verdict, or nothing on stdout) per command.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

import cogfabric._audit
from cogfabric.cli import main
from cogfabric.store import Journal, JournalDamagedError
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from collections.abc import Callable

_README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sim") / "journal"
    result = CliRunner().invoke(main, ["simulate", "--agents", "3", "--turns", "3", "--journal", str(path)])
    assert result.exit_code == 0, result.output
    return path


def _copy(journal: Path, target: Path) -> Path:
    target.mkdir()
    (target / "data.mdb").write_bytes((journal / "data.mdb").read_bytes())
    return target


def _table() -> dict[str, str]:
    """The README's table of --json fields: its row text by command."""
    text = _README.read_text(encoding="utf-8")
    section = text.split("### The commands' JSON, field by field", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `([a-z-]+)` \| (.*) \|$", section, flags=re.MULTILINE)
    return dict(rows)


def _documented(row: str) -> list[str]:
    """The top-level field names a row names, in order (the first backticked names, not nested ones)."""
    depth, names = 0, []
    for token in re.finditer(r"[()]|`([a-z_]+)`", row):
        if token[0] == "(":
            depth += 1
        elif token[0] == ")":
            depth -= 1
        elif depth == 0:
            names.append(token[1])
    return names


def _json(args: list[str]) -> tuple[int, Any, str]:
    result = CliRunner().invoke(main, args)
    return result.exit_code, json.loads(result.stdout) if result.stdout else None, result.stderr


def test_backup_json_gives_a_verdict_for_a_journal_too_damaged_to_open(
    simulated: Path, tmp_path: Path, damage_page: Callable[[Path, bytes], None]
) -> None:
    # exit 1 with nothing on stdout: a script's `json.loads` failed where verify's verdict parses
    copy = tmp_path / "damaged"
    with Journal.open(simulated, readonly=True) as journal:
        journal.backup(copy)  # compact: no stale copy of a page holds the marker, only the live one
        link = next(r.chain for r in journal.read() if r.seq == 20)
    damage_page(copy, link)

    code, verdict, stderr = _json(["backup", str(copy), str(tmp_path / "dest"), "--json"])

    assert code == 1
    assert {k: v for k, v in verdict.items() if k != "reason"} == {
        "ok": False,
        "head_seq": None,
        "bytes": None,
        "verified": False,
        "checked": None,
        "first_bad_seq": None,
    }
    assert verdict["reason"].startswith(f"{copy} is damaged")
    assert f"error: {copy} is damaged" in stderr
    assert not (tmp_path / "dest").exists()


def test_backup_json_gives_a_verdict_for_a_backup_it_cannot_open_to_verify(
    simulated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = cogfabric._audit.open_for_audit

    def damaged_dest(path: Path, **kwargs: Any) -> Any:
        if path == tmp_path / "dest":
            msg = f"{path} is damaged: made up"
            raise JournalDamagedError(msg)
        return opened(path, **kwargs)

    monkeypatch.setattr(cogfabric._audit, "open_for_audit", damaged_dest)

    code, verdict, stderr = _json(["backup", str(simulated), str(tmp_path / "dest"), "--json"])

    assert code == 1
    with Journal.open(simulated, readonly=True) as journal:
        last = journal.last_seq
    assert (verdict["ok"], verdict["head_seq"], verdict["verified"], verdict["checked"]) == (
        False,
        last,
        False,
        None,
    )
    assert verdict["bytes"] == (tmp_path / "dest" / "data.mdb").stat().st_size
    assert "which is kept, but could not verify it" in verdict["reason"]
    assert "error: backed up" in stderr


def test_the_readme_table_names_every_field_each_command_prints_in_order(
    simulated: Path, tmp_path: Path
) -> None:
    table = _table()
    export = tmp_path / "all.jsonl"
    assert (
        CliRunner().invoke(main, ["export", str(simulated), "--verifiable", "-o", str(export)]).exit_code == 0
    )
    printed = {
        "inspect": _json(["inspect", str(simulated), "--json"])[1],
        "verify": _json(["verify", str(simulated), "--json"])[1],
        "backup": _json(["backup", str(simulated), str(tmp_path / "b"), "--json"])[1],
        "salvage": _json(["salvage", str(simulated), str(tmp_path / "s"), "--json"])[1],
        "verify-export": _json(["verify-export", str(export), "--json"])[1],
        "trace": _json(["trace", str(simulated), "--seq", "3", "--json"])[1],
        "export": json.loads(export.read_text(encoding="utf-8").splitlines()[0]),
    }

    for command, document in printed.items():
        assert _documented(table[command]) == list(document), command
    replay = table["replay"]
    overview = _json(["replay", str(simulated), "--json"])[1]
    agent = _json(["replay", str(simulated), "--agent", "researcher-000", "--json"])[1]
    session = _json(["replay", str(simulated), "--session", overview["sessions"][0]["session"], "--json"])[1]
    for document in (overview, overview["agents"][0], overview["sessions"][0], agent, session):
        assert all(f"`{key}`" in replay for key in document), document


def test_seqs_counts_and_sizes_are_integers_and_absent_values_null(simulated: Path, tmp_path: Path) -> None:
    inspected = _json(["inspect", str(simulated), "--json"])[1]
    verdict = _json(["verify", str(simulated), "--json"])[1]
    backed = _json(["backup", str(simulated), str(tmp_path / "b"), "--json", "--no-verify"])[1]

    for key in ("format", "records", "head_seq", "stream_count", "bytes_on_disk"):
        assert type(inspected[key]) is int, key
    assert re.fullmatch(r"[0-9a-f]{32}", inspected["head_chain"])
    assert (verdict["ok"], verdict["first_bad_seq"], verdict["reason"]) == (True, None, "")
    assert type(verdict["checked"]) is int
    assert type(verdict["head_seq"]) is int
    # --no-verify: verified false, not a failure; reason "" as everywhere nothing is wrong
    assert (backed["ok"], backed["verified"], backed["checked"], backed["reason"]) == (True, False, None, "")
    assert backed["head_seq"] == inspected["head_seq"]


@pytest.mark.parametrize("command", ["inspect", "replay", "trace", "export"])
def test_the_other_commands_print_nothing_on_stdout_for_a_tampered_journal(
    simulated: Path, tmp_path: Path, break_link: Callable[[Path, int], None], command: str
) -> None:
    # README: no verdict from these: a script checks the exit status, not an empty stdout
    copy = _copy(simulated, tmp_path / "tampered")
    break_link(copy, 5)
    extra = {"trace": ["--seq", "3", "--json"], "export": []}.get(command, ["--json"])

    result = CliRunner().invoke(main, [command, str(copy), *extra])

    assert (result.exit_code, result.stdout) == (1, "")
    assert "fails verification at seq 5" in result.stderr


def test_the_verdicts_print_one_document_for_a_tampered_journal(
    simulated: Path, tmp_path: Path, break_link: Callable[[Path, int], None]
) -> None:
    copy = _copy(simulated, tmp_path / "tampered")
    break_link(copy, 5)

    verified = _json(["verify", str(copy), "--json"])
    backed = _json(["backup", str(copy), str(tmp_path / "b"), "--json"])

    for code, verdict, _ in (verified, backed):
        assert code == 1
        assert (verdict["ok"], verdict["checked"], verdict["first_bad_seq"]) == (False, 4, 5)
        assert verdict["reason"]


def test_backup_json_with_a_wrong_key_is_a_usage_error_with_nothing_on_stdout(tmp_path: Path) -> None:
    # README: a wrong or missing key is exit 2 with no verdict; only a journal's own damage gets one
    path = tmp_path / "keyed"
    with Journal.open(path, key=b"right") as journal:
        journal.append(make_events(3))

    for key in (["--key", "wrong"], []):
        result = CliRunner().invoke(main, ["backup", str(path), str(tmp_path / "dest"), "--json", *key])

        assert (result.exit_code, result.stdout) == (2, ""), result.output
        assert not (tmp_path / "dest").exists()
