"""The audit commands at their edges: chain keys, damaged pages, closed pipes, odd values, the head."""

from __future__ import annotations

import errno
import hashlib
import json
import mmap
import os
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import lmdb
import msgspec
import pytest
from click.testing import CliRunner

import cogfabric._audit
from cogfabric import AgentContext, CognitiveState, Config, FakeClock, JournalConfig, Message, Runtime, cli
from cogfabric.cli import main
from cogfabric.events import (
    AgentEvent,
    AgentSpawned,
    ContextLayer,
    EventCodec,
    IpcDeadLettered,
    IpcDelivered,
    IpcMessage,
    PrivateSet,
)
from cogfabric.store import Journal, JournalFormatError, JournalIntegrityError, LmdbJournal, Snapshot, _pages
from cogfabric.store._record import head_value
from cogfabric.store.testing import make_events
from tests.actors.test_supervision import _short_call_timeout

if TYPE_CHECKING:
    from collections.abc import Callable

AUDITS = (
    ["verify"],
    ["inspect"],
    ["export"],
    ["replay", "--agent", "a0"],
    ["replay"],
    ["trace", "--seq", "1"],
)


def _journal(tmp_path: Path, count: int = 40, *, key: bytes | None = None) -> Path:
    path = tmp_path / "journal"
    with Journal.open(path, key=key) as journal:
        journal.append([AgentSpawned(at=0.0, agent="a0"), *make_events(count - 1)])
    return path


def _no_constants(name: str) -> NoReturn:
    msg = f"not strict JSON: {name}"
    raise ValueError(msg)


def test_a_wrong_or_missing_chain_key_exits_two_with_the_same_message_everywhere(tmp_path: Path) -> None:
    path = _journal(tmp_path, 3, key=b"k")
    runner = CliRunner()

    for given in ([], ["--key", "wrong"]):
        results = [runner.invoke(main, [command[0], str(path), *command[1:], *given]) for command in AUDITS]

        assert [r.exit_code for r in results] == [2] * len(AUDITS), [r.output for r in results]
        assert len({r.output for r in results}) == 1
        assert "chain key" in results[0].output
    missing = runner.invoke(main, ["verify", str(path)])
    assert "--key" in missing.output
    assert runner.invoke(main, ["verify", str(path), "--key", "k"]).exit_code == 0
    # told to pass a key only when none was given: a wrong one is named as such
    wrong = runner.invoke(main, ["verify", str(path), "--key", "wrong"])
    assert missing.stderr.endswith(" (pass it with --key-file or --key)\n")
    assert wrong.stderr == f"error: {path} was written with a different chain key\n"


@pytest.mark.parametrize("args", AUDITS)
def test_a_journal_keyed_with_any_bytes_is_audited_with_a_key_file(tmp_path: Path, args: list[str]) -> None:
    key = bytes(range(200, 232))  # random bytes, as a secret key is: no text, so no --key can give it
    path = _journal(tmp_path, 3, key=key)
    key_file = tmp_path / "key"
    key_file.write_bytes(key)
    runner = CliRunner()

    read = runner.invoke(main, [args[0], str(path), *args[1:], "--key-file", str(key_file)])

    assert read.exit_code == 0, read.output
    key_file.write_bytes(key + b"\n")  # bytes exactly: a newline is a part of the key
    assert runner.invoke(main, ["verify", str(path), "--key-file", str(key_file)]).exit_code == 2
    missing = runner.invoke(main, ["verify", str(path)])
    assert "pass it with --key-file or --key" in missing.output


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        (["--key", "k", "--key-file", "KEYFILE"], "give the chain key once: --key or --key-file, not both"),
        (["--key-file", "KEYFILE", "--key-file", "KEYFILE"], "given 2 times"),
        (["--key", "k", "--key", "k"], "given 2 times"),
        (["--key-file", "MISSING"], "cannot read"),
        (["--key-file", "EMPTY"], "a chain key must be 1 to 64 bytes"),
        # read no further than a key can be long: not until memory runs out
        (["--key-file", "/dev/zero"], "a chain key must be 1 to 64 bytes, and the file holds more"),
    ],
)
def test_a_key_file_given_wrongly_is_a_usage_error(tmp_path: Path, given: list[str], problem: str) -> None:
    path = _journal(tmp_path, 3, key=b"k")
    (tmp_path / "key").write_bytes(b"k")
    (tmp_path / "empty").write_bytes(b"")
    files = {"KEYFILE": tmp_path / "key", "MISSING": tmp_path / "missing", "EMPTY": tmp_path / "empty"}

    result = CliRunner().invoke(main, ["verify", str(path), *(str(files.get(g, g)) for g in given)])

    assert result.exit_code == 2, result.output
    assert problem in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["export", "--stream", "bus", "--stream", "agent/a0"],
        ["export", "--layer", "ipc", "--layer", "agent_private"],
        ["export", "--after", "1", "--after", "2"],
        ["export", "-o", "a.jsonl", "-o", "b.jsonl"],
        ["replay", "--agent", "a0", "--agent", "a1"],
        ["replay", "--agent", "a0", "--at", "1", "--at", "2"],
    ],
)
def test_a_filter_given_twice_is_a_usage_error_not_the_last_one_silently(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    # click keeps the last of a repeated option: `--stream bus --stream agent/a0` would
    # export agent/a0 alone, narrower than asked, and exit 0
    path = _journal(tmp_path, 3)
    monkeypatch.chdir(tmp_path)

    result = CliRunner().invoke(main, [args[0], str(path), *args[1:]])

    assert result.exit_code == 2, result.output
    assert "given 2 times" in result.output
    assert not (tmp_path / "a.jsonl").exists()
    assert not (tmp_path / "b.jsonl").exists()


def test_a_wrong_chain_key_names_the_journal_not_the_private_copy(tmp_path: Path) -> None:
    path = _journal(tmp_path, 3, key=b"k")

    result = CliRunner().invoke(main, ["inspect", str(path), "--copy", "--key", "wrong"])

    assert result.exit_code == 2
    assert f"{path} was written with a different chain key" in result.output
    assert "cogfabric-audit-" not in result.output


def test_a_damaged_lmdb_page_exits_one_naming_the_path(
    tmp_path: Path, damage_page: Callable[[Path, bytes], None]
) -> None:
    path = _journal(tmp_path)
    with Journal.open(path, readonly=True) as journal:
        link = next(r.chain for r in journal.read() if r.seq == 20)
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    shutil.copyfile(path / "data.mdb", damaged / "data.mdb")
    damage_page(damaged, link)  # the leaf page that holds seq 20
    runner = CliRunner()

    results = [runner.invoke(main, [command[0], str(damaged), *command[1:]]) for command in AUDITS]
    copied = runner.invoke(main, ["verify", str(damaged), "--copy"])

    for result in [*results, copied]:
        assert result.exit_code == 1, result.output
        assert f"{damaged} is damaged" in result.output


def test_export_into_a_pipe_closed_early_stops_quietly_and_exits_zero(tmp_path: Path) -> None:
    path = _journal(tmp_path, 20_000)  # megabytes of lines: far more than a pipe holds
    errors = tmp_path / "stderr"

    with errors.open("wb") as stderr:
        export = subprocess.Popen(
            [sys.executable, "-m", "cogfabric", "export", str(path)], stdout=subprocess.PIPE, stderr=stderr
        )
        assert export.stdout is not None
        first = export.stdout.readline()  # what `| head -1` reads before it exits
        export.stdout.close()
        code = export.wait(timeout=120)

    assert json.loads(first)["seq"] == 1
    assert code == 0
    assert errors.read_text(encoding="utf-8") == ""


@pytest.mark.parametrize("command", AUDITS, ids=" ".join)
def test_every_audit_command_into_a_closed_pipe_exits_zero_quietly(
    tmp_path: Path, command: list[str]
) -> None:
    path = _journal(tmp_path, 3)
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line: every write fails with EPIPE
    try:
        done = subprocess.run(
            [sys.executable, "-m", "cogfabric", command[0], str(path), *command[1:]],
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)

    assert done.returncode == 0, done.stderr
    assert done.stderr == b""


def _forged(tmp_path: Path) -> Path:
    """A journal whose record at seq 2 was changed in place: verify fails on it."""
    path = _journal(tmp_path, 3)
    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True, db=env.open_db(b"events", create=False)) as txn:
        key = (2).to_bytes(8, "big")
        stored = txn.get(key)
        assert stored is not None
        record = bytearray(stored)
        record[20] ^= 1
        txn.put(key, bytes(record))
    env.close()
    return path


def _cogfabric_into(stdout: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``cogfabric ARGS`` with stdout a pipe whose reader is gone, or the full device."""
    if stdout == "full device" and not Path("/dev/full").exists():
        pytest.skip("needs /dev/full")
    if stdout == "closed pipe":
        read_end, write_end = os.pipe()
        os.close(read_end)  # `cogfabric ... | true`: the reader is gone before the first line
    else:
        write_end = os.open("/dev/full", os.O_WRONLY)
    try:
        return subprocess.run(
            [sys.executable, "-m", "cogfabric", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize("stdout", ["closed pipe", "full device"])
def test_a_failed_verify_exits_one_even_when_stdout_cannot_take_its_verdict(
    tmp_path: Path, stdout: str
) -> None:
    path = _forged(tmp_path)

    done = _cogfabric_into(stdout, "verify", str(path))

    assert done.returncode == 1, done.stderr  # a script testing the exit status still sees the damage
    assert done.stderr.startswith("FAILED at seq 2:"), done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("option", ["--help", "--version"])
@pytest.mark.parametrize(
    ("stdout", "code", "stderr"),
    [("closed pipe", 0, ""), ("full device", 2, "error: cannot write the output: No space left on device\n")],
)
def test_the_commands_own_help_and_version_meet_closed_and_full_output_as_every_command(
    option: str, stdout: str, code: int, stderr: str
) -> None:
    done = _cogfabric_into(stdout, option)

    assert (done.returncode, done.stderr) == (code, stderr)


def test_replay_json_is_strict_and_encodes_values_as_export_does(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    odd = {"nan": float("nan"), "inf": float("inf"), "bytes": b"\x00\xff"}
    with Journal.open(path) as journal:
        journal.append(
            [
                AgentSpawned(at=0.0, agent="a"),
                *(PrivateSet(at=1.0, agent="a", key=k, value=v) for k, v in odd.items()),
            ]
        )
    runner = CliRunner()

    replayed = runner.invoke(main, ["replay", str(path), "--agent", "a", "--json"])
    exported = runner.invoke(main, ["export", str(path), "--layer", "agent_private"])

    assert replayed.exit_code == 0, replayed.output
    view = json.loads(replayed.output, parse_constant=_no_constants)
    lines = [json.loads(line, parse_constant=_no_constants) for line in exported.output.splitlines()]
    assert view["private"] == {
        line["data"]["key"]: line["data"]["value"] for line in lines if line["type"] == "PrivateSet"
    }
    assert view["private"] == {"nan": None, "inf": None, "bytes": "AP8="}
    table = runner.invoke(main, ["replay", str(path), "--agent", "a"])
    assert table.exit_code == 0, table.output
    assert '"AP8="' in table.output  # the table shows values as --json does
    assert "b'" not in table.output


def test_replay_refuses_an_at_past_the_last_seq(tmp_path: Path) -> None:
    path = _journal(tmp_path, 38)
    runner = CliRunner()

    past = runner.invoke(main, ["replay", str(path), "--agent", "a0", "--at", "999999"])
    last = runner.invoke(main, ["replay", str(path), "--agent", "a0", "--at", "38", "--json"])

    assert past.exit_code == 2
    assert "last seq 38" in past.output
    assert last.exit_code == 0, last.output
    assert json.loads(last.output)["at"] == 38


def test_inspect_shows_the_head_seq_and_chain(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    with Journal.open(path, readonly=True) as journal:
        head = next(journal.read(after=journal.last_seq - 1))
    runner = CliRunner()

    summary = json.loads(runner.invoke(main, ["inspect", str(path), "--json"]).output)
    text = runner.invoke(main, ["inspect", str(path)]).output

    assert summary["head_seq"] == head.seq == 40
    assert summary["head_chain"] == head.chain.hex()
    assert len(summary["head_chain"]) == 32
    assert {"path", "format", "engine", "hash", "keyed", "records", "first_time", "last_time"} <= set(summary)
    assert f"head      seq 40, chain {head.chain.hex()}" in text.splitlines()


def test_inspect_of_an_empty_journal_has_no_head_chain(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    Journal.open(path).close()

    summary = json.loads(CliRunner().invoke(main, ["inspect", str(path), "--json"]).output)

    assert summary["head_seq"] == 0
    assert summary["head_chain"] is None


class _Teleported(AgentEvent, frozen=True, kw_only=True):
    """An event type the reading code does not know (written by a newer program, say)."""

    where: str


def test_an_export_to_a_file_that_fails_half_way_leaves_no_partial_file(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    codec = EventCodec([AgentSpawned, PrivateSet, _Teleported])
    with LmdbJournal.open(path, codec=codec) as journal:  # a valid chain over a record we cannot decode
        journal.append(
            [AgentSpawned(at=0.0, agent="a0"), *make_events(9), _Teleported(at=1.0, agent="a0", where="x")]
        )
    out = tmp_path / "all.jsonl"

    result = CliRunner().invoke(main, ["export", str(path), "-o", str(out)])

    assert result.exit_code == 1
    assert "seq 11" in result.output
    assert list(tmp_path.iterdir()) == [path]  # neither the export nor a partial one


def test_an_export_never_writes_through_a_file_or_link_planted_at_a_name_known_in_advance(
    tmp_path: Path,
) -> None:
    path = _journal(tmp_path, 5)
    out = tmp_path / "priv.jsonl"
    planted = tmp_path / ".priv.jsonl.partial"  # the name an earlier version wrote to
    planted.write_text("", encoding="utf-8")
    planted.chmod(0o644)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n", encoding="utf-8")
    (tmp_path / ".other.jsonl.partial").symlink_to(victim)

    for target in (out, tmp_path / "other.jsonl"):
        result = CliRunner().invoke(main, ["export", str(path), "-o", str(target)])
        assert result.exit_code == 0, result.output
        assert not target.is_symlink()
        assert target.stat().st_mode & 0o777 == 0o600
        assert len(target.read_text(encoding="utf-8").splitlines()) == 5
    assert victim.read_text(encoding="utf-8") == "keep me\n"
    assert planted.read_text(encoding="utf-8") == ""


def test_an_export_into_a_link_writes_through_it(tmp_path: Path) -> None:
    path = _journal(tmp_path, 5)
    real = tmp_path / "real.jsonl"
    real.write_text("old\n", encoding="utf-8")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)

    result = CliRunner().invoke(main, ["export", str(path), "-o", str(link)])

    assert result.exit_code == 0
    assert link.is_symlink()
    assert len(real.read_text(encoding="utf-8").splitlines()) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["journal", "link.jsonl", "real.jsonl"]


def test_an_export_into_a_directory_is_a_usage_error(tmp_path: Path) -> None:
    path = _journal(tmp_path, 5)

    result = CliRunner().invoke(main, ["export", str(path), "-o", str(tmp_path)])

    assert result.exit_code == 2
    assert "is a directory" in result.output


def test_an_export_of_a_stream_the_journal_does_not_hold_is_a_usage_error(tmp_path: Path) -> None:
    path = _journal(tmp_path, 5)

    result = CliRunner().invoke(main, ["export", str(path), "--stream", "a0"])  # agent/a0 is meant

    assert result.exit_code == 2
    assert "has no stream 'a0'" in result.output
    assert CliRunner().invoke(main, ["export", str(path), "--stream", "agent/a0"]).exit_code == 0


class _Listener:
    def on_message(self, ctx: object, message: object) -> None:
        pass


def test_replay_shows_the_broadcasts_an_agent_received(tmp_path: Path) -> None:
    from cogfabric.actors import Runtime  # noqa: PLC0415

    with Runtime.open(tmp_path / "j", behaviors={"listen": _Listener}) as runtime:
        runtime.spawn("a", behavior="listen")
        runtime.spawn("b", behavior="listen")
        runtime.bus.subscribe("a", "news")
        assert runtime.bus.broadcast("x", "news", {"n": 1}) == 1
        runtime.flush()

    shown = {
        agent: json.loads(
            CliRunner().invoke(main, ["replay", str(tmp_path / "j"), "--agent", agent, "--json"]).output
        )
        for agent in ("a", "b")
    }

    assert [(m["from"], m["topic"], m["kind"]) for m in shown["a"]["ipc"]["latest"]] == [
        ("x", "news", "broadcast")
    ]
    assert shown["b"]["ipc"] == {"messages": 0, "latest": []}  # not a subscriber: it never got it


class _Touchy:
    def on_message(self, ctx: object, message: IpcMessage) -> None:  # noqa: ARG002 - it only fails
        if message.topic == "boom":
            msg = "boom"
            raise RuntimeError(msg)


def test_replay_says_what_became_of_each_message_an_agent_sent_or_was_sent(tmp_path: Path) -> None:
    # an auditor asks what the agent got, and what was dead-lettered: each message's
    # fate, and a send refused before it was journaled, which only its dead letter holds
    from cogfabric.actors import AgentNotRegisteredError  # noqa: PLC0415

    path = tmp_path / "j"
    with Runtime.open(path, behaviors={"touchy": _Touchy}) as runtime:
        runtime.spawn("a", behavior="touchy")
        runtime.spawn("x")
        runtime.spawn("s", behavior="touchy")
        runtime.suspend("s")
        runtime.bus.subscribe("a", "news")
        runtime.bus.subscribe("s", "news")
        runtime.bus.send("x", "a", "hello", 1)
        runtime.bus.send("x", "a", "boom", 2)
        with pytest.raises(AgentNotRegisteredError):
            runtime.bus.send("a", "nosuch", "lost", 3)
        runtime.bus.send("a", "s", "asleep", 4)
        assert runtime.bus.broadcast("x", "news", 5) == 2
        runtime.flush()
    with Journal.open(path, readonly=True) as journal:
        hello = next(
            r.seq
            for r in journal.read(stream="bus")
            if isinstance(r.event, IpcMessage) and r.event.topic == "hello"
        )

    def fates(agent: str, *at: str) -> list[tuple[str, str, str, str, str]]:
        result = CliRunner().invoke(main, ["replay", str(path), "--agent", agent, "--json", *at])
        assert result.exit_code == 0, result.output
        return [
            (m["topic"], m["from"], m["to"], m["kind"], m["status"])
            for m in json.loads(result.output)["ipc"]["latest"]
        ]

    assert fates("a") == [
        ("hello", "x", "a", "send", "delivered"),
        ("boom", "x", "a", "send", "dead-lettered: handler error"),
        ("lost", "a", "nosuch", "", "dead-lettered: agent not registered"),
        ("asleep", "a", "s", "send", "dead-lettered: agent suspended"),
        ("news", "x", "", "broadcast", "delivered"),
    ]
    # each subscriber counted once, by its copy's fate (s's was delivered, then dead-lettered)
    assert fates("x")[-1] == ("news", "x", "", "broadcast", "delivered to 1, dead-lettered for 1")
    assert fates("s") == [
        ("asleep", "a", "s", "send", "dead-lettered: agent suspended"),
        ("news", "x", "", "broadcast", "dead-lettered: agent suspended"),
    ]
    assert fates("a", "--at", str(hello)) == [("hello", "x", "a", "send", "pending")]  # not delivered yet

    # each message with its seq (a refused one's, its dead letter's), in the JSON and the table
    with Journal.open(path, readonly=True) as journal:
        bus = list(journal.read(stream="bus"))
    seqs = {r.event.topic: r.seq for r in bus if isinstance(r.event, IpcMessage)}
    seqs["lost"] = next(
        r.seq for r in bus if isinstance(r.event, IpcDeadLettered) and r.event.topic == "lost"
    )
    shown = CliRunner().invoke(main, ["replay", str(path), "--agent", "a", "--json"])
    assert [(m["topic"], m["seq"]) for m in json.loads(shown.output)["ipc"]["latest"]] == [
        (topic, seqs[topic]) for topic in ("hello", "boom", "lost", "asleep", "news")
    ]
    table = CliRunner().invoke(main, ["replay", str(path), "--agent", "a"])
    assert table.exit_code == 0, table.output
    assert (
        f'seq {seqs["lost"]} refused "a" -> "nosuch" "lost": dead-lettered: agent not registered'
        in table.output
    )
    assert f'seq {seqs["news"]} broadcast "x" -> * "news": delivered' in table.output
    assert "5 messages:" in table.output


class _Slow:
    arrived = threading.Event()
    release = threading.Event()

    @classmethod
    def reset(cls) -> None:
        """Clear both events, for a test of its own."""
        cls.arrived.clear()
        cls.release.clear()

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
        if message.topic == "job":
            _Slow.arrived.set()
            assert _Slow.release.wait(10)
            ctx.set_private("handled", message.sender)


def _statuses(path: Path, agent: str) -> list[tuple[str, str, str]]:
    result = CliRunner().invoke(main, ["replay", str(path), "--agent", agent, "--json"])
    assert result.exit_code == 0, result.output
    return [(m["topic"], m["from"], m["status"]) for m in json.loads(result.output)["ipc"]["latest"]]


def test_a_request_its_requester_gave_up_on_and_its_recipient_handled_shows_both(tmp_path: Path) -> None:
    from cogfabric.actors import IpcTimeoutError  # noqa: PLC0415

    _Slow.reset()
    path = tmp_path / "j"
    with Runtime.open(path, behaviors={"slow": _Slow}) as runtime:
        runtime.spawn("x")
        runtime.spawn("y", behavior="slow")
        with pytest.raises(IpcTimeoutError):
            runtime.bus.request("x", "y", "job", 1, timeout=0.05)  # its dead letter first
        _Slow.release.set()
        assert runtime.agent("y").private("handled") == "x"  # after the job: it was handled
        runtime.flush()

    for agent in ("x", "y"):
        assert _statuses(path, agent) == [("job", "x", "delivered (its requester timed out)")]


def test_a_request_that_timed_out_is_dead_lettered_until_its_recipient_handles_it(tmp_path: Path) -> None:
    # queued behind a message its recipient is still handling: timed out first, and
    # "delivered (its requester timed out)" only from the delivery on
    from cogfabric.actors import IpcTimeoutError  # noqa: PLC0415

    _Slow.reset()
    path = tmp_path / "j"
    with Runtime.open(path, behaviors={"slow": _Slow}) as runtime:
        runtime.spawn("x")
        runtime.spawn("y", behavior="slow")
        runtime.bus.send("x", "y", "job", 1)
        assert _Slow.arrived.wait(10)
        with pytest.raises(IpcTimeoutError):
            runtime.bus.request("x", "y", "ask", 2, timeout=0.05)
        _Slow.release.set()
        runtime.flush()
    with Journal.open(path, readonly=True) as journal:
        timed_out = next(r.seq for r in journal.read(stream="bus") if isinstance(r.event, IpcDeadLettered))

    result = CliRunner().invoke(main, ["replay", str(path), "--agent", "y", "--json", "--at", str(timed_out)])
    assert result.exit_code == 0, result.output
    shown = [(m["topic"], m["status"]) for m in json.loads(result.output)["ipc"]["latest"]]
    assert shown[-1] == ("ask", "dead-lettered: timeout")
    assert _statuses(path, "y")[-1] == ("ask", "x", "delivered (its requester timed out)")


def test_a_send_refused_for_its_recipients_full_mailbox_shows_in_the_recipients_view(tmp_path: Path) -> None:
    # README: a message refused before it was journaled shows by its dead letter, with no
    # kind: for the agent it was sent to as for its sender; and a broadcast all its
    # subscribers got is "delivered to N" alone
    from cogfabric.actors import MailboxFullError, RuntimeConfig  # noqa: PLC0415

    _Slow.reset()
    path = tmp_path / "j"
    config = Config(runtime=RuntimeConfig(mailbox_size=1))
    with Runtime.open(path, config=config, behaviors={"slow": _Slow}) as runtime:
        runtime.spawn("x", behavior="slow")
        runtime.spawn("y", behavior="slow")
        runtime.bus.subscribe("x", "news")
        runtime.bus.send("x", "y", "job", 1)
        assert _Slow.arrived.wait(10)
        runtime.bus.send("x", "y", "queued", 2)  # its mailbox is full now
        # only the refused send has the short call_timeout: the others' commits may be slow under load
        with _short_call_timeout(runtime, 0.2), pytest.raises(MailboxFullError):
            runtime.bus.send("x", "y", "refused", 3)
        _Slow.release.set()
        assert runtime.bus.broadcast("y", "news", 4) == 1
        runtime.flush()

    for agent in ("x", "y"):
        result = CliRunner().invoke(main, ["replay", str(path), "--agent", agent, "--json"])
        assert result.exit_code == 0, result.output
        shown = {m["topic"]: (m["kind"], m["status"]) for m in json.loads(result.output)["ipc"]["latest"]}
        assert shown["refused"] == ("", "dead-lettered: mailbox full")
    assert shown["news"] == ("broadcast", "delivered to 1")


def test_a_dead_letter_of_an_earlier_agents_message_is_not_the_respawned_agents(tmp_path: Path) -> None:
    # README: "not an earlier agent's of that id"; its request timed out after the respawn
    from cogfabric.actors import IpcTimeoutError  # noqa: PLC0415

    _Slow.reset()
    path = tmp_path / "j"
    failed: list[BaseException] = []
    with Runtime.open(path, behaviors={"slow": _Slow}) as runtime:
        runtime.spawn("k")
        runtime.spawn("y", behavior="slow")

        def ask() -> None:
            try:
                runtime.bus.request("k", "y", "job", 1, timeout=0.5)
            except IpcTimeoutError as exc:
                failed.append(exc)

        asker = threading.Thread(target=ask)
        asker.start()
        assert _Slow.arrived.wait(10)
        runtime.kill("k")
        runtime.spawn("k")
        asker.join(10)
        _Slow.release.set()
        runtime.flush()

    assert len(failed) == 1
    assert _statuses(path, "k") == []
    assert _statuses(path, "y") == [("job", "k", "delivered (its requester timed out)")]


@pytest.mark.parametrize("args", AUDITS)
def test_a_data_file_that_cannot_be_copied_is_an_error_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    path = _journal(tmp_path)

    def refuse(*_args: object, **_kwargs: object) -> NoReturn:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cogfabric._audit, "_copy_used", refuse)
    result = CliRunner().invoke(main, [*args, str(path), "--copy"])

    assert result.exit_code == 2, result.output
    assert f"{path}: cannot copy its data file: Permission denied" in result.output
    assert isinstance(result.exception, SystemExit)  # reported, not raised


@pytest.mark.parametrize("copy", [[], ["--copy"]])
def test_an_unreadable_data_file_is_named_before_any_advice_to_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, copy: list[str]
) -> None:
    path = _journal(tmp_path)
    real_access = os.access

    def access(where: object, mode: int, **kwargs: object) -> bool:
        if str(where).endswith("data.mdb") and mode == os.R_OK:
            return False  # as for an auditor who does not own a 0600 file (tests run as root)
        return real_access(where, mode, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cogfabric._audit, "_not_writable", lambda _path: "this directory is not writable")
    monkeypatch.setattr(os, "access", access)
    result = CliRunner().invoke(main, ["verify", str(path), *copy])

    assert result.exit_code == 2, result.output
    assert f"{path}: cannot read its data file: permission denied" in result.output
    assert "rerun with --copy" not in result.output


def _agents_with_snapshots(path: Path, mode: str) -> None:
    """Agents that change state past their snapshot interval, with publications between."""
    config = Config(journal=JournalConfig(durability=mode, snapshot_interval=3))  # type: ignore[arg-type]
    with Runtime.open(path, config=config, clock=FakeClock()) as runtime:
        agents = [runtime.spawn(f"a{i}", task_id="t") for i in range(4)]
        for round_ in range(10):
            for agent in agents:
                agent.set_private("round", round_)
                agent.set_cognitive_state(CognitiveState(decision=round_))
            runtime.publish_task_context("t", {"round": round_})
            runtime.bus.subscribe("a0", f"topic-{round_}")


def _rehashed_snapshot(path: Path, stream: str, seq: int, data: bytes) -> None:
    """Store ``data`` as ``stream``'s snapshot, its hash recomputed (anyone can, unkeyed)."""
    seq_raw = seq.to_bytes(8, "big")
    digest = hashlib.blake2b(stream.encode() + b"\0" + seq_raw + data, digest_size=16).digest()
    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True, db=env.open_db(b"snapshots")) as txn:
        txn.put(stream.encode(), digest + seq_raw + data)
    env.close()


@pytest.mark.parametrize("mode", ["sync", "batch"])
def test_verify_finds_every_snapshot_in_agreement_with_its_events(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "journal"
    _agents_with_snapshots(path, mode)

    result = CliRunner().invoke(main, ["verify", str(path)])

    assert result.exit_code == 0, result.output
    assert "; 4 snapshots agree with their events" in result.output


def _forged_snapshot_of_a2(path: Path, key: str) -> int:
    """Agents with snapshots at ``path``, a2's latest one forged (``key`` set, hash recomputed); its seq."""
    _agents_with_snapshots(path, "sync")
    with Journal.open(path, readonly=True) as journal:
        snapshot = journal.load_snapshot("agent/a2")
    assert snapshot is not None
    state = msgspec.msgpack.decode(snapshot.data)
    state["private"][key] = "FORGED"
    _rehashed_snapshot(path, "agent/a2", snapshot.seq, msgspec.msgpack.encode(state))
    return snapshot.seq


def test_a_snapshot_forged_with_its_hash_recomputed_is_named_by_verify(tmp_path: Path) -> None:
    # an unkeyed journal: anyone can recompute a snapshot's hash, and the head does not cover it
    path = tmp_path / "journal"
    seq = _forged_snapshot_of_a2(path, "round")
    with Journal.open(path, readonly=True) as journal:
        assert journal.verify().ok  # the hash matches: only the events can tell

    result = CliRunner().invoke(main, ["verify", str(path)])

    assert result.exit_code == 1, result.output
    assert f"FAILED: agent 'a2': its snapshot at seq {seq} does not hold the state" in result.output
    assert CliRunner().invoke(main, ["verify", str(path), "--no-snapshots"]).exit_code == 0


def test_the_replay_overview_shows_what_the_events_hold_not_a_forged_snapshot(tmp_path: Path) -> None:
    # A snapshot is outside the hash chain (anyone can rehash one, unkeyed): the overview,
    # as --agent does, rebuilds each agent from its events alone.
    path = tmp_path / "journal"
    _forged_snapshot_of_a2(path, "forged")

    result = CliRunner().invoke(main, ["replay", str(path), "--json"])

    assert result.exit_code == 0, result.output
    assert [(a["agent"], a["private_values"]) for a in json.loads(result.output)["agents"]] == [
        (f"a{i}", 1) for i in range(4)
    ]


def test_replay_of_an_agent_shows_what_its_events_hold_not_a_forged_snapshot(tmp_path: Path) -> None:
    # README: replay rebuilds an agent "from its events alone (a snapshot is outside the
    # hash chain)": a snapshot rehashed by anyone must not show in --agent's view
    path = tmp_path / "journal"
    _forged_snapshot_of_a2(path, "forged")

    result = CliRunner().invoke(main, ["replay", str(path), "--agent", "a2", "--json"])

    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["private"] == {"round": 9}


def test_verify_json_fails_on_a_snapshot_that_disagrees_with_its_events(tmp_path: Path) -> None:
    # README: --json prints the verdict "with the same exit status": a forged snapshot
    # is a problem in the journal (exit 1), and the verdict is not ok
    path = tmp_path / "journal"
    seq = _forged_snapshot_of_a2(path, "round")

    result = CliRunner().invoke(main, ["verify", str(path), "--json"])

    assert result.exit_code == 1, result.output
    verdict = json.loads(result.stdout)
    # first_bad_seq is the seq the snapshot covers, as for one whose hash fails (session 51)
    assert (verdict["ok"], verdict["first_bad_seq"], verdict["snapshots"]) == (False, seq, 3)
    assert verdict["reason"].startswith(f"agent 'a2': its snapshot at seq {seq} does not hold the state")


@pytest.mark.parametrize("publish_seq", ["past the last seq", "a record that publishes nothing"])
def test_a_snapshot_forged_with_a_publication_it_never_had_is_named_and_not_recovered_from(
    tmp_path: Path, publish_seq: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A snapshot holding a publication later than the seq a replay stops at is passed
    # over by that replay. Verify compares as of the last seq: with publish_seq past it
    # the forged snapshot was compared with nothing, passed, and recovery started from it.
    path = tmp_path / "journal"
    _agents_with_snapshots(path, "sync")
    with Journal.open(path, readonly=True) as journal:
        snapshot = journal.load_snapshot("agent/a2")
        last = journal.last_seq
    assert snapshot is not None
    state = msgspec.msgpack.decode(snapshot.data)
    state["private"]["round"] = "FORGED"
    state["task_context"] = {"round": "FORGED"}
    state["publish_seq"] = 2**40 if publish_seq == "past the last seq" else 1  # seq 1 spawns a0
    _rehashed_snapshot(path, "agent/a2", snapshot.seq, msgspec.msgpack.encode(state))

    result = CliRunner().invoke(main, ["verify", str(path)])
    with Runtime.open(path, clock=FakeClock()) as runtime:
        view = runtime.agent("a2").context_view()
        runtime.publish_task_context("t", {"round": "after"})
        published = runtime.agent("a2").task_context()

    assert result.exit_code == 1, result.output
    assert (
        f"FAILED: agent 'a2': its snapshot at seq {snapshot.seq} names a task context published to it "
        f"at seq {state['publish_seq']}, and the journal holds none there (its last seq is {last})"
    ) in result.output
    assert (view.private["round"], view.task_shared) == (9, {"round": 9})  # from the events alone
    assert published == {"round": "after"}  # a later publication is applied
    assert f"agent a2: its snapshot at seq {snapshot.seq} names a task context" in caplog.text


def test_a_rehashed_snapshot_that_does_not_decode_is_named_and_recovery_replays_the_events(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "journal"
    _agents_with_snapshots(path, "sync")
    with Journal.open(path, readonly=True) as journal:
        snapshot = journal.load_snapshot("agent/a1")
    assert snapshot is not None
    _rehashed_snapshot(path, "agent/a1", snapshot.seq, msgspec.msgpack.encode({"id": 5}))  # raw error, before

    result = CliRunner().invoke(main, ["verify", str(path)])
    with Runtime.open(path, clock=FakeClock()) as runtime:
        recovered = runtime.agent("a1").private("round")

    assert result.exit_code == 1, result.output
    assert f"agent 'a1': its snapshot at seq {snapshot.seq} does not decode" in result.output
    assert recovered == 9  # from the events alone
    assert f"agent a1: its snapshot at seq {snapshot.seq} does not decode" in caplog.text


def test_snapshots_that_agree_in_all_but_float_identity_or_topic_order_pass(tmp_path: Path) -> None:
    # NaN != NaN, and a snapshot saved before a publication it already holds replays its
    # later events twice, which can reorder its topics: neither is a forgery
    path = tmp_path / "journal"
    go, entered = threading.Event(), threading.Event()

    class Subscriber:
        def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
            entered.set()
            assert go.wait(10)
            for topic, subscribe in (("x", True), ("x", False), ("x", True), ("z", True)):
                (ctx.subscribe if subscribe else ctx.unsubscribe)(topic)
            ctx.set_private("nan", float("nan"))

    config = Config(journal=JournalConfig(durability="batch", snapshot_interval=2))
    with Runtime.open(path, config=config, clock=FakeClock(), behaviors={"s": Subscriber}) as runtime:
        runtime.spawn("a", task_id="t", behavior="s")
        runtime.bus.send("x", "a", "go")
        assert entered.wait(10)
        runtime.publish_task_context("t", {"v": 1})  # committed; the agent applies it after "go"
        go.set()
        runtime.flush()

    result = CliRunner().invoke(main, ["verify", str(path)])

    assert result.exit_code == 0, result.output
    assert "; 1 snapshot agrees with its events" in result.output


def test_a_tail_check_covers_the_events_recovery_replays_past_a_snapshot_that_does_not_decode(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal"
    _agents_with_snapshots(path, "sync")
    with Journal.open(path, readonly=True) as journal:
        snapshot = journal.load_snapshot("agent/a1")
        early = next(r.seq for r in journal.read(stream="agent/a1") if isinstance(r.event, PrivateSet))
    assert snapshot is not None
    assert early < snapshot.seq  # before the snapshot: a tail check from it would skip the record
    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True, db=env.open_db(b"events")) as txn:
        key = early.to_bytes(8, "big")
        value = txn.get(key)
        assert value is not None
        txn.put(key, bytes(value).replace(b"round", b"ROUND"))  # still decodes; the chain breaks
    env.close()
    _rehashed_snapshot(path, "agent/a1", snapshot.seq, b"\xc0")  # nil: recovery replays a1's events instead

    with pytest.raises(JournalIntegrityError, match=f"seq {early}"):
        Runtime.open(path, clock=FakeClock(), verify="tail")


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (None, "covers seq {seq}, past its stream's last record"),  # the real state, claimed for later
        # a map whose private value nests past msgspec's depth: a RecursionError, raw, before
        (b"\x81\xa7private\x81\xa1k" + b"\x91" * 100_000 + b"\xc0", "at seq {seq} does not decode"),
    ],
)
def test_an_unusable_snapshot_with_its_hash_recomputed_is_named_and_never_recovered_from(
    tmp_path: Path, data: bytes | None, why: str
) -> None:
    path = tmp_path / "journal"
    _agents_with_snapshots(path, "sync")
    with Journal.open(path, readonly=True) as journal:
        snapshot = journal.load_snapshot("agent/a3")
        far = journal.last_seq  # a seq the journal holds, of another stream's record
        assert journal.stream_head("agent/a3") < far
    assert snapshot is not None
    state = msgspec.msgpack.decode(snapshot.data)
    state["private"]["round"] = "FORGED"
    seq = far if data is None else snapshot.seq
    _rehashed_snapshot(path, "agent/a3", seq, msgspec.msgpack.encode(state) if data is None else data)

    result = CliRunner().invoke(main, ["verify", str(path)])
    with Runtime.open(path, clock=FakeClock()) as runtime:  # recovery used to take the forged state
        recovered = runtime.agent("a3").private("round")
        published = [runtime.agent(f"a{i}").task_context() for i in range(4)]

    assert result.exit_code == 1, result.output
    assert f"agent 'a3': its snapshot {why.format(seq=seq)}" in result.output
    assert recovered == 9
    assert published == [{"round": 9}] * 4  # a3 from all its events, the others from their snapshots


def test_snapshots_holding_keys_that_are_not_strings_verify(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    config = Config(journal=JournalConfig(snapshot_interval=2))
    with Runtime.open(path, config=config, clock=FakeClock()) as runtime:
        agent = runtime.spawn("a")
        for n in range(5):
            agent.set_private("scores", {n: 0.5, None: n})

    result = CliRunner().invoke(main, ["verify", str(path)])

    assert result.exit_code == 0, result.output  # a deterministic encoding refused these keys
    assert "; 1 snapshot agrees" in result.output


@pytest.mark.parametrize(("busy", "code"), [(1, 0), (5, 2)])
def test_a_copy_is_taken_again_while_a_writer_changes_the_file_and_never_audited_torn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, busy: int, code: int
) -> None:
    path = _journal(tmp_path)
    real_copy = cogfabric._audit._copy_used
    copies = []

    def copy_during_a_commit(source: Path, target: Path) -> None:
        copies.append(target)
        real_copy(source, target)
        if len(copies) <= busy:  # a commit lands while this copy is taken
            stat = source.stat()
            os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))

    monkeypatch.setattr(cogfabric._audit, "_copy_used", copy_during_a_commit)
    result = CliRunner().invoke(main, ["verify", str(path), "--copy"])

    assert result.exit_code == code, result.output
    assert len(copies) == busy + 1 if code == 0 else len(copies) == 5
    if code:
        assert f"{path} changed while it was copied, 5 times: a writer is committing to it" in result.output


@pytest.mark.parametrize("key", ["", "k" * 65])
@pytest.mark.parametrize("args", AUDITS)
def test_a_key_no_journal_can_have_is_a_usage_error(tmp_path: Path, args: list[str], key: str) -> None:
    result = CliRunner().invoke(main, [*args, str(_journal(tmp_path)), "--key", key])

    assert result.exit_code == 2, result.output  # a ValueError traceback and exit 1 before
    assert "a chain key must be 1 to 64 bytes" in result.output


def test_values_keyed_by_other_than_strings_are_exported_with_keys_spelled_in_json(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with Runtime.open(path, clock=FakeClock()) as runtime:
        runtime.spawn("a").set_private("x", {None: 1, 2: "b"})  # what set_private takes, JSON has no key for

    exported = CliRunner().invoke(main, ["export", str(path)])
    replayed = CliRunner().invoke(main, ["replay", str(path), "--agent", "a", "--json"])

    assert (exported.exit_code, replayed.exit_code) == (0, 0), exported.output + replayed.output
    assert json.loads(exported.output.splitlines()[-1])["data"]["value"] == {"$map": [[None, 1], [2, "b"]]}
    assert json.loads(replayed.output)["private"] == {"x": {"$map": [[None, 1], [2, "b"]]}}


@pytest.mark.parametrize("command", ["export", "replay"])
def test_no_value_is_merged_away_nor_passes_for_another_in_json(tmp_path: Path, command: str) -> None:
    # {1: a, "1": b} was written {"1": a, "1": b} (a parser keeps b) and {None: a, "null":
    # b} as {"null": b}: an agent could hide a value from an auditor behind another key.
    ledger = {1: "paid 10000 to mallory", "1": "paid 10 to bob"}
    flags = {None: "exfiltrate", "null": "idle"}
    forged = {"$map": [["a", "b"]]}
    raw = {b"x": "under the bytes key", "eA==": "under its base64 as text"}
    path = tmp_path / "journal"
    with Runtime.open(path, clock=FakeClock()) as runtime:
        agent = runtime.spawn("a")
        for key, value in (("ledger", ledger), ("flags", flags), ("forged", forged), ("raw", raw)):
            agent.set_private(key, value)
        agent.set_cognitive_state(CognitiveState(context={2: "int", "2": "str"}))

    args = (
        ["export", str(path), "--stream", "agent/a"]
        if command == "export"
        else ["replay", str(path), "--agent", "a", "--json"]
    )
    result = CliRunner().invoke(main, args)

    assert result.exit_code == 0, result.output
    if command == "export":
        private = {
            line["data"]["key"]: line["data"]["value"]
            for line in map(json.loads, result.output.splitlines())
            if line["type"] == "PrivateSet"
        }
    else:
        private = json.loads(result.output)["private"]
    assert private == {
        "ledger": {"$map": [[1, "paid 10000 to mallory"], ["1", "paid 10 to bob"]]},
        "flags": {"$map": [[None, "exfiltrate"], ["null", "idle"]]},
        "forged": {"$map": [["$map", [["a", "b"]]]]},  # a map with the tag's key is written as pairs too
        "raw": {"$map": [["eA==", "under the bytes key"], ["eA==", "under its base64 as text"]]},
    }
    if command == "replay":
        assert json.loads(result.output)["cognitive"]["context"] == {"$map": [[2, "int"], ["2", "str"]]}
    else:
        (state,) = (json.loads(line) for line in result.output.splitlines() if '"CognitiveStateSet"' in line)
        assert state["data"]["state"]["context"] == {"$map": [[2, "int"], ["2", "str"]]}


def test_a_key_that_is_no_seq_after_the_last_record_is_refused_as_a_change(tmp_path: Path) -> None:
    # a one-byte key sorts after every seq: taken for the last record, it would hide the records past it
    path = _journal(tmp_path)
    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True, db=env.open_db(b"events")) as txn:
        txn.put(bytes([20]), b"x")
    env.close()

    result = CliRunner().invoke(main, ["verify", str(path)])

    assert result.exit_code == 1, result.output
    assert "its last record's key, 14, is no seq: it was changed" in result.output
    with pytest.raises(JournalIntegrityError, match="is no seq"):
        Journal.open(path)


@pytest.mark.parametrize(
    ("name", "why"),
    [(b"agent/\xff", "the record's stream name b'agent/\\xff' is not UTF-8"), (b"agent/\x00", "")],
    ids=["not UTF-8", "NUL"],
)
def test_a_rechained_record_whose_stream_name_no_writer_makes_is_named_by_verify(
    tmp_path: Path, name: bytes, why: str
) -> None:
    path = tmp_path / "journal"
    with Journal.open(path) as journal:
        journal.append([PrivateSet(at=0.0, agent="a", key="k")])
    env = lmdb.open(str(path), max_dbs=8)
    events, heads, meta = (env.open_db(name) for name in (b"events", b"heads", b"meta"))
    with env.begin(write=True) as txn:  # what anyone can do to an unkeyed journal
        key = (1).to_bytes(8, "big")
        value = bytes(txn.get(key, db=events) or b"")
        body = value[:-16].replace(b"agent/a", name)
        chain = hashlib.blake2b(bytes(16) + body, digest_size=16).digest()
        txn.put(key, body + chain, db=events)
        txn.put(b"head", head_value(key, chain, b""), db=meta)
        txn.put(name, bytes(txn.get(b"agent/a", db=heads) or b""), db=heads)
        txn.delete(b"agent/a", db=heads)
    env.close()

    result = CliRunner().invoke(main, ["verify", str(path)])

    assert result.exit_code == 1, result.output  # a UnicodeDecodeError traceback before
    assert f"FAILED at seq 1: {why}" in result.output


def test_a_database_re_created_with_flags_no_journal_sets_is_refused_as_a_change(tmp_path: Path) -> None:
    # the same records under reversed keys: outside the chain, yet every reader would order them otherwise
    path = _journal(tmp_path)
    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True) as txn:
        heads = env.open_db(b"heads", txn=txn)
        items = [(bytes(k), bytes(v)) for k, v in txn.cursor(db=heads)]
        txn.drop(heads, delete=True)
    reversed_heads = env.open_db(b"heads", reverse_key=True)
    with env.begin(write=True, db=reversed_heads) as txn:
        for k, v in items:
            txn.put(k, v)
    env.close()

    result = CliRunner().invoke(main, ["verify", str(path)])

    assert result.exit_code == 1, result.output
    assert "its heads database has LMDB flags ['reverse_key'] no journal sets" in result.output


@pytest.mark.parametrize("at", [float("nan"), 1e20, float("inf")])
def test_inspect_shows_a_time_no_date_can_hold_as_a_number(tmp_path: Path, at: float) -> None:
    path = tmp_path / "journal"
    with Journal.open(path) as journal:
        # append refuses a time that is not finite; a journal written before that check may hold one
        journal.append(
            [AgentSpawned(at=0.0, agent="a0"), PrivateSet(at=at, agent="a0", key="k")], validate=False
        )

    text = CliRunner().invoke(main, ["inspect", str(path)])
    as_json = CliRunner().invoke(main, ["inspect", str(path), "--json"])

    assert (text.exit_code, as_json.exit_code) == (0, 0), text.output + as_json.output
    assert f".. {at!r}" in text.output
    json.loads(as_json.output, parse_constant=_no_constants)  # strict JSON: NaN and inf as null


def test_replay_shows_a_huge_value_cut_in_its_table_and_whole_in_json(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with Runtime.open(path, clock=FakeClock()) as runtime:
        runtime.spawn("a").set_private("big", "x" * 1_000_000)

    table = CliRunner().invoke(main, ["replay", str(path), "--agent", "a"])  # minutes for rich, before
    whole = CliRunner().invoke(main, ["replay", str(path), "--agent", "a", "--json"])

    assert (table.exit_code, whole.exit_code) == (0, 0)
    assert "characters; --json shows it whole)" in table.output
    assert json.loads(whole.output)["private"]["big"] == "x" * 1_000_000


@pytest.mark.parametrize("command", ["verify", "inspect", "export"])
def test_an_audit_of_a_path_it_cannot_reach_blames_the_path_not_the_output(
    tmp_path: Path, command: str
) -> None:
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "data.mdb")
    too_long = tmp_path.joinpath(*["a"] * 3000)

    refused = CliRunner().invoke(main, [command, str(fifo)])
    unreachable = CliRunner().invoke(main, [command, str(too_long)])

    assert refused.exit_code == 2
    assert "not a regular file" in refused.output
    assert unreachable.exit_code == 2
    assert "cannot reach its data file" in unreachable.output
    assert "output" not in unreachable.output


@pytest.mark.parametrize("how", ["path", "symlink", "hard link"])
def test_an_export_never_writes_over_the_journals_own_files(tmp_path: Path, how: str) -> None:
    path = _journal(tmp_path, 5)
    data = path / "data.mdb"
    before = hashlib.sha256(data.read_bytes()).hexdigest()
    target = data
    if how == "symlink":
        target = tmp_path / "out.jsonl"
        target.symlink_to(data)
    elif how == "hard link":
        target = tmp_path / "out.jsonl"
        os.link(data, target)

    result = CliRunner().invoke(main, ["export", str(path), "-o", str(target)])

    assert result.exit_code == 2
    assert "would write over the journal's own files" in result.output
    assert hashlib.sha256(data.read_bytes()).hexdigest() == before
    assert CliRunner().invoke(main, ["verify", str(path)]).exit_code == 0


def test_an_export_into_the_journals_directory_is_refused_as_such(tmp_path: Path) -> None:
    # A new file there overwrites nothing: the refusal said it would write over the journal's files.
    path = _journal(tmp_path, 5)

    result = CliRunner().invoke(main, ["export", str(path), "-o", str(path / "new.jsonl")])

    assert result.exit_code == 2
    assert f"is in the journal's directory {path}, where an audit writes nothing" in result.output
    assert "write over" not in result.output
    assert not (path / "new.jsonl").exists()


def test_replay_shows_values_as_stored_never_as_markup(tmp_path: Path) -> None:
    text = "[red]secret[/red] :thumbs_up: a closing [/INST] tag"
    path = tmp_path / "journal"
    with Runtime.open(path) as runtime:
        runtime.spawn("a0").set_private("note", text)

    result = CliRunner().invoke(main, ["replay", str(path), "--agent", "a0"])

    assert result.exit_code == 0, result.output
    assert "[red]secret[/red] :thumbs_up: a closing [/INST] tag" in result.output


def test_an_audit_stopped_by_ctrl_c_exits_130_not_as_a_bad_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _journal(tmp_path, 5)

    def interrupted(*_args: object, **_kwargs: object) -> NoReturn:
        raise KeyboardInterrupt

    monkeypatch.setattr(LmdbJournal, "verify", interrupted)
    result = CliRunner().invoke(main, ["verify", str(path)])

    assert result.exit_code == 130
    assert "interrupted" in result.output


def test_inspect_json_names_a_journal_whose_directory_name_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / os.fsdecode(b"\xffdir")
    with Journal.open(path) as journal:
        journal.append(make_events(2))

    result = CliRunner().invoke(main, ["inspect", str(path), "--json"])

    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["path"] == str(tmp_path / "\\xffdir")


def test_inspect_escapes_control_characters_in_the_journals_name(tmp_path: Path) -> None:
    path = tmp_path / "j\x1b[2J\nrecords   999"
    with Journal.open(path) as journal:
        journal.append(make_events(2))

    result = CliRunner().invoke(main, ["inspect", str(path)])

    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == f"journal   {tmp_path}/j\\x1b[2J\\nrecords   999"


def test_an_export_into_a_symlink_loop_is_a_usage_error(tmp_path: Path) -> None:
    path = _journal(tmp_path, 5)
    loop = tmp_path / "loop"
    loop.symlink_to(loop)

    result = CliRunner().invoke(main, ["export", str(path), "-o", str(loop)])

    assert result.exit_code == 2
    assert "cannot write --output" in result.output


def test_a_value_nested_as_deep_as_stored_with_keys_json_lacks_is_replayed_and_exported(
    tmp_path: Path,
) -> None:
    from cogfabric.events import MAX_VALUE_DEPTH  # noqa: PLC0415

    deep: object = {None: 1}
    for _ in range(MAX_VALUE_DEPTH - 5):  # as deep as set_private takes
        deep = [deep]
    path = tmp_path / "journal"
    with Runtime.open(path, clock=FakeClock()) as runtime:
        runtime.spawn("a").set_private("x", deep)

    for args in (
        ["replay", str(path), "--agent", "a", "--json"],
        ["replay", str(path), "--agent", "a"],
        ["export", str(path)],
    ):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, (args, result.output[-500:])
    exported = CliRunner().invoke(main, ["export", str(path)]).output.splitlines()[-1]
    assert '{"$map":[[null,1]]}' in exported


def test_replay_of_an_agent_spawned_again_shows_only_its_own_messages(tmp_path: Path) -> None:
    from cogfabric.actors import Runtime  # noqa: PLC0415

    with Runtime.open(tmp_path / "j", behaviors={"listen": _Listener}) as runtime:
        runtime.spawn("w", behavior="listen")
        runtime.bus.send("x", "w", "old", {"n": 1})
        runtime.flush()
        runtime.kill("w")
        runtime.spawn("w", behavior="listen")
        runtime.bus.send("x", "w", "new", {"n": 2})
        runtime.flush()

    shown = json.loads(
        CliRunner().invoke(main, ["replay", str(tmp_path / "j"), "--agent", "w", "--json"]).output
    )

    assert [m["topic"] for m in shown["ipc"]["latest"]] == ["new"]  # not the killed agent's


def test_replay_names_the_kill_of_an_agent_whose_stream_has_a_model_output_after_it(tmp_path: Path) -> None:
    from cogfabric.actors import Runtime, ScriptedProvider  # noqa: PLC0415

    path = tmp_path / "j"
    with Runtime.open(path, clock=FakeClock()) as runtime:
        runtime.spawn("x", priority=2.5)
        runtime.bus.subscribe("x", "news")
        runtime.flush()
        assert runtime._journal is not None
        before = runtime._journal.last_seq
        runtime.kill("x")
        runtime.llm(ScriptedProvider(["ok"]), agent_id="x").generate("hello")  # recorded on agent/x

    result = CliRunner().invoke(main, ["replay", str(path), "--agent", "x"])
    at = ["replay", str(path), "--agent", "x", "--at", str(before), "--json"]
    shown = json.loads(CliRunner().invoke(main, at).output)

    assert (shown["priority"], shown["topics"]) == (2.5, ["news"])
    assert result.exit_code != 0
    assert "was killed at seq" in result.output


def test_an_export_to_a_file_with_a_name_near_the_longest_a_name_may_be_is_written(tmp_path: Path) -> None:
    path = _journal(tmp_path, 5)
    out = tmp_path / ("x" * 240 + ".jsonl")

    result = CliRunner().invoke(main, ["export", str(path), "-o", str(out)])

    assert result.exit_code == 0, result.output
    assert len(out.read_text(encoding="utf-8").splitlines()) == 5


def test_an_agents_text_cannot_move_the_cursor_or_forge_a_line_of_an_audit(tmp_path: Path) -> None:
    # Agent ids, task ids and session user ids reached the terminal as they were: an ESC
    # sequence erased the line above, a newline printed a stream that does not exist.
    path = tmp_path / "journal"
    with Runtime.open(path, clock=FakeClock()) as runtime:
        runtime.spawn("ops")
        runtime.spawn("zz\x1b[1A\x1b[2K\u202e", task_id="t1\x1b[2K\nok: 0 messages")
        runtime.spawn("null")
        runtime.spawn("kid", parent="null", task_id="null")
        runtime.memory.create_session("x\n     42  agent/ghost")

    runner = CliRunner()
    inspect = runner.invoke(main, ["inspect", str(path)], color=True)  # color: click strips no ESC
    replay = runner.invoke(main, ["replay", str(path), "--agent", "zz\x1b[1A\x1b[2K\u202e"], color=True)
    kid = runner.invoke(main, ["replay", str(path), "--agent", "kid"], color=True)
    root = runner.invoke(main, ["replay", str(path), "--agent", "ops"], color=True)

    assert [r.exit_code for r in (inspect, replay, kid, root)] == [0, 0, 0, 0], inspect.output + replay.output
    for result in (inspect, replay):
        assert "\x1b" not in result.output
        assert "\u202e" not in result.output
    assert "agent/zz\\x1b[1A\\x1b[2K\\u202e" in inspect.output
    assert not any(line.strip().startswith("42  agent/ghost") for line in inspect.output.splitlines())
    assert "session/session_x\\n     42  agent/ghost" in inspect.output
    assert "ok: 0 messages" in replay.output  # inside the task id's quoted value, not a line of its own
    assert not any(line.startswith("ok: 0 messages") for line in replay.output.splitlines())
    assert '"null"' in kid.output  # a parent named "null" is not no parent
    assert '"null"' not in root.output


def test_a_backslash_in_an_agents_id_is_shown_doubled_not_taken_for_an_escape(tmp_path: Path) -> None:
    # An id escaped as `a\x1b` (an ESC) must not read the same as the id `a\x1b` spelled
    # with a backslash: printable text that holds a backslash is escaped too.
    path = tmp_path / "journal"
    with Runtime.open(path, clock=FakeClock()) as runtime:
        runtime.spawn("a\x1b")
        runtime.spawn("a\\x1b")
    runner = CliRunner()

    inspect = runner.invoke(main, ["inspect", str(path)])
    escaped = runner.invoke(main, ["replay", str(path), "--agent", "a\x1b"])
    spelled = runner.invoke(main, ["replay", str(path), "--agent", "a\\x1b"])

    assert [r.exit_code for r in (inspect, escaped, spelled)] == [0, 0, 0], inspect.output
    assert inspect.stdout.endswith("  1  agent/a\\x1b\n  1  agent/a\\\\x1b\n")
    assert escaped.stdout.splitlines()[0].strip() == "agent a\\x1b at seq 2"
    assert spelled.stdout.splitlines()[0].strip() == "agent a\\\\x1b at seq 2"


def test_export_by_layer_finds_an_agents_cognitive_state_wherever_a_record_holds_it(tmp_path: Path) -> None:
    # The spawn's first cognitive state went out under task_shared only, and the kill's
    # death snapshot under no layer: --layer agent_private missed both.
    path = tmp_path / "journal"
    with Runtime.open(path, clock=FakeClock()) as runtime:
        agent = runtime.spawn("a", task_context={"goal": "g"}, experience_prior={"secret_prior": 1})
        agent.set_private("k", 1)
        runtime.kill("a")

    def exported(layer: str) -> list[str]:
        result = CliRunner().invoke(main, ["export", str(path), "--layer", layer])
        assert result.exit_code == 0, result.output
        return [json.loads(line)["type"] for line in result.output.splitlines()]

    assert exported("agent_private") == ["AgentSpawned", "PrivateSet", "AgentKilled"]
    assert exported("task_shared") == ["AgentSpawned"]
    assert AgentSpawned.layers == {ContextLayer.TASK_SHARED, ContextLayer.AGENT_PRIVATE}
    assert AgentSpawned.layer == ContextLayer.TASK_SHARED
    assert PrivateSet.layers == {ContextLayer.AGENT_PRIVATE}


def test_a_struct_beside_an_odd_key_is_written_as_msgspec_writes_it() -> None:
    from cogfabric._audit import encode_json  # noqa: PLC0415

    message = Message(role="user", content="c", time=0.0)  # omit_defaults: time is kept (not its default)

    alone = encode_json(message)

    assert encode_json([message, {1: "odd"}]) == b"[" + alone + b',{"$map":[[1,"odd"]]}]'


def test_replay_keeps_a_value_under_a_tuple_key_holding_bytes(tmp_path: Path) -> None:
    # to_builtins turned the bytes inside a tuple key into text: two keys became one
    path = tmp_path / "journal"
    memory = {(b"x", 1): "under the bytes-in-tuple key", ("eA==", 1): "under its base64 as text"}
    with Runtime.open(path, clock=FakeClock()) as runtime:
        runtime.spawn("a").set_cognitive_state(CognitiveState(working_memory=memory))

    result = CliRunner().invoke(main, ["replay", str(path), "--agent", "a", "--json"])

    assert result.exit_code == 0, result.output
    pairs = json.loads(result.output)["cognitive"]["working_memory"]["$map"]
    assert sorted(value for _, value in pairs) == sorted(memory.values())


def _cogfabric_with_stderr(stderr: str, *args: str) -> int:
    """The exit status of ``cogfabric ARGS`` with stderr a pipe whose reader is gone, or the full device."""
    if stderr == "full device" and not Path("/dev/full").exists():
        pytest.skip("needs /dev/full")
    if stderr == "closed pipe":
        read_end, write_end = os.pipe()
        os.close(read_end)  # `cogfabric ... 2>&1 >/dev/null | true`: the reader is gone
    else:
        write_end = os.open("/dev/full", os.O_WRONLY)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "cogfabric", *args],
            stdout=subprocess.DEVNULL,
            stderr=write_end,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    return done.returncode


@pytest.mark.parametrize("stderr", ["closed pipe", "full device"])
def test_the_exit_status_says_what_went_wrong_when_stderr_cannot_take_the_error(
    tmp_path: Path, stderr: str
) -> None:
    # The error line is lost, but not the status: a damaged journal must not read as
    # clean (0) and a usage error must not read as damage (1).
    forged = _forged(tmp_path / "forged")
    good = _journal(tmp_path / "good", 3)

    statuses = {
        "damaged journal": _cogfabric_with_stderr(stderr, "export", str(forged)),
        "unknown agent": _cogfabric_with_stderr(stderr, "replay", str(good), "--agent", "nosuch"),
        "bad option value": _cogfabric_with_stderr(stderr, "replay", str(good), "--at", "abc"),
    }

    assert statuses == {"damaged journal": 1, "unknown agent": 2, "bad option value": 2}


@pytest.mark.parametrize("terminal", [False, True])
def test_bench_shows_its_progress_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch, terminal: bool) -> None:
    # Issue 5: "progress only when stderr is a terminal"; bench wrote its lines into any stderr
    import cogfabric._bench  # noqa: PLC0415
    import cogfabric.cli  # noqa: PLC0415

    given: list[object] = []

    def records_its_progress(*_: object, progress: object = None, **__: object) -> None:
        given.append(progress)
        msg = "measured nothing"
        raise RuntimeError(msg)

    monkeypatch.setattr(cogfabric._bench, "run_bench", records_its_progress)
    monkeypatch.setattr(cogfabric.cli, "_stderr_is_terminal", lambda: terminal)
    result = CliRunner().invoke(main, ["bench", "--quick"])

    assert isinstance(result.exception, RuntimeError)
    assert [callable(p) for p in given] == [terminal]


@pytest.mark.parametrize("command", [["verify"], ["inspect"], ["export"]])
def test_an_audit_refuses_a_lock_file_that_links_elsewhere_and_audits_a_copy(
    tmp_path: Path, command: list[str]
) -> None:
    # LMDB writes its lock file's header even to read: a journal someone else made could
    # point it at a file of the auditor's, which an audit in place would overwrite.
    path = _journal(tmp_path, 3)
    precious = tmp_path / "precious.txt"
    precious.write_bytes(b"mine")
    (path / "lock.mdb").unlink()
    (path / "lock.mdb").symlink_to(precious)

    in_place = CliRunner().invoke(main, [*command, str(path)])
    copied = CliRunner().invoke(main, [*command, str(path), "--copy"])

    assert in_place.exit_code == 2
    assert "lock.mdb is a symbolic link" in in_place.output
    assert "--copy" in in_place.output
    assert copied.exit_code == 0, copied.output
    assert precious.read_bytes() == b"mine"


def test_a_copy_takes_the_pages_the_header_names_not_a_hole_made_long(tmp_path: Path) -> None:
    # ``truncate -s`` makes a data file long at no cost on disk; copied whole, a file
    # claiming terabytes would fill the auditor's disk with zeros.
    path = _journal(tmp_path, 40)
    data = path / "data.mdb"
    used = data.stat().st_size
    os.truncate(data, 300 * 2**20)
    target = tmp_path / "copy.mdb"

    cogfabric._audit._quiet_copy(path, target)
    copied = CliRunner().invoke(main, ["verify", str(path), "--copy"])

    assert target.stat().st_size <= used
    assert target.stat().st_mode & 0o777 == 0o600
    assert copied.exit_code == 0, copied.output


def _forge_last_page(data: Path, *, newest: bool, last_page: int) -> None:
    """Set the last page one of the data file's two meta pages names (the newer one or the older one)."""
    head = data.read_bytes()[: _pages.META_END + 65536]
    page = _pages.meta_at(head, 0).page_size
    newer = max((0, page), key=lambda offset: _pages.meta_at(head, offset).txnid)
    offset = newer if newest else page - newer
    with data.open("r+b") as file:
        file.seek(offset + _pages.META_END - 16)  # the record ends with last_page and txnid, 8 bytes each
        file.write(last_page.to_bytes(8, "little"))


def test_a_copy_takes_the_pages_the_newest_header_names_not_what_the_older_one_claims(tmp_path: Path) -> None:
    # LMDB reads the newer meta page only: the older one may claim any length
    path = _journal(tmp_path, 40)
    data = path / "data.mdb"
    used = data.stat().st_size
    _forge_last_page(data, newest=False, last_page=1 << 40)
    os.truncate(data, 300 * 2**20)
    target = tmp_path / "copy.mdb"

    cogfabric._audit._quiet_copy(path, target)

    assert target.stat().st_size <= used


def _made_long(tmp_path: Path, long: int) -> tuple[Path, int]:
    """A journal whose newest header names ``long`` bytes, its file made that long with a hole.

    Returns its path and how many bytes it held before.
    """
    path = _journal(tmp_path, 40)
    data = path / "data.mdb"
    used = data.stat().st_size
    page = _pages.meta_at(data.read_bytes(), 0).page_size
    _forge_last_page(data, newest=True, last_page=long // page - 1)
    os.truncate(data, long)
    return path, used


def test_a_hole_the_newest_header_names_is_copied_as_a_hole(tmp_path: Path) -> None:
    long = 300 * 2**20
    path, used = _made_long(tmp_path, long)
    data = path / "data.mdb"
    target = tmp_path / "copy.mdb"

    cogfabric._audit._quiet_copy(path, target)

    assert target.stat().st_size == long  # what the header names, byte for byte
    assert target.stat().st_blocks * 512 <= used + 2**20  # but only the data takes room on disk
    assert _head(target, used) == _head(data, used)  # (read whole, the two 300 MB files took 1.5 s)


def _head(path: Path, size: int) -> bytes:
    """The first ``size`` bytes of the file at ``path``."""
    with path.open("rb") as file:
        return file.read(size)


def test_a_long_file_with_no_lmdb_header_is_copied_only_as_far_as_a_header_reaches(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    path.mkdir()
    with (path / "data.mdb").open("wb") as file:
        file.write(b"not lmdb" * 10_000)
    os.truncate(path / "data.mdb", 300 * 2**20)
    target = tmp_path / "copy.mdb"

    cogfabric._audit._quiet_copy(path, target)
    copied = CliRunner().invoke(main, ["verify", str(path), "--copy"])

    assert target.stat().st_size == 2 * 65536
    assert copied.exit_code == 2
    assert "not an LMDB journal" in copied.output


def test_a_data_file_swapped_for_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    # data_file() checks the path, then the copy opens it: a FIFO put there meanwhile
    # would hang a plain open for a writer that never comes
    path = tmp_path / "journal"
    path.mkdir()
    os.mkfifo(path / "data.mdb")

    with pytest.raises(JournalFormatError, match=r"data\.mdb is not a regular file"):
        cogfabric._audit._quiet_copy(path, tmp_path / "copy.mdb")


def test_where_the_file_system_reports_no_holes_zeros_are_still_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # NFSv3, vfat and FUSE report a file as all data (or refuse SEEK_DATA): the hole is read
    long = 64 * 2**20
    path, used = _made_long(tmp_path, long)
    data = path / "data.mdb"
    real_lseek = os.lseek

    def no_seek_data(fd: int, offset: int, how: int) -> int:
        if how in (os.SEEK_DATA, os.SEEK_HOLE):
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_lseek(fd, offset, how)

    monkeypatch.setattr(os, "lseek", no_seek_data)
    target = tmp_path / "copy.mdb"

    cogfabric._audit._quiet_copy(path, target)

    assert target.stat().st_size == long
    assert target.stat().st_blocks * 512 <= used + 2**20
    assert target.read_bytes() == data.read_bytes()


def test_a_journal_ending_in_the_zeros_of_a_snapshot_audits_the_same_copied(tmp_path: Path) -> None:
    # A value's overflow pages have no header: a snapshot of zeros can be the file's last
    # pages, written zeros that the copy leaves a hole. The audit must read the copy as
    # the file, not take its zero end for pages past the file.
    path = tmp_path / "journal"
    with Journal.open(path) as journal:
        for i in range(40):
            journal.append(make_events(20, agents=3, start=20 * i))
        for k in range(4):
            snapshot = Snapshot("agent-0", 1, b"s" + bytes((64 << k) * 1024))
            journal.append(make_events(1, agents=1, start=800 + k), snapshots=[snapshot])
        journal.append([], snapshots=[Snapshot("agent-0", 2, b"s" + bytes(1 << 20))])
    data = path / "data.mdb"
    assert data.read_bytes()[-4 * mmap.PAGESIZE :] == bytes(4 * mmap.PAGESIZE)  # the case: a zero end

    in_place = CliRunner().invoke(main, ["verify", str(path), "--no-snapshots"])
    copied = CliRunner().invoke(main, ["verify", str(path), "--copy", "--no-snapshots"])

    assert in_place.exit_code == 0, in_place.output
    assert copied.exit_code == 0, copied.output


def test_verify_json_gives_a_verdict_for_a_journal_it_cannot_read(
    tmp_path: Path, damage_page: Callable[[Path, bytes], None]
) -> None:
    # a damaged page raises rather than reports: --json printed nothing on stdout
    path = _journal(tmp_path)
    with Journal.open(path, readonly=True) as journal:
        link = next(r.chain for r in journal.read() if r.seq == 20)
    damage_page(path, link)

    result = CliRunner().invoke(main, ["verify", str(path), "--json"])

    assert result.exit_code == 1
    verdict = json.loads(result.stdout)
    assert {k: v for k, v in verdict.items() if k != "reason"} == {
        "ok": False,
        "checked": None,
        "head_seq": None,
        "first_bad_seq": None,
        "snapshots": None,
    }
    assert verdict["reason"].startswith(f"{path} is damaged")
    assert f"error: {path} is damaged" in result.stderr


@pytest.mark.parametrize(
    ("journal", "given", "error"),
    [
        ("keyed", ["--key", "wrong"], "was written with a different chain key"),
        ("keyed", [], "was written with a chain key"),
        ("empty", [], "no journal at"),
    ],
)
def test_verify_json_prints_no_verdict_for_a_usage_error(
    tmp_path: Path, journal: str, given: list[str], error: str
) -> None:
    # README: "a usage error prints none", and exits 2: no `"ok": false` for a script to
    # take for a journal that failed (exit 1)
    paths = {"keyed": _journal(tmp_path, 3, key=b"k"), "empty": tmp_path / "empty"}
    paths["empty"].mkdir()

    result = CliRunner().invoke(main, ["verify", str(paths[journal]), "--json", *given])

    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("error: ")
    assert error in result.stderr


def test_the_command_verify_suggests_takes_the_key_and_copy_and_no_undecodable_record(
    tmp_path: Path, break_link: Callable[[Path, int], None]
) -> None:
    keyed = _journal(tmp_path / "keyed", 20, key=b"k")
    break_link(keyed, 3)
    plain = tmp_path / "plain"
    with LmdbJournal.open(plain, codec=EventCodec([AgentSpawned, PrivateSet, _Teleported])) as journal:
        # a valid chain over a record this codec cannot decode: export cannot show it either
        journal.append([AgentSpawned(at=0.0, agent="a0"), _Teleported(at=1.0, agent="a0", where="x")])
    runner = CliRunner()

    with_key = runner.invoke(main, ["verify", str(keyed), "--key", "k", "--copy"])
    undecodable = runner.invoke(main, ["verify", str(plain)])

    assert with_key.exit_code == 1
    assert with_key.stdout.endswith(
        f"see it: cogfabric export {keyed} --copy --no-verify --after 2 --until 3 "
        "(with the same --key-file or --key)\n"
    )
    shown = runner.invoke(
        main, ["export", str(keyed), "--copy", "--no-verify", "--after", "2", "--until", "3", "--key", "k"]
    )
    assert [json.loads(line)["seq"] for line in shown.stdout.splitlines()] == [3]
    assert undecodable.exit_code == 1
    assert "FAILED at seq 2: the record does not decode" in undecodable.stdout
    assert "see it" not in undecodable.stdout


def test_replay_of_an_agent_killed_and_spawned_again_later_names_both(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Runtime.open(path) as runtime:
        runtime.spawn("a")
        runtime.kill("a")
        runtime.spawn("b")
        runtime.spawn("a")
    with Journal.open(path, readonly=True) as journal:
        spawned, killed, _, again = (r.seq for r in journal.read() if r.stream in ("agent/a", "agent/b"))

    result = CliRunner().invoke(main, ["replay", str(path), "--agent", "a", "--at", str(again - 1)])

    assert result.exit_code == 2
    assert result.stderr == (
        f"error: agent 'a' was killed at seq {killed}; --at {killed - 1} shows it before; "
        f"it is spawned again at seq {again}: --at {again} shows it\n"
    )
    assert spawned < killed


def test_replay_names_no_beginning_past_what_it_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a spawn appended after verification was read unverified, and named "at seq None"
    path = tmp_path / "j"
    with Runtime.open(path) as runtime:
        runtime.spawn("x")
        runtime.spawn("y")
    with Journal.open(path, readonly=True) as journal:
        y = next(r.seq for r in journal.read(stream="agent/y"))
    monkeypatch.setattr(cli, "_check", lambda _opened, **_: y - 1)  # verified up to before y

    result = CliRunner().invoke(main, ["replay", str(path), "--agent", "y"])

    assert (result.exit_code, result.stderr) == (2, "error: agent 'y' does not exist in the journal\n")


def test_replay_of_an_id_with_records_but_no_spawn_says_it_was_never_spawned(tmp_path: Path) -> None:
    # README's "journal in 20 lines" appends an agent's events without a spawn: replay
    # said the agent "does not exist in the journal" while inspect listed its stream
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append([PrivateSet(at=1.0, agent="a1", key="k", value=1)])
        journal.append([PrivateSet(at=2.0, agent="a1", key="k", value=2)])
        journal.append([AgentSpawned(at=3.0, agent="b")])

    result = CliRunner().invoke(main, ["replay", str(path), "--agent", "a1"])
    at_one = CliRunner().invoke(main, ["replay", str(path), "--agent", "a1", "--at", "1"])

    assert (result.exit_code, result.stderr) == (
        2,
        (
            "error: agent 'a1' was never spawned: its stream holds 2 records up to seq 3, none of them an "
            f"AgentSpawned (replay rebuilds the agents a runtime spawned; cogfabric export {path} "
            "--stream agent/a1 --until 3 shows the records)\n"
        ),
    )
    assert "holds 1 record up to seq 1," in at_one.stderr
    assert "--stream agent/a1 --until 1 shows" in at_one.stderr
    shown = CliRunner().invoke(main, ["export", str(path), "--stream", "agent/a1", "--until", "3"])
    assert shown.exit_code == 0
    assert [json.loads(line)["seq"] for line in shown.stdout.splitlines()] == [1, 2]


def test_the_never_spawned_hint_is_a_command_that_runs_as_shown(tmp_path: Path) -> None:
    """The suggested export quotes the path and the id, and keeps --copy, --no-verify and the key."""
    path = tmp_path / "my journal"
    with Journal.open(path, key=b"k") as journal:
        journal.append([PrivateSet(at=1.0, agent="a 1", key="k", value=1)])
        journal.append([AgentSpawned(at=2.0, agent="b")])

    result = CliRunner().invoke(
        main, ["replay", str(path), "--agent", "a 1", "--copy", "--no-verify", "--key", "k"]
    )

    assert result.exit_code == 2
    command = result.stderr.split("spawned; ", 1)[1].split(" shows the records", 1)[0]
    assert command == (
        f"cogfabric export '{path}' --copy --no-verify --stream 'agent/a 1' --until 2 "
        "(with the same --key-file or --key)"
    )
    words = shlex.split(command.split(" (with", 1)[0])
    shown = CliRunner().invoke(main, [*words[1:], "--key", "k"])
    assert shown.exit_code == 0, shown.output
    assert [json.loads(line)["seq"] for line in shown.stdout.splitlines()] == [1]


@pytest.mark.parametrize("entry", [None, 4], ids=["removed", "names-another-record"])
def test_a_broadcast_delivered_to_the_agent_is_shown_whatever_the_id_index_says(
    tmp_path: Path, entry: int | None
) -> None:
    # replay reads another agent's broadcast when its copy reaches the replayed agent,
    # through the id index: unverified (--no-verify), a damaged index lost it silently
    path = tmp_path / "j"
    hello = IpcMessage(at=1.0, sender="y", recipient="", topic="hello", kind="broadcast")
    with Journal.open(path) as journal:
        journal.append([AgentSpawned(at=0.0, agent=a) for a in "xy"])
        journal.append([hello, PrivateSet(at=1.0, agent="x", key="k", value=1)])
        journal.append([IpcDelivered(at=2.0, message_id=hello.id, recipient="x")])
    env = lmdb.open(str(path), max_dbs=8)
    try:
        with env.begin(write=True, db=env.open_db(b"ids")) as txn:
            if entry is None:
                assert txn.delete(hello.id.encode())
            else:
                txn.put(hello.id.encode(), entry.to_bytes(8, "big"))
    finally:
        env.close()

    result = CliRunner().invoke(main, ["replay", str(path), "--agent", "x", "--json", "--no-verify"])

    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)["ipc"]["latest"]
    assert [(m["topic"], m["from"], m["status"]) for m in shown] == [("hello", "y", "delivered")]


def test_the_replay_table_cuts_a_long_name_or_topic_and_counts_one_message_as_one(tmp_path: Path) -> None:
    # each name and topic was shown whole: megabytes of table for one long topic
    path = tmp_path / "j"
    with Runtime.open(path) as runtime:
        runtime.spawn("a")
        runtime.spawn("b")
        runtime.bus.send("me", "a", "t" * 100_000, "p")
        runtime.bus.send("me", "b", "short", "p")
        runtime.flush()
    runner = CliRunner()

    long = runner.invoke(main, ["replay", str(path), "--agent", "a"])
    one = runner.invoke(main, ["replay", str(path), "--agent", "b"])

    assert long.exit_code == 0, long.output
    assert len(long.output) < 10_000
    assert "...(100,002characters)" in "".join(c for c in long.output if not c.isspace() and c != "│")
    assert "1 message:" in one.output
    assert '"me" -> "b" "short": dead-lettered: no behavior' in one.output
