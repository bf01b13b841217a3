"""A run in a container with tight limits: a typed error naming the limit hit, nothing acknowledged lost.

Each limit is set in a child process (``resource.setrlimit`` in ``preexec_fn``, or in
the child's own code), never on the test's process. What the reliability suite had
already: a full disk by ``RLIMIT_FSIZE`` with the error's free space (which then said a
file system with gigabytes free was the cause), a full tmpfs (test_disk_full.py), and a
thread that does not start, simulated (tests/actors/test_thread_capacity.py). What is
new: ``cogfabric simulate`` under ``ulimit -f`` and ``ulimit -v``, a map that cannot grow
within ``ulimit -v``, threads that a real ``ulimit -v`` or ``ulimit -u`` refuses, and a
journal that verifies after each.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest

from cogfabric.actors import AgentCapacityError, RuntimeCapacityError
from cogfabric.events import AgentSpawned, PrivateSet
from cogfabric.store import Journal

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def _limited(**limits: int) -> Callable[[], None]:
    def set_them() -> None:
        for name, value in limits.items():
            resource.setrlimit(getattr(resource, name), (value, value))

    return set_them


def _run(args: list[str], limits: Callable[[], None] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        preexec_fn=limits,
        env=_ENV,
        check=False,
    )


def _verify(path: Path) -> str:
    out = _run(["-m", "cogfabric", "verify", str(path)])
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_simulate_past_a_file_size_limit_names_the_limit_and_the_journal_verifies(tmp_path: Path) -> None:
    # Python ignores SIGXFSZ, so the write past ulimit -f fails (EFBIG), which LMDB reports
    # as EIO: the message said only that the file system had gigabytes free
    path = tmp_path / "j"
    simulate = ["-m", "cogfabric", "simulate", "--agents", "20", "--turns", "400", "--journal", str(path)]

    out = _run(simulate, _limited(RLIMIT_FSIZE=400_000))

    assert out.returncode == 1, out.stderr
    assert "this process may write no file past 400,000 bytes, ulimit -f, and its data file is" in out.stderr
    assert "fail-stop" in out.stderr
    assert _verify(path).startswith("ok: ")
    again = _run([*simulate[:6], "2", *simulate[7:]])  # without the limit, the run continues
    assert again.returncode == 0, again.stderr


def test_simulate_under_an_address_space_limit_below_its_map_names_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "j"

    out = _run(
        ["-m", "cogfabric", "simulate", "--agents", "2", "--turns", "1", "--journal", str(path)],
        _limited(RLIMIT_AS=600_000_000),  # the default map is 1 GiB
    )

    assert out.returncode == 2, out.stderr
    assert "Cannot allocate memory (its map size may be more than this process can map: ulimit -v limits" in (
        out.stderr
    )
    assert "600,000,000 bytes" in out.stderr


_STARVED = textwrap.dedent(
    """
    import sys, threading
    from cogfabric.actors import Config, JournalConfig, Runtime
    from cogfabric.actors import AgentCapacityError, RuntimeCapacityError

    threading.stack_size(256 << 20)  # four threads' stacks take 1 GiB of the address space
    config = Config(journal=JournalConfig(map_size=16 << 20))
    try:
        with Runtime.open(sys.argv[1], config=config) as rt:
            rt.spawn("first")
            rt.spawn_many([{"agent_id": f"n{k}"} for k in range(20)])
    except (AgentCapacityError, RuntimeCapacityError) as exc:
        print(type(exc).__name__, exc)
    """
)


def test_a_thread_an_address_space_limit_refuses_names_that_limit(tmp_path: Path) -> None:
    # Python's "can't start new thread" says no why: the message named vm.max_map_count and
    # ulimit -u only, where the address space (each stack 8 MiB by default) was the bound
    path = tmp_path / "j"

    out = _run(["-c", _STARVED, str(path)], _limited(RLIMIT_AS=1_600_000_000))

    assert out.returncode == 0, out.stderr
    kind, _, message = out.stdout.partition(" ")
    assert kind in {AgentCapacityError.__name__, RuntimeCapacityError.__name__}, out.stdout
    assert "; this process's limits: ulimit -v is 1,600,000,000 bytes of address space" in message
    assert "thread's stack (268,435,456 bytes)" in message
    assert _verify(path).startswith("ok: ")
    with Journal.open(path, readonly=True) as journal:  # a spawn_many refused journals none of it
        spawned = [r.event.agent for r in journal.read() if isinstance(r.event, AgentSpawned)]
    assert spawned == (["first"] if kind == AgentCapacityError.__name__ else [])


_GROWN = textwrap.dedent(
    """
    import sys
    from cogfabric.events import PrivateSet
    from cogfabric.store import Journal, JournalError

    acked, value = 0, "x" * 100_000
    with Journal.open(sys.argv[1], map_size=32 << 20, max_map_size=8 << 30) as journal:
        try:
            for n in range(100_000):
                event = PrivateSet(at=0.0, id=f"e{n}", cause=None, agent="a", key=f"k{n}", value=value)
                journal.append([event])
                acked = n + 1
        except JournalError as exc:
            print("error", type(exc).__name__, exc)
        try:
            journal.append([PrivateSet(at=0.0, id="after", cause=None, agent="a", key="after", value=1)])
            print("after-succeeded")
        except JournalError as exc:
            print("after", type(exc).__name__)
    print("acked", acked)
    """
)


@pytest.mark.slow
def test_a_map_that_cannot_grow_within_the_address_space_fails_stop_and_keeps_every_acknowledged_append(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j"

    out = _run(["-c", _GROWN, str(path)], _limited(RLIMIT_AS=250_000_000))

    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    acked = int(lines[-1].split()[1])
    assert acked > 0
    assert lines[0].startswith("error JournalUnavailableError "), lines
    assert "mdb_env_set_mapsize: Cannot allocate memory" in lines[0]
    assert "ulimit -v limits its address space to 250,000,000 bytes" in lines[0]
    assert "fail-stop" in lines[0]
    assert lines[1].startswith("after Journal"), lines  # fail-stop
    assert _verify(path).startswith(f"ok: {acked} records verified")
    with Journal.open(path, readonly=True) as journal:
        keys = [r.event.key for r in journal.read() if isinstance(r.event, PrivateSet)]
    assert keys == [f"k{n}" for n in range(acked)]


_AS_NOBODY = textwrap.dedent(
    """
    import os, resource, sys
    from cogfabric.actors import AgentCapacityError, Runtime

    with Runtime.open(sys.argv[1]) as rt:  # as root, whom ulimit -u does not bound
        rt.spawn("first")
        resource.setrlimit(resource.RLIMIT_NPROC, (12, 12))
        os.setgid(65534)
        os.setuid(65534)  # every thread of the process: its threads now count against nobody's 12
        try:
            rt.spawn_many([{"agent_id": f"n{k}"} for k in range(40)])
        except AgentCapacityError as exc:
            print(type(exc).__name__, exc)
        rt.spawn("last")
    """
)


@pytest.mark.slow
def test_a_spawn_past_ulimit_u_names_it_and_journals_nothing_of_the_spawn(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root, to run the child as another user (root is not bound by ulimit -u)")
    path = tmp_path / "j"

    out = _run(["-c", _AS_NOBODY, str(path)])

    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("AgentCapacityError agentfabric: cannot start a thread for agent 'n"), (
        out.stdout
    )
    assert "; this process's limits: ulimit -u is 12 (threads and processes of its user" in out.stdout
    assert _verify(path).startswith("ok: ")
    with Journal.open(path, readonly=True) as journal:
        spawned = [r.event.agent for r in journal.read() if isinstance(r.event, AgentSpawned)]
    assert spawned == ["first", "last"]
