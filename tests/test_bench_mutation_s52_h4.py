"""Pins from a mutation test of _bench.py (session 52, helper h4): each kills a mutant the tests let live.

``filesystem_of`` with a mount point mounted over (the later mount is the one seen),
``--json`` naming a file that exists but cannot be written (refused before measuring),
and the memory figures of /proc/self/status read in bytes (the kernel writes kB).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import cogfabric._bench
from cogfabric._bench import _status_bytes, filesystem_of, unwritable
from cogfabric.cli import main
from tests.test_session47_mutation_pins_2 import _FakeMounts


def test_a_mount_point_mounted_over_is_the_last_filesystems(monkeypatch: pytest.MonkeyPatch) -> None:
    # Mutant: the first of two mounts on one point won; /proc/mounts lists them in the
    # order they were mounted, and the last hides the others (a tmpfs over a disk's /tmp)
    mounts = (
        "rootfs / ext4 rw 0 0\n"
        "/dev/sdb1 /cogfabric-none/tmp xfs rw 0 0\n"
        "tmpfs /cogfabric-none/tmp tmpfs rw 0 0\n"
    )
    monkeypatch.setattr(cogfabric._bench, "Path", _FakeMounts(mounts))

    assert filesystem_of("/cogfabric-none/tmp/j") == "tmpfs"


def _no_write_access(monkeypatch: pytest.MonkeyPatch, target: Path) -> None:
    """``os.access`` says ``target`` cannot be written (a chmod alone is no test as root)."""
    real = os.access

    def access(path: Any, mode: int, *args: Any, **kwargs: Any) -> bool:
        if Path(path) == target and mode & os.W_OK:
            return False
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)


def test_a_results_file_that_exists_but_cannot_be_written_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Mutant: an existing file was taken as writable whatever its permissions
    target = tmp_path / "bench.json"
    target.write_text("kept", encoding="utf-8")
    _no_write_access(monkeypatch, target)

    assert unwritable(target) == "cannot be written"
    assert unwritable(tmp_path / "other.json") is None
    assert target.read_text(encoding="utf-8") == "kept"


def test_bench_refuses_such_a_file_before_measuring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "bench.json"
    target.write_text("kept", encoding="utf-8")
    _no_write_access(monkeypatch, target)

    def measured(*_: object, **__: object) -> Any:
        pytest.fail("bench measured before refusing its --json")

    monkeypatch.setattr(cogfabric._bench, "run_bench", measured)
    result = CliRunner().invoke(main, ["bench", "--quick", "--json", str(target)])

    assert result.exit_code == 2
    assert f"{target} cannot be written; name a file you can write" in result.output
    assert target.read_text(encoding="utf-8") == "kept"


@pytest.mark.skipif(not Path("/proc/self/statm").is_file(), reason="needs Linux's /proc")
def test_the_memory_figures_are_in_bytes() -> None:
    # Mutant: /proc/self/status's kB taken as bytes, so peak_rss_growth_bytes 1024 times
    # too small; statm counts the same resident memory in pages
    pages = int(Path("/proc/self/statm").read_text(encoding="ascii").split()[1])
    resident = pages * os.sysconf("SC_PAGE_SIZE")

    assert resident / 2 < _status_bytes("VmRSS") < resident * 2
    assert _status_bytes("VmHWM") >= _status_bytes("VmRSS") / 2
    assert _status_bytes("NoSuchField") == 0
