"""A walk of the LMDB file's B-trees before LMDB reads them: damaged pages become errors, not crashes.

LMDB has no checksums and trusts its pages. A page damaged in place (zeroed by a
torn write, say) makes it abort the whole process with an assertion when a cursor
steps onto it, where the journal must raise ``JournalDamagedError``. So ``open``
walks every B-tree from the committed meta page first, reading the file itself
(never through LMDB), and checks what LMDB's cursors assume of each page they reach:

* the header gives LMDB's free and main databases the flags LMDB gives them;
* every page a tree names lies inside the file, stores its own page number, is of
  the kind its level needs (branch above, leaf at the bottom) with no other flag (a
  page marked loose or kept is one LMDB's commit would not write), is reached once
  (no cycle), holds nodes (a branch two at least, the free database's too: LMDB
  asserts it when a commit rebalances one), and its free-space bounds and node
  offsets lie inside it, at even offsets (LMDB asserts an even node when it moves one);
* every node lies inside its page, or holds a value on overflow pages that are
  overflow pages long enough for it (a value's length read past the file is a SIGBUS);
* the free database's records are page lists LMDB can reuse: of past transactions,
  in their order (in the leaves, and by the keys of the branches above them), each
  list in order, of pages LMDB allocated, each listed once and used by no tree (a
  write would otherwise refuse the file as corrupted, overwrite a page in use, or
  abort on an assertion);
* every page LMDB allocated is used by a tree or listed free, as LMDB's own audit
  counts: a page in neither was cut off a tree (its database's record, say).

It checks what fuzzing damaged files found LMDB to rely on (no proof that nothing
else can crash it), not everything ``lmdb.verify`` (py-lmdb's offline
checker) does: the key order of the other databases and their counters are left out. Damage inside a
value is what the hash chain and ``verify()`` report. The walk reads every tree page
once (of a value's overflow pages only the first one's header, but a free-page list
whole, after that header) and checks the nodes of a leaf one by one in Python, but for a leaf of many nodes
of one header that tile it (the id index's, mostly), which a few calls check in C.
``bench/fabric.py`` times ``Journal.open`` for it (docs/performance.md, "The page walk
at open"). ``check_pages=False`` skips it.

The walk runs inside a read transaction that the caller holds: the pages reachable
from the newest meta page are then never reused by a writer meanwhile (LMDB frees a
page for reuse only once no reader is older than the transaction that freed it).
"""

from __future__ import annotations

import itertools
import operator
import os
import struct
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from ._errors import JournalDamagedError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["META_END", "META_MAGIC", "Meta", "check_pages", "meta_at", "misplaced"]

_HEADER: Final = struct.Struct("<QHHHH")  # mp_pgno, mp_pad, mp_flags, mp_lower, mp_upper
_OVERFLOW: Final = struct.Struct("<QHHI")  # mp_pgno, mp_pad, mp_flags, mp_pages
_NODE: Final = struct.Struct("<HHHH")  # mn_lo, mn_hi, mn_flags, mn_ksize
_DB: Final = struct.Struct("<IHHQQQQQ")  # md_pad, md_flags, md_depth, 4 counters, md_root
META_MAGIC: Final = 0xBEEFC0DE
META_AT: Final = 16  # the meta record follows its page's header
_META: Final = struct.Struct(f"<IIQQ{_DB.size}s{_DB.size}sQQ")
META_END: Final = META_AT + _META.size
"""Where a meta page's record ends: the least a file holds if its first meta page is whole."""


class Meta(NamedTuple):
    """LMDB's meta record (``MDB_meta``, 64-bit): what the first two pages of the file each hold."""

    magic: int
    version: int
    address: int
    map_size: int
    free_db: bytes
    """The ``MDB_db`` record of LMDB's free database."""
    main_db: bytes
    """The ``MDB_db`` record of LMDB's main database (which names the others)."""
    last_page: int
    """The last page LMDB allocated."""
    txnid: int

    @property
    def page_size(self) -> int:
        """The page size LMDB wrote the file with (kept in the free database's ``md_pad``)."""
        return int.from_bytes(self.free_db[:4], "little")


def meta_at(data: bytes, offset: int) -> Meta:
    """The meta record of the meta page that starts at ``offset`` of ``data``."""
    return Meta._make(_META.unpack_from(data, offset + META_AT))


def misplaced(meta: Meta, page: int) -> str | None:
    """Why meta page ``page`` (0 or 1) holds a record LMDB never writes there; None if it could.

    LMDB writes the meta record of transaction N to page N % 2 (both hold 0 in a new
    file), and a reader reads page ``newest txnid % 2``: on a page of the other
    parity, the newest record is not what readers read, and the walk, which checks
    the newest record's trees, would check other trees than LMDB reads.
    """
    if meta.magic != META_MAGIC or meta.txnid == 0 or meta.txnid % 2 == page:
        return None
    txnid = meta.txnid
    return f"LMDB's header page {page} holds transaction {txnid}, which LMDB writes to page {txnid % 2}"


_PAGE_HEADER: Final = _HEADER.size
_NODE_HEADER: Final = _NODE.size
_PGNO: Final = struct.Struct("<Q")

_P_BRANCH: Final = 0x01
_P_LEAF: Final = 0x02
_P_OVERFLOW: Final = 0x04
_F_BIGDATA: Final = 0x01
_F_SUBDATA: Final = 0x02
_NODE_FLAGS: Final = _F_BIGDATA | _F_SUBDATA
_P_INVALID: Final = 2**64 - 1
_MAX_DEPTH: Final = 32  # LMDB's cursor stack
_NO_END: Final = 2**64  # past every txnid: the upper bound of a key range
_FIRST_PAGE: Final = 2  # pages 0 and 1 are the meta pages
_READS: Final = 100  # reads of the meta pages until two agree (a writer may be writing one)
_NONZERO: Final = bytes((0, *(1,) * 255))  # a translation table: 0 stays 0, any other byte 1
_UNWRITTEN: Final = 1 << 20  # pages past the file's end the free list may name
_INTEGER_KEYS: Final = 0x08  # MDB_INTEGERKEY: the flags of LMDB's free database

_MAX_NAMED: Final = 32  # a journal has six named databases (store/_lmdb.py)
_FREE: Final = "free"  # LMDB's databases, named as in the errors
_RECORDS: Final = "events"  # the journal's records: 8-byte big-endian seqs as keys
_SEQ_SIZE: Final = 8
_MAIN: Final = "main"
_RESTORE: Final = "; restore the journal from a copy"
"""How every damage message ends: ``with_seqs`` puts the seqs a page of the records may hold before it."""


_OFFSETS: Final[dict[int, struct.Struct]] = {}  # by count: at most half the page size of them


def _offsets(page: bytes, lower: int) -> tuple[int, ...]:
    """Where a tree page's nodes start: the offsets between its header and ``lower``.

    Empty for a ``lower`` inside the header; clipped at the page's end for one past it
    (``nodes`` refuses both).
    """
    count = max(0, min(lower, len(page)) - _PAGE_HEADER) >> 1
    unpack = _OFFSETS.get(count)
    if unpack is None:
        unpack = _OFFSETS.setdefault(count, struct.Struct(f"<{count}H"))
    return unpack.unpack_from(page, _PAGE_HEADER)


_ODD: Final = bytes(b & 1 for b in range(256))  # a translation table: each byte's lowest bit


def _sound_offsets(page: bytes, pgno: int, kind: int) -> tuple[int, ...] | None:
    """Where the nodes of tree page ``pgno`` start, if its header is what LMDB's cursors rely on; else None.

    The one statement of what ``_Walk.nodes`` checks (it names the problem when this
    returns None): the page stores its own number and is of ``kind`` (``_P_LEAF`` or
    ``_P_BRANCH``) with no other flag; its free space runs between bounds inside it, at
    even offsets; it holds nodes, each starting inside its nodes' space at an even
    offset (LMDB makes each node's size even, and asserts an even node when it moves
    one: ``mdb_node_move``).
    """
    stored, _, flags, lower, upper = _HEADER.unpack_from(page)
    if (
        stored != pgno
        or flags != kind
        or not _PAGE_HEADER <= lower <= upper <= len(page)
        or (lower | upper) & 1
    ):
        return None
    offsets = _offsets(page, lower)
    if (
        not offsets
        or not upper <= min(offsets) <= max(offsets) <= len(page) - _NODE_HEADER
        or 1 in page[_PAGE_HEADER:lower:2].translate(_ODD)  # the low byte of each offset
    ):
        return None
    return offsets


_TILED_FROM: Final = 32
"""The fewest nodes of a leaf for which ``_tiled`` is tried: its calls cost the same
whatever the count, so a leaf of few nodes is checked node by node (the value was set
by scratch timings; no speed is claimed for it)."""


def _tiled(page: bytes, offsets: tuple[int, ...]) -> bool:
    """Whether a leaf's nodes all have one header, so one size, and tile the page from its ``upper`` on.

    Then each is a key and value inside the page, which ``_Walk.leaves`` checks node
    by node otherwise. It is the usual case of the event id index (ids of one length,
    values of eight bytes), checked with a few calls that each loop in C: each of the
    eight bytes of a node's header is the same at every node's start (a strided
    slice), and the offsets are those starts. False tells nothing: the caller checks
    node by node. Call it with offsets that ``_sound_offsets`` gave.
    """
    upper = _HEADER.unpack_from(page)[4]
    count = len(offsets)
    node_size, rest = divmod(len(page) - upper, count)
    lo, hi, flags, key_size = _NODE.unpack_from(page, upper)
    if rest or hi or flags or _NODE_HEADER + key_size + lo > node_size:
        return False
    for at in range(upper, upper + _NODE_HEADER):
        if page[at::node_size].count(page[at]) != count:
            return False
    return sorted(offsets) == list(range(upper, len(page), node_size))


class _Walk:
    """One walk of one file: the pages reached, the pages listed free, and where problems are reported."""

    def __init__(
        self, fd: int, where: Path, page_size: int, *, pages: int, allocated: int, txnid: int
    ) -> None:
        self.fd = fd
        self.where = where
        self.page_size = page_size
        self.pages = pages
        """Pages a tree may use: those the file holds, up to the last one LMDB allocated."""
        self.allocated = allocated
        """Pages LMDB allocated (its last page + 1): the free list may name one past the file's
        end (allocated and freed in one transaction, never written)."""
        self.txnid = txnid
        self.owner = bytearray(pages)  # the tree that reached each page: 1 + its index in ``trees``
        self.trees: list[str] = []
        self.free = bytearray(allocated)  # 1: the free database lists the page
        self.named: list[tuple[bytes, bytes]] = []

    def damaged(self, name: str, pgno: int, problem: str) -> JournalDamagedError:
        msg = (
            f"{self.where} is damaged: page {pgno} of its {name} database {problem}. LMDB has no "
            f"checksums and could crash the process on it{_RESTORE}"
        )
        return JournalDamagedError(msg)

    @staticmethod
    def with_seqs(name: str, exc: JournalDamagedError, low: Any, high: Any) -> JournalDamagedError:  # noqa: ANN401
        """``exc``, naming the seqs its page of the records may hold, from the keys of the branch above it.

        The records before them are on other pages: what a salvage can still read (README,
        "When a journal fails verification"). The first of those seqs is its ``first_seq``.
        """
        if name != _RECORDS or not isinstance(low, bytes) or len(low) not in (0, _SEQ_SIZE):
            return exc
        first = int.from_bytes(low, "big") if low else 1
        if isinstance(high, bytes) and len(high) == _SEQ_SIZE:
            seqs = f"the records from seq {first} to seq {int.from_bytes(high, 'big') - 1} at most"
        elif high is None:
            seqs = f"the records from seq {first} on"
        else:
            return exc
        text = str(exc)
        if not text.endswith(_RESTORE):
            return exc
        salvage = (
            f", or salvage the records before seq {first} with cogfabric salvage "
            '(README, "When a journal fails verification")'
            if first > 1
            else ""
        )
        message = f"{text[: -len(_RESTORE)]}; the page holds {seqs}{_RESTORE}{salvage}"
        return JournalDamagedError(message, first_seq=first)

    def outside(self) -> str:
        """Why a page the trees name is not one the file holds."""
        if self.pages <= _FIRST_PAGE:
            return "is named, but the file holds only its two header pages"
        return f"is named, but pages run from 2 to {self.pages - 1}"

    def read(self, name: str, pgno: int, length: int) -> bytes:
        data = os.pread(self.fd, length, pgno * self.page_size)
        if len(data) < length:
            raise self.damaged(name, pgno, "lies past the end of the data file")
        return data

    def tree(self, name: str, db: bytes) -> None:
        """Check every page of the database whose record (``MDB_db``) is ``db``."""
        self.trees.append(name)
        _, flags, depth, _, _, _, _, root = _DB.unpack(db)
        if root == _P_INVALID:
            return  # an empty database
        if not 0 < depth <= _MAX_DEPTH:
            raise self.damaged(name, root, f"is the root of a tree of depth {depth}")
        ordered = name == _FREE  # LMDB asserts when its free database's keys are out of order
        # Every branch's keys must rise within its range: LMDB finds a key by them, so one
        # out of order hides the records under it from every lookup, while a cursor
        # walking the leaves (verify's scan) still reads them all. Where LMDB compares
        # keys as bytes (flags 0: every database but its free one, whose keys are txnids).
        keyed = ordered or flags == 0
        # each page with the range of keys its subtree may hold (None: no upper bound)
        low, high = (0, _NO_END) if ordered else (b"", None)
        if depth == 1:
            self.leaves(name, [root], [(low, high)], keyed=keyed)
            return
        stack: list[tuple[int, int, Any, Any]] = [(root, 1, low, high)]
        while stack:
            pgno, level, low, high = stack.pop()
            try:
                self.mark(name, pgno, 1)
                page = self.read(name, pgno, self.page_size)
                children = self.branch(name, pgno, page)
                if len(children) < 2:  # noqa: PLR2004 - LMDB's minimum
                    # LMDB asserts it when it searches any tree but its free database
                    # (mdb_page_search_root), and when it rebalances any, the free one too
                    # (mdb_rebalance), as a commit does deleting the free-page lists it reuses
                    raise self.damaged(name, pgno, "is a branch page with one node")
                ranges = self.ranges(name, pgno, page, low, high) if keyed else [(low, high)] * len(children)
            except JournalDamagedError as exc:
                raise self.with_seqs(name, exc, low, high) from None
            if level + 1 == depth:
                self.leaves(name, children, ranges, keyed=keyed)
            else:
                # pushed last to first: the leaves are reached in key order
                stack.extend(
                    (child, level + 1, lo, hi)
                    for child, (lo, hi) in reversed(list(zip(children, ranges, strict=True)))
                )

    def mark(self, name: str, pgno: int, count: int) -> None:
        """Note pages ``pgno`` to ``pgno + count - 1`` as reached: inside the file, and once."""
        if pgno < _FIRST_PAGE or pgno + count > self.pages:
            raise self.damaged(name, pgno, self.outside())
        if self.owner.count(0, pgno, pgno + count) != count:
            raise self.damaged(name, pgno, "is reached twice (the tree has a cycle, or shares a page)")
        self.owner[pgno : pgno + count] = bytes((len(self.trees),)) * count

    def nodes(self, name: str, pgno: int, page: bytes, *, leaf: bool) -> tuple[int, ...]:
        """Check a tree page's header (``_sound_offsets``); return where its nodes start."""
        offsets = _sound_offsets(page, pgno, _P_LEAF if leaf else _P_BRANCH)
        if offsets is not None:
            return offsets
        stored, _, flags, lower, upper = _HEADER.unpack_from(page)
        kind = "leaf" if leaf else "branch"
        if stored != pgno:
            raise self.damaged(name, pgno, f"stores page number {stored}")
        if flags != (_P_LEAF if leaf else _P_BRANCH):
            # any other bit (P_LOOSE, P_KEEP, P_DIRTY) makes LMDB skip or misuse it
            raise self.damaged(name, pgno, f"should be a {kind} page, and has flags {flags:#x}")
        if not _PAGE_HEADER <= lower <= upper <= self.page_size or (lower | upper) & 1:
            raise self.damaged(name, pgno, f"has free space from {lower} to {upper}")
        offsets = _offsets(page, lower)
        if not offsets:  # LMDB drops an emptied page; a cursor would read node 65535 of one
            raise self.damaged(name, pgno, f"is a {kind} page without nodes")
        if not upper <= min(offsets) <= max(offsets) <= self.page_size - _NODE_HEADER:
            raise self.damaged(name, pgno, f"has a node outside its nodes (they start at {upper})")
        odd = next((at for at in offsets if at & 1), None)
        if odd is not None:
            raise self.damaged(name, pgno, f"has a node at odd offset {odd}")
        raise self.damaged(name, pgno, f"has a {kind} page header LMDB's cursors cannot use")

    def branch(self, name: str, pgno: int, page: bytes) -> list[int]:
        """Check a branch page; return the pages it names."""
        children = []
        for at in self.nodes(name, pgno, page, leaf=False):
            lo, hi, flags, key_size = _NODE.unpack_from(page, at)
            if at + _NODE_HEADER + key_size > self.page_size:
                raise self.damaged(name, pgno, f"has a node at offset {at} running past it")
            children.append(lo | hi << 16 | flags << 32)
        return children

    def ranges(self, name: str, pgno: int, page: bytes, low: Any, high: Any) -> list[tuple[Any, Any]]:  # noqa: ANN401
        """The range of keys each child of a branch may hold.

        LMDB finds a key by its branch pages' keys (but the first node's, which stands
        for the lowest); they must rise within the branch's own range. The free
        database's keys are txnids (ints, ``high`` at most ``_NO_END``); the others' are
        bytes, in LMDB's order (bytes order), ``high`` None for no upper bound.
        """
        txnids = name == _FREE
        bounds = [low]
        for at in self.nodes(name, pgno, page, leaf=False)[1:]:
            key_size = _NODE.unpack_from(page, at)[3]
            key: Any = page[at + _NODE_HEADER : at + _NODE_HEADER + key_size]
            if txnids:
                key = _PGNO.unpack(key)[0] if key_size == _PGNO.size else -1
            if not (bounds[-1] < key and (high is None or key < high)):
                raise self.damaged(name, pgno, f"has a node at offset {at} whose key is out of order")
            bounds.append(key)
        return list(itertools.pairwise([*bounds, high]))

    def keys_in_order(self, pgno: int, page: bytes, low: int, high: int) -> None:
        """Check that a leaf of the free database holds its records' keys rising, within its range."""
        before = low - 1
        for at in self.nodes(_FREE, pgno, page, leaf=True):
            (txnid,) = _PGNO.unpack_from(page, at + _NODE_HEADER)  # an 8-byte key: free_record checked it
            if not before < txnid < high:
                raise self.damaged(_FREE, pgno, f"holds the record of transaction {txnid} out of order")
            before = txnid

    def leaves(self, name: str, pgnos: list[int], ranges: list[tuple[Any, Any]], *, keyed: bool) -> None:
        """Check the leaf pages ``pgnos`` of a tree, each with the range of keys its branches give it.

        Each node must be a key and value inside its page, or its value on overflow pages
        that are (``node``). This loop holds most of the walk's time (a tree has a
        hundred leaves to a branch), so it does inline what ``mark`` and ``read`` do,
        and checks a page's header with ``_sound_offsets``, as ``nodes`` does; those
        are called where the check fails, to name the problem and raise.
        """
        size = self.page_size
        limit = size - _NODE_HEADER
        owner = self.owner
        tree = len(self.trees)
        pages = self.pages
        fd = self.fd
        pread = os.pread
        unpack = _NODE.unpack_from
        every = name == _FREE  # each record of the free database is checked further
        low, high = ranges[0] if ranges else (b"", None)
        try:
            for pgno, (low, high) in zip(pgnos, ranges, strict=True):
                if pgno < _FIRST_PAGE or pgno >= pages or owner[pgno]:
                    self.mark(name, pgno, 1)
                owner[pgno] = tree
                page = pread(fd, size, pgno * size)
                if len(page) < size:
                    page = self.read(name, pgno, size)
                offsets = _sound_offsets(page, pgno, _P_LEAF) or self.nodes(name, pgno, page, leaf=True)
                if every or len(offsets) < _TILED_FROM or not _tiled(page, offsets):
                    for at in offsets:
                        lo, hi, flags, key_size = unpack(page, at)
                        # not a key and value in the page
                        if flags or hi or every or at + key_size + lo > limit:
                            self.node(name, pgno, page, at)
                if every:
                    self.keys_in_order(pgno, page, low, high)
                elif keyed:
                    self.within(name, pgno, page, (offsets[0], offsets[-1]), low=low, high=high)
        except JournalDamagedError as exc:  # ``low`` and ``high``: the damaged page's range
            raise self.with_seqs(name, exc, low, high) from None

    def within(
        self, name: str, pgno: int, page: bytes, ends: tuple[int, int], *, low: bytes, high: bytes | None
    ) -> None:
        """Check that a leaf's first and last keys lie in the range its branches give it.

        A branch key set below its child's keys hides them from lookups as one set
        above does; the two ends are enough to see it (a cursor scan, verify's, sees
        keys out of order inside a leaf of the records).
        """
        first, last = ends
        key_at = first + _NODE_HEADER
        below = page[key_at : key_at + _NODE.unpack_from(page, first)[3]] < low
        key_at = last + _NODE_HEADER
        if below or (high is not None and page[key_at : key_at + _NODE.unpack_from(page, last)[3]] >= high):
            raise self.damaged(name, pgno, "holds keys outside the range its branch gives it")

    def node(self, name: str, pgno: int, page: bytes, at: int) -> None:
        """Check a leaf's node that is not a key and value inside the page."""
        lo, hi, flags, key_size = _NODE.unpack_from(page, at)
        data_at = at + _NODE_HEADER + key_size
        data_size = lo | hi << 16
        size = self.page_size
        if flags & ~_NODE_FLAGS or flags == _NODE_FLAGS:
            raise self.damaged(name, pgno, f"has a node at offset {at} with flags {flags:#x}")
        if data_at + (_PGNO.size if flags & _F_BIGDATA else data_size) > size:
            raise self.damaged(name, pgno, f"has a node at offset {at} running past it")
        key = page[at + _NODE_HEADER : data_at]
        if flags & _F_BIGDATA:
            first = _PGNO.unpack_from(page, data_at)[0]
            self.overflow(name, first, data_size)
            if name == _FREE:
                if data_size > _PGNO.size * (self.allocated + 1):  # longer than any list: do not read it
                    raise self.damaged(name, pgno, f"holds a free-page list of {data_size} bytes")
                self.free_record(pgno, key, self.read(name, first, _PAGE_HEADER + data_size)[_PAGE_HEADER:])
        elif flags & _F_SUBDATA:
            if name != _MAIN or data_size != _DB.size:
                raise self.damaged(name, pgno, f"holds a database record of {data_size} bytes")
            if len(self.named) >= _MAX_NAMED:
                raise self.damaged(name, pgno, f"names more than {_MAX_NAMED} databases")
            self.named.append((key, page[data_at : data_at + data_size]))
        elif name == _FREE:
            self.free_record(pgno, key, page[data_at : data_at + data_size])

    def overflow(self, name: str, pgno: int, data_size: int) -> None:
        """Check the overflow pages of a large value."""
        if not _FIRST_PAGE <= pgno < self.pages:
            raise self.damaged(name, pgno, self.outside())
        stored, _, flags, count = _OVERFLOW.unpack(self.read(name, pgno, _OVERFLOW.size))
        if stored != pgno or flags != _P_OVERFLOW:
            problem = f"should be an overflow page, and stores {stored}, flags {flags:#x}"
            raise self.damaged(name, pgno, problem)
        if count * self.page_size < _PAGE_HEADER + data_size:
            raise self.damaged(name, pgno, f"holds {count} pages, too few for a value of {data_size} bytes")
        self.mark(name, pgno, count)

    def free_record(self, pgno: int, key: bytes, data: bytes) -> None:
        """Check a record of LMDB's free database: the txnid that freed the pages, and their list.

        The list is a count, then that many page numbers in descending order, each
        one LMDB allocated and listed once in the whole database (``check_free`` then
        checks that no tree uses one).
        """
        if len(key) != _PGNO.size:
            raise self.damaged(_FREE, pgno, f"holds a record keyed by {len(key)} bytes, not a transaction")
        (txnid,) = _PGNO.unpack(key)
        if not 0 < txnid <= self.txnid:
            problem = f"holds a record of transaction {txnid}, past the file's last ({self.txnid})"
            raise self.damaged(_FREE, pgno, problem if txnid else "holds a record of transaction 0")
        if not data or len(data) % _PGNO.size:
            raise self.damaged(_FREE, pgno, f"holds a free-page list of {len(data)} bytes")
        count, *listed = struct.unpack(f"<{len(data) // _PGNO.size}Q", data)
        in_order = all(a > b for a, b in itertools.pairwise(listed))
        if (
            count != len(listed)
            or not in_order
            or (listed and not _FIRST_PAGE <= listed[-1] <= listed[0] < self.allocated)
        ):
            raise self.damaged(_FREE, pgno, "holds a free-page list LMDB cannot reuse")
        free = self.free
        for listed_pgno in listed:
            if free[listed_pgno]:
                raise self.damaged(_FREE, pgno, f"lists page {listed_pgno} as free a second time")
            free[listed_pgno] = 1

    def check_free(self) -> None:
        """Check that each page LMDB allocated is either used by one tree or listed free, not both.

        A page both used and listed free, a write would reuse; a page neither used nor
        free was cut off a tree (LMDB's own audit, ``mdb_audit``, counts the same).
        """
        used = int.from_bytes(self.owner.translate(_NONZERO), "little")  # 1 where a tree uses the page
        free = int.from_bytes(self.free, "little")
        both = used & free
        if both:
            pgno = ((both & -both).bit_length() - 1) // 8
            problem = "is listed as free too (in the free database): a write would reuse it"
            raise self.damaged(self.trees[self.owner[pgno] - 1], pgno, problem)
        accounted = (used | free).to_bytes(self.allocated, "little")
        lost = accounted.find(0, _FIRST_PAGE)
        if lost != -1:
            msg = (
                f"{self.where} is damaged: page {lost} is in no database and not free (a tree "
                "lost the pages under it, or the header names pages it never wrote). LMDB has "
                f"no checksums and could crash the process on it{_RESTORE}"
            )
            raise JournalDamagedError(msg)


def _shown(name: bytes) -> str:
    """A database's name as errors show it: as it is if printable, else escaped (it may be damaged)."""
    text = name.decode(errors="backslashreplace")
    return text if text.isprintable() else ascii(text)


def _newest_meta(fd: int, page_size: int, where: Path) -> Meta:
    """The meta record of the newest commit, read until two reads agree.

    Raises:
        JournalDamagedError: a meta page holds a transaction of the other page's parity.
        OSError: a meta page is cut off.

    """
    before: list[bytes] = []
    for _ in range(_READS):
        pages = [os.pread(fd, META_END, at) for at in (0, page_size)]
        if pages == before:
            break
        before = pages
    if any(len(page) != META_END for page in before):
        msg = "a header page of the data file is cut off"
        raise OSError(msg)
    metas = [meta_at(page, 0) for page in before]
    for number, meta in enumerate(metas):
        problem = misplaced(meta, number)
        if problem is not None:
            raise JournalDamagedError(f"{where} is damaged: {problem}")
    # the greater txnid (on a tie, of a new file, the first): the page LMDB's readers read
    return max(metas, key=operator.attrgetter("txnid"))


def check_pages(where: Path, page_size: int) -> None:
    """Walk the B-trees of ``where``'s data file from its newest meta page; raise on a damaged page.

    Call it inside a read transaction of the open environment (see the module's
    docstring). ``page_size`` is the one LMDB reports for the file.

    Raises:
        JournalDamagedError: a page that LMDB would misread or crash on.
        OSError: the data file cannot be read.

    """
    fd = os.open(where / "data.mdb", os.O_RDONLY)
    try:
        meta = _newest_meta(fd, page_size, where)
        free_db, main_db, last_page, txnid = meta.free_db, meta.main_db, meta.last_page, meta.txnid
        in_file = os.fstat(fd).st_size // page_size
        # LMDB's last page; beyond the file only by pages freed unwritten (bounded: hostile input)
        allocated = min(last_page + 1, in_file + _UNWRITTEN)
        walk = _Walk(fd, where, page_size, pages=min(allocated, in_file), allocated=allocated, txnid=txnid)
        for core, record, want in ((_FREE, free_db, _INTEGER_KEYS), (_MAIN, main_db, 0)):
            flags = _DB.unpack(record)[1]
            if flags != want:  # LMDB would compare or store its keys otherwise (and assert)
                msg = f"{where} is damaged: its header gives LMDB's {core} database the flags {flags:#x}"
                raise JournalDamagedError(msg)
        walk.tree(_FREE, free_db)
        walk.tree(_MAIN, main_db)
        for name, db in walk.named:
            walk.tree(_shown(name), db)
        walk.check_free()
    finally:
        os.close(fd)
