"""bench/fabric.py's ``round-read`` workload: every agent's reads after a round, side by side."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.test_bench_scripts import _run

if TYPE_CHECKING:
    from pathlib import Path


def test_round_read_times_the_handle_loop_and_the_bulk_reads_of_each_runtime_side_by_side(
    tmp_path: Path,
) -> None:
    options = "--only round-read --round-read-agents 6 --round-read-passes 2 --repeat 2 --timeout 120"
    _, results = _run("fabric.py", options, tmp_path)

    rows = {row["workload"]: row for row in results}
    reads = {
        "handle_views": "runtime.agent(a).context_view() each",
        "context_views": "runtime.context_views()",
        "handle_states": "runtime.agent(a).cognitive_state() each",
        "cognitive_states": "runtime.cognitive_states()",
        "handle_private": "runtime.agent(a).private(key) each",
    }
    for kind in ("memory-only", "batch"):
        base = f"round read, 6 idle agents, {kind}"
        labels = [f"{base}: {label}" for label in reads.values()]
        assert [w for w in rows if w.startswith(base)] == labels
        for name, workload in zip(reads, labels, strict=True):
            row = rows[workload]
            assert (row["count"], row["unit"]) == (12, "reads")  # 6 agents x 2 passes
            assert len(row["runs"]) == len(row["extras"]) == 2
            # each row's time is its own read's, from the run's figures
            assert row["runs"] == [extra[f"{name}_seconds"] for extra in row["extras"]]
            assert row["rate"] > 0
        for bulk, loop in (("context_views", "handle_views"), ("cognitive_states", "handle_states")):
            row = rows[f"{base}: {reads[bulk]}"]
            assert row["reference"] == f"{base}: {reads[loop]}"
            assert row["ratio"] == pytest.approx(row["rate"] / rows[row["reference"]]["rate"])
