"""Pykka actors: agents, the journal writer, sessions and the IPC bus (issue 3 onward)."""

from __future__ import annotations

__all__: list[str] = []
