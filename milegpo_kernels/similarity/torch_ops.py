"""Input checks, the shared pipeline and the torch twins of the similarity ops; the ops are described in
:mod:`milegpo_kernels.similarity`."""

from __future__ import annotations

from typing import Callable, NamedTuple

import torch

from ..graph.torch_ops import check_components, check_edges
from ..grouping.torch_ops import DenseIds, dense_ids_torch, lexsort
from ..inputs import check_id_ranges, reads_host

#: pairs whose shingles the torch twin of :func:`shingle_overlap` expands at once (bounds its memory)
OVERLAP_CHUNK = 1 << 16


class SimilarityPieces(NamedTuple):
    """The three steps of :func:`similar_state_keys` a backend provides: ``buckets(group_band, hash)``
    (:func:`milegpo_kernels.dense_ids` of the band tuples), ``overlap(a, b, offsets, values, max_len)``
    (:func:`shingle_overlap`) and ``components(src, dst, num_nodes, edge_offsets)``
    (:func:`connected_labels`)."""

    buckets: Callable[..., DenseIds]
    overlap: Callable[..., torch.Tensor]
    components: Callable[..., torch.Tensor]


def check_int64(name: str, op: str, t: torch.Tensor, dim: int = 1) -> None:
    if t.dtype != torch.int64 or t.dim() != dim:
        raise TypeError(f"{op}: {name} must be a {dim}-d int64 tensor, got {t.dtype} of shape {tuple(t.shape)}")


def check_csr(offsets: torch.Tensor, values: torch.Tensor, op: str) -> int:
    """The number of sets S of a CSR table (offsets (S + 1,), values (L,) int64); checks dtypes, shapes and
    devices, and on the host (:func:`~milegpo_kernels.inputs.reads_host`) that the offsets are monotone
    from 0 to L."""
    check_int64("shingle_offsets", op, offsets)
    check_int64("shingles", op, values)
    if offsets.shape[0] < 1:
        raise ValueError(f"{op}: shingle_offsets must have S + 1 >= 1 entries")
    if offsets.device != values.device:
        raise ValueError(f"{op}: shingle_offsets is on {offsets.device}, shingles on {values.device}")
    if reads_host(offsets):
        if int(offsets[0]) != 0 or int(offsets[-1]) != values.shape[0]:
            raise ValueError(f"{op}: shingle_offsets must run from 0 to len(shingles) = {values.shape[0]}, got "
                             f"{int(offsets[0])} .. {int(offsets[-1])}")
        bad = torch.nonzero(offsets[1:] < offsets[:-1])
        if bad.numel():
            i = int(bad[0, 0])
            raise ValueError(f"{op}: shingle_offsets must be non-decreasing: entry {i + 1} < entry {i}")
    return offsets.shape[0] - 1


def max_set_size(offsets: torch.Tensor) -> int:
    """The largest set of a CSR table (a host read)."""
    return int((offsets[1:] - offsets[:-1]).max()) if offsets.shape[0] > 1 else 0


def check_pairs(a: torch.Tensor, b: torch.Tensor, offsets: torch.Tensor, values: torch.Tensor, op: str) -> int:
    """P, the number of pairs; raises naming what is wrong (dtypes, shapes, devices, on the host an index
    outside the table)."""
    check_int64("a", op, a)
    check_int64("b", op, b)
    if a.shape != b.shape:
        raise ValueError(f"{op}: a and b must have one shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    s = check_csr(offsets, values, op)
    if a.device != offsets.device or b.device != offsets.device:
        raise ValueError(f"{op}: a, b and the table must be on one device, got {a.device}, {b.device}, "
                         f"{offsets.device}")
    check_id_ranges({"a": (a, s), "b": (b, s)}, op)
    return a.shape[0]


def shingle_overlap_torch(a, b, offsets, values, max_len: int | None = None) -> torch.Tensor:
    """|set a[i] & set b[i]| per pair: each of set a's values looked up in set b (sorted) with a search over
    (set, value rank) keys; ``max_len`` is not needed here (the kernels' search depth)."""
    p = check_pairs(a, b, offsets, values, "shingle_overlap")
    out = torch.zeros(p, dtype=torch.int64, device=a.device)
    if p == 0 or values.numel() == 0:
        return out
    _, rank = torch.unique(values, return_inverse=True)
    n_values = values.shape[0]
    length = offsets[1:] - offsets[:-1]
    owner = torch.repeat_interleave(torch.arange(length.shape[0], device=a.device), length)
    table_key = owner * n_values + rank  # ascending: sets in order, values sorted inside each
    for lo in range(0, p, OVERLAP_CHUNK):
        pa, pb = a[lo:lo + OVERLAP_CHUNK], b[lo:lo + OVERLAP_CHUNK]
        la = length.index_select(0, pa)
        pair = torch.repeat_interleave(torch.arange(pa.shape[0], device=a.device), la)
        first = torch.cumsum(la, 0) - la
        element = offsets.index_select(0, pa).index_select(0, pair) + torch.arange(pair.shape[0], device=a.device) \
            - first.index_select(0, pair)
        query = pb.index_select(0, pair) * n_values + rank.index_select(0, element)
        at = torch.searchsorted(table_key, query).clamp_(max=n_values - 1)
        hit = table_key.index_select(0, at) == query
        out[lo:lo + OVERLAP_CHUNK] = torch.zeros_like(pa).index_add_(0, pair, hit.to(torch.int64))
    return out


def connected_labels_torch(src, dst, num_nodes: int, edge_offsets=None) -> torch.Tensor:
    """Synchronous label propagation: every round each edge lowers both ends, and both ends' labels, to the
    smaller of its ends' labels' labels, then every label jumps to its label's label; until a round changes
    nothing."""
    check_edges(src, dst, num_nodes, "connected_labels", edge_offsets)
    if edge_offsets is not None:
        check_components(src, dst, num_nodes, edge_offsets, "connected_labels")
    label = torch.arange(num_nodes, dtype=torch.int64, device=src.device)
    if src.numel() == 0:
        return label
    for _ in range(num_nodes + 1):
        at_src, at_dst = label.index_select(0, src), label.index_select(0, dst)
        low = torch.minimum(label.index_select(0, at_src), label.index_select(0, at_dst))
        new = label.clone()
        for end in (src, dst, at_src, at_dst):
            new.scatter_reduce_(0, end, low, reduce="amin")
        new = torch.minimum(new, new.index_select(0, new))
        if torch.equal(new, label):
            break
        label = new
    return label


def check_similarity_inputs(group, key, sketch, bands, threshold, shingle_offsets, shingles) -> int:
    """M, the number of rows; raises naming the argument that is wrong."""
    op = "similar_state_keys"
    for name, t in (("group", group), ("key", key), ("sketch", sketch)):
        check_int64(name, op, t)
        if t.shape[0] != key.shape[0] or t.device != key.device:
            raise ValueError(f"{op}: {name} must be ({key.shape[0]},) on {key.device} like key, got "
                             f"{tuple(t.shape)} on {t.device}")
    check_int64("bands", op, bands, dim=2)
    if bands.shape[1] < 1 or bands.device != key.device:
        raise ValueError(f"{op}: bands must be (S, B >= 1) on {key.device}, got {tuple(bands.shape)} on {bands.device}")
    if threshold is not None:
        if not (0.0 < float(threshold) <= 1.0):
            raise ValueError(f"{op}: threshold must be in (0, 1], got {threshold!r}")
        if shingle_offsets is None or shingles is None:
            raise ValueError(f"{op}: verifying candidates (a threshold) needs shingle_offsets and shingles")
        s = check_csr(shingle_offsets, shingles, op)
        if s != bands.shape[0] or shingle_offsets.device != key.device:
            raise ValueError(f"{op}: the shingle table has {s} sets on {shingle_offsets.device}, bands "
                             f"{bands.shape[0]} on {bands.device}: one table, one device")
    if reads_host(sketch) and sketch.numel():
        bad = torch.nonzero(sketch >= bands.shape[0])
        if bad.numel():
            i = int(bad[0, 0])
            raise ValueError(f"{op}: sketch[{i}] = {int(sketch[i])} is not a row of bands (0..{bands.shape[0] - 1}; "
                             "-1: the row takes part in nothing)")
    return key.shape[0]


def _runs(sorted_col: torch.Tensor, *more: torch.Tensor) -> torch.Tensor:
    """(M,) bool: position p starts a run of equal values of the sorted columns."""
    start = torch.zeros(sorted_col.shape[0], dtype=torch.bool, device=sorted_col.device)
    start[:1] = True
    for col in (sorted_col, *more):
        start[1:] |= col[1:] != col[:-1]
    return start


def _run_start(start: torch.Tensor) -> torch.Tensor:
    """(M,) int64: the first position of each position's run."""
    pos = torch.arange(start.shape[0], device=start.device)
    return torch.cummax(torch.where(start, pos, 0), 0).values


def similar_state_keys_pipeline(group, key, sketch, bands, threshold, shingle_offsets, shingles, max_shingles,
                                pieces: SimilarityPieces) -> torch.Tensor:
    """The op (:mod:`milegpo_kernels.similarity`) on one backend's pieces; every other step is a torch
    device op (sorts, scans, gathers), so the torch twin and the Triton path differ only in the pieces.

    Positions: the rows sorted by (group, key); a node is a run of equal (group, key), represented by its
    first position (smaller position, smaller key). Elements: (position, band) pairs, ``position * B + band``,
    so a task group's elements are one contiguous range, and bucket ids (ascending tuples on the twin, first
    occurrences on Triton) follow the groups' order. Only a node's first position with a sketch
    (``sketch >= 0``) enters the bands; every other element gets a bucket of its own."""
    m = check_similarity_inputs(group, key, sketch, bands, threshold, shingle_offsets, shingles)
    if m == 0:
        return key.clone()
    device = key.device
    n_bands = bands.shape[1]
    order = lexsort(group, key)
    group_sorted, key_sorted, sketch_sorted = (c.index_select(0, order) for c in (group, key, sketch))
    node_start = _run_start(_runs(group_sorted, key_sorted))
    member = (node_start == torch.arange(m, device=device)) & (sketch_sorted >= 0)
    group_run = torch.cumsum(_runs(group_sorted).to(torch.int64), 0) - 1
    group_offsets = torch.zeros(m + 1, dtype=torch.int64, device=device)
    group_offsets[1:] = torch.cumsum(torch.bincount(group_run, minlength=m), 0)  # (m + 1,): static, runs past the groups are empty

    n_elements = m * n_bands
    element = torch.arange(n_elements, device=device)
    element_member = member.repeat_interleave(n_bands)
    band_hash = bands.index_select(0, sketch_sorted.clamp(min=0)).reshape(-1)
    # (group, band) as one column: group_run * (B + 1) + band; an element outside the bands takes slot B of
    # its group with its own index as the hash (a bucket of its own, still inside its group's range)
    group_band = group_run.repeat_interleave(n_bands) * (n_bands + 1) + torch.where(
        element_member, torch.arange(n_bands, device=device).repeat(m), n_bands)
    bucket = pieces.buckets(group_band, torch.where(element_member, band_hash, element))
    bucket_head = torch.full((n_elements,), n_elements, dtype=torch.int64, device=device).scatter_reduce_(
        0, bucket.ids, element, reduce="amin")
    if threshold is None:  # every candidate merges: a star from each bucket's first element connects the bucket
        src = element // n_bands
        dst = bucket_head.index_select(0, bucket.ids) // n_bands
        edge_offsets = group_offsets * n_bands
    else:
        src, dst, edge_offsets = _verified_pairs(bucket.ids, sketch_sorted, bands, threshold, shingle_offsets, shingles,
                                                 max_shingles, group_offsets, pieces)
    root = pieces.components(src, dst, m, edge_offsets)
    merged_sorted = torch.where(sketch_sorted >= 0, key_sorted.index_select(0, root.index_select(0, node_start)),
                                key_sorted)
    return torch.empty_like(key).scatter_(0, order, merged_sorted)


def _verified_pairs(bucket_ids, sketch_sorted, bands, threshold, shingle_offsets, shingles, max_shingles,
                    group_offsets, pieces):
    """Every pair of elements in one bucket, proposed once (at the first band where the two agree) and kept
    when the shingle Jaccard similarity is at least ``threshold``: (src, dst, edge_offsets) over positions,
    a rejected pair a self-loop. Sizing the pair list reads its length on the host (one sync on a GPU)."""
    device = bucket_ids.device
    n_bands = bands.shape[1]
    n_elements = bucket_ids.shape[0]
    by_bucket = torch.sort(bucket_ids, stable=True).indices  # a bucket's elements in element order
    slot = torch.arange(n_elements, device=device)
    bucket_start = _run_start(_runs(bucket_ids.index_select(0, by_bucket)))
    earlier_members = slot - bucket_start
    pair_end = torch.cumsum(earlier_members, 0)
    n_pairs = int(pair_end[-1])
    pair_first = pair_end - earlier_members
    later = torch.repeat_interleave(slot, earlier_members, output_size=n_pairs)
    earlier = bucket_start.index_select(0, later) + torch.arange(n_pairs, device=device) - pair_first.index_select(0, later)
    later_element, earlier_element = by_bucket.index_select(0, later), by_bucket.index_select(0, earlier)
    pos_a, pos_b = later_element // n_bands, earlier_element // n_bands
    sketch_a, sketch_b = sketch_sorted.index_select(0, pos_a), sketch_sorted.index_select(0, pos_b)
    band = later_element % n_bands
    agree = bands.index_select(0, sketch_a) == bands.index_select(0, sketch_b)  # (P, B)
    proposed_before = (agree & (torch.arange(n_bands, device=device) < band[:, None])).any(1)
    inter = pieces.overlap(sketch_a, sketch_b, shingle_offsets, shingles, max_shingles)
    length = shingle_offsets[1:] - shingle_offsets[:-1]
    union = length.index_select(0, sketch_a) + length.index_select(0, sketch_b) - inter
    similar = (union == 0) | (inter.to(torch.float64) / union.clamp(min=1).to(torch.float64) >= float(threshold))
    dst = torch.where(similar & ~proposed_before, pos_b, pos_a)
    pair_start = torch.cat([pair_first, pair_end[-1:]])  # pairs before element slot i, i in 0..E
    return pos_a, dst, pair_start.index_select(0, group_offsets * n_bands)


TORCH_PIECES = SimilarityPieces(dense_ids_torch, shingle_overlap_torch, connected_labels_torch)


def similar_state_keys_torch(group, key, sketch, bands, threshold=None, shingle_offsets=None, shingles=None,
                             max_shingles: int | None = None) -> torch.Tensor:
    return similar_state_keys_pipeline(group, key, sketch, bands, threshold, shingle_offsets, shingles, max_shingles,
                                       TORCH_PIECES)
