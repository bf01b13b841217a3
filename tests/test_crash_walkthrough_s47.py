"""A crash-minded user's walkthrough (session 47): checkpoints, SIGTERM and a cut data file."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import cogfabric as cf
from cogfabric.actors import AgentContext

_README = Path(__file__).resolve().parent.parent / "README.md"

_CHILD = """
import sys
import threading
import cogfabric as cf
{handler}
done = threading.Event()

class Checkpointer:
    def on_message(self, ctx, message):
        ctx.set_cognitive_state(cf.CognitiveState(decision=message.payload))
        ctx.checkpoint_cognitive()
        if message.topic == "flushed":
            ctx.flush()
        done.set()

batch = {{"journal": {{"durability": "batch"}}}}
rt = cf.Runtime.open(sys.argv[1], behaviors={{"c": Checkpointer}}, config=batch)
rt.spawn("a", behavior="c")
rt.flush()
rt.bus.send("x", "a", sys.argv[2], sys.argv[2])
assert done.wait(60)
print("READY", flush=True)
sys.stdin.readline()
"""


def _run_until_ready(path: Path, topic: str, handler: str = "") -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD.format(handler=handler), str(path), topic],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    assert child.stdout is not None
    assert child.stdout.readline() == "READY\n"  # the checkpoint returned
    return child


def _last_checkpoint(path: Path) -> object:
    with cf.Runtime.open(path) as rt:
        checkpoint = rt.last_checkpoint("a")
    return None if checkpoint is None else checkpoint.decision


def test_checkpoint_docstrings_say_how_a_batch_checkpoint_survives_a_crash(tmp_path: Path) -> None:
    for doc in (AgentContext.checkpoint_cognitive.__doc__, cf.Agent.checkpoint_cognitive.__doc__):
        assert doc is not None
        assert "batch" in doc
        assert "flush()" in doc
    # what they say: a checkpoint flushed before the kill survives it
    child = _run_until_ready(tmp_path / "j", "flushed")
    child.kill()
    child.communicate(timeout=60)
    assert _last_checkpoint(tmp_path / "j") == "flushed"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_readmes_sigterm_handler_lets_the_exit_close_flush_a_batch_runtime(tmp_path: Path) -> None:
    (handler,) = re.findall(
        r"`(signal\.signal\(signal\.SIGTERM, [^`]+)`", _README.read_text(encoding="utf-8")
    )
    child = _run_until_ready(tmp_path / "j", "unflushed", f"import signal\n{handler}")
    child.send_signal(signal.SIGTERM)
    child.communicate(timeout=60)
    assert child.returncode == 143
    assert _last_checkpoint(tmp_path / "j") == "unflushed"


def test_a_data_file_cut_to_its_header_pages_is_refused_with_a_readable_reason(tmp_path: Path) -> None:
    with cf.Runtime.open(tmp_path / "j") as rt:
        for i in range(50):
            rt.spawn(f"a{i}").set_private("k", "x" * 200)
    cut = tmp_path / "cut"
    cut.mkdir(mode=0o700)
    shutil.copyfile(tmp_path / "j" / "data.mdb", cut / "data.mdb")
    with (cut / "data.mdb").open("r+b") as f:
        f.truncate(2 * 4096)
    with pytest.raises(cf.JournalDamagedError) as caught:
        cf.Runtime.open(cut)
    assert "from 2 to 1" not in str(caught.value)
    assert "holds only its two header pages" in str(caught.value)
