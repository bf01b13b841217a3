"""An operator who runs one journal for weeks and changes its configuration between runs.

The YAML errors such an operator makes (a unit, quotes, a tab, a file saved as Latin-1)
each name what to write instead; a reopen under another configuration reads back every
agent and session as the last run left them; the keys that do change the journal for good
(``session_ttl``, ``max_sessions``) do what README's "Changing the configuration between
runs" says.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

import cogfabric as cf
import cogfabric._simulation
from cogfabric.actors import ActorTimeoutError
from cogfabric.cli import main
from cogfabric.config import InvalidConfigError, load_config, parse_config
from cogfabric.store import JournalFullError
from tests.test_simulate_determinism_s52_h5 import _states

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("runtime: {call_timeout: 5s}\n", "'5s'"),
        ("memory: {session_ttl: 24h}\n", "'24h'"),
        ("journal: {map_size: 1GiB}\n", "'1GiB'"),  # int | None: no hint at all before
        ("journal: {max_map_size: 2 GB}\n", "'2 GB'"),
    ],
)
def test_a_number_with_a_unit_is_told_to_be_written_plain_not_as_1_0e_3(text: str, shown: str) -> None:
    # `call_timeout: 5s` was told "YAML 1.1 reads a number such as 1e3, with no dot, as
    # text: write 1.0e+3", which has nothing to do with it
    with pytest.raises(InvalidConfigError) as raised:
        parse_config(text, source="site.yaml")

    message = str(raised.value)
    assert f"({shown} is text: write a plain number, with no unit; times are in seconds" in message
    assert "1.0e+3" not in message
    assert message.startswith("site.yaml: Expected `")


@pytest.mark.parametrize(
    "text",
    [
        "journal: {snapshot_interval: '100'}\n",
        'runtime: {call_timeout: "30.5"}\n',
        "memory: {max_sessions: '7'}\n",
    ],
)
def test_a_quoted_number_is_told_to_lose_its_quotes(text: str) -> None:
    with pytest.raises(InvalidConfigError, match=r"is text: write the number without quotes\)$"):
        parse_config(text)


def test_a_number_written_1e3_keeps_its_own_hint_and_plain_text_gets_none() -> None:
    with pytest.raises(InvalidConfigError, match=r"write 1\.0e\+3\)$"):
        parse_config("runtime: {call_timeout: 1e3}\n")
    with pytest.raises(InvalidConfigError, match=r"at `\$\.runtime\.call_timeout`$"):
        parse_config("runtime: {call_timeout: soon}\n")


@pytest.mark.parametrize(
    ("encoded", "where"),
    [
        ("journal:\n  durability: sync  # été\n".encode("latin-1"), "byte 0xe9 at line 2, column 23"),
        ("llm:\n  model: \u201cgpt\u201d\n".encode("cp1252"), "byte 0x93 at line 2, column 10"),
    ],
)
def test_a_file_saved_in_another_encoding_names_the_byte_and_its_line(
    tmp_path: Path, encoded: bytes, where: str
) -> None:
    # libyaml said "unacceptable character #x0074: invalid trailing UTF-8 octet at
    # position 31": a character that is not the bad one, and no line
    path = tmp_path / "cogfabric.yaml"
    path.write_bytes(encoded)

    with pytest.raises(InvalidConfigError) as raised:
        load_config(path)

    assert str(raised.value) == (
        f"{path}: not UTF-8 text: {where} (saved in another encoding, such as Latin-1 or "
        "Windows-1252? save it as UTF-8)"
    )


def test_utf16_with_its_byte_order_mark_is_still_read(tmp_path: Path) -> None:
    path = tmp_path / "cogfabric.yaml"
    path.write_bytes("journal:\n  durability: batch  # été\n".encode("utf-16"))

    assert load_config(path).journal.durability == "batch"


@pytest.mark.parametrize("text", ["journal:\n\tdurability: sync\n", "journal:\n  \tfsync: false\n"])
def test_a_tab_in_the_indentation_is_named_as_one(text: str) -> None:
    # libyaml named no tab: "found character that cannot start any token at line 2, column 1"
    with pytest.raises(
        InvalidConfigError, match=r"at line 2, column \d \(a tab: YAML indents with spaces only\)$"
    ):
        parse_config(text)


def test_a_simulation_stopped_by_call_timeout_names_the_key_and_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "the journal did not acknowledge within 0.001 s; the outcome is unknown" named
    # neither runtime.call_timeout nor the file that set it
    config = tmp_path / "ops.yaml"
    config.write_text("runtime: {call_timeout: 0.001}\n", encoding="utf-8")

    def times_out(*_: object, **__: object) -> None:
        msg = "the journal did not acknowledge within 0.001 s; the outcome is unknown"
        raise ActorTimeoutError(msg)

    monkeypatch.setattr(cogfabric._simulation, "run_simulation", times_out)
    result = CliRunner().invoke(main, ["simulate", "--journal", str(tmp_path / "j"), "--config", str(config)])

    assert result.exit_code == 1
    hint = f"(runtime.call_timeout is 0.001 s; a slow disk may need more: raise it in {config})"
    assert result.stderr.rstrip().endswith(f"the outcome is unknown {hint}")
    assert "Traceback" not in result.output


def _everything(rt: cf.Runtime) -> dict[str, Any]:
    """Every agent (lifecycle, layers, cognitive state, latest checkpoint) and live session."""
    views = rt.context_views()
    return {
        "agents": rt.agents(),
        "state": {
            a: (
                rt.agent(a).lifecycle,
                dict(views[a].task_shared),
                dict(views[a].private),
                rt.agent(a).cognitive_state(),
                rt.last_checkpoint(a),
            )
            for a in rt.agents()
        },
        "sessions": {s: rt.memory.get_session(s).messages for s in rt.memory.sessions()},
    }


def _work(rt: cf.Runtime, tag: str) -> None:
    for i in range(4):
        agent = f"a{i}"
        handle = rt.agent(agent) if agent in rt.agents() else rt.spawn(agent, task_id="t")
        for k in range(9):
            handle.set_private(f"k{k % 3}", f"{tag}-{k}")
        handle.set_cognitive_state(cf.CognitiveState(decision=f"{tag}-{i}"))
        if i % 2:
            handle.checkpoint_cognitive()
        session = rt.memory.create_session(f"{tag}-u{i}", agent_id=agent)
        rt.memory.add_message(session, "user", f"{tag} {i}")
    rt.publish_task_context("t", {"goal": tag})
    rt.flush()


_FIRST: dict[str, Any] = {"journal": {"snapshot_interval": 4}, "memory": {"session_ttl": 1000.0}}


@pytest.mark.parametrize(
    "changed",
    [
        {"journal": {"durability": "batch", "fsync": False}},
        {"journal": {"snapshot_interval": 1, "group_commit_max": 1}},
        {"journal": {"snapshot_interval": 1_000_000, "check_pages": False}},
        {"journal": {"map_size": 4096}},  # below the file's size: no change, the file never shrinks
        {"runtime": {"mailbox_size": 1, "call_timeout": 5.0}},
        {"memory": {"max_history": 1, "max_sessions": 8}},
    ],
    ids=["batch", "snapshot every event", "no snapshots", "small map", "runtime", "memory"],
)
def test_a_reopen_under_another_config_reads_back_what_each_run_left(
    tmp_path: Path, changed: dict[str, Any]
) -> None:
    # README says what the journal holds reads back the same under any other config
    path = tmp_path / "j"
    clock = cf.FakeClock()
    with cf.Runtime.open(path, config=_FIRST, clock=clock) as rt:
        _work(rt, "first")
        first = _everything(rt)
    with cf.Runtime.open(path, config=changed, clock=clock) as rt:
        assert _everything(rt) == first
        _work(rt, "second")
        second = _everything(rt)
    with cf.Runtime.open(path, config=_FIRST, clock=clock) as rt:
        assert _everything(rt) == second


def test_a_shorter_session_ttl_ends_idle_sessions_for_good(tmp_path: Path) -> None:
    path = tmp_path / "j"
    clock = cf.FakeClock()
    with cf.Runtime.open(path, clock=clock) as rt:
        session = rt.memory.create_session("u")
    clock.advance(100)
    with cf.Runtime.open(path, clock=clock, config={"memory": {"session_ttl": 50.0}}) as rt:
        assert rt.memory.sessions() == []
    with cf.Runtime.open(path, clock=clock) as rt:  # the default TTL, 24 h, again
        assert rt.memory.sessions() == []
        with pytest.raises(cf.SessionNotFoundError) as raised:
            rt.memory.get_messages(session)
        assert raised.value.reason == "expired"


def test_a_smaller_max_sessions_evicts_only_at_the_next_new_session_and_for_good(tmp_path: Path) -> None:
    path = tmp_path / "j"
    clock = cf.FakeClock()
    with cf.Runtime.open(path, clock=clock) as rt:
        for i in range(5):
            rt.memory.create_session(f"u{i}")
    with cf.Runtime.open(path, clock=clock, config={"memory": {"max_sessions": 2}}) as rt:
        assert len(rt.memory.sessions()) == 5
        rt.memory.create_session("new")
        assert len(rt.memory.sessions()) == 2
    with cf.Runtime.open(path, clock=clock) as rt:
        assert len(rt.memory.sessions()) == 2


def test_a_max_map_size_below_the_file_opens_and_its_first_commit_that_does_not_fit_names_the_size(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j"
    with cf.Runtime.open(path) as rt:
        agent = rt.spawn("a")
        for i in range(200):
            agent.set_private(f"k{i}", "x" * 500)
    size = (path / "data.mdb").stat().st_size

    with cf.Runtime.open(path, config={"journal": {"max_map_size": 8192}}) as rt:  # not refused here
        assert rt.agent("a").private("k199") == "x" * 500
        with pytest.raises(JournalFullError, match=f"its data file is {size:,} bytes already"):
            _fill(rt.agent("a"))
    with cf.Runtime.open(path) as rt:  # raised again (no limit): it goes on from what was committed
        assert rt.agent("a").private("k199") == "x" * 500
        rt.agent("a").set_private("after", 1)


def _fill(agent: cf.Agent) -> None:
    for i in range(1000):  # the file's free pages fill first
        agent.set_private(f"more{i}", "y" * 500)


@pytest.mark.slow
def test_a_simulation_split_in_runs_of_other_configs_leaves_every_agent_as_one_run_does(
    tmp_path: Path,
) -> None:
    whole = cogfabric._simulation.run_simulation(tmp_path / "whole", agents=6, turns=33, seed=3)
    configs = [
        "journal: {snapshot_interval: 3, group_commit_max: 2}\nruntime: {mailbox_size: 50}\n",
        "journal: {snapshot_interval: 1, durability: batch, fsync: false}\nmemory: {max_sessions: 1}\n",
        (
            "journal: {snapshot_interval: 100000, map_size: 4096, check_pages: false}\n"
            "runtime: {call_timeout: 5.0}\n"
        ),
    ]
    for text, turns in zip(configs, [10, 12, 11], strict=True):
        run = cogfabric._simulation.run_simulation(
            tmp_path / "split", agents=6, turns=turns, seed=3, config=parse_config(text)
        )
        assert (run.dead_letters, run.sessions_replaced, run.failures) == (0, 0, 0)

    assert whole.dead_letters == 0
    assert _states(tmp_path / "split") == _states(tmp_path / "whole")


def test_a_copy_of_the_journal_reopened_keyed_or_not_is_refused_by_key_not_config(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with cf.Runtime.open(path, key="ops-secret-1") as rt:
        rt.spawn("a")
    other = tmp_path / "copy"
    shutil.copytree(path, other)
    for key, says in [
        (None, "open it with that key"),
        ("ops-secret-2", "written with a different chain key"),
    ]:
        with pytest.raises(cf.JournalKeyError, match=says) as raised:
            cf.Runtime.open(other, key=key)
        assert "ops-secret" not in str(raised.value)
