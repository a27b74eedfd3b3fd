"""The counter-based generator against published answers: Random123's Philox4x32-10 known-answer
vectors (kat_vectors), and gt.rand / gt.randn / gt.randint recomputed element by element from an
independent numpy Philox, as docs/architecture.md describes them."""
import numpy as np
import pytest

import globaltensor as gt
from globaltensor import _native
from conftest import run_ranks

# Random123 kat_vectors, "philox4x32 10": counter (4 words), key (2 words) -> output (4 words).
KAT = [((0x00000000, 0x00000000, 0x00000000, 0x00000000), (0x00000000, 0x00000000),
        (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
       ((0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff), (0xffffffff, 0xffffffff),
        (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
       ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
        (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]


@pytest.mark.parametrize("counter, key, want", KAT)
def test_philox_matches_random123_known_answers(counter, key, want):
    assert tuple(_native.philox4x32(counter, key)) == want
    assert tuple(int(v) for v in _philox(np.array([counter], np.uint64), key)[0]) == want


def _philox(ctr, key):
    """Philox4x32-10 on rows of 4 counter words (uint64 arrays holding 32-bit words), in numpy."""
    m = np.uint64(0xFFFFFFFF)
    c = [ctr[:, i].astype(np.uint64) for i in range(4)]
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    for _ in range(10):
        p0, p1 = np.uint64(0xD2511F53) * c[0], np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & m, (p0 >> np.uint64(32)) ^ c[3] ^ k1, p0 & m]
        k0, k1 = (k0 + np.uint64(0x9E3779B9)) & m, (k1 + np.uint64(0xBB67AE85)) & m
    return np.stack(c, axis=1)


def _words(seed, call, n):
    """The four words of elements 0..n-1 of factory call `call` after manual_seed(seed)."""
    flat = np.arange(n, dtype=np.uint64)
    ctr = np.stack([flat & np.uint64(0xFFFFFFFF), flat >> np.uint64(32),
                    np.full(n, call & 0xFFFFFFFF, np.uint64), np.full(n, call >> 32, np.uint64)], axis=1)
    return _philox(ctr, (seed & 0xFFFFFFFF, seed >> 32))


def _reference(seed, shape):
    """gt.rand(shape), gt.randn(shape, dtype=float64), gt.randint(-5, 7, shape): calls 0, 1, 2."""
    n = int(np.prod(shape))
    w = _words(seed, 0, n)
    uniform = ((w[:, 0] >> np.uint64(8)).astype(np.float64) * 2.0 ** -24).astype(np.float32)
    w = _words(seed, 1, n)
    u1, u2 = (w[:, 0].astype(np.float64) + 1.0) * 2.0 ** -32, w[:, 1].astype(np.float64) * 2.0 ** -32
    normal = np.sqrt(-2.0 * np.log(u1)) * np.cos(6.283185307179586 * u2)
    w = _words(seed, 2, n)
    x = [(int(a) << 32) | int(b) for a, b in zip(w[:, 0], w[:, 1])]
    ints = np.array([-5 + ((v * 12) >> 64) for v in x], np.int64)
    return [a.reshape(shape) for a in (uniform, normal, ints)]


def _draw(seed, shape, sbp):
    gt.manual_seed(seed)
    kw = {} if sbp is None else {"placement": gt.placement("cpu", [0, 1, 2]), "sbp": sbp}
    return [gt.rand(*shape, **kw).numpy(), gt.randn(*shape, dtype=gt.float64, **kw).numpy(),
            gt.randint(-5, 7, shape, **kw).numpy()]


SEED, SHAPE = (1 << 40) + 12345, (5, 7)


def test_factories_follow_the_documented_philox_draws():
    for got, want in zip(_draw(SEED, SHAPE, None), _reference(SEED, SHAPE)):
        np.testing.assert_array_equal(got, want)


def test_global_factories_draw_the_same_values_on_three_ranks():
    want = _reference(SEED, SHAPE)
    for sbp in (gt.sbp.split(0), gt.sbp.split(1), gt.sbp.broadcast):
        for got in run_ranks(_draw, 3, SEED, SHAPE, sbp):
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)
