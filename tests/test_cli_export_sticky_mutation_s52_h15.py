"""Survivors of helper h15's mutation round on export -o's sticky-directory check (session 52).

Only another user's file in a sticky directory is written in place: one in a directory
without the sticky bit, one root writes, or one in a sticky directory the user owns is
still written beside and renamed over it (whole or not at all), as before.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from cogfabric.cli import _replaceable
from tests.test_cli_export_sticky_s52 import _SOMEONE, _sticky_with_a_file

if TYPE_CHECKING:
    from pathlib import Path

_OTHER = 4243  # the file's owner: neither the auditor nor the directory's


def test_another_users_file_in_a_directory_without_the_sticky_bit_is_renamed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _sticky_with_a_file(tmp_path)
    out.parent.chmod(0o777)  # anyone may rename in it
    monkeypatch.setattr(os, "geteuid", lambda: _SOMEONE)

    assert _replaceable(out)


def test_root_renames_over_another_users_file_in_another_users_sticky_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _sticky_with_a_file(tmp_path)
    if os.geteuid() == 0:
        os.chown(out, _OTHER, -1)
        os.chown(out.parent, _SOMEONE, -1)
    monkeypatch.setattr(os, "geteuid", lambda: 0)  # another user's file for a non-root runner

    assert _replaceable(out)


def test_the_sticky_directorys_owner_renames_over_another_users_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() != 0:
        pytest.skip("changing a file's owner needs root")
    out = _sticky_with_a_file(tmp_path)
    os.chown(out, _OTHER, -1)
    os.chown(out.parent, _SOMEONE, -1)
    monkeypatch.setattr(os, "geteuid", lambda: _SOMEONE)

    assert _replaceable(out)
