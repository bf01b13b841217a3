"""The error a script gets from a ``--json`` command that prints no document (session 56, helper h4).

A command run with ``--json`` whose failure leaves stdout empty (a usage error, a path
with no journal, a wrong key, a journal refused by its chain, a record newer than this
code, Ctrl-C) said so on stderr in prose only: a script could tell exit 1 from exit 2
and no more. Its last line on stderr is now one JSON object, ``{"error": {"kind",
"exit", "message", "seq", "type_name", "stored", "known"}}``; stdout and the exit
status are as they were.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NoReturn

import pytest
from click.testing import CliRunner

from cogfabric.cli import _asks_for_json, main
from cogfabric.events import EVENT_TYPES, EventCodec, PrivateSet
from cogfabric.store import FORMAT_VERSION, Journal, LmdbJournal
from cogfabric.store.testing import make_events
from tests.actors.test_runtime import _flip_last_records_bit, _PrivateSetV2
from tests.test_upgrade_s54_h6 import _journal_of_format

_FIELDS = ["kind", "exit", "message", "seq", "type_name", "stored", "known"]


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    path = tmp_path / "j"
    with Journal.open(path, max_map_size=1 << 22) as opened:
        opened.append(make_events(6))
    return path


def _run(args: list[str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, args)
    return result.exit_code, result.stdout, result.stderr


def _error(stderr: str) -> dict[str, Any]:
    """The error object: stderr's last line, checked to hold every field in order."""
    document = json.loads(stderr.splitlines()[-1])
    assert list(document) == ["error"]
    assert list(document["error"]) == _FIELDS
    error: dict[str, Any] = document["error"]
    return error


def _with_a_newer_record(path: Path) -> Path:
    """``path`` with a ``PrivateSet`` at version 2 appended (seq 7), as a newer cogfabric writes one."""
    newer = EventCodec([_PrivateSetV2 if t is PrivateSet else t for t in EVENT_TYPES])
    with LmdbJournal.open(path, codec=newer) as opened:
        opened.append([_PrivateSetV2(at=2.0, agent="a", key="k", value=1)])
    return path


@pytest.mark.parametrize("command", ["verify", "inspect", "replay", "trace"])
def test_a_missing_journal_gives_its_kind_and_exit_status_on_stderr(tmp_path: Path, command: str) -> None:
    extra = ["--seq", "1"] if command == "trace" else []

    code, stdout, stderr = _run([command, str(tmp_path / "missing"), "--json", *extra])

    assert (code, stdout) == (2, "")  # as before: no document on stdout
    assert stderr.startswith(f"error: no journal at {tmp_path / 'missing'}\n")
    assert _error(stderr) == {
        "kind": "JournalNotFoundError",
        "exit": 2,
        "message": f"no journal at {tmp_path / 'missing'}",
        "seq": None,
        "type_name": None,
        "stored": None,
        "known": None,
    }


@pytest.mark.parametrize("command", ["inspect", "replay", "trace"])
def test_a_record_newer_than_this_code_is_named_with_its_type_and_both_versions(
    journal: Path, command: str
) -> None:
    _with_a_newer_record(journal)
    extra = ["--seq", "1"] if command == "trace" else []

    code, stdout, stderr = _run([command, str(journal), "--json", *extra])

    assert (code, stdout) == (1, "")
    error = _error(stderr)
    assert {k: v for k, v in error.items() if k != "message"} == {
        "kind": "JournalRecordVersionError",
        "exit": 1,
        "seq": 7,
        "type_name": "PrivateSet",
        "stored": 2,
        "known": 1,
    }
    assert "newer than the known version 1" in error["message"]


def test_a_journal_of_a_newer_format_gives_both_formats(tmp_path: Path) -> None:
    path = _journal_of_format(tmp_path / "j", FORMAT_VERSION + 1)

    code, stdout, stderr = _run(["inspect", str(path), "--json"])

    assert (code, stdout) == (2, "")
    error = _error(stderr)
    assert (error["kind"], error["stored"], error["known"]) == (
        "JournalFormatError",
        FORMAT_VERSION + 1,
        FORMAT_VERSION,
    )


def test_a_journal_refused_by_its_chain_names_the_first_bad_seq(journal: Path) -> None:
    seq = _flip_last_records_bit(journal, "agent/a1")

    code, stdout, stderr = _run(["replay", str(journal), "--json"])

    assert (code, stdout) == (1, "")
    error = _error(stderr)
    assert (error["kind"], error["exit"], error["seq"]) == ("JournalIntegrityError", 1, seq)
    assert error["message"].startswith(f"the journal fails verification at seq {seq}: ")


def test_a_wrong_key_is_a_usage_error_of_its_own_kind(tmp_path: Path) -> None:
    path = tmp_path / "keyed"
    with Journal.open(path, key=b"the key", max_map_size=1 << 22) as opened:
        opened.append(make_events(2))

    code, stdout, stderr = _run(["verify", str(path), "--json", "--key", "another"])

    assert (code, stdout) == (2, "")
    assert (_error(stderr)["kind"], _error(stderr)["exit"]) == ("JournalKeyError", 2)


@pytest.mark.parametrize(
    "args",
    [
        ["verify", "--json", "--bogus", "J"],  # click's own, --json seen before the error
        ["verify", "J", "--bogus", "--json"],  # and after it, which click never parsed
        ["replay", "J", "--json", "--agent", "a", "--session", "s"],  # the command's own
        ["trace", "J", "--json"],  # neither --seq nor --id
    ],
)
def test_a_usage_error_is_a_usage_error_object(journal: Path, args: list[str]) -> None:
    args = [str(journal) if arg == "J" else arg for arg in args]

    code, stdout, stderr = _run(args)

    assert (code, stdout) == (2, "")
    assert (_error(stderr)["kind"], _error(stderr)["exit"]) == ("UsageError", 2)


def test_ctrl_c_is_an_interrupted_object(journal: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*_args: object, **_kwargs: object) -> NoReturn:
        raise KeyboardInterrupt

    monkeypatch.setattr(LmdbJournal, "verify", interrupted)

    code, stdout, stderr = _run(["inspect", str(journal), "--json"])

    assert (code, stdout) == (130, "")
    assert (_error(stderr)["kind"], _error(stderr)["exit"]) == ("Interrupted", 130)


def test_without_json_stderr_holds_no_object(tmp_path: Path) -> None:
    code, stdout, stderr = _run(["inspect", str(tmp_path / "missing")])

    assert (code, stdout, stderr) == (2, "", f"error: no journal at {tmp_path / 'missing'}\n")


def test_a_verdict_on_stdout_comes_with_no_error_object(journal: Path) -> None:
    # verify, backup, salvage and verify-export print their verdict for a bad journal: it is the document
    seq = _flip_last_records_bit(journal, "agent/a1")

    code, stdout, stderr = _run(["verify", str(journal), "--json"])

    assert code == 1
    assert json.loads(stdout)["first_bad_seq"] == seq
    assert stderr == ""


@pytest.mark.parametrize(
    ("args", "asked"),
    [
        (["inspect", "J", "--json"], True),
        (["verify-export", "-", "--json"], True),
        (["export", "J", "--json"], False),  # export has no --json
        (["bench", "--json", "out.json"], False),  # a file's name, not a document on stdout
        (["replay", "J", "--", "--json"], False),  # a word after --: an argument
        (["--help"], False),
    ],
)
def test_the_command_line_asks_for_json_only_of_a_command_that_has_it(args: list[str], asked: bool) -> None:
    assert _asks_for_json(args) is asked


def test_the_readme_and_the_help_name_the_error_objects_fields_in_order() -> None:
    fields = '{"error": {' + ", ".join(f'"{name}"' for name in _FIELDS) + "}}"
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("### The commands' JSON, field by field", 1)[1].split("\n#", 1)[0]

    assert f"`{fields}`" in section
    assert fields in " ".join(CliRunner().invoke(main, ["--help"]).stdout.split())
