"""What a seed reproduces, and README's check of it (session 56, helper h8, a researcher's rerun).

README, "Reproducing a run": two runs of a seed write the same records (stream, type,
data) but for ids, times, order and chain links, and a continued run the records of one
run of the sum; its `content`/`state` shell functions (jq) show it. On a `FakeClock`, the
times are the same too.
"""

from __future__ import annotations

import collections
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

import cogfabric as cf
from cogfabric._simulation import run_simulation
from cogfabric.cli import main
from cogfabric.store import Journal
from tests.test_simulate_determinism_s52_h5 import _states

_README = Path(__file__).resolve().parents[1] / "README.md"
_ID = re.compile(r"[0-9a-f]{16}-[0-9a-f]{12}")
_SESSION_END = re.compile(r"_[0-9a-f]{16}$")


def _recipe() -> str:
    """The shell block of README's "Reproducing a run"."""
    text = _README.read_text(encoding="utf-8")
    section = text[text.index("\n### Reproducing a run\n") :]
    section = section[: section.index("\n### ", 1)]
    [block] = re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    return str(block)


def _plain(value: Any, drop: frozenset[str]) -> Any:
    """``value`` without the keys ``drop``, its ids and sessions' random ends cut."""
    if isinstance(value, dict):
        return {k: _plain(v, drop) for k, v in value.items() if k not in drop}
    if isinstance(value, list):
        return [_plain(v, drop) for v in value]
    if isinstance(value, str):
        return _SESSION_END.sub("", _ID.sub("ID", value))
    return value


def _content(path: Path, *, times: bool = False) -> collections.Counter[str]:
    """The journal's records as a multiset (stream and event), but for ids, and times unless ``times``."""
    drop = frozenset({"id", "cause"} if times else {"id", "cause", "at", "time"})
    with Journal.open(path, readonly=True) as journal:
        return collections.Counter(
            msgspec.json.encode([_plain(r.stream, drop), _plain(msgspec.to_builtins(r.event), drop)]).decode()
            for r in journal.read()
        )


def _ids(path: Path) -> set[str]:
    with Journal.open(path, readonly=True) as journal:
        return {r.event.id for r in journal.read()}


def test_two_runs_of_a_seed_and_a_continued_one_write_the_same_records_but_for_ids_and_times(
    tmp_path: Path,
) -> None:
    one = run_simulation(tmp_path / "a", agents=6, turns=30, seed=7)
    run_simulation(tmp_path / "b", agents=6, turns=30, seed=7)
    run_simulation(tmp_path / "split", agents=6, turns=18, seed=7)
    run_simulation(tmp_path / "split", agents=6, turns=12, seed=7)
    run_simulation(tmp_path / "other", agents=6, turns=30, seed=8)

    a = _content(tmp_path / "a")

    assert one.dead_letters == one.sessions_replaced == 0
    assert a.total() == one.total_events
    assert _content(tmp_path / "b") == a
    assert _content(tmp_path / "split") == a
    assert _content(tmp_path / "other") != a  # another seed: other answers
    assert not _ids(tmp_path / "a") & _ids(tmp_path / "b")  # no id of one run is the other's
    assert _states(tmp_path / "a") == _states(tmp_path / "b")


class _Peer:
    """A round's note to a peer the round's seed picks, a broadcast every other round."""

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:
        ctx.set_private("handled", (ctx.private("handled") or 0) + 1)
        if message.topic != "round":
            return
        round_no, peers = message.payload["round"], message.payload["peers"]
        peer = peers[(round_no + peers.index(ctx.agent_id) + 1) % len(peers)]
        ctx.send(peer, "note", {"from": ctx.agent_id, "round": round_no})
        ctx.set_cognitive_state(cf.CognitiveState(observation=f"round {round_no}"))
        if round_no % 2 == 0:
            ctx.broadcast("news", {"by": ctx.agent_id})


def _embedded_run(path: Path) -> dict[str, cf.ContextView]:
    clock = cf.FakeClock(start=1000.0)
    peers = ["p0", "p1", "p2"]
    with cf.Runtime.open(
        path, clock=clock, behaviors={"peer": _Peer}, config={"runtime": {"call_timeout": 5.0}}
    ) as rt:
        for peer in peers:
            rt.spawn(peer, behavior="peer")
            rt.bus.subscribe(peer, "news")
        for round_no in range(4):
            clock.advance(1)
            for peer in peers:
                rt.bus.send("driver", peer, "round", {"round": round_no, "peers": peers})
            rt.settle(5)
        return rt.context_views()


def test_two_runs_on_a_fake_clock_write_the_same_records_times_included_but_for_ids(tmp_path: Path) -> None:
    views = _embedded_run(tmp_path / "a")

    assert _embedded_run(tmp_path / "b") == views
    assert _content(tmp_path / "b", times=True) == _content(tmp_path / "a", times=True)
    assert views["p0"].private["handled"] == 4 + 4 + 6  # its rounds, its notes, every news (its own too)


@pytest.mark.skipif(
    shutil.which("jq") is None or shutil.which("bash") is None, reason="the recipe is bash and jq"
)
def test_the_readmes_check_finds_two_runs_of_a_seed_the_same_and_another_seeds_not(tmp_path: Path) -> None:
    run_simulation(tmp_path / "run-c", agents=6, turns=30, seed=8)  # another seed's, beside the block's two
    command = f'cogfabric() {{ {sys.executable!r} -m cogfabric "$@"; }}\nset -eu\n' + _recipe()
    another = (
        'diff a.records <(content run-c) | grep -c "^>" || true\n'
        "wc -l < a.records\n"
        "content no-such-journal > lost.records || echo failed\n"  # the block's pipefail
    )

    out = subprocess.run(
        ["bash", "-c", command + another],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
        cwd=tmp_path,
    )

    assert out.returncode == 0, out.stderr
    said = out.stdout.splitlines()
    assert said[:2] == ["same records", "same state"], out.stdout[:2000]
    differing, records, lost = said[2:]
    assert lost == "failed"
    with Journal.open(tmp_path / "run-a", readonly=True) as journal:
        assert int(records) == journal.last_seq  # every record compared, none lost to the filter
    assert int(differing) > 0


def test_simulates_help_names_what_a_seed_reproduces_and_where_to_read_it() -> None:
    result = CliRunner().invoke(main, ["simulate", "--help"])

    assert result.exit_code == 0
    said = " ".join(result.output.split())
    assert "Two runs of a seed write the same records but for their seqs, order, times and ids" in said
    assert '(README: "Reproducing a run")' in said
    assert "\n### Reproducing a run\n" in _README.read_text(encoding="utf-8")
