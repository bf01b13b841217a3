"""What README's "Performance" and docs/performance.md tell a benchmarker holds for the
bench/ scripts: their JSON records the CPU, a smoke run judges no target, every results
file in docs/ is named where the docs use it, and plot.py's help names what it charts.
(Tiny sizes, nothing timed.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cogfabric._bench import cpu_model
from tests.test_bench_scripts import _bench_module

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def test_the_peers_json_names_the_cpu_as_the_other_scripts_do(tmp_path: Path) -> None:
    # it had only platform.processor(), which is empty on Linux
    peers = _bench_module("peers")
    config = peers.Config(
        single_events=1, batched_events=1, read_checkpoints=1, agents=1, repeat=1, tmp_parent=str(tmp_path)
    )

    environment = peers.environment(config, peers.make_events(4, 1))

    assert environment["cpu_model"] == cpu_model()
    assert environment["tmp_parent"] == str(tmp_path)
    assert environment["tmp_filesystem"]


def _batch_ring_targets(fabric: Any, argv: list[str]) -> list[object]:
    settings = fabric.parse_args(argv)[0]
    workloads = fabric.ring_batch_workloads(settings)
    return [row.target for workload in workloads for row in workload.rows if row.target]


@pytest.mark.parametrize("argv", [["--quick"], ["--ring-batch-hops", "40"], ["--ring-batch-agents", "20"]])
def test_a_batch_ring_of_other_sizes_than_the_targets_judges_no_target(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # --quick keeps the 100 agents but runs 40 hops: its table said ">= 0.25x MISSED"
    fabric = _bench_module("fabric")
    monkeypatch.setattr(fabric, "ring_event_mix", lambda *_: [])  # not built: nothing runs

    assert _batch_ring_targets(fabric, argv) == []


def test_the_batch_ring_at_its_default_size_is_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    fabric = _bench_module("fabric")
    monkeypatch.setattr(fabric, "ring_event_mix", lambda *_: [])

    (target,) = _batch_ring_targets(fabric, [])

    assert target.describe() == ">= 0.25x"  # type: ignore[attr-defined]


def test_every_results_file_in_docs_is_named_where_the_docs_use_it() -> None:
    text = "".join(page.read_text(encoding="utf-8") for page in (ROOT / "README.md", DOCS / "performance.md"))
    unnamed = sorted(path.name for path in DOCS.glob("*.json") if path.name not in text)

    assert unnamed == []


def test_plots_help_names_every_script_whose_json_it_charts(capsys: pytest.CaptureFixture[str]) -> None:
    plot = _bench_module("plot")
    with pytest.raises(SystemExit):
        plot.main(["--help"])
    shown = " ".join(capsys.readouterr().out.split())

    for script in ("journal_append.py", "fabric.py", "sessions.py", "audit.py", "peers.py"):
        assert script in shown
