"""MLX's floating-point quantization modes (mxfp4, mxfp8, nvfp4): codes and dequantized values
bit for bit as MLX's CPU package computes them (data/mlx_fp_quantized.npz, made by
data/make_mlx_fp_quantized.py), the formats decoded independently in NumPy, the codes chosen
against a NumPy nearest-value search, quantized_matmul against dequantize-then-matmul in float64
(both orientations, a batch, one row and many), its gradient, and the errors."""

import os

import numpy as np
import pytest

import tessera.core as mx
import tessera.nn as nn

DATA = np.load(os.path.join(os.path.dirname(__file__), "data", "mlx_fp_quantized.npz"))
RNG = np.random.default_rng(17)
MODES = {"mxfp4": (32, 4), "mxfp8": (32, 8), "nvfp4": (16, 4)}
FP4 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], np.float64)


def fp8_value(code):
    """fp8 e4m3 (bias 7, no infinities, 0x7F / 0xFF NaN) decoded from its fields."""
    code = np.asarray(code, np.int64)
    sign = np.where(code & 0x80, -1.0, 1.0)
    e, m = (code >> 3) & 0xF, code & 7
    mag = np.where(e == 0, m / 512.0, (1 + m / 8.0) * np.exp2(e.astype(np.float64) - 7))
    return np.where((code & 0x7F) == 0x7F, np.nan, sign * mag)


def decode(wq, scales, mode, global_scale=None):
    """The values a packed matrix stands for, from the format's definition (float64)."""
    gs, bits = MODES[mode]
    b = np.ascontiguousarray(wq).view(np.uint8).reshape(wq.shape[0], -1).astype(np.int64)
    if bits == 4:
        codes = np.stack([b & 0xF, b >> 4], -1).reshape(b.shape[0], -1)
        v = FP4[codes]
    else:
        v = fp8_value(b)
    scale = group_scales(scales, mode) * (1.0 if global_scale is None else global_scale / 2688.0)
    return v * np.repeat(scale, gs, axis=-1)


def group_scales(scales, mode):
    """The scale each uint8 code stands for: an fp8 e4m3 value (nvfp4) or 2^(code - 127)."""
    s = scales.astype(np.int64)
    return fp8_value(s) if mode == "nvfp4" else np.exp2(s.astype(np.float64) - 127)


def as_bits(a):
    return np.array(a.view(mx.uint16)) if a.dtype == mx.bfloat16 else np.array(a)


def load_w(key, dtype):
    a = mx.array(DATA[key])
    return a.view(mx.bfloat16) if dtype == "bfloat16" else a


# MLX 0.32.4's to_fp8 / from_fp8 misread float64 (to_fp8(1.0) gives 0), so its mxfp8 and nvfp4
# codes of a float64 matrix are wrong; Tessera converts float64 correctly, and only mxfp4 (no
# fp8 step) is compared there.
CASES = [(m, d) for m in MODES for d in ("float32", "float16", "bfloat16", "float64")
         if d != "float64" or m == "mxfp4"]


@pytest.mark.parametrize("mode, dtype", CASES)
def test_matches_mlx_bit_for_bit(mode, dtype):
    key = f"{mode}_{dtype}"
    wq, scales = mx.quantize(load_w(key + "_w", dtype), mode=mode)
    assert wq.dtype == mx.uint32 and scales.dtype == mx.uint8
    np.testing.assert_array_equal(np.array(wq), DATA[key + "_wq"])
    np.testing.assert_array_equal(np.array(scales), DATA[key + "_scales"])
    deq = mx.dequantize(mx.array(DATA[key + "_wq"]), mx.array(DATA[key + "_scales"]), mode=mode,
                        dtype=getattr(mx, dtype))
    np.testing.assert_array_equal(as_bits(deq), DATA[key + "_deq"])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_nvfp4_global_scale_matches_mlx(dtype):
    g = mx.array(DATA["nvfp4_global_gs"])
    w = mx.array(DATA["nvfp4_float32_w"]).astype(getattr(mx, dtype))
    key = f"nvfp4_global_{dtype}_"
    wq, scales = mx.quantize(w, mode="nvfp4", global_scale=g)
    np.testing.assert_array_equal(np.array(wq), DATA[key + "wq"])
    np.testing.assert_array_equal(np.array(scales), DATA[key + "scales"])
    deq = mx.dequantize(wq, scales, mode="nvfp4", global_scale=g, dtype=mx.float32)
    np.testing.assert_array_equal(np.array(deq), DATA[key + "deq"])
    # The requested dtype is honoured (MLX returns float32 here whatever dtype says).
    half = mx.dequantize(wq, scales, mode="nvfp4", global_scale=g, dtype=mx.bfloat16)
    assert half.dtype == mx.bfloat16
    np.testing.assert_array_equal(np.array(half.astype(mx.float32)),
                                  np.array(deq.astype(mx.bfloat16).astype(mx.float32)))


@pytest.mark.parametrize("mode", list(MODES))
def test_dequantize_is_the_format_decoded(mode):
    gs, _ = MODES[mode]
    w = RNG.standard_normal((6, 8 * gs)).astype(np.float32) * RNG.uniform(0.01, 50, (6, 1))
    wq, scales = mx.quantize(mx.array(w), mode=mode)
    want = decode(np.array(wq), np.array(scales), mode)
    got = np.array(mx.dequantize(wq, scales, mode=mode, dtype=mx.float32))
    np.testing.assert_array_equal(got, want.astype(np.float32))
    # Defaults: bfloat16 out, as MLX.
    assert mx.dequantize(wq, scales, mode=mode).dtype == mx.bfloat16


@pytest.mark.parametrize("mode", ["mxfp4", "nvfp4"])
def test_fp4_codes_are_the_nearest_values(mode):
    # float32 input: the scale as the format defines it, then each element's nearest fp4 value
    # (ties to the lower code, i.e. toward zero) found by a NumPy search over the table.
    gs, _ = MODES[mode]
    w = RNG.standard_normal((5, 4 * gs)).astype(np.float32) * RNG.uniform(0.1, 9, (5, 1))
    wq, scales = mx.quantize(mx.array(w), mode=mode)
    groups = w.reshape(-1, gs).astype(np.float64)
    scale = group_scales(np.array(scales), mode).reshape(-1, 1)
    amax = np.abs(groups).max(1, keepdims=True)
    if mode == "mxfp4":  # the smallest power of two not below max / 6: nothing clips
        want_e = np.ceil(np.log2(np.float32(amax / 6).astype(np.float64)))
        np.testing.assert_array_equal(np.log2(scale), want_e)
    v = groups / scale
    dist = np.abs(v[..., None] - FP4)
    want = FP4[np.argmin(dist, -1)]
    got = (decode(np.array(wq), np.array(scales), mode).reshape(-1, gs)) / scale
    np.testing.assert_array_equal(np.abs(got), np.abs(want))
    # Nothing is more than half a step of the fp4 grid (or clipped at 6) away.
    assert np.all(np.abs(got - v) <= np.maximum(np.abs(v) - 6, 1.0) + 1e-12)


def test_exactly_representable_matrices_round_trip():
    e = RNG.integers(-3, 4, (4, 1))
    for mode, table in (("mxfp4", FP4), ("mxfp8", fp8_value(np.arange(0, 0x7F)))):
        gs, _ = MODES[mode]
        top = 6.0 if mode == "mxfp4" else 448.0
        v = RNG.choice(table[np.isfinite(table)], (4, 2 * gs))
        v[:, 0] = top  # the group maximum fixes the scale at exactly 2^e
        v[:, gs] = -top
        w = (v * np.exp2(e)).astype(np.float32)
        back = mx.dequantize(*mx.quantize(mx.array(w), mode=mode), mode=mode, dtype=mx.float32)
        np.testing.assert_array_equal(np.array(back), w)


@pytest.mark.parametrize("transpose", [True, False])
@pytest.mark.parametrize("rows", [1, 9])
@pytest.mark.parametrize("mode", list(MODES))
def test_quantized_matmul_matches_dequantized_product(mode, rows, transpose):
    gs, _ = MODES[mode]
    shape = (48, 4 * gs) if transpose else (4 * gs, 2 * gs)
    wq, scales = mx.quantize(mx.array(RNG.standard_normal(shape).astype(np.float32)), mode=mode)
    wd = decode(np.array(wq), np.array(scales), mode)
    x = RNG.standard_normal((rows, wd.shape[1] if transpose else wd.shape[0])).astype(np.float32)
    got = mx.quantized_matmul(mx.array(x), wq, scales, transpose=transpose, mode=mode)
    want = x.astype(np.float64) @ (wd.T if transpose else wd)
    assert got.dtype == mx.float32
    np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("mode", list(MODES))
def test_quantized_matmul_agrees_with_mlx(mode):
    wq, scales = (mx.array(DATA[f"{mode}_float32_" + k]) for k in ("wq", "scales"))
    got = mx.quantized_matmul(mx.array(DATA[f"{mode}_qmm_x"]), wq, scales, mode=mode)
    want = DATA[f"{mode}_qmm_out"]
    np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_quantized_matmul_batched_and_half_precision():
    wq, scales = mx.quantize(mx.array(RNG.standard_normal((3, 40, 64)).astype(np.float32)),
                             mode="mxfp4")
    wd = decode(np.array(wq).reshape(120, -1), np.array(scales).reshape(120, -1), "mxfp4")
    wd = wd.reshape(3, 40, 64)
    x = RNG.standard_normal((2, 1, 5, 64)).astype(np.float32)
    got = mx.quantized_matmul(mx.array(x), wq, scales, mode="mxfp4")
    assert got.shape == (2, 3, 5, 40)
    want = x.astype(np.float64) @ np.swapaxes(wd, -1, -2)
    np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    half = mx.quantized_matmul(mx.array(x, dtype=mx.bfloat16), wq, scales, mode="mxfp4")
    assert half.dtype == mx.bfloat16
    np.testing.assert_allclose(np.array(half.astype(mx.float32)), want, rtol=0.03,
                               atol=0.03 * np.abs(want).max())


def test_gradient_with_respect_to_x():
    wq, scales = mx.quantize(mx.array(RNG.standard_normal((24, 64)).astype(np.float32)),
                             mode="nvfp4")
    wd = decode(np.array(wq), np.array(scales), "nvfp4")
    x = mx.array(RNG.standard_normal((3, 64)).astype(np.float32))
    g = mx.grad(lambda x: (mx.quantized_matmul(x, wq, scales, mode="nvfp4") ** 2).sum())(x)
    want = 2 * (np.array(x, np.float64) @ wd.T) @ wd
    np.testing.assert_allclose(np.array(g), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    with pytest.raises(ValueError, match="scales of mode 'nvfp4'"):
        mx.grad(lambda s: mx.quantized_matmul(x, wq, s, mode="nvfp4").sum())(scales)


def test_vmap_over_matrices():
    w = mx.array(RNG.standard_normal((4, 8, 32)).astype(np.float32))
    wq, scales = mx.vmap(lambda m: mx.quantize(m, mode="mxfp8"))(w)
    want_q, want_s = mx.quantize(w, mode="mxfp8")
    np.testing.assert_array_equal(np.array(wq), np.array(want_q))
    np.testing.assert_array_equal(np.array(scales), np.array(want_s))


def test_quantized_linear_in_fp_modes():
    layer = nn.Linear(64, 24)
    x = mx.array(RNG.standard_normal((5, 64)).astype(np.float32))
    for mode in MODES:
        q = nn.QuantizedLinear.from_linear(layer, mode=mode)
        assert q.biases is None and q.scales.dtype == mx.uint8
        wd = decode(np.array(q.weight), np.array(q.scales), mode)
        want = np.array(x, np.float64) @ wd.T + np.array(layer.bias)
        np.testing.assert_allclose(np.array(q(x)), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: mx.quantize(mx.ones((4, 64)), mode="mxfp4", group_size=64), "groups of 32 in 4 bits"),
        (lambda: mx.quantize(mx.ones((4, 64)), mode="mxfp8", bits=4), "groups of 32 in 8 bits"),
        (lambda: mx.quantize(mx.ones((4, 24)), mode="nvfp4"), "multiple of group_size 16"),
        (lambda: mx.quantize(mx.ones((4, 64)), mode="fp4"), "modes are 'affine'"),
        (lambda: mx.quantize(mx.ones((4, 64)), mode="mxfp4", global_scale=mx.array(1.0)),
         "global_scale belongs to mode 'nvfp4'"),
        (lambda: mx.quantize(mx.ones((4, 64)), mode="nvfp4", global_scale=mx.ones(2)),
         "float32 scalar"),
        (lambda: mx.dequantize(*mx.quantize(mx.ones((4, 64)), mode="mxfp4"), mx.ones((4, 2)),
                               mode="mxfp4"), "has no biases"),
        (lambda: mx.dequantize(mx.zeros((4, 8), mx.uint32), mx.ones((4, 2)), mode="mxfp4"),
         "uint8"),
        (lambda: mx.quantized_matmul(mx.ones((2, 32)), *mx.quantize(mx.ones((4, 64)), mode="mxfp4"),
                                     mode="mxfp4"), "needs 64"),
        (lambda: mx.quantized_matmul(mx.ones((2, 64), mx.int32),
                                     *mx.quantize(mx.ones((4, 64)), mode="mxfp4"), mode="mxfp4"),
         "real floating"),
    ],
)
def test_errors_name_the_problem(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ---- qqmm / gather_qqmm: both operands quantized ----

@pytest.mark.parametrize("rows", [1, 5])
@pytest.mark.parametrize("mode, global_scales", [("nvfp4", False), ("nvfp4", True),
                                                 ("mxfp8", False), ("mxfp4", False)])
def test_qqmm_multiplies_the_quantized_values(mode, global_scales, rows):
    x = RNG.standard_normal((rows, 128)).astype(np.float32)
    w = RNG.standard_normal((40, 128)).astype(np.float32)
    gx = mx.array(np.float32(np.abs(x).max())) if global_scales else None
    gw = mx.array(np.float32(np.abs(w).max())) if global_scales else None
    xq = mx.quantize(mx.array(x), mode=mode, global_scale=gx)
    wq, ws = mx.quantize(mx.array(w), mode=mode, global_scale=gw)
    g = lambda a: None if a is None else float(np.array(a))
    xd = decode(np.array(xq[0]), np.array(xq[1]), mode, g(gx))
    wd = decode(np.array(wq), np.array(ws), mode, g(gw))
    want = xd @ wd.T
    packed = mx.qqmm(mx.array(x), wq, ws, mode=mode, global_scale_x=gx, global_scale_w=gw)
    unpacked = mx.qqmm(mx.array(x), mx.array(w), mode=mode, global_scale_x=gx, global_scale_w=gw)
    for got in (packed, unpacked):
        assert got.shape == (rows, 40) and got.dtype == mx.float32
        np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    vec = mx.qqmm(mx.array(x[0]), wq, ws, mode=mode, global_scale_x=gx, global_scale_w=gw)
    assert vec.shape == (40,)


def test_gather_qqmm_gathers_experts():
    x = RNG.standard_normal((3, 2, 64)).astype(np.float32)
    w = RNG.standard_normal((4, 16, 64)).astype(np.float32)
    wq, ws = mx.quantize(mx.array(w), mode="mxfp8")
    lhs, rhs = np.array([2, 0, 1, 1]), np.array([3, 3, 0, 2])
    got = mx.gather_qqmm(mx.array(x), wq, ws, mx.array(lhs), mx.array(rhs), mode="mxfp8")
    xq = mx.quantize(mx.array(x), mode="mxfp8")
    xd = decode(np.array(xq[0]).reshape(6, -1), np.array(xq[1]).reshape(6, -1), "mxfp8")
    wd = decode(np.array(wq).reshape(64, -1), np.array(ws).reshape(64, -1), "mxfp8")
    want = xd.reshape(3, 2, 64)[lhs] @ np.swapaxes(wd.reshape(4, 16, 64)[rhs], -1, -2)
    assert got.shape == (4, 2, 16)
    np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_qqmm_errors():
    x, w = mx.ones((2, 64)), mx.ones((8, 64))
    with pytest.raises(ValueError, match="quantizes both operands in an fp mode"):
        mx.qqmm(x, w, mode="affine")
    with pytest.raises(ValueError, match="both global_scale_x and global_scale_w, or neither"):
        mx.qqmm(x, w, global_scale_x=mx.array(1.0))
    with pytest.raises(ValueError, match="packed \\(uint32\\) w needs its scales"):
        mx.qqmm(x, mx.quantize(w, mode="nvfp4")[0])
    with pytest.raises(ValueError, match="float32, float16 or bfloat16"):
        mx.qqmm(x.astype(mx.float64), w)


def test_gather_qmm_takes_nvfp4s_global_scale_and_none():
    rng = np.random.default_rng(11)
    w = rng.standard_normal((3, 8, 32)).astype(np.float32)
    x = rng.standard_normal((2, 1, 32)).astype(np.float32)
    idx = np.array([[2], [0]], np.uint32)
    g = mx.array(np.float32(np.abs(w).max()))
    wq, scales = mx.quantize(mx.array(w), mode="nvfp4", global_scale=g)
    lhs = mx.array(np.array([[0], [1]], np.uint32))
    got = mx.gather_qmm(mx.array(x), wq, scales, lhs_indices=lhs, rhs_indices=mx.array(idx),
                        transpose=True, mode="nvfp4", global_scale=g)
    # The reference: this file's own decoding of the packed values, times x, per chosen matrix.
    wd = np.stack([decode(np.array(wq[e]), np.array(scales[e]), "nvfp4", float(g.item()))
                   for e in range(3)])
    want = np.stack([x[b] @ wd[idx[b, 0]].T for b in range(2)])
    np.testing.assert_allclose(np.array(got).reshape(want.shape), want, rtol=1e-5, atol=1e-5)
    # None (what mlx-lm passes for affine experts) is the call without it.
    aq = mx.quantize(mx.array(w), group_size=32, bits=4)
    a = mx.gather_qmm(mx.array(x), *aq, rhs_indices=mx.array(idx), group_size=32, bits=4,
                      global_scale=None)
    b = mx.gather_qmm(mx.array(x), *aq, rhs_indices=mx.array(idx), group_size=32, bits=4)
    np.testing.assert_array_equal(np.array(a), np.array(b))
    with pytest.raises(ValueError, match="global_scale belongs to mode 'nvfp4'"):
        mx.gather_qmm(mx.array(x), *aq, rhs_indices=mx.array(idx), group_size=32, bits=4,
                      global_scale=g)
