"""OneFlow's balanced split of a length over parts: the first (total % parts) parts get one more."""
from ..layout import split_sizes

__all__ = ["BalancedPartNums", "BalancedRanges"]


def BalancedPartNums(total: int, part_size: int) -> list:  # noqa: N802 - OneFlow's name
    """The lengths of the part_size parts of `total` (as a dim split over ranks: S(d)'s pieces)."""
    return [int(n) for n in split_sizes(total, part_size)]


def BalancedRanges(total: int, part_size: int) -> list:  # noqa: N802 - OneFlow's name
    """[(start, end)] of each part, in order."""
    ranges, start = [], 0
    for n in BalancedPartNums(total, part_size):
        ranges.append((start, start + n))
        start += n
    return ranges
