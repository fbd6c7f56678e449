"""Triton kernels for state-key grouping: int64 tuples -> dense ids, no host sync.

Design: an open-addressing hash table (linear probing) whose slots store a *row
index* of the input, never a key value, so every int64 key (negative keys, the
success sink ``(1 << 63) - 1``) is a legal key and ``-1`` can mark an empty slot.

1. ``_insert_kernel``: every row hashes its tuple (splitmix64 over the columns) and
   probes: ``atomic_cas(slot, -1, row)`` claims an empty slot; a slot held by row
   ``r`` (returned by the failed CAS, or read first with ``PEEK``) is compared column
   by column against ``r``'s tuple (read from the input, which no one writes, so no
   ordering question arises and the atomics are ``relaxed``). Equal tuple: the row
   joins that slot, and if it is smaller than ``r``, ``atomic_min(slot, row)``; the
   slot ends up holding the *smallest* row of the tuple, whatever the race order.
   Different tuple: next slot. The row records its slot. (Reading the slot before the
   CAS, ``PEEK``, was meant to spare hot slots their atomics, but all rows probe at
   once, see the slot empty and CAS anyway: it measured 5-10% slower. It is also a plain
   read of what other programs' atomics write, a harmless race that ``race_check`` names:
   tests/kernels/test_races.py. The credit
   pipeline avoids the hottest case, one slot per task group for every row, by
   numbering groups from sorted runs instead.)
2. ``_resolve_kernel``: ``rep[row] = table[slot[row]]`` (the tuple's first row) and
   ``first[row] = rep[row] == row``.
3. ``rank = cumsum(first)`` (a device op) and ``_ids_kernel``: ``ids = rank[rep] - 1``:
   ids are dense, numbered in order of first occurrence, deterministic; ``count =
   rank[-1]`` stays a 0-d device tensor.

The kernel reads up to three columns from their own tensors (no stacked copy); more
columns are numbered two at a time first (the ids of the first two columns stand for
them: same tuples, same first occurrences).

Capacity is static: the table has ``next_pow2(2 * M)`` slots (load factor <= 1/2)
unless ``table_size`` (>= M, so that every distinct tuple fits) is given, e.g. a
tiny one to force long collision chains in tests.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .torch_ops import DenseIds, check_cols

BLOCK = 1024
SEM = "relaxed"  # the table's atomics order nothing: keys are read from the input, which no one writes
# (25% faster than acq_rel on an H200)
PEEK = False  # reading first was 5-10% slower on an H200 (scripts/kernel_variants.py, 2026-11-30)
EMPTY = tl.constexpr(-1)  # empty slot; slots hold row indices >= 0


@triton.jit
def _mix64(h):
    # splitmix64 finaliser on uint64 (wrapping multiply, logical shifts)
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9
    h = (h ^ (h >> 27)) * 0x94D049BB133111EB
    return h ^ (h >> 31)


@triton.jit
def _col(k0_ptr, k1_ptr, k2_ptr, c: tl.constexpr, rows, mask):
    """Column c of the tuples at ``rows``."""
    if c == 0:
        ptr = k0_ptr
    elif c == 1:
        ptr = k1_ptr
    else:
        ptr = k2_ptr
    return tl.load(ptr + rows, mask=mask, other=0)


@triton.jit
def _insert_kernel(k0_ptr, k1_ptr, k2_ptr, table_ptr, slot_ptr, M, T, NCOLS: tl.constexpr, BLOCK: tl.constexpr,
                   SEM: tl.constexpr, PEEK: tl.constexpr):
    """k0, k1, k2: the (M,) int64 columns (the first NCOLS <= 3 of them are read); table: (T,)
    int64 filled with -1; slot: int64 out, one element per lane of the grid (M rounded up to
    BLOCK: every lane owns one, see below)."""
    pid = tl.program_id(0).to(tl.int64)
    rows = pid * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    inb = rows < M
    h = tl.full((BLOCK,), 0x2545F4914F6CDD1D, tl.uint64)
    for c in tl.static_range(NCOLS):
        col = _col(k0_ptr, k1_ptr, k2_ptr, c, rows, inb)
        h = _mix64(h ^ col.to(tl.uint64, bitcast=True))
    t64 = T.to(tl.int64)
    slot = (h % t64.to(tl.uint64)).to(tl.int64)
    active = inb
    # lanes that must not touch the table (done, past M, or PEEK saw the slot taken) aim their
    # compare-and-swap at their own output element with a compare value no slot holds (-2): no
    # write, and no contention on a hot table slot (lanes past M own the padding elements: no
    # two programs' atomics meet outside the table)
    own = slot_ptr + rows
    n_active = tl.sum(active.to(tl.int32), axis=0)
    while n_active > 0:
        if PEEK:  # a plain read first: rows of a tuple already in the table need no atomic
            seen = tl.load(table_ptr + slot, mask=active, other=-2, cache_modifier=".cg")
            try_cas = active & (seen == EMPTY)
        else:
            seen = tl.full((BLOCK,), -2, tl.int64)
            try_cas = active
        got = tl.atomic_cas(tl.where(try_cas, table_ptr + slot, own), tl.where(try_cas, EMPTY, -2).to(tl.int64),
                            rows, sem=SEM)
        prev = tl.where(try_cas, got, seen)
        inserted = active & (prev == EMPTY)
        taken = active & (prev != EMPTY)
        other = tl.where(taken, prev, 0)
        same = taken
        for c in tl.static_range(NCOLS):
            mine = _col(k0_ptr, k1_ptr, k2_ptr, c, rows, taken)
            theirs = _col(k0_ptr, k1_ptr, k2_ptr, c, other, taken)
            same = same & (mine == theirs)
        # the slot keeps the smallest row of its tuple: only a smaller row needs the atomic
        tl.atomic_min(table_ptr + slot, rows, mask=same & (rows < prev), sem=SEM)
        active = active & ~(inserted | same)
        slot = tl.where(active, (slot + 1) % t64, slot)
        n_active = tl.sum(active.to(tl.int32), axis=0)
    tl.store(slot_ptr + rows, slot, mask=inb)


@triton.jit
def _resolve_kernel(table_ptr, slot_ptr, rep_ptr, first_ptr, M, BLOCK: tl.constexpr):
    """rep = the tuple's smallest row; first (bool, as int8) = this row is it."""
    pid = tl.program_id(0).to(tl.int64)
    rows = pid * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    inb = rows < M
    slot = tl.load(slot_ptr + rows, mask=inb, other=0)
    rep = tl.load(table_ptr + slot, mask=inb, other=0)
    tl.store(rep_ptr + rows, rep, mask=inb)
    tl.store(first_ptr + rows, (rep == rows).to(tl.int8), mask=inb)


@triton.jit
def _ids_kernel(rank_ptr, rep_ptr, ids_ptr, M, BLOCK: tl.constexpr):
    """ids = rank[rep] - 1: the tuple's number in order of first occurrence."""
    pid = tl.program_id(0).to(tl.int64)
    rows = pid * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    inb = rows < M
    rep = tl.load(rep_ptr + rows, mask=inb, other=0)
    tl.store(ids_ptr + rows, tl.load(rank_ptr + rep, mask=inb, other=1) - 1, mask=inb)


def _table_size(m: int, table_size: int | None) -> int:
    if table_size is None:
        return max(16, triton.next_power_of_2(2 * m))
    if table_size < max(m, 1):
        raise ValueError(f"dense_ids: table_size must be >= the number of rows ({m}), got {table_size}")
    return max(2, int(table_size))  # >= 2: a table of 1 would be specialised as a constant


def dense_ids_triton(*cols: torch.Tensor, table_size: int | None = None, sem: str = SEM, peek: bool = PEEK,
                     insert_block: int | None = None) -> DenseIds:
    """Dense ids of int64 tuples via a GPU hash table (see the module docstring).

    cols: each (M,) int64 on one device. Ids are numbered in order of first
    occurrence (not in sorted order like the torch twin); ``is_first`` marks the
    first occurrence of each tuple. table_size: hash table slots (>= M); default
    ``next_pow2(2 M)``. sem, peek: the insert kernel's atomics' memory order and whether
    it reads a slot before its compare-and-swap; insert_block: rows per program of the insert
    kernel, whose programs loop until their slowest row is placed (default :data:`BLOCK`; tuning
    knobs, timed by ``scripts/kernel_variants.py``; the ids are the same).
    """
    m = check_cols(cols)
    device = cols[0].device
    if m == 0:
        empty = torch.empty(0, dtype=torch.int64, device=device)
        return DenseIds(empty, torch.zeros((), dtype=torch.int64, device=device), empty.bool())
    if len(cols) > 3:  # the kernel reads up to three columns: number the first two, then the rest
        knobs = {"table_size": table_size, "sem": sem, "peek": peek, "insert_block": insert_block}
        return dense_ids_triton(dense_ids_triton(*cols[:2], **knobs).ids, *cols[2:], **knobs)
    t = _table_size(m, table_size)
    insert_block = insert_block or BLOCK
    keys = [c.contiguous() for c in cols]
    keys += [keys[0]] * (3 - len(keys))  # unread
    table = torch.full((t,), EMPTY.value, dtype=torch.int64, device=device)
    insert_grid = triton.cdiv(m, insert_block)
    slot = torch.empty(insert_grid * insert_block, dtype=torch.int64, device=device)  # a slot per lane
    grid = (triton.cdiv(m, BLOCK),)
    _insert_kernel[(insert_grid,)](*keys, table, slot, m, t, NCOLS=len(cols), BLOCK=insert_block, SEM=sem,
                                   PEEK=peek)
    rep = torch.empty(m, dtype=torch.int64, device=device)
    first = torch.empty(m, dtype=torch.bool, device=device)
    _resolve_kernel[grid](table, slot, rep, first.view(torch.int8), m, BLOCK=BLOCK)
    rank = torch.cumsum(first, 0)  # int64
    ids = torch.empty(m, dtype=torch.int64, device=device)
    _ids_kernel[grid](rank, rep, ids, m, BLOCK=BLOCK)
    return DenseIds(ids, rank[-1], first)
