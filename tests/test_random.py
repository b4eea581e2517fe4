"""Tests of functx.random (keys, the Threefry generator, the samplers) and functx.nn.dropout.

* Known answers: the Random123 test vectors of Threefry-2x32-20, and the bits of
  ``jax.random`` (when JAX is installed; skipped otherwise) for keys, split, fold_in, bits,
  uniform, bernoulli, randint, categorical and permutation, to the bit; normal and
  truncated_normal to a few ulps.
* Determinism: the same key gives the same bits across calls, traced (make_trace), under
  vmap (against a Python loop) and under checkpoint's recomputation.
* Statistics (fixed keys, so deterministic): means, variances and chi-square tests on bins
  for every sampler; split and fold_in streams look independent (correlations, a
  chi-square on joint bins, and across keys).
* Errors: bad keys, dtypes, shapes and rates name the function and say what to do.

Chi-square p-values use mpmath's regularised incomplete gamma function; the tests reject
below 1e-6 (and a biased sample is shown to be rejected, so the test has power).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import functx as fx
import functx.nn as fnn
import functx.numpy as fnp
import functx.random as fxr
from functx.primitives import bits

P_MIN = 1e-6  # smallest acceptable chi-square p-value


# -- statistics helpers --------------------------------------------------------------------------

def chi2_pvalue(observed: np.ndarray, expected: np.ndarray) -> float:
    """The p-value of Pearson's chi-square statistic (degrees of freedom: bins - 1)."""
    observed, expected = np.asarray(observed, float).ravel(), np.asarray(expected, float).ravel()
    stat = float(np.sum((observed - expected) ** 2 / expected))
    dof = observed.size - 1
    return float(mpmath.gammainc(dof / 2, stat / 2, mpmath.inf, regularized=True))


def chi2_uniform_bins(u: np.ndarray, bins: int = 20, lo: float = 0.0, hi: float = 1.0) -> float:
    counts, _ = np.histogram(np.asarray(u, np.float64), bins=bins, range=(lo, hi))
    return chi2_pvalue(counts, np.full(bins, u.size / bins))


def normal_cdf(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def test_chi_square_has_power() -> None:
    """The chi-square helper accepts a fair sample and rejects a slightly biased one."""
    u = np.asarray(fxr.uniform(fxr.key(0), (100_000,)))
    assert chi2_uniform_bins(u) > P_MIN
    biased = np.where(u < 0.05, u + 0.05, u)  # the first bin emptied into the second
    assert chi2_uniform_bins(biased) < 1e-100


# -- the block function and keys -----------------------------------------------------------------

# Random123's known-answer tests for Threefry-2x32 with 20 rounds: (key, counter, result).
THREEFRY_KAT = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
]


@pytest.mark.parametrize("key,counter,expected", THREEFRY_KAT)
def test_threefry_known_answers(key: tuple, counter: tuple, expected: tuple) -> None:
    u = [np.array(v, np.uint32) for v in (*key, *counter)]
    y0, y1 = bits.threefry2x32(*u)
    assert (int(y0), int(y1)) == expected
    # Elementwise over broadcast counters: the same answer at every position.
    y0, y1 = bits.threefry2x32(u[0], u[1], np.full((3, 70_001), u[2]), np.full(70_001, u[3]))
    assert y0.shape == (3, 70_001) and np.all(y0 == expected[0]) and np.all(y1 == expected[1])


def test_threefry_rejects_other_dtypes() -> None:
    with pytest.raises(fx.DTypeError, match="threefry2x32 needs uint32"):
        fx.eval_shape(bits.threefry2x32, *[np.zeros(2, np.int32)] * 4)


@pytest.mark.parametrize("seed,expected", [
    (0, (0, 0)), (42, (0, 42)), (2**32 - 1, (0, 2**32 - 1)), (2**32 + 5, (1, 5)),
    (-1, (2**32 - 1, 2**32 - 1)), (2**64 - 1, (2**32 - 1, 2**32 - 1)), (-2**63, (2**31, 0)),
    (np.int32(-1), (0, 2**32 - 1)), (np.int64(-2), (2**32 - 1, 2**32 - 2)),
    (np.uint64(2**63 + 7), (2**31, 7)), (np.array(9, np.int16), (0, 9)),
])
def test_key_from_seed(seed: Any, expected: tuple) -> None:
    """The key is the seed's 64 bits (high word first); narrow seed dtypes have no high word."""
    k = fxr.key(seed)
    assert isinstance(k, np.ndarray) and k.dtype == np.uint32 and k.shape == (2,)
    assert tuple(int(v) for v in k) == expected
    assert not k.flags.writeable


def test_key_of_traced_seeds() -> None:
    seeds = np.array([0, 1, 2**40 + 3, -5], np.int64)
    batched = fx.vmap(fxr.key)(seeds)
    assert np.array_equal(batched, np.stack([fxr.key(int(s)) for s in seeds]))


@pytest.mark.parametrize("seed,error,match", [
    (1.5, fx.DTypeError, "integer seed"), (True, fx.DTypeError, "integer seed"),
    (np.zeros(()), fx.DTypeError, "integer seed"), (np.zeros(2, np.int64), fx.ShapeError, "scalar"),
    (2**64, ValueError, "64 bits"), ("7", fx.DTypeError, "integer seed"),
])
def test_key_errors(seed: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        fxr.key(seed)


def test_split_and_fold_in_agree() -> None:
    """``split(k, n)[i] == fold_in(k, i)``; split's shape argument lays out the same keys."""
    k = fxr.key(17)
    keys = fxr.split(k, 6)
    assert keys.shape == (6, 2) and keys.dtype == np.uint32
    for i in range(6):
        assert np.array_equal(keys[i], fxr.fold_in(k, i))
    assert np.array_equal(fxr.split(k, (2, 3)), keys.reshape(2, 3, 2))
    assert np.array_equal(fxr.fold_in(k, np.int64(4)), keys[4])
    assert fxr.split(k, 0).shape == (0, 2)
    assert len({tuple(v) for v in fxr.split(k, 1000).tolist()}) == 1000


def test_fold_in_traced_data() -> None:
    k = fxr.key(3)
    out = fx.vmap(lambda d: fxr.fold_in(k, d))(np.arange(5, dtype=np.int32))
    assert np.array_equal(out, fxr.split(k, 5))


@pytest.mark.parametrize("fn", [
    lambda k: fxr.uniform(k), lambda k: fxr.split(k), lambda k: fxr.fold_in(k, 1),
    lambda k: fxr.normal(k), lambda k: fxr.bits(k), lambda k: fxr.permutation(k, 3),
    lambda k: fxr.bernoulli(k), lambda k: fxr.randint(k, (), 0, 3),
    lambda k: fxr.categorical(k, np.zeros(3)), lambda k: fxr.truncated_normal(k, 0.0, 1.0),
    lambda k: fxr.gumbel(k),
])
@pytest.mark.parametrize("bad,error,match", [
    (0, fx.DTypeError, "key\\(seed\\)"),
    (np.zeros(2, np.int64), fx.DTypeError, "dtype int64"),
    (np.zeros(3, np.uint32), fx.ShapeError, r"shape \(3,\)"),
    (np.zeros((4, 2), np.uint32), fx.ShapeError, "vmap"),
])
def test_bad_keys_are_named(fn: Callable, bad: Any, error: type, match: str) -> None:
    """Every function names itself and says what a key is."""
    with pytest.raises(error, match=match) as info:
        fn(bad)
    assert "functx.random." in str(info.value) and "uint32 array of shape (2,)" in str(info.value)


def test_fold_in_data_errors() -> None:
    k = fxr.key(0)
    with pytest.raises(ValueError, match=r"\[0, 2\*\*32\)"):
        fxr.fold_in(k, -1)
    with pytest.raises(fx.DTypeError, match="integer data"):
        fxr.fold_in(k, np.float32(1))
    with pytest.raises(fx.ShapeError, match="vmap"):
        fxr.fold_in(k, np.arange(3))


# -- determinism: calls, traces, vmap, checkpoint ---------------------------------------------------

SAMPLERS: dict[str, Callable] = {
    "bits32": lambda k: fxr.bits(k, (3, 5)),
    "bits64": lambda k: fxr.bits(k, (4,), np.uint64),
    "bits8": lambda k: fxr.bits(k, (9,), np.uint8),
    "split": lambda k: fxr.split(k, (2, 2)),
    "fold_in": lambda k: fxr.fold_in(k, 123),
    "uniform": lambda k: fxr.uniform(k, (7,), np.float32, -1.0, np.arange(1.0, 8.0)),
    "normal": lambda k: fxr.normal(k, (2, 3)),
    "normal_c64": lambda k: fxr.normal(k, (3,), np.complex64),
    "truncated_normal": lambda k: fxr.truncated_normal(k, np.array([-1.0, 0.0]), 2.0, (3, 2)),
    "bernoulli": lambda k: fxr.bernoulli(k, np.array([0.1, 0.5, 0.9]), (2, 3)),
    "randint": lambda k: fxr.randint(k, (6,), -3, 40),
    "randint_u8": lambda k: fxr.randint(k, (6,), 0, 256, np.uint8),
    "categorical": lambda k: fxr.categorical(k, np.log([[0.2, 0.8], [0.5, 0.5]]), shape=(3, 2)),
    "permutation": lambda k: fxr.permutation(k, 7),
    "permutation_rows": lambda k: fxr.permutation(k, np.arange(12.0).reshape(3, 4), axis=1),
    "permutation_indep": lambda k: fxr.permutation(k, np.arange(12).reshape(3, 4), 0, True),
    "gumbel": lambda k: fxr.gumbel(k, (4,), np.float32),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_same_key_same_bits(name: str) -> None:
    """Across calls, traced and replayed, and under vmap (against a loop over keys)."""
    f = SAMPLERS[name]
    k = fxr.key(5)
    a, b = f(k), f(np.array(k))  # a writeable copy of the key is the same key
    assert type(a) is np.ndarray and not a.flags.writeable
    assert a.dtype == b.dtype and np.array_equal(a, b)
    trace = fx.make_trace(f)(k)
    assert np.array_equal(fx.eval_trace(trace, k)[0], a)
    keys = fxr.split(fxr.key(6), 4)
    batched = fx.vmap(f)(keys)
    assert np.array_equal(batched, np.stack([f(kk) for kk in keys]))
    assert np.array_equal(batched[2], f(keys[2]))
    nested = fx.vmap(fx.vmap(f))(keys.reshape(2, 2, 2))
    assert np.array_equal(nested.reshape(batched.shape), batched)
    if name != "fold_in":  # a different key gives different values
        assert not np.array_equal(f(fxr.key(7)), a)


@settings(max_examples=15)
@given(shape=st.lists(st.integers(0, 5), max_size=3).map(tuple), seed=st.integers(0, 2**32 - 1))
def test_bits_are_a_function_of_the_flat_index(shape: tuple, seed: int) -> None:
    """The element at C-order index i of any shape is the i-th element of the flat stream, so
    reshaping the request does not change the values."""
    k = fxr.key(seed)
    n = math.prod(shape)
    flat = fxr.bits(k, (n,))
    assert np.array_equal(fxr.bits(k, shape), flat.reshape(shape))
    assert np.array_equal(fxr.uniform(k, shape), fxr.uniform(k, (n,)).reshape(shape))


def test_values_do_not_depend_on_the_size_requested() -> None:
    """A longer request extends a shorter one (counter-based: element i never changes)."""
    k = fxr.key(11)
    assert np.array_equal(fxr.bits(k, (1000,))[:10], fxr.bits(k, (10,)))
    assert np.array_equal(fxr.normal(k, (500,))[:3], fxr.normal(k, (3,)))


def test_checkpoint_recomputation_reproduces_dropout() -> None:
    """checkpoint recomputes the dropout mask from the key: the gradient is the gradient
    without checkpoint, bit for bit, and matches the mask drawn outside."""
    k = fxr.key(0)
    x = np.linspace(-2.0, 2.0, 50)

    def block(x: Any, k: Any) -> Any:
        return fnp.sum(fnp.tanh(fnn.dropout(k, fnp.sin(x), 0.4)) ** 2)

    g_plain = fx.grad(block)(x, k)
    g_ckpt = fx.grad(fx.checkpoint(block))(x, k)
    assert np.array_equal(g_plain, g_ckpt)
    keep = np.asarray(fxr.bernoulli(k, 0.6, (50,)))
    assert np.all(g_plain[~keep] == 0) and np.all(g_plain[keep] != 0)


# -- bits and uniform -----------------------------------------------------------------------------

def test_every_bit_is_fair() -> None:
    """Each of the 32 bit positions is set about half the time (a binomial z-test), and
    bits of one word are uncorrelated with the next word's (xor also fair)."""
    n = 100_000
    b = np.asarray(fxr.bits(fxr.key(1), (n,)))
    ones = (b[:, None] >> np.arange(32, dtype=np.uint32)) & 1
    z = (ones.sum(0) - n / 2) / math.sqrt(n / 4)
    assert np.max(np.abs(z)) < 5, z
    pairs = (b[:-1] ^ b[1:]) >> np.uint32(31)
    assert abs(pairs.mean() - 0.5) < 5 * math.sqrt(0.25 / n)
    b64 = np.asarray(fxr.bits(fxr.key(1), (n,), np.uint64))
    top = (b64 >> np.uint64(63)).astype(np.int64)
    assert abs(top.mean() - 0.5) < 5 * math.sqrt(0.25 / n)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_uniform_statistics(dtype: type) -> None:
    n = 200_000
    u = np.asarray(fxr.uniform(fxr.key(2), (n,), dtype))
    assert u.dtype == dtype and u.min() >= 0 and u.max() < 1
    u64 = u.astype(np.float64)
    assert abs(u64.mean() - 0.5) < 5 * math.sqrt(1 / 12 / n)
    assert abs(u64.var() - 1 / 12) < 5 * math.sqrt(1 / 180 / n)  # var of (u - 1/2)^2 is 1/180
    assert chi2_uniform_bins(u64, bins=16 if dtype == np.float16 else 50) > P_MIN
    # All mantissa bits are random: the values are multiples of 2**-nmant, spread out.
    nmant = np.finfo(dtype).nmant
    assert np.all(np.ldexp(u64, nmant) == np.floor(np.ldexp(u64, nmant)))
    # n draws from 2**nmant equally likely values: the expected number of distinct ones.
    m = 2.0**nmant
    distinct = m * -math.expm1(n * math.log1p(-1 / m))
    assert abs(len(np.unique(u)) - distinct) < 5 * math.sqrt(n - distinct + 1) + 1


def test_uniform_range_and_broadcasting() -> None:
    lo = np.array([-3.0, 0.0, 10.0])
    hi = np.array([[-2.0, 1e-3, 1e6]])
    u = np.asarray(fxr.uniform(fxr.key(3), (4000, 3), minval=lo, maxval=hi))
    assert u.shape == (4000, 3)
    assert np.all(u >= lo) and np.all(u < hi)
    scaled = (u - lo) / (hi - lo)
    for j in range(3):
        assert chi2_uniform_bins(scaled[:, j], bins=10) > P_MIN
    # The same draws as the unit interval, mapped affinely.
    unit = np.asarray(fxr.uniform(fxr.key(3), (4000, 3)))
    np.testing.assert_allclose(u, np.maximum(lo, unit * (hi - lo) + lo), rtol=1e-15)
    with pytest.raises(fx.ShapeError, match="broadcast to the requested shape"):
        fxr.uniform(fxr.key(3), (3,), minval=np.zeros(4))
    with pytest.raises(fx.DTypeError, match="floating-point"):
        fxr.uniform(fxr.key(3), (3,), np.int32)


def test_uniform_is_differentiable_in_its_bounds() -> None:
    """d/dlo sum(lo + f (hi - lo)) = n - sum f, d/dhi = sum f."""
    k = fxr.key(4)
    f = np.asarray(fxr.uniform(k, (100,)))
    g_lo, g_hi = fx.grad(lambda lo, hi: fnp.sum(fxr.uniform(k, (100,), minval=lo, maxval=hi)),
                         argnums=(0, 1))(-1.0, 3.0)
    np.testing.assert_allclose([g_lo, g_hi], [100 - f.sum(), f.sum()], rtol=1e-12)


# -- normal and truncated normal ------------------------------------------------------------------

NORMAL_EDGES = np.array([-np.inf, -2.5, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 2.5, np.inf])


def chi2_normal_bins(x: np.ndarray) -> float:
    counts, _ = np.histogram(x, bins=NORMAL_EDGES)
    probs = np.diff([normal_cdf(e) for e in NORMAL_EDGES])
    return chi2_pvalue(counts, probs * x.size)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_normal_statistics(dtype: type) -> None:
    n = 200_000
    x = np.asarray(fxr.normal(fxr.key(5), (n,), dtype))
    assert x.dtype == dtype and np.all(np.isfinite(x))
    x = x.astype(np.float64)
    assert abs(x.mean()) < 5 / math.sqrt(n)
    assert abs(x.var() - 1) < 5 * math.sqrt(2 / n)
    assert abs(np.mean(x**3)) < 5 * math.sqrt(15 / n)  # skewness 0
    assert abs(np.mean(x**4) - 3) < 5 * math.sqrt(96 / n)  # kurtosis 3
    assert chi2_normal_bins(x) > P_MIN


def test_normal_tails_use_the_whole_mantissa() -> None:
    """The inverse CDF reaches far tails: the extreme of 400000 draws is about 4.7 sigma,
    and |x| > 4 about 25 times (P(|x| > 4) = 6.3e-5)."""
    x = np.asarray(fxr.normal(fxr.key(6), (400_000,)))
    assert 4.1 < np.abs(x).max() < 6.5
    assert 8 < np.sum(np.abs(x) > 4) < 50


def test_normal_complex() -> None:
    z = np.asarray(fxr.normal(fxr.key(7), (100_000,), np.complex128))
    assert z.dtype == np.complex128
    for part in (z.real, z.imag):
        assert abs(part.mean()) < 5 * math.sqrt(0.5 / z.size)
        assert abs(part.var() - 0.5) < 5 * math.sqrt(0.5 / z.size)
    assert abs(np.corrcoef(z.real, z.imag)[0, 1]) < 5 / math.sqrt(z.size)


def test_erfinv_matches_the_inverse_of_erf() -> None:
    """normal() inverts erf: sqrt(2) erfinv(u) = x means erf(x / sqrt(2)) = u, checked on
    the float64 polynomial branches (w < 6.25, w < 16, beyond) with mpmath."""
    from functx.random._distributions import _erfinv

    u = np.array([-0.999999999, -0.9, -0.3, 0.0, 1e-10, 0.2, 0.7, 0.99, 0.999999,
                  1 - 1e-9, 1 - 2**-52])
    y = np.asarray(_erfinv(u))
    for ui, yi in zip(u, y):
        exact = float(mpmath.erfinv(mpmath.mpf(float(ui))))
        assert abs(yi - exact) <= 4e-15 * max(abs(exact), 1e-300), (ui, yi, exact)
    y32 = np.asarray(_erfinv(u.astype(np.float32)))
    exact32 = np.array([float(mpmath.erfinv(mpmath.mpf(float(v)))) for v in u.astype(np.float32)])
    np.testing.assert_allclose(y32, exact32, rtol=2e-6)
    assert np.asarray(_erfinv(np.array([1.0, -1.0]))).tolist() == [np.inf, -np.inf]


def test_float32_normal_tails_match_erfinv_of_the_same_uniform() -> None:
    """The float32 tails (the 2^13 smallest and largest mantissas, |x| from 3.1 to 5.42)
    against ``sqrt(2) erfinv(u)`` of the very ``u`` jax.random.uniform computes (float32
    products and sums): within 1e-6 relative. (Against u rounded once from float64 instead,
    one unit of u in the last place moves x by up to 1% there.) Random bits seldom reach
    the tails, so the spec table's hypothesis examples do not cover them."""
    from functx.primitives import bits_normal
    from tests.specs.random import _normal_ref

    rng = np.random.default_rng(3)
    mant = np.concatenate([np.arange(0, 1 << 13), np.arange((1 << 23) - (1 << 13), 1 << 23)])
    bits = (mant.astype(np.uint32) << np.uint32(9)) | rng.integers(0, 512, mant.size,
                                                                   dtype=np.uint32)
    got = np.asarray(bits_normal.bits_to_normal(bits, np.float32))
    want = _normal_ref(np.float32)(bits)
    assert np.abs(want).min() > 3.0 and np.abs(want).max() > 5.4
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


def test_normal_compiled_and_numpy_paths_agree(monkeypatch: Any) -> None:
    """Large arrays take the compiled (Numba) loop of bits_to_normal, small ones and
    FUNCTX_NUMBA=0 the NumPy operations: the same formula, so the results agree to an ulp
    or two on every branch (bits drawn to reach the tails as well)."""
    from functx.primitives import bits_normal

    rng = np.random.default_rng(0)
    n = bits_normal.NUMBA_MIN_SIZE
    for dt, ut in ((np.float64, np.uint64), (np.float32, np.uint32)):
        top = np.iinfo(ut).max
        bits = np.concatenate([rng.integers(0, top, n, dtype=ut, endpoint=True),
                               np.array([0, 1, top, top - 1, top // 2], ut),
                               (top - rng.integers(0, 2**20, 500, dtype=ut))])
        compiled = np.asarray(bits_normal.bits_to_normal(bits, dt))
        monkeypatch.setenv("FUNCTX_NUMBA", "0")
        plain = np.asarray(bits_normal.bits_to_normal(bits, dt))
        monkeypatch.delenv("FUNCTX_NUMBA")
        assert compiled.dtype == plain.dtype == dt and np.isfinite(plain).all()
        ulps = np.abs(compiled - plain) / np.spacing(np.abs(plain).astype(dt))
        assert ulps.max() <= 4, (dt, ulps.max())  # libm vs NumPy log: an ulp each


def test_threefry_compiled_and_numpy_paths_agree(monkeypatch: Any) -> None:
    """The compiled block function gives exactly the NumPy passes' bits (full-size,
    broadcast and single-element operands)."""
    from functx.primitives import bits

    rng = np.random.default_rng(1)
    n = bits.NUMBA_MIN_SIZE
    ops = [np.uint32(7), rng.integers(0, 2**32, (n // 4, 1), dtype=np.uint32),
           rng.integers(0, 2**32, (1, 4), dtype=np.uint32),
           rng.integers(0, 2**32, (n // 4, 4), dtype=np.uint32)]
    ops = [np.asarray(o) for o in ops]
    compiled = bits.threefry2x32_impl(np, *ops)
    monkeypatch.setenv("FUNCTX_NUMBA", "0")
    plain = bits.threefry2x32_impl(np, *ops)
    for c, p in zip(compiled, plain):
        assert c.shape == (n // 4, 4) and np.array_equal(c, p)


@pytest.mark.parametrize("width", [32, 64])
def test_random_bits_compiled_and_numpy_paths_agree(monkeypatch: Any, width: int) -> None:
    """The compiled random_bits loop gives exactly the NumPy path's bits, for one key and
    for a batch of keys (vmap)."""
    from functx.primitives import bits

    k1 = np.array([3, 4], np.uint32)
    k2 = np.array([99, 2**32 - 1], np.uint32)
    shape = (bits.NUMBA_MIN_SIZE // 2, 3)
    compiled = bits.random_bits(k1, k2, shape, width)
    single = bits.random_bits(k1[0], k2[0], shape, width)
    monkeypatch.setenv("FUNCTX_NUMBA", "0")
    plain = bits.random_bits(k1, k2, shape, width)
    assert compiled.shape == (2,) + shape and np.array_equal(compiled, plain)
    assert np.array_equal(single, plain[0])


def test_erfinv_gradient() -> None:
    """The derivative of erf_inv is erfinv' = sqrt(pi)/2 exp(erfinv(u)^2), on every branch,
    and finite at 0."""
    from functx.random._distributions import _erfinv

    u = np.array([-0.9999, -0.7, -0.2, 0.0, 0.3, 0.6, 0.99, 0.9999999, 1 - 1e-12])
    g = np.asarray(fx.grad(lambda u: fnp.sum(_erfinv(u)))(u))
    exact = [float(mpmath.sqrt(mpmath.pi) / 2 * mpmath.exp(mpmath.erfinv(v) ** 2)) for v in u]
    np.testing.assert_allclose(g, exact, rtol=1e-9)


def test_truncated_normal_is_differentiable_in_its_bounds() -> None:
    """Gradients for the bounds (through the inverse CDF) match finite differences."""
    k = fxr.key(28)

    def total(lo: Any, hi: Any) -> Any:
        return fnp.sum(fxr.truncated_normal(k, lo, hi, (300,)) ** 2)

    g_lo, g_hi = fx.grad(total, argnums=(0, 1))(-0.7, 1.3)
    eps = 1e-6
    fd_lo = (float(total(-0.7 + eps, 1.3)) - float(total(-0.7 - eps, 1.3))) / (2 * eps)
    fd_hi = (float(total(-0.7, 1.3 + eps)) - float(total(-0.7, 1.3 - eps))) / (2 * eps)
    np.testing.assert_allclose([g_lo, g_hi], [fd_lo, fd_hi], rtol=1e-5)


@pytest.mark.parametrize("lower,upper", [(-1.0, 2.0), (0.0, np.inf), (-np.inf, -3.0),
                                         (4.0, 4.5)])
def test_truncated_normal_statistics(lower: float, upper: float) -> None:
    n = 100_000
    x = np.asarray(fxr.truncated_normal(fxr.key(8), lower, upper, (n,)))
    assert np.all(x > lower) and np.all(x < upper)
    phi = lambda t: 0.0 if np.isinf(t) else math.exp(-t * t / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    mass = normal_cdf(upper) - normal_cdf(lower)
    mean = (phi(lower) - phi(upper)) / mass
    var = 1 + ((lower * phi(lower) if np.isfinite(lower) else 0)
               - (upper * phi(upper) if np.isfinite(upper) else 0)) / mass - mean**2
    assert abs(x.mean() - mean) < 5 * math.sqrt(var / n)
    # Chi-square on 10 equal-mass bins of the truncated distribution.
    probs = np.linspace(0, 1, 11)
    counts = np.histogram([(normal_cdf(v) - normal_cdf(lower)) / mass for v in x[:20_000]],
                          bins=probs)[0]
    assert chi2_pvalue(counts, np.full(10, 2000)) > P_MIN


def test_truncated_normal_bounds_are_open_even_after_rounding() -> None:
    """With bounds a hair apart every value lies strictly between them (clipped inside)."""
    lo = np.array([1.0, -1e-300, 3.0], np.float32)
    hi = np.nextafter(np.nextafter(lo, np.float32(np.inf)), np.float32(np.inf))
    x = np.asarray(fxr.truncated_normal(fxr.key(9), lo, hi, (1000, 3), np.float32))
    assert x.dtype == np.float32 and np.all(x > lo) and np.all(x < hi)
    assert fxr.truncated_normal(fxr.key(9), np.zeros((2, 1)), np.ones(3)).shape == (2, 3)


# -- bernoulli, randint, categorical, gumbel ---------------------------------------------------------

@pytest.mark.parametrize("p", [0.0, 0.01, 0.3, 0.5, 0.97, 1.0])
def test_bernoulli_frequency(p: float) -> None:
    n = 100_000
    b = np.asarray(fxr.bernoulli(fxr.key(10), p, (n,)))
    assert b.dtype == np.bool_ and b.shape == (n,)
    if p in (0.0, 1.0):
        assert np.all(b == bool(p))
    else:
        assert abs(b.mean() - p) < 5 * math.sqrt(p * (1 - p) / n)


def test_bernoulli_array_p_and_errors() -> None:
    p = np.array([0.1, 0.5, 0.9], np.float32)
    b = np.asarray(fxr.bernoulli(fxr.key(11), p, (50_000, 3)))
    np.testing.assert_allclose(b.mean(0), p, atol=5 * math.sqrt(0.25 / 50_000))
    assert fxr.bernoulli(fxr.key(11), p).shape == (3,)
    with pytest.raises(fx.DTypeError, match="floating-point probability"):
        fxr.bernoulli(fxr.key(11), np.array([1, 0]))
    with pytest.raises(fx.ShapeError, match="broadcast"):
        fxr.bernoulli(fxr.key(11), p, (3, 2))


@pytest.mark.parametrize("dtype,lo,hi", [
    (np.int64, -5, 12), (np.int32, 0, 7), (np.int8, -128, 128), (np.uint8, 0, 256),
    (np.uint16, 100, 107), (np.uint32, 0, 2**32), (np.int64, -2**62, -2**62 + 3),
])
def test_randint_uniformity(dtype: type, lo: int, hi: int) -> None:
    n = 60_000
    x = np.asarray(fxr.randint(fxr.key(12), (n,), lo, hi, dtype))
    assert x.dtype == dtype and x.shape == (n,)
    assert int(x.min()) >= lo and int(x.max()) <= hi - 1
    span = hi - lo
    if span <= 256:
        counts = np.bincount((x.astype(np.int64) - lo).astype(np.int64), minlength=span)
        assert counts.size == span and np.all(counts > 0)
        assert chi2_pvalue(counts, np.full(span, n / span)) > P_MIN
    else:  # the top bits are uniform: 16 bins
        bins = ((x.astype(np.float64) - lo) / span * 16).astype(np.int64)
        assert chi2_pvalue(np.bincount(bins, minlength=16), np.full(16, n / 16)) > P_MIN


def test_randint_edge_cases() -> None:
    k = fxr.key(13)
    assert np.all(np.asarray(fxr.randint(k, (20,), 5, 5)) == 5)  # an empty range gives minval
    assert np.all(np.asarray(fxr.randint(k, (20,), 5, -3)) == 5)
    lo, hi = np.array([0, 10, -4]), np.array([[1], [20]])
    x = np.asarray(fxr.randint(k, (2, 3), lo, hi))
    assert x.shape == (2, 3) and np.all(x >= lo) and np.all((x < hi) | (hi <= lo))
    with pytest.raises(fx.DTypeError, match="integer dtype"):
        fxr.randint(k, (2,), 0, 3, np.float32)
    with pytest.raises(fx.ShapeError, match="broadcast"):
        fxr.randint(k, (2,), np.zeros(3, int), 5)


def test_categorical_frequencies() -> None:
    probs = np.array([0.05, 0.15, 0.3, 0.5, 0.0])
    logits = np.log(np.where(probs > 0, probs, 1.0)) + np.where(probs > 0, 0.0, -np.inf)
    n = 50_000
    s = np.asarray(fxr.categorical(fxr.key(14), logits + 3.0, shape=(n,)))  # shift-invariant
    assert s.dtype == np.int64 and s.shape == (n,)
    counts = np.bincount(s, minlength=5)
    assert counts[4] == 0
    assert chi2_pvalue(counts[:4], probs[:4] * n) > P_MIN


def test_categorical_axes_and_batches() -> None:
    logits = np.log(np.array([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]]))  # (3 batches, 2 classes)
    s = np.asarray(fxr.categorical(fxr.key(15), logits, shape=(20_000, 3)))
    assert s.shape == (20_000, 3)
    np.testing.assert_allclose(s.mean(0), [0.1, 0.8, 0.5], atol=5 * math.sqrt(0.25 / 20_000))
    s0 = fxr.categorical(fxr.key(15), logits.T, axis=0)
    assert s0.shape == (3,)
    with pytest.raises(fx.ShapeError, match="out of range"):
        fxr.categorical(fxr.key(15), logits, axis=2)
    with pytest.raises(fx.DTypeError, match="floating-point logits"):
        fxr.categorical(fxr.key(15), np.array([1, 2]))


def test_gumbel_statistics() -> None:
    g = np.asarray(fxr.gumbel(fxr.key(16), (200_000,)))
    euler = 0.5772156649015329
    assert abs(g.mean() - euler) < 5 * math.sqrt(math.pi**2 / 6 / g.size)
    assert abs(g.var() - math.pi**2 / 6) < 0.05
    assert np.all(np.isfinite(g))


# -- permutation ------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [0, 1, 2, 10, 2000])
def test_permutation_is_a_permutation(n: int) -> None:
    p = np.asarray(fxr.permutation(fxr.key(17), n))
    assert p.dtype == np.int64 and np.array_equal(np.sort(p), np.arange(n))
    if n > 10:
        assert not np.array_equal(p, np.arange(n))


def test_permutation_positions_are_uniform() -> None:
    """Over many keys, every element lands in every position about equally often."""
    keys = fxr.split(fxr.key(18), 3000)
    perms = np.asarray(fx.vmap(lambda k: fxr.permutation(k, 5))(keys))
    for pos in range(5):
        counts = np.bincount(perms[:, pos], minlength=5)
        assert chi2_pvalue(counts, np.full(5, 600)) > P_MIN
    # and all 120 orders occur
    assert len({tuple(p) for p in perms.tolist()}) == 120


def test_permutation_of_arrays() -> None:
    k = fxr.key(19)
    x = np.arange(24.0).reshape(4, 6)
    rows = np.asarray(fxr.permutation(k, x))  # whole rows move
    assert sorted(rows[:, 0].tolist()) == [0, 6, 12, 18]
    assert np.array_equal(rows - rows[:, :1], np.tile(np.arange(6.0), (4, 1)))
    cols = np.asarray(fxr.permutation(k, x, axis=1, independent=True))
    assert np.array_equal(np.sort(cols, axis=1), x)
    assert len({tuple(np.argsort(r)) for r in cols}) > 1  # rows shuffled differently
    w = np.arange(6.0) ** 2
    g = fx.grad(lambda x: fnp.sum(fxr.permutation(k, x) * w))(np.linspace(0, 1, 6))
    order = np.asarray(fxr.permutation(k, 6))
    assert np.array_equal(g[order], w)  # the gradient flows back through the shuffle
    with pytest.raises(fx.ShapeError, match="out of range"):
        fxr.permutation(k, x, axis=2)
    with pytest.raises(fx.DTypeError, match="rank >= 1"):
        fxr.permutation(k, np.float64(3.0))


# -- independence of split and fold_in streams -----------------------------------------------------

def test_split_streams_look_independent() -> None:
    n = 100_000
    ka, kb = fxr.split(fxr.key(20))
    a = np.asarray(fxr.uniform(ka, (n,)))
    b = np.asarray(fxr.uniform(kb, (n,)))
    parent = np.asarray(fxr.uniform(fxr.key(20), (n,)))
    for x, y in ((a, b), (a, parent), (b, parent)):
        assert abs(np.corrcoef(x, y)[0, 1]) < 5 / math.sqrt(n)
        joint = np.histogram2d(x, y, bins=10, range=[[0, 1], [0, 1]])[0]
        assert chi2_pvalue(joint, np.full((10, 10), n / 100)) > P_MIN


def test_streams_across_many_keys() -> None:
    """The first value drawn with each of 20000 folded-in keys is uniform, and consecutive
    keys' values are uncorrelated: keys that differ in one counter are unrelated."""
    k = fxr.key(21)
    firsts = np.asarray(fx.vmap(lambda d: fxr.uniform(fxr.fold_in(k, d)))(
        np.arange(20_000, dtype=np.uint32)))
    assert chi2_uniform_bins(firsts) > P_MIN
    assert abs(np.corrcoef(firsts[:-1], firsts[1:])[0, 1]) < 5 / math.sqrt(firsts.size)
    seeds = np.asarray(fx.vmap(lambda s: fxr.uniform(fxr.key(s)))(np.arange(20_000)))
    assert chi2_uniform_bins(seeds) > P_MIN


# -- dropout ----------------------------------------------------------------------------------------

def test_dropout_mask_and_scale() -> None:
    k = fxr.key(22)
    x = np.linspace(1.0, 2.0, 10_000).reshape(100, 100)
    y = np.asarray(fnn.dropout(k, x, 0.25))
    keep = np.asarray(fxr.bernoulli(k, 0.75, x.shape))
    np.testing.assert_allclose(y, np.where(keep, x / 0.75, 0.0), rtol=1e-15)
    assert abs(keep.mean() - 0.75) < 5 * math.sqrt(0.75 * 0.25 / x.size)
    assert np.array_equal(fnn.dropout(k, x, 0.25), y)  # same key, same mask
    assert not np.array_equal(fnn.dropout(fxr.key(23), x, 0.25), y)


def test_dropout_preserves_the_mean() -> None:
    x = np.ones((400, 500), np.float32)
    for rate in (0.1, 0.5, 0.9):
        y = np.asarray(fnn.dropout(fxr.key(24), x, rate))
        assert y.dtype == np.float32
        sd = math.sqrt(rate / (1 - rate) / x.size)  # of the mean of kept/(1-rate) values
        assert abs(y.mean() - 1.0) < 5 * sd


def test_dropout_identity_and_zero_cases() -> None:
    x = np.arange(6.0).reshape(2, 3)
    assert fnn.dropout(None, x, 0.0) is x
    assert fnn.dropout(fxr.key(0), x, 0.7, deterministic=True) is x
    z = np.asarray(fnn.dropout(fxr.key(0), x, 1.0))
    assert z.shape == x.shape and np.all(z == 0)
    g = fx.grad(lambda x: fnp.sum(fnn.dropout(fxr.key(0), x, 1.0)))(x)
    assert np.all(g == 0)


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.8])
def test_dropout_gradient_is_mask_over_keep_probability(rate: float) -> None:
    k = fxr.key(25)
    x = np.linspace(-1.0, 1.0, 1000)
    w = np.linspace(2.0, 3.0, 1000)
    g = fx.grad(lambda x: fnp.sum(fnn.dropout(k, x, rate) * w))(x)
    keep = np.asarray(fxr.bernoulli(k, 1 - rate, (1000,)))
    np.testing.assert_allclose(g, keep * w / (1 - rate), rtol=1e-15)


def test_dropout_broadcast_dims_and_vmap() -> None:
    x = np.ones((4, 5, 6))
    y = np.asarray(fnn.dropout(fxr.key(26), x, 0.5, broadcast_dims=(1,)))
    assert np.array_equal(y, np.broadcast_to(y[:, :1, :], y.shape))  # shared along axis 1
    keys = fxr.split(fxr.key(27), 4)
    batched = fx.vmap(lambda k, x: fnn.dropout(k, x, 0.3))(keys, x)
    assert np.array_equal(batched, np.stack([fnn.dropout(k, xx, 0.3) for k, xx in zip(keys, x)]))


@pytest.mark.parametrize("rate", [-0.1, 1.5, float("nan"), "0.5", True])
def test_dropout_rejects_bad_rates(rate: Any) -> None:
    with pytest.raises(fnn.ArgumentError, match="rate"):
        fnn.dropout(fxr.key(0), np.ones(3), rate)


def test_dropout_rejects_bad_inputs() -> None:
    with pytest.raises(fx.DTypeError, match="floating-point input"):
        fnn.dropout(fxr.key(0), np.arange(3), 0.5)
    with pytest.raises(fx.DTypeError, match="functx.nn.dropout needs a key"):
        fnn.dropout(0, np.ones(3), 0.5)
    with pytest.raises(fx.ShapeError, match="functx.nn.dropout needs one key"):
        fnn.dropout(fxr.split(fxr.key(0)), np.ones(3), 1.0)


# -- bit primitives at the edges ------------------------------------------------------------------

def test_bitcast_keeps_every_bit_pattern() -> None:
    """IEEE-754 patterns (1.0, -0.0, inf, NaN payloads) survive a round trip exactly."""
    assert int(bits.bitcast_convert_type(np.float32(1.0), new_dtype=np.uint32)) == 0x3F800000
    assert int(bits.bitcast_convert_type(np.float64(-0.0), new_dtype=np.uint64)) == 1 << 63
    patterns = np.array([0x7F800000, 0xFF800000, 0x7FC00001, 0xFFFFFFFF, 1, 0x80000000],
                        np.uint32)
    f = bits.bitcast_convert_type(patterns, new_dtype=np.float32)
    assert np.isinf(f[0]) and np.isnan(f[2]) and f[4] > 0 and np.signbit(f[5])
    assert np.array_equal(bits.bitcast_convert_type(f, new_dtype=np.uint32), patterns)
    with pytest.raises(fx.DTypeError, match="one width"):
        fx.eval_shape(lambda x: bits.bitcast_convert_type(x, new_dtype=np.uint64),
                      np.zeros(2, np.float32))
    with pytest.raises(fx.DTypeError, match="integers and real floats"):
        fx.eval_shape(lambda x: bits.bitcast_convert_type(x, new_dtype=np.uint8),
                      np.zeros(2, np.bool_))


def test_shift_amounts_at_and_past_the_width() -> None:
    one = np.array([1, 1, 1, 1], np.uint32)
    amounts = np.array([0, 31, 32, 0xFFFFFFFF], np.uint32)
    assert bits.shift_left(one, amounts).tolist() == [1, 2**31, 0, 0]
    top = np.full(4, 2**31, np.uint32)
    assert bits.shift_right_logical(top, amounts).tolist() == [2**31, 1, 0, 0]
    neg = np.full(4, -8, np.int32)
    assert bits.shift_right_arithmetic(neg, amounts.view(np.int32)).tolist() == [-8, -1, -1, -1]
    assert bits.shift_right_logical(neg, np.int32(28)).tolist() == [15] * 4
    with pytest.raises(fx.DTypeError, match="integer operands"):
        fx.eval_shape(bits.shift_left, np.zeros(2, np.float32), np.zeros(2, np.float32))


# -- jax.random as an oracle --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def jax_random() -> Any:
    """jax.random configured for raw threefry keys and the partitionable bit layout."""
    jax = pytest.importorskip("jax", reason="JAX (an optional oracle) is not installed")
    old = (jax.config.jax_default_prng_impl, jax.config.jax_threefry_partitionable)
    jax.config.update("jax_default_prng_impl", "threefry2x32")
    jax.config.update("jax_threefry_partitionable", True)
    yield jax
    jax.config.update("jax_default_prng_impl", old[0])
    jax.config.update("jax_threefry_partitionable", old[1])


def enable_x64(jax: Any) -> Any:
    """JAX's 64-bit mode as a context manager (None where this JAX has no such context)."""
    ctx = getattr(jax, "enable_x64", None)
    if ctx is None:
        ctx = getattr(getattr(jax, "experimental", None), "enable_x64", None)
    return ctx


JAX_SEEDS = [0, 2**32 - 1]  # JAX compiles each sampler once; a second seed costs little


@pytest.mark.parametrize("seed", JAX_SEEDS)
def test_bits_match_jax(jax_random: Any, seed: int) -> None:
    """Bit for bit: keys, split, fold_in, bits, uniform, bernoulli, randint, permutation.

    (JAX compiles every sampler on first use, seconds each on a small machine, so this
    checks a few representative calls; the statistics tests cover the rest.)
    """
    jr, jnp = jax_random.random, jax_random.numpy
    k, jk = fxr.key(seed), jr.PRNGKey(seed)

    def same(a: Any, b: Any) -> bool:
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and np.array_equal(a, b)

    assert same(k, jk)
    assert same(fxr.split(k), jr.split(jk))
    assert same(fxr.fold_in(k, 123456), jr.fold_in(jk, 123456))
    assert same(fxr.bits(k, (5, 7)), jr.bits(jk, (5, 7), jnp.uint32))
    assert same(fxr.uniform(k, (1000,), np.float32), jr.uniform(jk, (1000,), jnp.float32))
    p = np.array([0.1, 0.5, 0.9], np.float32)
    assert same(fxr.bernoulli(k, p, (100, 3)), jr.bernoulli(jk, p, (100, 3)))
    for lo, hi in ((-5, 17), (-2**31, 2**31 - 1), (9, 3)):
        assert same(fxr.randint(k, (300,), lo, hi, np.int32),
                    jr.randint(jk, (300,), lo, hi, jnp.int32))
    assert same(fxr.permutation(k, 3000), jr.permutation(jk, 3000))  # two sorting rounds


@pytest.mark.parametrize("seed", [7, -1, 2**40 + 3])
def test_bits_match_jax_x64(jax_random: Any, seed: int) -> None:
    """64-bit seeds, bits and uniform floats exactly; normal to rounding (a different
    evaluation of w = -log(1 - u*u) near +-1, and XLA's fused multiply-adds)."""
    jr, jnp = jax_random.random, jax_random.numpy
    x64 = enable_x64(jax_random)
    if x64 is None:
        pytest.skip("this JAX has no enable_x64 context manager")
    with x64(True):
        k, jk = fxr.key(seed), jr.PRNGKey(seed)
        assert np.array_equal(k, jk)
        assert np.array_equal(fxr.bits(k, (50,), np.uint64), jr.bits(jk, (50,), jnp.uint64))
        assert np.array_equal(fxr.uniform(k, (1000,)), jr.uniform(jk, (1000,), jnp.float64))
        np.testing.assert_allclose(fxr.normal(k, (5000,)), jr.normal(jk, (5000,), jnp.float64),
                                   rtol=1e-13, atol=1e-14)
