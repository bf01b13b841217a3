"""A full disk (a file-size limit in a child process): typed errors, fail-stop, nothing acknowledged lost."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

from cogfabric.actors import Runtime

if TYPE_CHECKING:
    from pathlib import Path

_CHILD = textwrap.dedent(
    """
    import os, resource, signal, sys
    from cogfabric.actors import Runtime
    from cogfabric.store import JournalError

    path = sys.argv[1]
    with Runtime.open(path) as rt:
        agent = rt.spawn("a")
        rt.flush()
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    size = os.path.getsize(path + "/data.mdb") + 2_000_000
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    with Runtime.open(path) as rt:
        agent = rt.agent("a")
        n = 0
        try:
            while True:
                agent.set_private(f"k{n}", "x" * 50_000)
                print("acked", n, flush=True)
                n += 1
        except JournalError as exc:
            print("error", type(exc).__name__, flush=True)
        try:
            agent.set_private("after", 1)
            print("after-succeeded", flush=True)
        except JournalError as exc:
            print("after", type(exc).__name__, flush=True)
        print("memory", agent.private(f"k{n}") is None, agent.private("after") is None, flush=True)
    """
)


def test_a_full_disk_fails_appends_with_a_typed_error_and_loses_nothing_acknowledged(tmp_path: Path) -> None:
    path = tmp_path / "j"

    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, timeout=120, check=False
    )

    lines = out.stdout.splitlines()
    acked = [int(line.split()[1]) for line in lines if line.startswith("acked")]
    assert out.returncode == 0, out.stderr
    assert acked, out.stdout
    assert any(line.startswith("error Journal") for line in lines), lines[-5:]
    assert any(line.startswith("after Journal") for line in lines), "fail-stop: later appends must fail"
    assert "memory True True" in lines, "the agent must not run ahead of the journal"
    with Runtime.open(path) as rt:
        agent = rt.agent("a")
        assert all(agent.private(f"k{n}") is not None for n in acked)
        assert agent.private(f"k{acked[-1] + 1}") is None
        agent.set_private("again", 1)
        assert agent.private("again") == 1
