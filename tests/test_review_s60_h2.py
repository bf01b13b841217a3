"""Review of session 59's unreviewed commits (helper h2): the journal's close and the lazy version.

Each test failed on the code reviewed (05620e7) and passes with the fix beside it:

- ``LmdbJournal.close()`` marked the journal released before closing its environment: a
  Ctrl-C pressed during a plain ``close()``'s final sync (raised as the sync returns) left
  the environment open, and a second ``close()`` returned at once, so the path could not
  be opened again in this process.
- ``cogfabric.__version__`` was None (``--version`` printed "version None") for a
  distribution whose metadata names no version.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric
from cogfabric.store import Journal
from tests.test_interrupt_hold_s58_h1 import (  # autouse: Python's own SIGINT handler, then as found
    _sigint_as_found as _sigint_as_found,  # noqa: PLC0414
)

if TYPE_CHECKING:
    from pathlib import Path


class _CtrlCInSync:
    """An LMDB environment whose first ``sync`` gets a real SIGINT while it runs (raised as it returns)."""

    def __init__(self, env: Any) -> None:
        self._env = env
        self.syncs = 0

    def sync(self, force: bool) -> None:
        self._env.sync(force)
        self.syncs += 1
        if self.syncs == 1:
            signal.raise_signal(signal.SIGINT)  # Python's handler runs here: KeyboardInterrupt

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("sync", [True, False])
def test_a_ctrl_c_during_a_plain_close_is_finished_by_the_next_close(tmp_path: Path, sync: bool) -> None:
    path = tmp_path / "j"
    journal: Any = Journal.open(path, sync=sync)
    journal._env = env = _CtrlCInSync(journal._env)
    with pytest.raises(KeyboardInterrupt):
        journal.close()
    assert journal.closed
    journal.close()  # finishes it: the environment is closed, the path free
    assert env.syncs == 2  # synced again, the first sync's end not known
    Journal.open(path).close()  # was: "already open in this process"


def test_a_distribution_that_names_no_version_reads_as_unknown(tmp_path: Path) -> None:
    (tmp_path / "cogfabric-9.9.dist-info").mkdir()  # no METADATA: importlib.metadata says None
    src = os.path.dirname(os.path.dirname(str(cogfabric.__file__)))  # noqa: PTH120 - the package's parent
    probe = "import cogfabric; print(repr(cogfabric.__version__))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), src])}
    shown = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=True,
        env=env,
    )
    assert shown.stdout.strip() == "'0+unknown'"
