"""The audit views and the simulation at their edges: what a mutation test found no test held."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from click.testing import CliRunner

import cogfabric._simulation
from cogfabric import Config, JournalConfig, Runtime
from cogfabric.cli import main
from cogfabric.events import AgentSpawned, IpcMessage, PrivateSet
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path


def test_replay_counts_every_message_and_shows_the_latest_twenty_in_order(tmp_path: Path) -> None:
    # README: `ipc` gives "how many messages it sent or got and the latest 20 in
    # the order they were sent"
    path = tmp_path / "journal"
    with Runtime.open(path) as rt:
        rt.spawn("a", task_id="t")
        rt.spawn("b", task_id="t")
        for i in range(25):
            rt.bus.send("a", "b", f"topic-{i:02d}", {"i": i})

    result = CliRunner().invoke(main, ["replay", str(path), "--agent", "b", "--json"])

    assert result.exit_code == 0, result.output
    ipc = json.loads(result.output)["ipc"]
    assert ipc["messages"] == 25
    assert [m["topic"] for m in ipc["latest"]] == [f"topic-{i:02d}" for i in range(5, 25)]


def test_inspect_gives_the_first_and_the_last_time(tmp_path: Path) -> None:
    # issue 5: inspect shows "first and last time"
    path = tmp_path / "journal"
    with Journal.open(path) as journal:
        journal.append([AgentSpawned(at=1_000.0, agent="a0")])
        journal.append([PrivateSet(at=2_000.0, agent="a0", key="k", value=1)])
        journal.append([PrivateSet(at=3_000.25, agent="a0", key="k", value=2)])

    result = CliRunner().invoke(main, ["inspect", str(path), "--json"])

    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert (summary["first_time"], summary["last_time"]) == (1_000.0, 3_000.25)
    text = CliRunner().invoke(main, ["inspect", str(path)]).output
    # to the millisecond: a whole simulation's records fall within one second
    assert "time      1970-01-01T00:16:40.000+00:00 .. 1970-01-01T00:50:00.250+00:00" in text


def test_verify_counts_only_the_agents_that_have_a_snapshot(tmp_path: Path) -> None:
    # README: "`verify` compares no snapshot here ... 0 snapshots agree": the count is of
    # snapshots compared, not of agents
    path = tmp_path / "journal"
    config = Config(journal=JournalConfig(snapshot_interval=5))
    with Runtime.open(path, config=config) as rt:
        busy = rt.spawn("busy", task_id="t")
        rt.spawn("quiet", task_id="t")
        rt.spawn("idle", task_id="t")
        for i in range(12):
            busy.set_private("step", i)

    result = CliRunner().invoke(main, ["verify", str(path)])

    assert result.exit_code == 0, result.output
    assert "; 1 snapshot agrees with its events" in result.output


def test_another_seed_gives_the_researchers_other_hypotheses(tmp_path: Path) -> None:
    # `--seed`: "Seed of the scripted model": a researcher's own answers follow it,
    # not only which reviews it asks for
    def first_claims(seed: int) -> dict[str, str]:
        where = tmp_path / f"seed-{seed}"
        cogfabric._simulation.run_simulation(where, agents=6, turns=5, seed=seed)
        claims: dict[str, str] = {}
        with Journal.open(where, readonly=True) as journal:
            for record in journal.read():
                event = record.event
                if isinstance(event, PrivateSet) and event.key == "hypothesis":
                    claims.setdefault(event.agent, event.value["claim"])
        return claims

    seven, eight = first_claims(7), first_claims(8)

    assert sorted(seven) == sorted(eight) == [f"researcher-{i:03d}" for i in range(5)]
    assert all(seven[a] != eight[a] for a in seven)


def test_inspect_counts_records_per_kind_of_stream_and_lists_types_by_count_and_streams_by_name(
    tmp_path: Path,
) -> None:
    # README's inspect: "types     PrivateSet 2,092, IpcDelivered 1,842, ..." (most first),
    # "streams   agent 2,693, bus 2,202, ..." (records of each kind of stream, not streams),
    # then each stream by name
    path = tmp_path / "journal"
    with Journal.open(path) as journal:
        journal.append([AgentSpawned(at=1.0, agent="b"), AgentSpawned(at=1.0, agent="a")])
        journal.append([PrivateSet(at=2.0, agent="b", key="k", value=i) for i in range(3)])
        journal.append([IpcMessage(at=3.0, sender="b", recipient="a", topic="t")])

    result = CliRunner().invoke(main, ["inspect", str(path)])

    assert result.exit_code == 0, result.output
    assert "types     PrivateSet 3, AgentSpawned 2, IpcMessage 1\n" in result.output
    assert "streams   agent 5, bus 1\n" in result.output
    assert result.output.endswith("  1  agent/a\n  4  agent/b\n  1  bus\n")


def test_export_shows_null_for_no_layer_and_each_records_version(tmp_path: Path) -> None:
    # README: an event that touches no context layer (lifecycle, sessions) has a null `layer`;
    # "`version` and `data` are the event as read" (an IpcSubscribed is at version 2)
    path = tmp_path / "journal"
    with Runtime.open(path) as rt:
        rt.spawn("a", task_id="t")
        rt.bus.subscribe("a", "news")
        rt.suspend("a")

    result = CliRunner().invoke(
        main, ["export", str(path), "--type", "LifecycleChanged", "--type", "IpcSubscribed"]
    )

    assert result.exit_code == 0, result.output
    shown = {line["type"]: line for line in map(json.loads, result.output.splitlines())}
    assert (shown["LifecycleChanged"]["layer"], shown["LifecycleChanged"]["version"]) == (None, 1)
    assert (shown["IpcSubscribed"]["layer"], shown["IpcSubscribed"]["version"]) == ("IPC", 2)
