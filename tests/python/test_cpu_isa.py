"""The copies of the elementwise loops a baseline build (the wheel) picks at run time
(TESSERA_CPU_ISA: baseline, avx2, avx512): each copy this CPU runs gives NumPy's values, and the
copies agree with each other within the rounding of a contracted multiply-add."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

WORKER = r"""
import json, sys
import numpy as np
import tessera.core as mx

rng = np.random.default_rng(0)
x = rng.uniform(-20, 20, 4099).astype(np.float32)     # odd length: vector body and tail
y = rng.uniform(0.25, 3, 4099).astype(np.float32)
rows = rng.uniform(-30, 30, (7, 1031)).astype(np.float32)
a, b, r = mx.array(x), mx.array(y), mx.array(rows)
out = {
    "exp": mx.exp(a), "tanh": mx.tanh(a), "sin": mx.sin(a), "cos": mx.cos(a),
    "sigmoid": mx.sigmoid(a), "log": mx.log(b), "exp_f16": mx.exp(a.astype(mx.float16) / 4),
    "add": a + b, "mul_scalar": a * 3.5, "scalar_sub": 2.0 - a, "power": mx.power(b, a / 8),
    "softmax": mx.softmax(r, axis=-1), "logsumexp": mx.logsumexp(r, axis=-1),
}
print(json.dumps({k: np.asarray(v.astype(mx.float32)).tolist() for k, v in out.items()}))
"""


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def isas():
    flags = cpu_flags()
    out = ["baseline"]
    if {"avx2", "fma"} <= flags:
        out.append("avx2")
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags:
        out.append("avx512")
    return out


def worker_output(code, isa):
    # What a worker script prints, run with TESSERA_CPU_ISA=isa in a fresh process.
    env = dict(os.environ, TESSERA_CPU_ISA=isa)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def run(isa):
    got = json.loads(worker_output(WORKER, isa))
    return {k: np.array(v, dtype=np.float32) for k, v in got.items()}


def reference():
    rng = np.random.default_rng(0)
    x = rng.uniform(-20, 20, 4099).astype(np.float32).astype(np.float64)
    y = rng.uniform(0.25, 3, 4099).astype(np.float32).astype(np.float64)
    rows = rng.uniform(-30, 30, (7, 1031)).astype(np.float32).astype(np.float64)
    e = np.exp(rows - rows.max(axis=-1, keepdims=True))
    return {
        "exp": np.exp(x), "tanh": np.tanh(x), "sin": np.sin(x), "cos": np.cos(x),
        "sigmoid": 1 / (1 + np.exp(-x)), "log": np.log(y),
        "exp_f16": np.exp(x.astype(np.float16).astype(np.float64) / 4),
        "add": x + y, "mul_scalar": x * 3.5, "scalar_sub": 2.0 - x, "power": y ** (x / 8),
        "softmax": e / e.sum(axis=-1, keepdims=True),
        "logsumexp": rows.max(axis=-1) + np.log(e.sum(axis=-1)),
    }


@pytest.fixture(scope="module")
def results():
    return {isa: run(isa) for isa in isas()}


def test_every_copy_gives_numpys_values(results):
    ref = reference()
    for isa, got in results.items():
        for name, want in ref.items():
            rtol = 2e-3 if name == "exp_f16" else 2e-6
            np.testing.assert_allclose(got[name], want.astype(np.float32), rtol=rtol, atol=1e-6,
                                       err_msg=f"{name} with TESSERA_CPU_ISA={isa}")


def test_the_copies_agree_with_the_baseline_loop(results):
    base = results["baseline"]
    for isa, got in results.items():
        for name, want in base.items():
            # Contracting a*b+c into one FMA may move a result by an ulp or two.
            np.testing.assert_array_almost_equal_nulp(got[name], want, nulp=4)


def test_an_unknown_isa_is_an_error_naming_the_variable():
    env = dict(os.environ, TESSERA_CPU_ISA="sse9")
    code = "import tessera.core as mx; mx.eval(mx.exp(mx.ones(100000)))"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode != 0
    assert "TESSERA_CPU_ISA=sse9" in r.stderr and "avx512" in r.stderr


NARROW_WORKER = r"""
import json
import numpy as np
import tessera.core as mx

rng = np.random.default_rng(4)
x = rng.standard_normal(4099).astype(np.float32)             # odd length: vector body and tail
special = np.array([0x3F808000, 0x3F818000, 0xBF808000, 0x7F7FFFFF, 0x00000001, 0x807FFFFF,
                    0x7F800000, 0xFF800000, 0x7FC00001, 0xFFA12345, 0x80000000], np.uint32)
x[:special.size] = special.view(np.float32)                 # ties, overflow, denormals, inf, NaN
y = mx.array(x).astype(mx.bfloat16)
print(json.dumps({"x": x.view(np.uint32).tolist(), "y": np.asarray(y.view(mx.uint16)).tolist()}))
"""


def test_float32_to_bfloat16_rounds_to_nearest_even_on_every_isa():
    # The rounding of every half-precision product's float32 result has a 16-lane copy.
    for isa in isas():
        got = json.loads(worker_output(NARROW_WORKER, isa))
        u = np.array(got["x"], dtype=np.uint64)
        want = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
        nan = np.isnan(u.astype(np.uint32).view(np.float32))
        want[nan] = (u[nan] >> 16) | 0x40                           # quiet, sign and payload kept
        np.testing.assert_array_equal(np.array(got["y"], dtype=np.uint64), want, err_msg=isa)


HALF_WORKER = r"""
import json
import numpy as np
import tessera.core as mx

rng = np.random.default_rng(3)
x, w = rng.standard_normal((3, 301)), rng.standard_normal((133, 301))
out = {}
for name in ("bfloat16", "float16"):
    dt = getattr(mx, name)
    a, b = mx.array(x).astype(dt), mx.array(w).astype(dt)
    out[name + "_wt"] = (a @ b.T).astype(mx.float32)          # a Linear layer's decode step
    out[name + "_rowmajor"] = (a[:1] @ mx.contiguous(b.T)).astype(mx.float32)
    out[name + "_in"] = [np.asarray(a.astype(mx.float32)).tolist(),
                         np.asarray(b.astype(mx.float32)).tolist()]
print(json.dumps({k: v if isinstance(v, list) else np.asarray(v).tolist() for k, v in out.items()}))
"""


def test_half_precision_products_of_few_rows_on_every_isa():
    # The decode-sized products (half_gemm.cpp) have a path per instruction set; each must give
    # the float64 product of the same rounded values, to the half type's rounding.
    for isa in isas():
        got = json.loads(worker_output(HALF_WORKER, isa))
        for name, rtol in (("bfloat16", 2 ** -8), ("float16", 2 ** -10)):
            a, b = (np.array(v, dtype=np.float64) for v in got[name + "_in"])
            want = a @ b.T
            tol = rtol * np.abs(want) + 1e-5 * np.abs(a) @ np.abs(b).T
            wt, rowmajor = np.array(got[name + "_wt"]), np.array(got[name + "_rowmajor"])
            assert np.all(np.abs(wt - want) <= tol), (isa, name)
            assert np.all(np.abs(rowmajor - want[:1]) <= tol[:1]), (isa, name)


ATTENTION_WORKER = r"""
import json
import numpy as np
import tessera.core as mx

rng = np.random.default_rng(5)
out = []
# (B, Hq, Hkv, Lq, Lk, D, Dv, causal): 1-8 query rows per key/value head (the decode kernel,
# keys not a whole number of its 16-key steps or 128-key chunks), then 16 rows (the general one),
# then a prefill (query tiles of 63 rows, two key blocks, D and Dv not whole tiles: on AMX, the
# tiles' zero padding).
for B, Hq, Hkv, Lq, Lk, D, Dv, causal in ((1, 9, 3, 1, 300, 64, 64, False),
                                          (2, 8, 2, 2, 129, 128, 128, False),
                                          (1, 4, 4, 1, 1, 16, 32, True),
                                          (1, 2, 1, 1, 17, 256, 48, False),
                                          (1, 8, 1, 2, 40, 32, 16, False),
                                          (1, 6, 2, 70, 300, 80, 40, True)):
    for name in ("float32", "float16", "bfloat16"):
        dt = getattr(mx, name)
        # q as mlx-lm passes it: (B, L, H, D) stored, viewed as (B, H, L, D)
        q = mx.swapaxes(mx.array(rng.standard_normal((B, Lq, Hq, D))).astype(dt), 1, 2)
        k = mx.array(rng.standard_normal((B, Hkv, Lk, D))).astype(dt)
        v = mx.array(rng.standard_normal((B, Hkv, Lk, Dv))).astype(dt)
        o = mx.fast.scaled_dot_product_attention(q, k, v, scale=D ** -0.5,
                                                 mask="causal" if causal else None)
        out.append({"dtype": name, "D": D, "causal": causal} |
                   {n: np.asarray(a.astype(mx.float32)).tolist()
                    for n, a in (("q", q), ("k", k), ("v", v), ("o", o))})
print(json.dumps(out))
"""


def test_attention_on_every_isa():
    # mlx-lm's decode step: a few query rows per key/value head against every key; and a prefill.
    # Each path (attention_decode.cpp on AVX-512, the general kernel elsewhere, its products on
    # AMX tiles for bfloat16 where the CPU has them) must give the float64 softmax(q k^T scale) v
    # of the same rounded values, to the output type's rounding.
    for isa in isas():
        for case in json.loads(worker_output(ATTENTION_WORKER, isa)):
            q, k, v, got = (np.array(case[n], dtype=np.float64) for n in ("q", "k", "v", "o"))
            reps = q.shape[1] // k.shape[1]
            k, v = np.repeat(k, reps, axis=1), np.repeat(v, reps, axis=1)
            s = q @ k.transpose(0, 1, 3, 2) * case["D"] ** -0.5
            if case["causal"]:
                s = np.where(np.tril(np.ones(s.shape[-2:]), s.shape[-1] - s.shape[-2]), s, -np.inf)
            p = np.exp(s - s.max(-1, keepdims=True))
            want = (p / p.sum(-1, keepdims=True)) @ v
            rtol = {"float32": 2 ** -21, "float16": 2 ** -10, "bfloat16": 2 ** -8}[case["dtype"]]
            tol = rtol * np.abs(want) + 1e-6 * np.abs(v).max()
            assert np.all(np.abs(got - want) <= tol), (isa, case["dtype"], q.shape, k.shape)


QUANT_WORKER = r"""
import json
import numpy as np
import tessera.core as mx

rng = np.random.default_rng(4)
out = []
# Rows 1-8 (the few-rows path); k a whole number of 128-value blocks or not; every group size;
# x of one scale, and x whose magnitudes span 2^-20..2^20 (neighbours 2^40 apart: the int16
# rounding's worst case).
for m, k, n, gs, spread in ((1, 576, 67, 64, 0), (3, 640, 33, 128, 0), (2, 160, 40, 32, 0),
                            (1, 2048, 9, 64, 0), (5, 576, 70, 64, 0), (8, 256, 65, 32, 0),
                            (2, 576, 40, 64, 20)):
    w = mx.array(rng.standard_normal((n, k))).astype(mx.bfloat16)
    wq, s, b = mx.quantize(w, gs, 4)
    xs = rng.standard_normal((m, k)) * 2 + 0.5
    if spread:
        xs *= 2.0 ** rng.uniform(-spread, spread, (m, k))
    x = mx.array(xs).astype(mx.bfloat16)
    y = mx.quantized_matmul(x, wq, s, b, True, gs, 4)
    out.append({"gs": gs, "x": np.asarray(x.astype(mx.float32)).tolist(),
                "packed": np.asarray(wq).view(np.uint8).tolist(),
                "scales": np.asarray(s.astype(mx.float32)).tolist(),
                "biases": np.asarray(b.astype(mx.float32)).tolist(),
                "y": np.asarray(y.astype(mx.float32)).tolist(), "dtype": str(y.dtype)})
print(json.dumps(out))
"""


def test_bfloat16_quantized_products_of_few_rows_on_every_isa():
    # mlx-lm's 4-bit decode: bfloat16 x, scales and biases, 1-8 rows. Each path must give the
    # float64 product of x with the weights scale * q + bias, to bfloat16's rounding: the float
    # lanes (1-3 rows) exactly; vpdpwssd (1-8 rows where the CPU has AVX512_VNNI) with x rounded
    # to int16 per 8 values, a value off by at most 2^-16 of the largest of its 8; from 4 rows
    # without AVX512_VNNI the weights are rounded to bfloat16 for the GEMM once more.
    int16_x = "avx512_vnni" in cpu_flags()
    for isa in isas():
        for case in json.loads(worker_output(QUANT_WORKER, isa)):
            gs, rows = case["gs"], len(case["x"])
            vnni = isa == "avx512" and int16_x
            weight_rounding = 0 if rows < 4 or vnni else 2 ** -9
            packed = np.array(case["packed"], dtype=np.uint8)
            q = np.stack([packed & 15, packed >> 4], -1).reshape(packed.shape[0], -1)
            w = (np.repeat(np.array(case["scales"]), gs, 1) * q +
                 np.repeat(np.array(case["biases"]), gs, 1))
            x = np.array(case["x"], dtype=np.float64)
            want, scale = x @ w.T, np.abs(x) @ np.abs(w).T
            got = np.array(case["y"])
            assert case["dtype"].endswith("bfloat16")
            tol = 2 ** -8 * np.abs(want) + (1e-5 + weight_rounding) * scale
            if vnni:
                k = x.shape[1]
                lanes = np.abs(np.pad(x, ((0, 0), (0, -k % 8)))).reshape(rows, -1, 8)
                largest = np.repeat(lanes.max(-1), 8, 1)[:, :k]
                tol += 2 ** -16 * (largest @ np.abs(w).T)
            assert np.all(np.abs(got - want) <= tol), (isa, gs, rows)


QUANT_NONFINITE_WORKER = r"""
import json
import numpy as np
import tessera.core as mx

rng = np.random.default_rng(5)
w = mx.array(rng.uniform(0.5, 1.5, (20, 256))).astype(mx.bfloat16)
wq, s, b = mx.quantize(w, 64, 4)
x = rng.uniform(0.5, 1.5, (3, 256))
x[0, 17] = np.nan
x[1, 130] = np.inf
y = mx.quantized_matmul(mx.array(x).astype(mx.bfloat16), wq, s, b, True, 64, 4)
wd = mx.dequantize(wq, s, b, 64, 4).astype(mx.float32)
print(json.dumps({"y": np.asarray(y.astype(mx.float32)).tolist(),
                  "w": np.asarray(wd).tolist(), "x": np.where(np.isnan(x), 0, x).tolist()}))
"""


def test_quantized_products_of_few_rows_keep_nan_and_inf_on_every_isa():
    # The int16 path cannot hold a NaN or an infinity: such an x goes the float way. Its NaN makes
    # a NaN row; its infinity a non-finite row (the float paths form s * dot(x, q) + b * sum(x), so
    # a zero q times the infinity gives NaN where MLX's s * q + b gives +inf); other rows as ever.
    for isa in isas():
        text = worker_output(QUANT_NONFINITE_WORKER, isa)
        out = json.loads(text.replace("NaN", "null").replace("Infinity", "1e999"))
        y = np.array(out["y"], dtype=np.float64)  # null -> nan
        assert np.all(np.isnan(y[0])), isa
        assert not np.any(np.isfinite(y[1])), isa
        want = np.array(out["x"])[2] @ np.array(out["w"]).T
        assert np.allclose(y[2], want, rtol=2 ** -7), isa
