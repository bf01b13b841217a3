"""Pins from a second mutation test of session 47's code (helper h10): each kills a mutant the tests let live.

verify-export's re-encoding message (a line missing a field, a key dropped from a
mapping), simulate's refusal of a directory of other files (how many it names, a
name that is not printable), ``filesystem_of`` (a mount point that is a prefix of
another's name, one with a space), ``cpu_model`` (None, not ""), the JSON's
``tmp_parent`` (absolute), ``ctx.last_checkpoint`` of a killed agent and the hint
for a ``bytearray`` config.
"""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

import cogfabric as cf
import cogfabric._bench
from cogfabric import CognitiveState
from cogfabric._bench import _machine, cpu_model, filesystem_of
from cogfabric._export_check import verify_export
from tests.actors.test_agent_mutation_pins import _keeper
from tests.test_cli_bad_input_s47 import _simulate
from tests.test_export_verify_reencoded import _lines, _reencoded


def test_a_line_missing_a_field_export_writes_is_named_not_a_crash(tmp_path: Path) -> None:
    # Mutant: _differing asked _same_numbers of a field the line lacks (a KeyError)
    lines = _lines(tmp_path, "v")
    lines[1] = _reencoded(lines[1], lambda f: f.pop("time"))

    report = verify_export(lines)

    assert not report.ok
    assert report.bad_line == 2
    assert "its 'time' is not what its record holds" in report.reason


def test_a_mapping_with_a_key_dropped_is_a_change_not_a_reencoding(tmp_path: Path) -> None:
    # Mutant: _same_numbers took a line's keys being some of the record's as the same value
    lines = _lines(tmp_path, {"score": 0.0, "x": 1})
    lines[1] = _reencoded(lines[1], lambda f: f["data"]["value"].pop("x"))

    report = verify_export(lines)

    assert not report.ok
    assert "its 'data' is not what its record holds" in report.reason
    assert "re-encoded" not in report.reason


@pytest.mark.parametrize(
    ("names", "shown"),
    [
        (["a.py", "b.py", "c.py"], "(a.py, b.py, c.py) and no journal"),
        (["a.py", "b.py", "c.py", "d.py"], "(a.py, b.py, c.py and 1 more) and no journal"),
    ],
)
def test_simulate_names_three_other_files_and_counts_the_rest(
    tmp_path: Path, names: list[str], shown: str
) -> None:
    # Mutant: "and 0 more" after exactly three files
    project = tmp_path / "project"
    project.mkdir()
    for name in names:
        (project / name).touch()

    output = _simulate(project, expect=2)

    assert f"{project} holds other files {shown}" in output


def test_simulate_quotes_an_other_file_whose_name_is_not_printable(tmp_path: Path) -> None:
    # Mutant: a newline in a file's name was written as it is, breaking the message's line
    project = tmp_path / "project"
    project.mkdir()
    (project / "odd\nname").touch()

    output = _simulate(project, expect=2)

    assert "holds other files ('odd\\nname') and no journal" in output


class _FakeMounts:
    """Stands for ``Path`` in ``cogfabric._bench``: /proc/mounts reads ``text`` (or fails)."""

    def __init__(self, text: str | None) -> None:
        self.text = text

    def __call__(self, where: str) -> _FakeMounts:
        assert where in ("/proc/mounts", "/proc/cpuinfo")
        return self

    def read_text(self, encoding: str | None = None, errors: str | None = None) -> str:  # noqa: ARG002
        assert encoding is not None  # never the locale's (python -X warn_default_encoding)
        if self.text is None:
            raise FileNotFoundError
        return self.text


_MOUNTS = (
    "rootfs / ext4 rw 0 0\n"
    "tmpfs /cogfabric-none/ram tmpfs rw 0 0\n"
    "/dev/sdb1 /cogfabric-none/my\\040disk xfs rw 0 0\n"
)


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/cogfabric-none/ram", "tmpfs"),
        ("/cogfabric-none/ram/j", "tmpfs"),
        ("/cogfabric-none/ramdisk/j", "ext4"),  # /cogfabric-none/ram's name is no parent of it
        ("/cogfabric-none/my disk/j", "xfs"),  # /proc/mounts writes a space as \040
        ("/cogfabric-none/my/j", "ext4"),
    ],
)
def test_filesystem_of_is_that_of_the_mount_point_holding_the_path(
    monkeypatch: pytest.MonkeyPatch, path: str, kind: str
) -> None:
    # Mutants: a mount point matched any path its name begins (/x/ram for /x/ramdisk);
    # a mount point's \040 was not read as a space
    monkeypatch.setattr(cogfabric._bench, "Path", _FakeMounts(_MOUNTS))

    assert filesystem_of(path) == kind


def test_cpu_model_is_none_when_nothing_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # Mutant: "" (platform.processor()'s nothing) where the docstring says None
    monkeypatch.setattr(cogfabric._bench, "Path", _FakeMounts(None))
    monkeypatch.setattr(platform, "processor", lambda: "")

    assert cpu_model() is None


def test_the_json_names_the_journals_directory_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Mutant: --dir . was written as "." in the JSON, which names no directory once read elsewhere
    monkeypatch.chdir(tmp_path)
    machine = _machine(Path())

    assert machine["tmp_parent"] == str(tmp_path.resolve())


def test_a_kept_ctx_of_a_killed_agent_looks_up_no_checkpoint(tmp_path: Path) -> None:
    # "AgentNotFoundError: the agent was killed." Mutant: it read the killed agent's checkpoint
    kept: list[cf.AgentContext] = []
    with cf.Runtime.open(tmp_path / "j", behaviors={"keep": _keeper(kept)}) as rt:
        rt.spawn("a", behavior="keep")
        rt.agent("a").set_cognitive_state(CognitiveState(decision="d"))
        rt.agent("a").checkpoint_cognitive()
        assert rt.bus.request("driver", "a", "t", None, 30).payload == "kept"
        last = kept[0].last_checkpoint()
        assert last is not None
        assert last.decision == "d"

        rt.kill("a")

        with pytest.raises(cf.AgentNotFoundError):
            kept[0].last_checkpoint()


def test_a_bytearray_given_as_config_says_where_yaml_text_goes() -> None:
    # Mutant: only bytes were told of parse_config
    with pytest.raises(
        cf.InvalidConfigError,
        match=r"got bytearray \(YAML text\? read it with cogfabric\.config\.parse_config",
    ):
        cf.Runtime.open(None, config=bytearray(b"journal: {}"))  # type: ignore[arg-type]
