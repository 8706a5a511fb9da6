"""Affine quantization: bit-compatibility with arrays MLX's CPU package quantized (stored in
data/mlx_affine_quantized.npz, made by data/make_mlx_affine_quantized.py), round trips to the
nearest representable value, quantized_matmul against dequantize-then-matmul in float64, and its gradients."""

import os

import numpy as np
import pytest

import tessera.core as mx

DATA = np.load(os.path.join(os.path.dirname(__file__), "data", "mlx_affine_quantized.npz"))
CASES = sorted({k.rsplit("_", 1)[0] for k in DATA.files if k.startswith("b")})
RNG = np.random.default_rng(5)


def load(key, dtype):
    a = DATA[key]
    if dtype == "bfloat16":
        return mx.array(a).view(mx.bfloat16)
    return mx.array(a)


def as_bits(a):
    """The stored bits of an array (bfloat16 as uint16), for exact comparison."""
    return np.array(a.view(mx.uint16)) if a.dtype == mx.bfloat16 else np.array(a)


@pytest.mark.parametrize("case", CASES)
def test_matches_mlx_bit_for_bit(case):
    bits, gs, dtype = case.split("_")
    bits, gs = int(bits[1:]), int(gs[1:])
    w = load(case + "_w", dtype)
    wq, scales, biases = mx.quantize(w, group_size=gs, bits=bits)
    np.testing.assert_array_equal(np.array(wq), DATA[case + "_wq"])
    np.testing.assert_array_equal(as_bits(scales), DATA[case + "_scales"])
    np.testing.assert_array_equal(as_bits(biases), DATA[case + "_biases"])
    # MLX's packed arrays dequantize to MLX's values.
    deq = mx.dequantize(mx.array(DATA[case + "_wq"]), load(case + "_scales", dtype),
                        load(case + "_biases", dtype), group_size=gs, bits=bits)
    np.testing.assert_array_equal(as_bits(deq), DATA[case + "_deq"])


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 8])
def test_round_trip_lands_on_the_nearest_grid_point(bits):
    w = RNG.standard_normal((4, 3, 128)).astype(np.float32)
    wq, scales, biases = mx.quantize(mx.array(w), group_size=32, bits=bits)
    assert wq.shape == (4, 3, 128 * bits // 32) and scales.shape == (4, 3, 4)
    back = np.array(mx.dequantize(wq, scales, biases, group_size=32, bits=bits))
    # Every representable value of each group, by brute force: the nearest must be chosen.
    s = np.repeat(np.array(scales), 32, axis=-1)[..., None].astype(np.float64)
    b = np.repeat(np.array(biases), 32, axis=-1)[..., None].astype(np.float64)
    grid = s * np.arange(2**bits) + b
    best = np.abs(grid - w[..., None]).min(axis=-1)
    np.testing.assert_allclose(np.abs(back - w), best, atol=1e-5)
    assert np.all(np.abs(back - w) <= 1.5 * np.abs(s[..., 0]) + 1e-6)


@pytest.mark.parametrize("transpose", [True, False])
@pytest.mark.parametrize("bits,gs", [(4, 64), (3, 32), (8, 128)])
def test_quantized_matmul_matches_dequantized_product(transpose, bits, gs):
    shape = (96, 256) if transpose else (256, 128)
    wq, scales, biases = mx.quantize(mx.array(RNG.standard_normal(shape).astype(np.float32)),
                                     group_size=gs, bits=bits)
    wd = np.array(mx.dequantize(wq, scales, biases, group_size=gs, bits=bits)).astype(np.float64)
    x = RNG.standard_normal((2, 5, 256)).astype(np.float32)
    got = np.array(mx.quantized_matmul(mx.array(x), wq, scales, biases, transpose=transpose,
                                       group_size=gs, bits=bits))
    want = x.astype(np.float64) @ (wd.T if transpose else wd)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype,rel", [("bfloat16", 2 ** -8), ("float16", 2 ** -10)])
@pytest.mark.parametrize("bits,gs,mode,k", [(4, 64, "affine", 576), (4, 128, "affine", 640),
                                            (3, 32, "affine", 96), (4, 32, "mxfp4", 160),
                                            (4, 64, "affine", 2304)])
def test_half_precision_prefill_products_match_the_float64_product(dtype, rel, bits, gs, mode, k):
    # Many rows of half-precision x (a prefill): the weights are dequantized to x's dtype a panel
    # of rows at a time as the GEMM packs them (K across the GEMM's K blocks: 256 values, 2048 on
    # AMX). Reference: float64 x @ dequantize(w).T with the dequantized values in float64;
    # allowed: the result's rounding plus one rounding of each weight to the half type.
    dt = getattr(mx, dtype)
    w = mx.array(RNG.standard_normal((130, k)).astype(np.float32)).astype(dt)
    q = mx.quantize(w, group_size=gs, bits=bits, mode=mode)
    wd = np.array(mx.dequantize(*q, group_size=gs, bits=bits, mode=mode, dtype=mx.float32)
                  ).astype(np.float64)
    x = mx.array(RNG.standard_normal((2, 20, k)).astype(np.float32)).astype(dt)
    got = mx.quantized_matmul(x, *q, transpose=True, group_size=gs, bits=bits, mode=mode)
    assert got.dtype == dt
    xf = np.array(x.astype(mx.float32)).astype(np.float64)
    want, scale = xf @ wd.T, np.abs(xf) @ np.abs(wd).T
    err = np.abs(np.array(got.astype(mx.float32)) - want)
    assert np.all(err <= rel * np.abs(want) + rel * scale)


def test_quantized_matmul_agrees_with_mlx_and_takes_half_precision():
    x, wq = DATA["qmm_x"], mx.array(DATA["b4_g64_float32_wq"])
    s, b = mx.array(DATA["b4_g64_float32_scales"]), mx.array(DATA["b4_g64_float32_biases"])
    got = np.array(mx.quantized_matmul(mx.array(x), wq, s, b))
    np.testing.assert_allclose(got, DATA["qmm_out"], rtol=1e-5, atol=1e-4)
    half = mx.quantized_matmul(mx.array(x).astype(mx.float16), wq, s.astype(mx.float16),
                               b.astype(mx.float16))
    assert half.dtype == mx.float16
    np.testing.assert_allclose(np.array(half.astype(mx.float32)), DATA["qmm_out"], rtol=2e-2, atol=0.1)


def test_quantized_matmul_gradients():
    w = RNG.standard_normal((32, 64)).astype(np.float64)
    wq, scales, biases = mx.quantize(mx.array(w, dtype=mx.float64), group_size=32, bits=4)
    x = mx.array(RNG.standard_normal((3, 64)), dtype=mx.float64)
    c = mx.array(RNG.standard_normal((3, 32)), dtype=mx.float64)

    def loss(xv, sv, bv):
        return mx.sum(mx.quantized_matmul(xv, wq, sv, bv, group_size=32, bits=4) * c)

    def dense(xv, sv, bv):
        wd = mx.dequantize(wq, sv, bv, group_size=32, bits=4)
        return mx.sum((xv @ wd.T) * c)

    got = mx.grad(loss, argnums=(0, 1, 2))(x, scales, biases)
    want = mx.grad(dense, argnums=(0, 1, 2))(x, scales, biases)
    for g, r in zip(got, want):
        np.testing.assert_allclose(np.array(g), np.array(r), rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError, match="quantized weights"):
        mx.grad(lambda q: mx.sum(mx.quantized_matmul(x, q, scales, biases, group_size=32)))(wq)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: mx.quantize(mx.ones((4, 48))), "multiple of group_size 64"),
        (lambda: mx.quantize(mx.ones((4, 64)), bits=7), "bits 7"),
        (lambda: mx.quantize(mx.ones((4, 64)), group_size=16), "group_size 16"),
        (lambda: mx.quantize(mx.ones((64,))), "2 or more dims"),
        (lambda: mx.quantize(mx.ones((4, 64), dtype=mx.int32)), "floating"),
        (lambda: mx.dequantize(*mx.quantize(mx.ones((4, 64)))[:2]), "needs the biases"),
        (lambda: mx.dequantize(*mx.quantize(mx.ones((4, 64))), bits=8), "holds 32 values"),
        (lambda: mx.quantized_matmul(mx.ones((2, 32)), *mx.quantize(mx.ones((4, 64)))), "needs 64"),
    ],
)
def test_errors_name_the_problem(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def fp8_table():
    """Every e4m3fn code's value, from the format's definition (NaN for 0x7F / 0xFF)."""
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    e, m = (codes >> 3) & 0xF, codes & 7
    vals = np.where(e == 0, m / 512.0, (1 + m / 8.0) * 2.0 ** (e - 7.0)) * sign
    vals[(codes & 0x7F) == 0x7F] = np.nan
    return vals


def test_fp8_round_trip_is_the_nearest_code():
    table = fp8_table()
    finite = np.where(np.isnan(table), np.inf, table)
    x = np.concatenate([RNG.standard_normal(2000) * 50, RNG.standard_normal(500) * 0.01,
                        table[~np.isnan(table)], [500.0, -1e6, 0.0, -0.0]]).astype(np.float32)
    codes = np.array(mx.to_fp8(mx.array(x)))
    # Brute force: the nearest representable value (ties to the even code), saturating at 448.
    clipped = np.clip(x.astype(np.float64), -448, 448)
    dist = np.abs(finite[None, :] - clipped[:, None])
    best = dist.min(axis=1, keepdims=True)
    candidates = np.where(dist == best, np.arange(256), 999)
    even = np.where(candidates % 2 == 0, candidates, 999).min(axis=1)
    want = np.where(even < 999, even, candidates.min(axis=1))
    np.testing.assert_array_equal(table[codes], table[want])
    back = np.array(mx.from_fp8(mx.array(codes), dtype=mx.float32))
    np.testing.assert_array_equal(back, table[codes].astype(np.float32))
    assert mx.from_fp8(mx.array(codes)).dtype == mx.bfloat16
    assert np.isnan(np.array(mx.from_fp8(mx.to_fp8(mx.array([np.nan])), dtype=mx.float32))).all()
    with pytest.raises(ValueError, match="uint8"):
        mx.from_fp8(mx.ones((2,)))
