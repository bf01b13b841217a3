"""A ``map_size`` above ``max_map_size`` is refused before anything is created.

Before session 51 it was silently lowered to ``max_map_size``: a configuration that asked
for a 4 GiB map under a 1 MiB limit opened a 1 MiB journal and failed its first big
commit. The default map size (1 GiB) above a smaller ``max_map_size`` is still lowered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cogfabric import Config, Runtime
from cogfabric.actors import JournalConfig
from cogfabric.config import InvalidConfigError, parse_config
from cogfabric.store import LmdbJournal

if TYPE_CHECKING:
    from pathlib import Path


def test_journal_open_refuses_a_map_size_above_max_map_size_and_creates_nothing(tmp_path: Path) -> None:
    where = tmp_path / "j"
    with pytest.raises(
        ValueError, match=r"map_size \(2097152 bytes\) is larger than max_map_size \(1048576 bytes\)"
    ):
        LmdbJournal.open(where, map_size=2 << 20, max_map_size=1 << 20)
    assert not where.exists()


def test_journal_open_takes_equal_sizes_and_lowers_the_default_to_a_smaller_limit(tmp_path: Path) -> None:
    with LmdbJournal.open(tmp_path / "a", map_size=1 << 20, max_map_size=1 << 20) as journal:
        assert journal.map_size == 1 << 20
    with LmdbJournal.open(tmp_path / "b", max_map_size=1 << 20) as journal:  # the default 1 GiB is lowered
        assert journal.map_size == 1 << 20


def test_a_config_with_map_size_above_max_map_size_is_refused_naming_its_path(tmp_path: Path) -> None:
    config = Config(journal=JournalConfig(map_size=2 << 20, max_map_size=1 << 20))
    with pytest.raises(InvalidConfigError, match=r"larger than max_map_size .* - at `\$\.journal\.map_size`"):
        config.validated()
    with pytest.raises(InvalidConfigError, match=r"\$\.journal\.map_size"):
        Runtime.open(tmp_path / "j", config=config)
    assert not (tmp_path / "j").exists()
    with pytest.raises(InvalidConfigError, match=r"\$\.journal\.map_size"):
        Config.of({"journal": {"map_size": 3 << 20, "max_map_size": 2 << 20}})
    with pytest.raises(InvalidConfigError, match=r"\$\.journal\.map_size"):
        parse_config("journal:\n  map_size: 4096000\n  max_map_size: 409600\n")


def test_a_config_with_only_one_of_the_two_sizes_or_equal_ones_is_taken() -> None:
    for journal in (
        {"max_map_size": 1 << 20},
        {"map_size": 1 << 40},
        {"map_size": 1 << 20, "max_map_size": 1 << 20},
    ):
        taken = Config.of({"journal": journal}).journal
        assert (taken.map_size, taken.max_map_size) == (journal.get("map_size"), journal.get("max_map_size"))
