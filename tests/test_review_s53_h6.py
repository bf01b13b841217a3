"""README's "The journal's bytes" and "From asyncio", held against the code (review s53 h6).

An export line rebuilt from the section's words alone (its table, its layer names, what
``data`` holds, how ``chain``, ``prev`` and ``record`` are written) must be the line export
writes; each way the chain head can be wrong must give the ``first_bad_seq`` the section
says; the thread pool sizing must be the interpreter's own.
"""

from __future__ import annotations

import base64
import concurrent.futures
import inspect
import json
import re
import shutil
from pathlib import Path

import lmdb
import msgspec
import pytest
from click.testing import CliRunner

from cogfabric.cli import main
from cogfabric.events import LifecycleChanged, PrivateSet, TaskContextSet
from cogfabric.store import Journal

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
RAW_SECTION = README[README.index("### The journal's bytes") : README.index("## What exists today")]
SECTION = " ".join(RAW_SECTION.split())
ASYNCIO = " ".join(README[README.index("### From asyncio") : README.index("## Testing your agents")].split())


def _journal(tmp_path: Path) -> Path:
    path = tmp_path / "journal"
    with Journal.open(path) as journal:
        journal.append([PrivateSet(at=1.5, agent="a1", key="k", value={"i": 1})])
        journal.append([TaskContextSet(at=2.0, agent="a1", context={"goal": "g"})])
        journal.append([LifecycleChanged(at=3.0, agent="a1", state="SUSPENDED", previous="IDLE")])
    return path


def _table() -> dict[str, list[str]]:
    block = re.search(r"```text\n(.*?)```", RAW_SECTION, re.DOTALL)
    assert block is not None
    words = block.group(1).split()
    return {words[i]: words[i + 1 : i + 5] for i in range(0, len(words), 5)}


def test_an_export_line_rebuilt_from_the_readme_is_the_line_export_writes(tmp_path: Path) -> None:
    names = dict(re.findall(r'`([TPI])` (?:is )?`"(\w+)"`', SECTION))
    assert set(names) == {"T", "P", "I"}, "the section names each layer letter's JSON value"
    assert "`data` every field but `type` and `v`" in SECTION
    assert "`chain` and `prev` in hex, `record` the stored bytes in base64" in SECTION
    table = _table()
    result = CliRunner().invoke(main, ["export", str(_journal(tmp_path)), "--verifiable"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) == 3
    for line in lines:
        exported = json.loads(line)
        record = base64.b64decode(exported["record"])
        event = msgspec.msgpack.decode(record[10 : -25 - record[-25] - 3])
        _, _, layer, layers = table[event["type"]]
        built = {
            "seq": int.from_bytes(record[2:10], "big"),
            "time": event["at"],
            "stream": record[-25 - record[-25] : -25].decode(),
            "layer": None if layer == "-" else names[layer],
            "layers": [] if layers == "-" else [names[letter] for letter in layers],
            "type": event["type"],
            "version": event["v"],
            "data": {field: value for field, value in event.items() if field not in ("type", "v")},
            "chain": record[-16:].hex(),
            "prev": exported["prev"],
            "record": base64.b64encode(record).decode(),
        }
        assert msgspec.json.encode(built).decode() == line


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("missing", None),
        ("short", None),
        ("tag", 3),
        ("chain", 3),
        ("behind", 2),
        ("ahead", 4),
    ],
)
def test_a_bad_chain_head_gives_the_first_bad_seq_the_readme_says(
    tmp_path: Path, damage: str, expected: int | None
) -> None:
    for said in (
        "the last seq + 1 for a head past the records",
        "the head's seq + 1 for a head behind the records",
        "the last seq for a head at it whose chain or tag does not match",
        "null for a head missing (or not 40 bytes)",
    ):
        assert said in SECTION
    path = _journal(tmp_path)
    copy = tmp_path / damage
    shutil.copytree(path, copy)
    env = lmdb.open(str(copy), max_dbs=8)
    try:
        with env.begin(write=True) as txn:
            meta = env.open_db(b"meta", txn=txn, create=False)
            head = bytes(txn.get(b"head", db=meta) or b"")
            changed = {
                "missing": None,
                "short": head[:24],
                "tag": head[:24] + bytes(16),
                "chain": head[:8] + bytes(32),
                "behind": (1).to_bytes(8, "big") + head[8:],
                "ahead": (9).to_bytes(8, "big") + head[8:],
            }[damage]
            if changed is None:
                txn.delete(b"head", db=meta)
            else:
                txn.put(b"head", changed, db=meta)
    finally:
        env.close()
    with Journal.open(copy, readonly=True) as journal:
        report = journal.verify()
    assert not report.ok
    assert report.first_bad_seq == expected


def test_the_default_executor_size_is_the_interpreters() -> None:
    source = inspect.getsource(concurrent.futures.ThreadPoolExecutor.__init__)
    found = re.search(r"max_workers = (min\(32, \(os\.\w+\(\) or 1\) \+ 4\))", source)
    assert found is not None
    assert f"`{found.group(1)}`" in ASYNCIO or "`os.process_cpu_count()`" in ASYNCIO
    assert "`min(32, (os.cpu_count() or 1) + 4)`" in ASYNCIO
