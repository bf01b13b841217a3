"""A verifiable export: `export --verifiable` writes it, `verify-export` checks it without the journal."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import msgspec
import pytest
from click.testing import CliRunner

from cogfabric._audit import export_lines
from cogfabric._export_check import ExportReport, parse_anchor, verify_export
from cogfabric.cli import main
from cogfabric.events import LifecycleChanged, PrivateSet
from cogfabric.store import LmdbJournal
from cogfabric.store._record import PREFIX, parts, stream_part

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from cogfabric.events import Event

KEY = b"an audit key"


def _events(count: int) -> list[Event]:
    made: list[Event] = []
    for i in range(count):
        agent = f"a{i % 3}"
        made.append(PrivateSet(at=float(i), agent=agent, key="k", value={"n": i, "note": f"value {i}"}))
        if i % 4 == 3:
            made.append(LifecycleChanged(at=float(i), agent=agent, state="SUSPENDED", previous="IDLE"))
    return made


def _journal(tmp_path: Path, *, key: bytes | None = None, count: int = 12) -> Path:
    path = tmp_path / "journal"
    with LmdbJournal.open(path, key=key) as journal:
        journal.append(_events(count))
    return path


def _lines(path: Path, *, key: bytes | None = None, after: int = 0, until: int | None = None) -> list[bytes]:
    with LmdbJournal.open(path, readonly=True, key=key) as journal:
        return list(export_lines(journal, verifiable=True, after=after, until=until))


def _last_chain(path: Path, *, key: bytes | None = None) -> tuple[int, bytes]:
    with LmdbJournal.open(path, readonly=True, key=key) as journal:
        last = list(journal.read())[-1]
        return last.seq, last.chain


def _edited(line: bytes, edit: Callable[[dict[str, object]], None]) -> bytes:
    fields = json.loads(line)
    edit(fields)
    return msgspec.json.encode(fields) + b"\n"  # written as export writes: compact, in its order


# ---------------------------------------------------------------- the journal's stored bytes


def test_read_stored_gives_each_record_with_the_bytes_its_chain_link_covers(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    with LmdbJournal.open(path, readonly=True) as journal:
        records = list(journal.read())
        stored = list(journal.read_stored())
        assert [record for record, _ in stored] == records
        prev = bytes(16)
        for record, raw in stored:
            assert raw[-16:] == record.chain
            assert hashlib.blake2b(prev + raw[:-16], digest_size=16).digest() == record.chain
            prev = record.chain
        assert [r.seq for r, _ in journal.read_stored(after=3, until=6)] == [4, 5, 6]
        assert list(journal.read_stored(after=len(records))) == []


# ---------------------------------------------------------------- verify_export


def test_a_whole_export_checks_out_from_the_journals_start_to_its_head(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    lines = _lines(path)
    seq, chain = _last_chain(path)
    report = verify_export(lines, anchors={seq: chain})
    assert report.ok, report.reason
    assert (report.lines, report.first_seq, report.last_seq) == (seq, 1, seq)
    assert report.prev == bytes(16).hex()
    assert report.last_chain == chain.hex()
    assert report.anchors == 1
    # its readable fields are export's own
    plain = json.loads(next(iter(_plain_export(path))))
    verifiable = json.loads(lines[0])
    assert {k: v for k, v in verifiable.items() if k not in ("prev", "record")} == plain


def _plain_export(path: Path) -> list[bytes]:
    with LmdbJournal.open(path, readonly=True) as journal:
        return list(export_lines(journal))


def test_a_range_starts_on_the_link_of_the_record_before_it_which_an_anchor_can_pin(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    whole = [json.loads(line) for line in _lines(path)]
    lines = _lines(path, after=4, until=9)
    report = verify_export(lines, anchors={4: bytes.fromhex(whole[3]["chain"])})
    assert report.ok, report.reason
    assert (report.first_seq, report.last_seq, report.anchors) == (5, 9, 1)
    assert report.prev == whole[3]["chain"]
    wrong = verify_export(lines, anchors={4: bytes(16)})
    assert not wrong.ok
    assert wrong.bad_line == 1
    assert "its prev is not the anchor of seq 4" in wrong.reason


def test_an_anchor_the_export_does_not_reach_fails_it(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    seq, chain = _last_chain(path)
    cut = _lines(path)[:-2]  # the end cut off: consistent, but short of the anchored head
    report = verify_export(cut, anchors={seq: chain})
    assert not report.ok
    assert report.bad_line is None
    assert report.reason == f"anchor seq {seq} is not in the export, which holds seqs 1 to {seq - 2}"
    assert not verify_export([], anchors={1: chain}).ok
    assert verify_export([]).ok


def test_a_keyed_journals_export_needs_its_key(tmp_path: Path) -> None:
    path = _journal(tmp_path, key=KEY)
    lines = _lines(path, key=KEY)
    assert verify_export(lines, key=KEY).ok
    assert verify_export(lines, key=KEY.decode()).ok  # text, as --key gives it
    for key in (None, b"another key"):
        report = verify_export(lines, key=key)
        assert not report.ok
        assert report.bad_line == 1
        assert "does not match its hash-chain link" in report.reason


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda f: f["data"].update(value={"n": 99}), "its 'data' is not what its record holds"),
        (lambda f: f.update(time=123.0), "its 'time' is not what its record holds"),
        (lambda f: f.update(stream="agent/other"), "its 'stream' is not what its record holds"),
        (lambda f: f.update(seq=f["seq"] + 100), "its 'seq' is not what its record holds"),
        (lambda f: f.update(chain="00" * 16), "its 'chain' is not what its record holds"),
        (lambda f: f.update(extra=1), "it has a field 'extra' that an export does not write"),
        (lambda f: f.pop("record"), "it has no 'record'"),
        (lambda f: f.update(prev="zz"), "its record or prev is not base64 or hex text"),
        (lambda f: f.update(prev="00"), "its prev is not a 16-byte chain link"),
        (
            lambda f: f.update(record=_flipped(f["record"])),
            "its record does not match its hash-chain link",
        ),
    ],
)
def test_a_changed_line_is_named_with_what_changed(
    tmp_path: Path, change: Callable[[dict[str, object]], None], why: str
) -> None:
    lines = _lines(_journal(tmp_path))
    lines[5] = _edited(lines[5], change)
    report = verify_export(lines)
    assert not report.ok
    assert (report.bad_line, report.lines, report.last_seq) == (6, 5, 5)
    assert report.reason.startswith("line 6 (after seq 5): ")
    assert why in report.reason


def _flipped(record: object) -> str:
    assert isinstance(record, str)
    raw = bytearray(base64.b64decode(record))
    raw[len(raw) // 2] ^= 1
    return base64.b64encode(bytes(raw)).decode()


def test_a_line_must_be_written_byte_for_byte_as_export_writes_it(tmp_path: Path) -> None:
    lines = _lines(_journal(tmp_path))
    assert verify_export([_edited(line, lambda _f: None) for line in lines]).ok  # the helper keeps them whole
    assert verify_export([line.replace(b"\n", b"\r\n") for line in lines]).ok  # a line end of another system
    spaced = json.dumps(json.loads(lines[2])).encode()
    assert verify_export([*lines[:2], spaced]).reason == (
        "line 3 (after seq 2): it is not written as export writes its record "
        "(spacing, key order, escapes or a repeated key)"
    )
    # A repeated key: this reader takes the last one (the record's), another JSON reader
    # may show the first (made up). The line is refused, whoever reads it.
    fields = json.loads(lines[2])
    real = msgspec.json.encode(fields["data"])
    forged = msgspec.json.encode({**fields["data"], "value": "made up"})
    repeated = lines[2].replace(b'"data":' + real, b'"data":' + forged + b',"data":' + real)
    assert repeated != lines[2]
    assert not verify_export([*lines[:2], repeated]).ok


def test_lines_dropped_repeated_or_reordered_break_the_chain(tmp_path: Path) -> None:
    lines = _lines(_journal(tmp_path))
    dropped = verify_export(lines[:3] + lines[4:])
    assert dropped.bad_line == 4
    assert "its seq 5 does not follow seq 3" in dropped.reason
    repeated = verify_export(lines[:4] + lines[3:])
    assert repeated.bad_line == 5
    assert "its seq 4 does not follow seq 4" in repeated.reason
    swapped = verify_export([lines[0], lines[2], lines[1], *lines[3:]])
    assert swapped.bad_line == 2
    first_gone = verify_export(lines[1:])  # a range: consistent, anchored by nothing
    assert first_gone.ok
    assert first_gone.first_seq == 2


def test_a_line_carried_from_elsewhere_must_chain_on_the_line_before_it(tmp_path: Path) -> None:
    lines = _lines(_journal(tmp_path))
    # line 2's prev made another link: its own record no longer hashes to its chain
    moved = _edited(lines[1], lambda f: f.update(prev="11" * 16))
    assert "does not match its hash-chain link" in verify_export([lines[0], moved]).reason
    # a line of another journal at the same seq: it holds up alone, not as the next
    other = _lines(_journal(tmp_path / "other", count=3))
    report = verify_export([lines[0], other[1]])
    assert report.bad_line == 2
    assert "its prev is not the chain link of seq 1, the line before it" in report.reason


def test_seq_1_links_to_no_record(tmp_path: Path) -> None:
    lines = _lines(_journal(tmp_path))

    def rechained(fields: dict[str, object]) -> None:  # seq 1 chained on a link of 16 ones, consistently
        assert isinstance(fields["record"], str)
        body = base64.b64decode(fields["record"])[:-16]
        prev = bytes.fromhex("11" * 16)
        chain = hashlib.blake2b(prev + body, digest_size=16).digest()
        fields.update(prev=prev.hex(), chain=chain.hex(), record=base64.b64encode(body + chain).decode())

    forged = _edited(lines[0], rechained)
    assert verify_export([forged], anchors={0: bytes.fromhex("11" * 16)}).reason == (
        "line 1: its prev must be 16 zero bytes: seq 1 links to no record"
    )


def test_a_record_framed_for_another_stream_than_its_event_is_refused(tmp_path: Path) -> None:
    lines = _lines(_journal(tmp_path))

    def other_stream(fields: dict[str, object]) -> None:  # consistently chained, but framed for agent/zz
        assert isinstance(fields["record"], str)
        taken = parts(base64.b64decode(fields["record"]))
        assert taken is not None
        body = PREFIX + taken.seq.to_bytes(8, "big") + taken.event + stream_part(b"agent/zz") + bytes(8)
        chain = hashlib.blake2b(bytes(16) + body, digest_size=16).digest()
        fields.update(chain=chain.hex(), record=base64.b64encode(body + chain).decode())

    assert (
        verify_export([_edited(lines[0], other_stream)]).reason
        == "line 1: its record's stream is not its event's"
    )


def test_a_forger_who_rechains_an_unkeyed_export_is_caught_only_by_an_anchor(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    seq, chain = _last_chain(path)
    lines = _lines(path)
    # Whoever can compute the chain writes another journal, of other values, to the end:
    # every line checks out. Only the anchored head tells.
    forged_path = tmp_path / "forged"
    with LmdbJournal.open(forged_path) as journal:
        journal.append([_forged(e) for e in _events(12)])
    forged = _lines(forged_path)
    assert len(forged) == len(lines)
    assert verify_export(forged).ok
    report = verify_export(forged, anchors={seq: chain})
    assert not report.ok
    assert f"its chain is not the anchor of seq {seq}" in report.reason


def _forged(event: Event) -> Event:
    if isinstance(event, PrivateSet):
        return PrivateSet(at=event.at, agent=event.agent, key="k", value="made up")
    return event


def test_blank_lines_only_at_the_end_and_nothing_that_is_not_json(tmp_path: Path) -> None:
    lines = _lines(_journal(tmp_path))
    assert verify_export([*lines, b"\n", b""]).ok
    inner = verify_export([lines[0], b"\n", lines[1]])
    assert (inner.bad_line, inner.ok) == (2, False)
    assert "it is blank, and lines follow it" in inner.reason
    assert "it is not JSON" in verify_export([lines[0], b"{not json\n"]).reason
    assert "it has no 'seq'" in verify_export([b"[1, 2]\n"]).reason


@pytest.mark.parametrize("text", ["5", "5:", ":00", "x:" + "00" * 16, "-1:" + "00" * 16, "3:" + "00" * 15])
def test_an_anchor_is_a_seq_and_a_16_byte_link(text: str) -> None:
    with pytest.raises(ValueError, match="an anchor is SEQ:CHAIN"):
        parse_anchor(text)
    assert parse_anchor("7:" + "ab" * 16) == (7, bytes.fromhex("ab" * 16))


# ---------------------------------------------------------------- the command line


def test_export_verifiable_then_verify_export_on_the_command_line(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    seq, chain = _last_chain(path)
    out = tmp_path / "all.jsonl"
    runner = CliRunner()
    result = runner.invoke(main, ["export", str(path), "--verifiable", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes().splitlines(keepends=True) == _lines(path)

    checked = runner.invoke(main, ["verify-export", str(out)])
    assert checked.exit_code == 0, checked.output
    assert checked.stdout == (
        f"ok: {seq} records verified, seqs 1 to {seq}, from the journal's start; "
        f"last chain link {chain.hex()}\n"
    )
    assert "does not show it came from the journal" in checked.stderr

    anchored = runner.invoke(main, ["verify-export", str(out), "--anchor", f"{seq}:{chain.hex()}", "--json"])
    assert anchored.exit_code == 0, anchored.output
    verdict = json.loads(anchored.stdout)
    assert verdict == {
        "ok": True,
        "lines": seq,
        "first_seq": 1,
        "last_seq": seq,
        "prev": "00" * 16,
        "last_chain": chain.hex(),
        "anchors": 1,
        "anchored_to": seq,
        "bad_line": None,
        "reason": "",
    }
    assert anchored.stderr == ""

    wrong = runner.invoke(main, ["verify-export", str(out), "--anchor", f"{seq}:{'00' * 16}"])
    assert wrong.exit_code == 1
    assert wrong.stdout.startswith(f"FAILED: line {seq} (after seq {seq - 1}): its chain is not the anchor")


def test_verify_export_reads_stdin_and_a_keyed_export_with_its_key_file(tmp_path: Path) -> None:
    path = _journal(tmp_path, key=KEY)
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)
    exported = CliRunner().invoke(main, ["export", str(path), "--verifiable", "--key-file", str(key_file)])
    assert exported.exit_code == 0, exported.output
    runner = CliRunner()
    keyed = runner.invoke(
        main, ["verify-export", "-", "--key-file", str(key_file)], input=exported.stdout_bytes
    )
    assert keyed.exit_code == 0, keyed.output
    assert keyed.stderr == ""  # keyed: no note that it proves nothing of its origin
    unkeyed = runner.invoke(main, ["verify-export", "-"], input=io.BytesIO(exported.stdout_bytes))
    assert unkeyed.exit_code == 1
    assert "FAILED: line 1: its record does not match its hash-chain link" in unkeyed.stdout


def test_verify_export_usage_errors(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    runner = CliRunner()
    missing = runner.invoke(main, ["verify-export", str(tmp_path / "nope.jsonl")])
    assert missing.exit_code == 2
    assert "cannot read" in missing.stderr
    filtered = runner.invoke(main, ["export", str(path), "--verifiable", "--stream", "agent/a0"])
    assert filtered.exit_code == 2
    assert "--verifiable exports every record of its range" in filtered.stderr
    twice = runner.invoke(
        main, ["verify-export", "-", "--anchor", f"1:{'00' * 16}", "--anchor", f"1:{'11' * 16}"], input=b""
    )
    assert twice.exit_code == 2
    plain = runner.invoke(main, ["export", str(path)])
    not_verifiable = runner.invoke(main, ["verify-export", "-"], input=plain.stdout_bytes)
    assert not_verifiable.exit_code == 1
    assert "it is no line of a verifiable export" in not_verifiable.stdout


def test_a_simulations_journal_exports_verifiably(tmp_path: Path) -> None:
    path = tmp_path / "sim"
    runner = CliRunner()
    ran = runner.invoke(main, ["simulate", "--agents", "4", "--turns", "6", "--journal", str(path)])
    assert ran.exit_code == 0, ran.output
    seq, chain = _last_chain(path)
    report = verify_export(_lines(path), anchors={seq: chain})
    assert report.ok, report.reason
    assert report.lines == seq


def test_an_anchor_backs_the_lines_up_to_its_seq_not_those_made_up_past_it(tmp_path: Path) -> None:
    events = _events(8)
    real, longer = tmp_path / "real", tmp_path / "longer"
    with LmdbJournal.open(real) as journal:
        journal.append(events)
    made_up = [PrivateSet(at=99.0, agent="a0", key="verdict", value="made up")]
    with LmdbJournal.open(longer) as journal:  # the real records, then one chained on the real head
        journal.append([*events, *made_up])
    seq, chain = _last_chain(real)
    lines = _lines(longer)
    assert lines[:seq] == _lines(real)
    head = verify_export(lines, anchors={seq: chain})
    assert (head.ok, head.anchors, head.anchored_to, head.last_seq) == (True, 1, seq, seq + 1)
    assert verify_export(lines, anchors={0: bytes(16)}).anchored_to == 0  # backs no line at all
    assert verify_export(lines).anchored_to is None

    runner = CliRunner()
    out = tmp_path / "longer.jsonl"
    out.write_bytes(b"".join(lines))
    past_head = runner.invoke(main, ["verify-export", str(out), "--anchor", f"{seq}:{chain.hex()}"])
    assert past_head.exit_code == 0, past_head.output
    assert past_head.stdout.endswith("; 1 anchor matched\n")
    assert past_head.stderr.startswith(f"note: seq {seq + 1} comes after the last anchor (seq {seq}), ")
    at_start = runner.invoke(main, ["verify-export", str(out), "--anchor", f"0:{'00' * 16}"])
    assert at_start.exit_code == 0, at_start.output
    assert at_start.stderr.startswith(f"note: seqs 1 to {seq + 1} come after the last anchor (seq 0), ")
    last_seq, last_chain = _last_chain(longer)
    anchored = runner.invoke(main, ["verify-export", str(out), "--anchor", f"{last_seq}:{last_chain.hex()}"])
    assert (anchored.exit_code, anchored.stderr) == (0, "")  # the last line anchored: every line backed


def test_a_seq_below_1_and_a_line_nested_too_deeply_are_refused(tmp_path: Path) -> None:
    lines = _lines(_journal(tmp_path))

    def seq_0(fields: dict[str, object]) -> None:  # a record of seq 0, consistently chained
        assert isinstance(fields["record"], str)
        raw = base64.b64decode(fields["record"])
        body = PREFIX + bytes(8) + raw[10:-16]
        chain = hashlib.blake2b(bytes(16) + body, digest_size=16).digest()
        fields.update(seq=0, chain=chain.hex(), record=base64.b64encode(body + chain).decode())

    assert verify_export([_edited(lines[0], seq_0)]).reason == (
        "line 1: its seq 0 is no journal's: a journal's seqs start at 1"
    )
    deep = verify_export([b"[" * 100_000 + b"\n"])
    assert (deep.ok, deep.bad_line) == (False, 1)
    assert deep.reason.startswith("line 1: it is not JSON")


def test_verify_export_of_stdin_with_stdin_closed_says_so() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cogfabric", "verify-export", "-"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
        preexec_fn=lambda: os.close(0),
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == "error: stdin is closed: there is no export to read\n"


# ---------------------------------------------------------------- pins from a mutation test


def test_anchored_to_is_the_highest_seq_anchored_whatever_the_order_of_the_anchors(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    whole = [json.loads(line) for line in _lines(path)]
    seq, chain = _last_chain(path)
    anchors = {seq: chain, 4: bytes.fromhex(whole[3]["chain"]), 0: bytes(16)}
    report = verify_export(_lines(path), anchors=anchors)
    assert (report.ok, report.anchors, report.anchored_to) == (True, 3, seq)
    early = verify_export(_lines(path), anchors={4: anchors[4], 0: bytes(16)})
    assert (early.ok, early.anchors, early.anchored_to) == (True, 2, 4)  # lines past seq 4 backed by none


def test_an_empty_export_holds_no_seq_no_prev_and_no_link(tmp_path: Path) -> None:
    for lines in ([], [b"\n"], [b"", b"\r\n"]):
        assert verify_export(lines) == ExportReport(ok=True, lines=0)  # every field None, no anchor
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    checked = CliRunner().invoke(main, ["verify-export", str(empty), "--json"])
    assert checked.exit_code == 0, checked.output
    assert json.loads(checked.stdout) == {
        "ok": True,
        "lines": 0,
        "first_seq": None,
        "last_seq": None,
        "prev": None,
        "last_chain": None,
        "anchors": 0,
        "anchored_to": None,
        "bad_line": None,
        "reason": "",
    }
    plain = CliRunner().invoke(main, ["verify-export", str(empty)])
    assert (plain.exit_code, plain.stdout) == (0, "ok: an empty export (no records)\n")


def test_of_several_faults_the_first_is_named(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    lines = _lines(path)
    seq, _ = _last_chain(path)
    blanks = verify_export([lines[0], b"\n", b"\n", lines[1]])
    assert (blanks.bad_line, blanks.reason) == (2, "line 2: it is blank, and lines follow it")
    far = verify_export(lines, anchors={seq + 5: bytes(16), seq + 3: bytes(16)})
    assert far.reason == f"anchor seq {seq + 3} is not in the export, which holds seqs 1 to {seq}"
    # two fields changed: the first by name is named
    both = _edited(lines[5], lambda f: f.update(time=123.0, data={"changed": True}))
    assert verify_export([*lines[:5], both]).reason == (
        "line 6 (after seq 5): its 'data' is not what its record holds"
    )


@pytest.mark.parametrize(
    "spaced",
    [
        lambda line: b" " + line,
        lambda line: b"\t" + line,
        lambda line: line.removesuffix(b"\n") + b" \n",
        lambda line: line.removesuffix(b"\n") + b"\r\r\n",
    ],
)
def test_whitespace_around_a_line_is_not_byte_for_byte_what_export_writes(
    tmp_path: Path, spaced: Callable[[bytes], bytes]
) -> None:
    lines = _lines(_journal(tmp_path))
    report = verify_export([*lines[:2], spaced(lines[2]), *lines[3:]])
    assert (report.ok, report.bad_line, report.lines) == (False, 3, 2)
    assert report.reason == (
        "line 3 (after seq 2): it is not written as export writes its record "
        "(spacing, key order, escapes or a repeated key)"
    )


def test_verify_export_json_says_a_failed_verdict_with_exit_1(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    seq, _ = _last_chain(path)
    out = tmp_path / "all.jsonl"
    out.write_bytes(b"".join(_lines(path)))
    wrong = CliRunner().invoke(main, ["verify-export", str(out), "--json", "--anchor", f"{seq}:{'00' * 16}"])
    assert wrong.exit_code == 1
    verdict = json.loads(wrong.stdout)
    assert (verdict["ok"], verdict["lines"], verdict["bad_line"], verdict["last_seq"]) == (
        False,
        seq - 1,
        seq,
        seq - 1,
    )
    assert verdict["reason"].startswith(
        f"line {seq} (after seq {seq - 1}): its chain is not the anchor of seq {seq}"
    )


def test_verify_export_of_a_range_does_not_say_it_starts_at_the_journals_start(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    seq, chain = _last_chain(path)
    prev = json.loads(_lines(path)[3])["chain"]
    out = tmp_path / "range.jsonl"
    out.write_bytes(b"".join(_lines(path, after=4)))
    runner = CliRunner()
    # the same anchor given twice is one anchor
    anchor = f"{seq}:{chain.hex()}"
    checked = runner.invoke(main, ["verify-export", str(out), "--anchor", anchor, "--anchor", anchor])
    assert checked.exit_code == 0, checked.output
    assert checked.stdout == (
        f"ok: {seq - 4} records verified, seqs 5 to {seq}, the first chained on prev {prev} (seq 4's link); "
        f"last chain link {chain.hex()}; 1 anchor matched\n"
    )
    assert checked.stderr == ""


def test_verify_export_json_notes_what_nothing_backs_on_stderr_as_without_json(tmp_path: Path) -> None:
    # README: verify-export says on stderr when neither an anchor nor a key backs the verdict,
    # or lines come after the last anchor; a script that reads --json's "ok" is told too.
    path = _journal(tmp_path)
    whole = [json.loads(line) for line in _lines(path)]
    out = tmp_path / "all.jsonl"
    out.write_bytes(b"".join(_lines(path)))
    runner = CliRunner()
    for anchors in ([], ["--anchor", f"4:{whole[3]['chain']}"]):
        plain = runner.invoke(main, ["verify-export", str(out), *anchors])
        as_json = runner.invoke(main, ["verify-export", str(out), "--json", *anchors])
        assert (plain.exit_code, as_json.exit_code) == (0, 0), as_json.output
        assert plain.stderr.startswith("note: ")
        assert as_json.stderr == plain.stderr
        assert json.loads(as_json.stdout)["ok"] is True
    keyed_path = _journal(tmp_path / "keyed", key=KEY)
    keyed_out = tmp_path / "keyed.jsonl"
    keyed_out.write_bytes(b"".join(_lines(keyed_path, key=KEY)))
    keyed = runner.invoke(main, ["verify-export", str(keyed_out), "--json", "--key", KEY.decode()])
    assert (keyed.exit_code, keyed.stderr) == (0, "")
