"""The original's names the spec's own tests use (spec §2.1 ``Agent.State``/``SpawnedAt``, §5.5).

``TestSpawnEstablishesProvenanceNotHierarchy``, ``TestParentDeathChildSurvives``,
``TestLifecycleSuspendResumeRetireKill`` and ``TestRecoverRevivesSuspendedAgent`` read
an agent's ``State``; ``TestDefaultMemoryConfig_HasCleanOptions`` reads ``CleanOptions``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cogfabric import (
    AgentNotFoundError,
    AgentState,
    CognitiveState,
    FakeClock,
    Runtime,
    default_memory_config,
)

if TYPE_CHECKING:
    from pathlib import Path


def test_an_agents_state_is_its_lifecycle_by_the_originals_name(tmp_path: Path) -> None:
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        parent = rt.spawn("parent")
        child = rt.spawn("child", parent="parent")
        states = [parent.state, child.state]
        rt.suspend("child")
        states.append(child.state)
        rt.recover("child", CognitiveState(context="c"))
        states.append(child.state)
        rt.retire("child")
        states.append(rt.agent("child").state)
        assert states == ["IDLE", AgentState.IDLE, AgentState.SUSPENDED, AgentState.IDLE, AgentState.RETIRED]
        rt.kill("parent")
        with pytest.raises(AgentNotFoundError):
            _ = parent.state


def test_an_agent_knows_when_it_was_spawned_also_after_a_reopen(tmp_path: Path) -> None:
    clock = FakeClock(start=1_700_000_000.0)
    with Runtime.open(tmp_path / "j", clock=clock) as rt:
        first = rt.spawn("first")
        clock.advance(5)
        second = rt.spawn("second")
        assert (first.spawned_at, second.spawned_at) == (1_700_000_000.0, 1_700_000_005.0)
    clock.advance(100)
    with Runtime.open(tmp_path / "j", clock=clock) as rt:
        assert rt.agent("second").spawned_at == 1_700_000_005.0


def test_the_default_memory_config_has_its_clean_options_by_the_originals_name() -> None:
    config = default_memory_config()
    assert config.clean_options is config.clean
    assert config.clean_options.max_user_len == 200
