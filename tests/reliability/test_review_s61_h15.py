"""Review of the errors that name a container's limits (04323f3): what they said that was not so.

A write that starts at ``ulimit -f`` fails EFBIG, "File too large", which named no limit; a
full disk under a far higher ``ulimit -f`` was blamed on the limit too; the root of a user
namespace (a rootless container's) is bound by ``ulimit -u``, which was left unnamed as
root's; under ``ulimit -v``, glibc's malloc arena of each thread (64 MiB of address space)
takes more than its stack, and was not named; and a stack size was named from ``ulimit -s``
where glibc does not read it. Limits are set in child processes, or ``getrlimit`` is faked.
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import lmdb
import pytest

from cogfabric.actors import AgentCapacityError, RuntimeCapacityError
from cogfabric.store._lmdb import _journal_error
from tests.reliability.test_container_limits_s61_h13 import _ENV, _limited, _run

_GLIBC = bool(os.confstr("CS_GNU_LIBC_VERSION")) if "CS_GNU_LIBC_VERSION" in os.confstr_names else False


def _fake_limits(monkeypatch: pytest.MonkeyPatch, **limits: int) -> None:
    real = resource.getrlimit

    def getrlimit(which: int) -> tuple[int, int]:
        for name, value in limits.items():
            if which == getattr(resource, name):
                return (value, value)
        return real(which)

    monkeypatch.setattr(resource, "getrlimit", getrlimit)


_AT_THE_LIMIT = textwrap.dedent(
    """
    import sys
    from cogfabric.events import PrivateSet
    from cogfabric.store import Journal, JournalError

    with Journal.open(sys.argv[1], map_size=16 << 20) as journal:
        try:
            for n in range(1000):
                event = PrivateSet(at=0.0, id=f"e{n}", cause=None, agent="a", key=f"k{n}", value="x" * 3000)
                journal.append([event])
        except JournalError as exc:
            print(type(exc).__name__, exc)
    """
)


def test_a_write_that_starts_at_a_page_aligned_ulimit_f_names_the_limit(tmp_path: Path) -> None:
    # ulimit -f 400 (KiB): the commit whose first new page starts at the limit is refused
    # whole (EFBIG), not cut short (EIO): "File too large" named no limit
    out = _run(["-c", _AT_THE_LIMIT, str(tmp_path / "j")], _limited(RLIMIT_FSIZE=409_600))

    assert out.returncode == 0, out.stderr
    assert (
        "mdb_txn_commit: File too large (this process may write no file past 409,600 bytes, ulimit -f, "
        in (out.stdout)
    )
    assert "and its data file is 409,600); the append failed, the journal is fail-stop" in out.stdout


def test_a_full_disk_under_a_far_higher_ulimit_f_is_not_blamed_on_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "data.mdb").write_bytes(b"\0" * 8192)
    _fake_limits(monkeypatch, RLIMIT_FSIZE=10**12)

    error = _journal_error(tmp_path, lmdb.Error("mdb_txn_commit: Input/output error"))

    assert "ulimit -f" not in str(error)
    assert "(its file system has " in str(error)
    _fake_limits(monkeypatch, RLIMIT_FSIZE=8192 + (1 << 20))  # a commit's write passed it
    assert "may write no file past 1,056,768 bytes, ulimit -f, and its data file is 8,192;" in str(
        _journal_error(tmp_path, lmdb.Error("mdb_txn_commit: Input/output error"))
    )


def test_a_file_too_large_without_a_limit_names_the_file_system(tmp_path: Path) -> None:
    (tmp_path / "data.mdb").write_bytes(b"\0" * 4096)
    if resource.getrlimit(resource.RLIMIT_FSIZE)[0] != resource.RLIM_INFINITY:
        pytest.skip("this process has a ulimit -f")

    error = _journal_error(tmp_path, lmdb.Error("mdb_txn_commit: File too large"))

    assert str(error).endswith(
        "File too large (its data file is 4,096 bytes, more than its file system allows one file)"
    )


_ROOTLESS = textwrap.dedent(
    """
    import ctypes, os, resource, sys, threading
    from cogfabric.actors import AgentCapacityError

    r, w = os.pipe()
    r2, w2 = os.pipe()
    pid = os.fork()
    if pid == 0:  # nobody, as root of a user namespace of its own: a rootless container's root
        os.setgid(65534)
        os.setuid(65534)
        if ctypes.CDLL(None, use_errno=True).unshare(0x10000000):  # CLONE_NEWUSER
            print("no user namespace", flush=True)
            os._exit(0)
        os.write(w, b"x")
        os.read(r2, 1)
        resource.setrlimit(resource.RLIMIT_NPROC, (8, 8))
        stop = threading.Event()
        try:
            for _ in range(40):
                threading.Thread(target=stop.wait, daemon=True).start()
        except RuntimeError:
            print("uid", os.getuid(), AgentCapacityError("x", threading.active_count()), flush=True)
        stop.set()
        os._exit(0)
    if os.read(r, 1):
        for name, line in (("setgroups", "deny"), ("uid_map", "0 65534 1"), ("gid_map", "0 65534 1")):
            with open(f"/proc/{pid}/{name}", "w", encoding="ascii") as f:
                f.write(line)
        os.write(w2, b"x")
    os.waitpid(pid, 0)
    """
)


def test_the_root_of_a_user_namespace_is_told_its_ulimit_u() -> None:
    # Linux exempts the host's root from ulimit -u, not a user namespace's: a thread the
    # limit refused there named neither it nor anything else of this process
    if os.geteuid() != 0 or not hasattr(ctypes.CDLL(None), "unshare"):
        pytest.skip("needs root, to run a child as root of a user namespace mapped to nobody")

    out = _run(["-c", _ROOTLESS], None)

    assert out.returncode == 0, out.stderr
    if out.stdout.startswith("no user namespace"):
        pytest.skip("user namespaces are not available here")
    assert out.stdout.startswith("uid 0 agentfabric: cannot start a thread"), out.stdout
    assert "; this process's limits: ulimit -u is 8 (threads and processes of its user" in out.stdout


_SPAWNED = textwrap.dedent(
    """
    import sys
    from cogfabric.actors import AgentCapacityError, Config, JournalConfig, Runtime

    with Runtime.open(sys.argv[1], config=Config(journal=JournalConfig(map_size=16 << 20))) as rt:
        try:
            refs = [rt.spawn(f"a{k}") for k in range(20)]
            for ref in refs:
                ref.set_private("k", "v")
            rt.flush()
            print("spawned", len(refs))
        except AgentCapacityError as exc:
            print(type(exc).__name__, exc)
    """
)


@pytest.mark.skipif(not _GLIBC, reason="glibc's malloc arenas")
def test_the_malloc_arenas_an_address_space_limit_runs_out_on_are_named_and_bounded(tmp_path: Path) -> None:
    # 16 MiB of map and 23 stacks of 8 MiB fit in 400 MB; each thread's arena (64 MiB of
    # address space, up to eight per core) does not, which the message did not name
    limit = _limited(RLIMIT_AS=400_000_000, RLIMIT_STACK=8 << 20)
    refused = _run(["-c", _SPAWNED, str(tmp_path / "a")], limit)
    bounded = subprocess.run(
        [sys.executable, "-c", _SPAWNED, str(tmp_path / "b")],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        preexec_fn=limit,
        env={**_ENV, "MALLOC_ARENA_MAX": "2"},
        check=False,
    )

    assert refused.stdout.startswith("AgentCapacityError"), (refused.stdout, refused.stderr)
    assert (
        "which each thread's stack (8,388,608 bytes), glibc's malloc arena of each thread (64 MiB each"
        in (refused.stdout)
    )
    assert "set MALLOC_ARENA_MAX=2, or raise it" in refused.stdout
    assert bounded.stdout == "spawned 20\n", (bounded.stdout, bounded.stderr)


def test_a_stack_size_is_named_only_where_glibc_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # musl (Alpine's) and macOS give a thread a stack of their own, whatever ulimit -s is
    _fake_limits(monkeypatch, RLIMIT_AS=1 << 30, RLIMIT_STACK=8 << 20)

    def no_glibc(name: str) -> str:
        raise ValueError(name)

    monkeypatch.setattr(os, "confstr", no_glibc)

    message = str(RuntimeCapacityError("journal writer", 3, "r"))

    assert "which each thread's stack, and each open journal's map" in message
    assert "arena" not in message


def test_a_limit_that_cannot_be_read_leaves_the_capacity_error_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    # read inside the error's constructor: an error there replaced the capacity error
    def unreadable(which: int) -> tuple[int, int]:
        raise OSError(which)

    monkeypatch.setattr(resource, "getrlimit", unreadable)

    assert str(AgentCapacityError("a", 3)).endswith("or run fewer agents in one process)")


def test_ulimit_u_is_named_below_linuxs_default_for_a_user_not_root(monkeypatch: pytest.MonkeyPatch) -> None:
    threads_max = Path("/proc/sys/kernel/threads-max")
    if not threads_max.exists():
        pytest.skip("Linux's default ulimit -u is half of kernel.threads-max")
    default = int(threads_max.read_bytes()) // 2
    monkeypatch.setattr(os, "getuid", lambda: 1000)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    _fake_limits(monkeypatch, RLIMIT_NPROC=default)

    assert "ulimit -u" not in str(AgentCapacityError("a", 3)).partition("; this process")[2]
    _fake_limits(monkeypatch, RLIMIT_NPROC=default - 1)
    assert f"; this process's limits: ulimit -u is {default - 1:,} (threads" in str(
        AgentCapacityError("a", 3)
    )
    monkeypatch.setattr(os, "getuid", lambda: 0)  # the host's root: exempt
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    exempt = Path("/proc/self/uid_map").read_bytes().split()[:2] == [b"0", b"0"]
    assert ("limits: ulimit -u" in str(AgentCapacityError("a", 3))) is not exempt
