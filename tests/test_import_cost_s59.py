"""What a process's start pays for ``import cogfabric``: the version is read on first use.

``importlib.metadata`` (and the email package it brings) and the search for the
installed distribution took about a third of ``import cogfabric``, which every command
and every process of a simulation pays; ``__version__`` now reads it on first use.
"""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

from click.testing import CliRunner

import cogfabric
from cogfabric.cli import main


def _loaded_after(code: str) -> set[str]:
    probe = f"import sys; {code}; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=True,
    )
    return set(done.stdout.split())


def test_importing_cogfabric_or_its_command_line_does_not_read_the_distributions_metadata() -> None:
    assert "importlib.metadata" not in _loaded_after("import cogfabric, cogfabric.events, cogfabric.cli")


def test_the_version_is_the_installed_distributions_and_the_command_line_prints_it() -> None:
    assert cogfabric.__version__ == metadata.version("cogfabric")
    assert "__version__" in dir(cogfabric)
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"cogfabric, version {cogfabric.__version__}\n"


def test_the_version_can_be_imported_by_name() -> None:
    loaded = _loaded_after("from cogfabric import __version__; print(__version__, file=sys.stderr)")
    assert "importlib.metadata" in loaded  # read then, on first use
