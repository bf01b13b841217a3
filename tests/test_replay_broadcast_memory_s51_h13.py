"""``replay --agent`` counts an entry once when a second record takes its id (helper h13, session 51).

The window that drops the fates of broadcasts below the latest ``_IPC_SHOWN`` counted
an entry each time one was made. An id met twice (its copy's fate journaled before the
broadcast itself, or two records of one id behind a damaged id index) was counted twice,
so a broadcast still among the latest shown lost its fates: JSON showed its status as
null and the table raised TypeError. The parent of the window's commit showed
"delivered to 1" for both journals.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import lmdb
from click.testing import CliRunner

from cogfabric.cli import main
from cogfabric.events import AgentSpawned, IpcDelivered, IpcMessage
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path


def _cast(message_id: str) -> IpcMessage:
    return IpcMessage(at=0.0, id=message_id, sender="X", recipient="", topic="t", kind="broadcast")


def _sends(count: int) -> list[IpcMessage]:
    return [IpcMessage(at=0.0, id=f"m{n}", sender="X", recipient="Y", topic="s") for n in range(count)]


def _latest(path: Path, *extra: str) -> tuple[list[dict[str, object]], str]:
    runner = CliRunner()
    as_json = runner.invoke(main, ["replay", str(path), "--agent", "X", "--json", *extra])
    table = runner.invoke(main, ["replay", str(path), "--agent", "X", *extra])
    assert as_json.exit_code == 0, as_json.output
    assert table.exit_code == 0, table.output
    return json.loads(as_json.stdout)["ipc"]["latest"], table.stdout


def test_a_copys_fate_journaled_before_its_broadcast_leaves_the_earlier_ones_fates(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append([AgentSpawned(at=0.0, agent=a) for a in "XY"])
        journal.append([_cast("cast"), IpcDelivered(at=0.0, message_id="cast", recipient="Y")])
        # X's own copy of "own" has its fate journaled first (a journal written by hand)
        journal.append([IpcDelivered(at=0.0, message_id="own", recipient="X"), _cast("own")])
        journal.append(_sends(18))  # 20 entries in all: every one shown

    latest, table = _latest(path)

    assert len(latest) == 20
    assert (latest[0]["id"], latest[0]["status"]) == ("cast", "delivered to 1")
    assert (latest[1]["id"], latest[1]["status"]) == ("own", "delivered to 0")
    assert 'seq 3 broadcast "X" -> * "t": delivered to 1' in table


def test_two_records_of_one_id_behind_a_damaged_index_are_one_entry(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append([AgentSpawned(at=0.0, agent=a) for a in "XY"])
        journal.append([_cast("cast"), IpcDelivered(at=0.0, message_id="cast", recipient="Y")])
        journal.append([IpcMessage(at=0.0, id="dupe", sender="X", recipient="Y", topic="s")])
    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True, db=env.open_db(b"ids")) as txn:
        assert txn.delete(b"dupe")
    env.close()
    with Journal.open(path) as journal:  # the index lost "dupe": a second record takes the id
        journal.append([IpcMessage(at=0.0, id="dupe", sender="X", recipient="Y", topic="s")])
        journal.append(_sends(18))

    latest, table = _latest(path, "--no-verify")

    assert [m["seq"] for m in latest[:2]] == [3, 6]  # the second record of "dupe" is the one shown
    assert (latest[0]["id"], latest[0]["status"]) == ("cast", "delivered to 1")
    assert 'seq 3 broadcast "X" -> * "t": delivered to 1' in table


def test_a_second_record_of_a_broadcasts_id_does_not_lose_its_fates(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append([AgentSpawned(at=0.0, agent=a) for a in "XY"])
        journal.append([_cast("dupe")])
    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True, db=env.open_db(b"ids")) as txn:
        assert txn.delete(b"dupe")
    env.close()
    with Journal.open(path) as journal:
        journal.append([_cast("dupe"), IpcDelivered(at=0.0, message_id="dupe", recipient="Y")])
        journal.append([_cast(f"b{n}") for n in range(19)])

    latest, _ = _latest(path, "--no-verify")

    assert (latest[0]["id"], latest[0]["seq"], latest[0]["status"]) == ("dupe", 4, "delivered to 1")
