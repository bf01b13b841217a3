"""The performance figures the docs give agree with the JSON files they cite (no timing here)."""

from __future__ import annotations

import json
import re
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
_DOCS = _ROOT / "docs"
_FIRST_VM = "fc-v669"  # "The machines" lists every other kernel's files; the rest were on this one


def _kernel(document: dict[str, object]) -> str:
    where = document.get("machine") or document.get("environment") or {}
    assert isinstance(where, dict)
    platform = str(where.get("platform") or document.get("platform") or "")
    match = re.search(r"-(fc-v\d+)-", platform)
    assert match is not None, platform
    return match.group(1)


def _named(stem: str, text: str) -> bool:
    """Whether the page names a results file, in full or as a list's ``-commit`` continuation."""
    if stem in text:
        return True
    kind = re.match(r"(bench|peers|lmdb-gil|journal-append|sessions(?:-add)?|fabric(?:-[a-z]+)?)-", stem)
    assert kind is not None, stem
    rest = stem[kind.end() :]
    forms = {f"-{rest}", f"the {rest} file"}
    numbered = re.fullmatch(r"(.+)-(\d)", rest)
    if numbered:
        forms.add(f"-{numbered.group(1)}-1 and -{numbered.group(2)}")
    return any(form in text for form in forms)


def test_the_machines_names_every_file_that_did_not_run_on_the_first_vm() -> None:
    page = (_DOCS / "performance.md").read_text(encoding="utf-8")
    section = page[page.index("## The machines") : page.index("The references moved unevenly")]
    unnamed = [
        f"{path.stem} ({kernel})"
        for path in sorted(_DOCS.glob("*.json"))
        if (kernel := _kernel(json.loads(path.read_text(encoding="utf-8")))) != _FIRST_VM
        and not _named(path.stem, section)
    ]
    assert unnamed == []  # unnamed, a file falls to "every other file", on the first VM


def test_the_readme_sync_rings_switches_and_commits_are_its_runs() -> None:
    readme = (_ROOT / "README.md").read_text(encoding="utf-8")
    command = r"--only ring-batch,ring-sync --repeat 3 --json docs/(fabric-ring-\w+\.json)"
    (name,) = set(re.findall(command, readme))
    rows = json.loads((_DOCS / name).read_text(encoding="utf-8"))["results"]
    (ring,) = [r for r in rows if "sync: acked" in r["workload"]]
    extras = ring["extras"]
    switches = [e["switches_per_delivery"] for e in extras]
    commits = [e["events_per_commit"] for e in extras]
    (row,) = [line for line in readme.splitlines() if line.startswith("| >= 5,000 acknowledged changes/s")]

    assert f"({min(commits):.0f}-{max(commits):.0f} journaled events a commit here)" in row
    assert f"({min(switches):.1f}-{max(switches):.1f} voluntary context switches a delivery)" in row
