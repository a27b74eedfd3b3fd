"""Pure arithmetic of layouts: uneven split sizes and which slice of the global value a rank holds.

Split axes nest in mesh-axis order: mesh axis 0 cuts the tensor first, mesh axis 1 then cuts
each of those pieces, and so on. Along a split of length L over k ranks, the first L % k
ranks get L // k + 1 elements and the rest L // k (empty pieces allowed).
"""
from .sbp import split


def split_sizes(length, k):
    """Lengths of the k pieces of `length`: the first length % k get one more."""
    base, extra = divmod(length, k)
    return [base + 1 if i < extra else base for i in range(k)]


def split_range(length, k, index):
    """(start, stop) of piece `index` of `length` split over k."""
    base, extra = divmod(length, k)
    start = index * base + min(index, extra)
    return start, start + base + (1 if index < extra else 0)


def local_box(global_shape, hierarchy, sbp, mesh_coord):
    """Per tensor dim, the (start, stop) range that the rank at `mesh_coord` holds."""
    box = [(0, n) for n in global_shape]
    for mesh_dim, s in enumerate(sbp):
        if isinstance(s, split):
            lo, hi = box[s.dim]
            a, b = split_range(hi - lo, hierarchy[mesh_dim], mesh_coord[mesh_dim])
            box[s.dim] = (lo + a, lo + b)
    return box


def local_shape(global_shape, hierarchy, sbp, mesh_coord):
    """The shape of the local piece at `mesh_coord`."""
    return tuple(b - a for a, b in local_box(global_shape, hierarchy, sbp, mesh_coord))


def box_slices(box):
    return tuple(slice(a, b) for a, b in box)


def holds_value(sbp, mesh_coord):
    """Whether this rank's piece carries the value rather than zeros: coordinate 0 on every
    partial_sum axis (a partial value is kept by one rank per axis, the others hold zeros)."""
    from .sbp import partial_sum
    return all(c == 0 for s, c in zip(sbp, mesh_coord) if s is partial_sum)


def parent_extent(global_len, hierarchy, sbp, mesh_coord, dim, upto):
    """The (start, stop) of tensor dim `dim` after the splits of mesh axes < `upto` only."""
    lo, hi = 0, global_len
    for mesh_dim in range(upto):
        s = sbp[mesh_dim]
        if isinstance(s, split) and s.dim == dim:
            a, b = split_range(hi - lo, hierarchy[mesh_dim], mesh_coord[mesh_dim])
            lo, hi = lo + a, lo + b
    return lo, hi


def intersect(box_a, box_b):
    """The intersection of two boxes, or None when empty."""
    out = []
    for (a0, a1), (b0, b1) in zip(box_a, box_b):
        lo, hi = max(a0, b0), min(a1, b1)
        if hi <= lo:
            return None
        out.append((lo, hi))
    return out
