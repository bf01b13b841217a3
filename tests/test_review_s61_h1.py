"""Review of the sweeps' skip rule (helper h1, session 61): it hides no landing a real signal makes.

The signal-landing sweeps skip a line whose first instruction is a ``NOP`` with a handler
neither the instruction before it nor the one after it has (``_artificial``, session 60).
A guard over every function of cogfabric's: each line so skipped holds nothing but
``NOP``s (no call, no jump of the line is left unlanded), and no instruction that reaches
it (falling through, or jumping to it) has its handler, so a real signal delivered as
that instruction ends is handled as no landing of the sweep's would be. (By instruction
order alone the rule lands on a few more ``NOP``s than a real signal reaches, such as the
``try:`` of a plain ``Journal.close()``: stricter, never looser.)
"""

from __future__ import annotations

import dis
import importlib
import pkgutil
import types
from typing import TYPE_CHECKING

import pytest

import cogfabric
from tests import test_interrupt_sweep_s58_h1 as sweep

if TYPE_CHECKING:
    from collections.abc import Iterator

_NO_FALL_THROUGH = frozenset(
    {
        "RETURN_VALUE",
        "RAISE_VARARGS",
        "RERAISE",
        "JUMP_FORWARD",
        "JUMP_BACKWARD",
        "JUMP_BACKWARD_NO_INTERRUPT",
    },
)


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _sources() -> Iterator[str]:
    seen: set[str] = set()
    for info in pkgutil.walk_packages(cogfabric.__path__, "cogfabric."):
        if info.name.endswith("__main__"):
            continue  # runs the command line
        path = str(importlib.import_module(info.name).__file__)
        if path not in seen:
            seen.add(path)
            yield path


def _reaching(ins: list[dis.Instruction], i: int) -> list[int]:
    """The indexes of the instructions that do something and reach ``ins[i]`` (through ``NOP``s)."""
    found: list[int] = []
    todo, seen = [i], {i}
    while todo:
        j = todo.pop()
        jumps = dis.hasjrel + dis.hasjabs
        sources = [k for k, x in enumerate(ins) if x.opcode in jumps and x.argval == ins[j].offset]
        if j > 0 and ins[j - 1].opname not in _NO_FALL_THROUGH:
            sources.append(j - 1)
        for k in sources:
            if k in seen:
                continue
            seen.add(k)
            (todo if ins[k].opname == "NOP" else found).append(k)
    return found


@pytest.mark.slow  # compiles every module of cogfabric's (about 4 s)
def test_every_line_the_sweeps_skip_is_one_no_real_signal_lands_in() -> None:
    wrong: list[str] = []
    skipped = 0
    for path in _sources():
        with open(path, encoding="utf-8") as source:  # noqa: PTH123
            text = source.read()
        for code in _codes(compile(text, path, "exec")):
            ins = list(dis.get_instructions(code))
            handlers, _ = sweep._handlers(code)
            for i, x in enumerate(ins):
                if x.starts_line is None or x.opname != "NOP" or not sweep._artificial(code, x.offset):
                    continue
                skipped += 1
                where = f"{path}:{x.starts_line} {code.co_name}"
                rest = []
                for y in ins[i + 1 :]:
                    if y.starts_line is not None and y.starts_line != x.starts_line:
                        break
                    rest.append(y.opname)
                if set(rest) - {"NOP"}:
                    wrong.append(f"{where}: its line goes on unlanded ({rest})")
                if any(handlers[ins[k].offset] == handlers[x.offset] for k in _reaching(ins, i)):
                    wrong.append(f"{where}: an instruction reaching it has its handler")
    assert skipped > 10  # the try: lines in with blocks (MailboxSlots.acquire's, close()'s)
    assert not wrong
