"""Three loose ends of the command line's error objects and of a journal a newer cogfabric wrote to.

Session 57, helper h4:

- ``export`` had no ``--json``, so a script piping it got its errors in prose only: it
  now takes ``--json-errors``, which ends stderr with the error object other commands
  give with ``--json`` (stdout stays the export, lines written before the error too).
- ``--json`` given as an option's value (``--key-file --json``, a key file called
  ``--json``) made the error object appear, though no JSON was asked for: the command
  line was searched for the word before click parsed it.
- ``inspect`` printed nothing of a journal holding a record newer than this code:
  ``--skip-newer`` summarises it, counting such records and naming their type and both
  versions (``newer``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from cogfabric._audit import inspect_journal
from cogfabric.cli import _asks_for_json
from cogfabric.events import EVENT_TYPES, EventCodec, PrivateSet
from cogfabric.store import Journal, LmdbJournal
from cogfabric.store.testing import make_events
from tests.actors.test_runtime import _flip_last_records_bit, _PrivateSetV2
from tests.test_cli_json_s56_h4 import _error, _run, _with_a_newer_record
from tests.test_cli_json_s56_h4 import journal as journal  # noqa: PLC0414 - the fixture, used by name

if TYPE_CHECKING:
    from pathlib import Path

#: What a newer cogfabric reads with: PrivateSet at version 2, upcast from 1.
_NEWER_CODEC = EventCodec(
    [_PrivateSetV2 if t is PrivateSet else t for t in EVENT_TYPES], {("PrivateSet", 1): lambda raw: raw}
)


def _no_error_object(stderr: str) -> bool:
    return not any(line.startswith('{"error"') for line in stderr.splitlines())


# --------------------------------------------------------------- export --json-errors


def test_export_json_errors_names_a_missing_journal(tmp_path: Path) -> None:
    missing = tmp_path / "missing"

    code, stdout, stderr = _run(["export", str(missing), "--json-errors"])

    assert (code, stdout) == (2, "")
    assert stderr.startswith(f"error: no journal at {missing}\n")
    assert _error(stderr) == {
        "kind": "JournalNotFoundError",
        "exit": 2,
        "message": f"no journal at {missing}",
        "seq": None,
        "type_name": None,
        "stored": None,
        "known": None,
    }


def test_export_without_json_errors_says_its_error_in_prose_only(tmp_path: Path) -> None:
    code, stdout, stderr = _run(["export", str(tmp_path / "missing")])

    assert (code, stdout, stderr) == (2, "", f"error: no journal at {tmp_path / 'missing'}\n")


def test_export_json_errors_names_a_newer_record_after_the_lines_it_wrote(journal: Path) -> None:
    _with_a_newer_record(journal)

    code, stdout, stderr = _run(["export", str(journal), "--json-errors"])

    assert code == 1
    assert [json.loads(line)["seq"] for line in stdout.splitlines()] == [1, 2, 3, 4, 5, 6]  # the export
    error = _error(stderr)
    assert {k: v for k, v in error.items() if k != "message"} == {
        "kind": "JournalRecordVersionError",
        "exit": 1,
        "seq": 7,
        "type_name": "PrivateSet",
        "stored": 2,
        "known": 1,
    }


def test_export_json_errors_names_a_refused_chain_and_its_seq(journal: Path) -> None:
    seq = _flip_last_records_bit(journal, "agent/a1")

    code, stdout, stderr = _run(["export", str(journal), "--json-errors"])

    assert (code, stdout) == (1, "")
    assert (_error(stderr)["kind"], _error(stderr)["seq"]) == ("JournalIntegrityError", seq)


@pytest.mark.parametrize(
    "args",
    [
        ["export", "J", "--json-errors", "--until", "0"],  # the command's own
        ["export", "J", "--bogus", "--json-errors"],  # click's, before it parsed --json-errors
        ["export", "J", "--json-errors", "--type", "NoSuchType"],  # an option's callback
    ],
)
def test_export_json_errors_names_a_usage_error(journal: Path, args: list[str]) -> None:
    code, stdout, stderr = _run([str(journal) if arg == "J" else arg for arg in args])

    assert (code, stdout) == (2, "")
    assert (_error(stderr)["kind"], _error(stderr)["exit"]) == ("UsageError", 2)


# --------------------------------------------------------------- --json as an option's value


@pytest.mark.parametrize(
    ("args", "asked"),
    [
        (["inspect", "J", "--key-file", "--json"], False),  # a key file called --json
        (["inspect", "J", "--key-file=--json"], False),
        (["replay", "J", "--agent", "--json"], False),  # an agent called --json
        (["export", "J", "-o", "--json-errors"], False),  # an export file called --json-errors
        (["inspect", "J", "--key-file", "k", "--json"], True),
        (["inspect", "--json", "J"], True),
        (["verify", "J", "--bogus", "--json"], True),  # an unknown option: taken to take no value
        (["export", "J", "--json-errors"], True),
        (["export", "J", "--", "--json-errors"], False),
        (["export", "J", "--json"], False),  # export has no --json
        (["bench", "--json", "out.json"], False),  # a file's name, not the flag
        (["no-such-command", "--json"], False),
    ],
)
def test_only_the_commands_own_option_asks_for_the_error_object(args: list[str], asked: bool) -> None:
    assert _asks_for_json(args) is asked


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", "J", "--key-file", "--json"],  # no such file: a usage error of the option's callback
        ["replay", "J", "--agent", "--json", "--bogus"],  # click's own, before the command ran
        ["export", "J", "-o", "--json-errors", "--bogus"],
    ],
)
def test_json_as_an_options_value_asks_for_no_error_object(
    journal: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # no file called --json here

    code, stdout, stderr = _run([str(journal) if arg == "J" else arg for arg in args])

    assert (code, stdout) == (2, "")
    assert _no_error_object(stderr)


def test_ctrl_c_with_a_key_file_called_json_gives_no_error_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "keyed"
    with Journal.open(path, key=b"the key", max_map_size=1 << 22) as opened:
        opened.append(make_events(2))
    (tmp_path / "--json").write_bytes(b"the key")
    monkeypatch.chdir(tmp_path)

    def interrupted(*_args: object, **_kwargs: object) -> NoReturn:
        raise KeyboardInterrupt

    monkeypatch.setattr(LmdbJournal, "verify", interrupted)

    code, stdout, stderr = _run(["inspect", str(path), "--key-file", "--json"])

    assert (code, stdout, stderr) == (130, "", "interrupted\n")


# --------------------------------------------------------------- inspect --skip-newer


def _as_a_newer_cogfabric_sees_it(path: Path) -> dict[str, Any]:
    with LmdbJournal.open(path, codec=_NEWER_CODEC, readonly=True) as opened:
        return inspect_journal(opened, path)  # types by tag: the newer PrivateSet's is PrivateSet too


def test_inspect_skip_newer_counts_a_newer_record_and_names_it(journal: Path) -> None:
    _with_a_newer_record(journal)
    newer = _as_a_newer_cogfabric_sees_it(journal)

    code, stdout, stderr = _run(["inspect", str(journal), "--skip-newer", "--json"])

    assert code == 0
    summary = json.loads(stdout)
    for key in ("records", "head_seq", "head_chain", "types", "stream_count", "stream_kinds", "streams"):
        assert summary[key] == newer[key], key  # as the cogfabric that wrote it counts them
    assert summary["newer"] == [
        {"type": "PrivateSet", "stored": 2, "known": 1, "records": 1, "first_seq": 7, "last_seq": 7}
    ]
    assert summary["last_time"] != 2.0  # the newer record's time is not read
    assert stderr.startswith("note: 1 record newer than this cogfabric counted, not read")


def test_inspect_skip_newer_reads_past_newer_records_in_a_row_and_between_others(journal: Path) -> None:
    _with_a_newer_record(journal)  # seq 7
    with Journal.open(journal, max_map_size=1 << 22) as opened:
        opened.append(make_events(3))  # seqs 8 to 10
    with LmdbJournal.open(journal, codec=_NEWER_CODEC) as opened:
        opened.append([_PrivateSetV2(at=3.0, agent="b", key="k", value=i) for i in range(3)])  # 11 to 13
    newer = _as_a_newer_cogfabric_sees_it(journal)

    code, stdout, _ = _run(["inspect", str(journal), "--skip-newer", "--json"])

    assert code == 0
    summary = json.loads(stdout)
    assert (summary["records"], summary["head_seq"], summary["head_chain"]) == (13, 13, newer["head_chain"])
    assert (summary["types"], summary["streams"]) == (newer["types"], newer["streams"])
    assert summary["newer"] == [
        {"type": "PrivateSet", "stored": 2, "known": 1, "records": 4, "first_seq": 7, "last_seq": 13}
    ]


def test_inspect_skip_newer_names_them_in_its_table(journal: Path) -> None:
    _with_a_newer_record(journal)

    code, stdout, _ = _run(["inspect", str(journal), "--skip-newer"])

    assert code == 0
    assert "newer     PrivateSet v2 1 (known v1; seq 7)\n" in stdout
    assert "records   7 in " in stdout


def test_inspect_without_skip_newer_stops_at_a_newer_record_and_says_how_to_go_on(journal: Path) -> None:
    _with_a_newer_record(journal)

    code, stdout, stderr = _run(["inspect", str(journal)])

    assert (code, stdout) == (1, "")
    assert stderr.startswith("error: record at seq 7: ")
    assert stderr.endswith("(--skip-newer summarises the journal)\n")


def test_inspect_of_a_journal_with_no_newer_record_lists_none(journal: Path) -> None:
    code, stdout, stderr = _run(["inspect", str(journal), "--skip-newer", "--json"])

    assert (code, stderr) == (0, "")
    assert json.loads(stdout)["newer"] == []
    assert "newer" not in _run(["inspect", str(journal)])[1]
