"""export_function / import_function / exporter: functions written to a file and run in a fresh
process, against NumPy and against the same function run directly."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tessera.core as mx

DATA = Path(__file__).parent / "data"


def run_fresh(code, **env):
    """Runs `code` in a new interpreter; returns its stdout (the test fails on a non-zero exit)."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=300, env=dict(os.environ, **env))
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_a_function_runs_in_a_fresh_process(tmp_path):
    path = tmp_path / "f.mlxfn"
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    y = np.arange(4, dtype=np.float32)

    def fun(a, b):
        return mx.sin(a) * b + mx.sum(a, axis=0), mx.argmax(a, axis=1)

    mx.export_function(str(path), fun, mx.array(x), mx.array(y))
    out = run_fresh(f"""
        import json, numpy as np, tessera.core as mx
        f = mx.import_function({str(path)!r})
        x = mx.array(np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4))
        outs = f(x, mx.arange(4, dtype=mx.float32))
        print(json.dumps([type(outs).__name__] + [np.array(o).tolist() for o in outs]))
    """)
    kind, first, second = json.loads(out)
    assert kind == "tuple"
    np.testing.assert_allclose(first, np.sin(x) * y + x.sum(0), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(second, x.argmax(1))


def test_input_forms_keywords_and_metadata(tmp_path):
    path = str(tmp_path / "kw.mlxfn")

    def fun(x, scale, shift=None):
        return x * scale + (0 if shift is None else shift)

    x, s, t = mx.array([1.0, 2.0]), mx.array(3.0), mx.array([10.0, 20.0])
    mx.export_function(path, fun, x, s, shift=t, metadata='{"layers": 2}')
    f, meta = mx.import_function(path, return_metadata=True)
    assert meta == '{"layers": 2}'
    expect = [13.0, 26.0]
    assert f(x, s, shift=t)[0].tolist() == expect
    assert f((x, s), {"shift": t})[0].tolist() == expect  # one tuple and one dict
    # The same trace, positionally: not the traced signature, and the error lists what is there.
    with pytest.raises(ValueError, match=r"(?s)no trace takes \(float32\(2,\), float32\(\), "
                                         r"float32\(2,\)\).*shift=float32\(2,\)"):
        f(x, s, t)
    with pytest.raises(ValueError, match="single tuple and/or dictionary"):
        f(x, [s])
    # Keywords alone, given as one dict.
    mx.export_function(path, lambda **kw: kw["a"] - kw["b"], {"a": x, "b": t})
    assert mx.import_function(path)(a=t, b=x)[0].tolist() == [9.0, 18.0]


def test_exporter_keeps_several_traces_and_picks_by_signature(tmp_path):
    path = str(tmp_path / "multi.mlxfn")

    def fun(x, y=None):
        return [x.T @ x] if y is None else [x @ y]

    with mx.exporter(path, fun) as ex:
        ex(mx.ones((2, 3)))
        ex(mx.ones((4, 2), dtype=mx.float16))
        ex(mx.ones((2, 3)), y=mx.ones((3, 5)))
    with pytest.raises(RuntimeError, match="closed"):
        ex(mx.ones((1, 1)))
    f = mx.import_function(path)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_allclose(f(mx.array(a))[0], a.T @ a, rtol=1e-5)
    np.testing.assert_allclose(f(mx.array(a), y=mx.array(b))[0], a @ b, rtol=1e-5)
    h = rng.standard_normal((4, 2)).astype(np.float16)
    got = f(mx.array(h))[0]
    assert got.dtype == mx.float16
    np.testing.assert_allclose(np.array(got, dtype=np.float32),
                               h.astype(np.float32).T @ h.astype(np.float32), rtol=1e-2, atol=1e-2)
    with pytest.raises(ValueError, match="no trace takes"):
        f(mx.ones((3, 3)))  # a shape no trace has


def test_shapeless_export_takes_other_shapes_of_the_same_ranks(tmp_path):
    path = str(tmp_path / "shapeless.mlxfn")

    def fun(x, w):
        h = mx.maximum(x @ w, 0.0)
        return mx.softmax(h, axis=-1) + mx.mean(x, axis=-1, keepdims=True)

    mx.export_function(path, fun, mx.ones((2, 3)), mx.ones((3, 4)), shapeless=True)
    f = mx.import_function(path)
    rng = np.random.default_rng(1)
    for n, k, m in ((5, 7, 3), (1, 2, 9)):
        x = rng.standard_normal((n, k)).astype(np.float32)
        w = rng.standard_normal((k, m)).astype(np.float32)
        h = np.maximum(x @ w, 0)
        e = np.exp(h - h.max(-1, keepdims=True))
        expect = e / e.sum(-1, keepdims=True) + x.mean(-1, keepdims=True)
        got = f(mx.array(x), mx.array(w))[0]
        assert got.shape == (n, m)
        np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="ranks and dtypes must match"):
        f(mx.ones((2, 3, 1)), mx.ones((3, 4)))


def test_captured_arrays_and_random_keys_are_constants_of_the_file(tmp_path):
    path = str(tmp_path / "const.mlxfn")
    weights = mx.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    mx.random.seed(5)

    def fun(x):
        return x @ weights + mx.random.uniform(shape=(3,))

    mx.export_function(path, fun, mx.ones((1, 2)))
    mx.random.seed(5)
    expect = np.array(fun(mx.ones((1, 2))))
    out = run_fresh(f"""
        import numpy as np, tessera.core as mx
        f = mx.import_function({path!r})
        print(np.array(f(mx.ones((1, 2)))[0]).tolist())
    """)
    np.testing.assert_array_equal(json.loads(out), expect)


def test_functions_that_cannot_be_exported_and_files_that_cannot_be_read(tmp_path):
    @mx.custom_function
    def f(x):
        return x * 2

    @f.vjp
    def f_vjp(primals, cotangent, output):
        return cotangent * 2

    with pytest.raises(ValueError, match="cannot be exported"):
        mx.export_function(str(tmp_path / "c.mlxfn"), f, mx.ones(2))
    with pytest.raises(ValueError, match="written by MLX 0.32.4.*export the function again"):
        mx.import_function(str(DATA / "mlx_0_32_4_add.mlxfn"))
    good = tmp_path / "g.mlxfn"
    mx.export_function(str(good), lambda x: x + 1, mx.ones(3))
    data = good.read_bytes()
    (tmp_path / "t.mlxfn").write_bytes(data[:-5])
    with pytest.raises(ValueError, match="truncated or corrupt|corrupt"):
        mx.import_function(str(tmp_path / "t.mlxfn"))
    with pytest.raises(ValueError, match="cannot open"):
        mx.import_function(str(tmp_path / "missing.mlxfn"))


def _sweep_cases():
    """Functions that together use every primitive import can rebuild, with example inputs."""
    rng = np.random.default_rng(7)
    f32 = lambda *s: mx.array(rng.standard_normal(s).astype(np.float32))  # noqa: E731
    x, y = f32(3, 4), f32(3, 4)
    u = mx.array(rng.uniform(-0.9, 0.9, (3, 4)).astype(np.float32))
    i = mx.array(rng.integers(1, 50, (3, 4)).astype(np.int32))
    j = mx.array(rng.integers(1, 5, (3, 4)).astype(np.int32))
    spd = f32(4, 4)
    spd = spd @ spd.T + 4 * mx.eye(4)
    w = f32(16, 64)
    cases = {
        "unary": (lambda a, b: [mx.abs(a), -a, mx.sign(a), mx.square(a), mx.exp(a), mx.expm1(a),
                                mx.log1p(mx.abs(a)), mx.sin(a), mx.cos(a), mx.tan(b), mx.arcsin(b),
                                mx.arccos(b), mx.arctan(a), mx.sinh(a), mx.cosh(a), mx.tanh(a),
                                mx.arcsinh(a), mx.arccosh(mx.abs(a) + 1), mx.arctanh(b),
                                mx.sigmoid(a), mx.erf(a), mx.erfinv(b), mx.floor(a), mx.ceil(a),
                                mx.round(a, 1), mx.sqrt(mx.abs(a)), mx.rsqrt(mx.abs(a) + 1),
                                mx.log(mx.abs(a) + 1), mx.log2(mx.abs(a) + 1),
                                mx.stop_gradient(a), mx.logical_not(a > 0)], (x, u)),
        "complex": (lambda a, b: [mx.conjugate(a + 1j * b), mx.real(a + 2j), mx.imag(a * 1j)],
                    (x, y)),
        "binary": (lambda a, b: [a + b, a - b, a * b, a / b, mx.remainder(a, b),
                                 mx.power(mx.abs(a), b), mx.maximum(a, b), mx.minimum(a, b),
                                 mx.arctan2(a, b), mx.logaddexp(a, b), a == b, a != b, a < b,
                                 a <= b, a > b, a >= b, mx.logical_and(a > 0, b > 0),
                                 mx.logical_or(a > 0, b > 0), mx.where(a > b, a, b),
                                 *mx.divmod(a, b)], (x, y)),
        "integer": (lambda a, b: [a & b, a | b, a ^ b, a << b, a >> b, ~a, a // b], (i, j)),
        "creation": (lambda a: [mx.full((2, 3), 1.5) + a[0, 0], mx.arange(5) * a[0, 0],
                                mx.linspace(0, 1, 7) + a[0, 0], mx.eye(3, 4) * a[:3],
                                mx.tril(a), mx.tri(3, 4) * a[:3], a.astype(mx.float16),
                                a.view(mx.int32), mx.as_strided(a, (2, 2), (4, 1), 1),
                                mx.contiguous(a.T), mx.zeros_like(a) + mx.ones_like(a)], (x,)),
        "shape": (lambda a, b: [mx.broadcast_to(a[:1], (3, 4)), a.reshape(2, 6), a.T,
                                mx.expand_dims(a, 1), mx.squeeze(a[:1], 0),
                                mx.concatenate([a, b], axis=1), *mx.split(a, [1, 3], axis=1),
                                mx.flip(a, 0), mx.pad(a, ((1, 0), (0, 2))),
                                mx.depends(a, b)], (x, y)),
        "indexing": (lambda a, k: [a[1:3, ::2], a.at[mx.array([0, 2])].add(1.0),
                                   a[mx.array([2, 0])],
                                   mx.take(a, mx.array([1, 3]), axis=1),
                                   mx.slice(a, k, (0,), (2, 4)), mx.slice_update(a, a[:1], k, (0,)),
                                   mx.take_along_axis(a, mx.argsort(a, 1), 1),
                                   mx.put_along_axis(a, mx.argsort(a, 1)[:, :1],
                                                     mx.zeros((3, 1)), 1),
                                   mx.array(a)[1:2], _slice_assign(a)],
                     (x, mx.array([1]))),
        "reduce": (lambda a: [mx.sum(a, 1), mx.mean(a), mx.var(a, 0), mx.argmax(a, 1),
                              mx.cumsum(a, 1), mx.softmax(a, -1), mx.logsumexp(a, -1),
                              mx.max(a), mx.prod(a, 0)], (x,)),
        "sort": (lambda a: [mx.sort(a, 1), mx.argsort(a, 0), mx.partition(a, 2, 1),
                            mx.argpartition(a, 1, 0),
                            mx.searchsorted(mx.sort(a[0]), a[1])], (x,)),
        "linalg": (lambda a, s: [mx.addmm(a[:, :3], a, s[:, :3], alpha=0.5, beta=2.0),
                                 a @ s,
                                 mx.gather_mm(a[None], s[None], mx.array([0, 0]), mx.array([0, 0])),
                                 mx.segmented_mm(a, s, mx.array([[0, 2], [2, 4]])),
                                 mx.linalg.inv(s), mx.linalg.cholesky(s), mx.linalg.eigh(s)[0],
                                 mx.abs(mx.linalg.svd(s, compute_uv=False)),
                                 mx.abs(mx.linalg.qr(s)[1]), mx.linalg.lu(s)[2],
                                 mx.linalg.solve(s, a.T), mx.abs(mx.linalg.eigvals(s))],
                   (x, spd)),
        "fft": (lambda a: [mx.abs(mx.fft.rfft(a)), mx.hadamard_transform(a)], (x,)),
        "fast": (lambda a: [mx.fast.rope(a, 4, traditional=False, base=1e4, scale=1.0, offset=2),
                            mx.fast.rope(a, 2, traditional=True, base=None, scale=0.5, offset=1,
                                         freqs=mx.array([3.0])),
                            mx.fast.rms_norm(a, a[0, 0, 0], 1e-5),
                            *mx.grad(lambda p, q: mx.fast.rms_norm(p, q, 1e-5).sum(),
                                     argnums=(0, 1))(a, a[0, 0, 0]),
                            mx.fast.layer_norm(a, a[0, 0, 0], a[0, 0, 1], 1e-5),
                            mx.fast.layer_norm(a, None, None, 1e-4),
                            *mx.grad(lambda p, q: mx.fast.layer_norm(p, q, q, 1e-5).sum(),
                                     argnums=(0, 1))(a, a[0, 0, 0]),
                            mx.fast.cross_entropy(a, mx.array([[[0, 3, -1], [1, 2, 0]]])),
                            mx.grad(lambda z: mx.fast.cross_entropy(
                                z, mx.array([[[0, 3, -1], [1, 2, 0]]])).sum())(a),
                            mx.fast.scaled_dot_product_attention(a, a, a, scale=0.5,
                                                                 mask="causal"),
                            mx.fast.scaled_dot_product_attention(
                                a, a[:, :1], a[:, :1], scale=0.5, mask=a[0, 0, :, :3] > 0,
                                sinks=mx.array([0.5, -1.0])),
                            *mx.grad(lambda q, k: mx.fast.scaled_dot_product_attention(
                                q, k, k, scale=0.5, mask="causal").sum(), argnums=(0, 1))(a, a)],
                 (f32(1, 2, 3, 4),)),
        "conv": (lambda a, k: [mx.conv1d(a, k),
                               *mx.grad(lambda p, q: mx.sum(mx.conv1d(p, q) ** 2),
                                        argnums=(0, 1))(a, k)],
                 (f32(1, 8, 4), f32(2, 3, 4))),
        "quantized": (lambda a, m: [mx.dequantize(*mx.quantize(m, 64, 4), 64, 4),
                                    mx.dequantize(*mx.quantize(m, 32, 4, mode="mxfp4"),
                                                  group_size=32, bits=4, mode="mxfp4"),
                                    mx.quantized_matmul(a, *mx.quantize(m, 64, 4), True, 64, 4),
                                    mx.gather_qmm(a, *mx.quantize(m[None], 64, 4), transpose=True,
                                                  group_size=64, bits=4,
                                                  rhs_indices=mx.array([0])),
                                    mx.from_fp8(mx.to_fp8(a))], (f32(2, 64), w)),
        "random": (lambda k: [mx.random.uniform(shape=(5,), key=k),
                              mx.random.normal((2, 2), key=k)], (mx.random.key(3),)),
    }
    return cases


def _slice_assign(a):
    b = mx.array(a)
    b[0, 1:3] = 5.0
    return b


def test_every_exportable_primitive_round_trips_through_a_file(tmp_path):
    cases = _sweep_cases()
    used = set()
    expected = {}
    inputs = {}
    for name, (fun, args) in cases.items():
        mx.export_function(str(tmp_path / f"{name}.mlxfn"), fun, *args)
        used.update(mx._exported_primitives(str(tmp_path / f"{name}.mlxfn")))
        for k, a in enumerate(args):
            inputs[f"{name}.{k}"] = np.array(a)
        for k, o in enumerate(fun(*args)):
            o = o.astype(mx.float32) if o.dtype == mx.bfloat16 else o
            expected[f"{name}.{k}"] = np.array(o)
    np.savez(tmp_path / "inputs.npz", **inputs)
    # Input-less primitives (arange, eye, linspace) run at export: the file holds their values.
    missing = set(mx._exportable_primitives()) - used
    assert missing == {"Arange", "Eye", "Linspace"}, f"no case of the sweep uses {sorted(missing)}"
    run_fresh(f"""
        import numpy as np, tessera.core as mx
        from pathlib import Path
        d = Path({str(tmp_path)!r})
        inputs = np.load(d / "inputs.npz")
        names = sorted({{k.split(".")[0] for k in inputs.files}})
        out = {{}}
        for name in names:
            args = [mx.array(inputs[f"{{name}}.{{k}}"]) for k in range(len(inputs.files))
                    if f"{{name}}.{{k}}" in inputs.files]
            for k, o in enumerate(mx.import_function(str(d / f"{{name}}.mlxfn"))(*args)):
                o = o.astype(mx.float32) if o.dtype == mx.bfloat16 else o
                out[f"{{name}}.{{k}}"] = np.array(o)
        np.savez(d / "outputs.npz", **out)
    """)
    got = np.load(tmp_path / "outputs.npz")
    assert sorted(got.files) == sorted(expected)
    for k, v in expected.items():
        # The same kernels on the same inputs: the same bits.
        np.testing.assert_array_equal(got[k], v, err_msg=k)


def test_every_truncation_and_corrupted_byte_is_an_error_not_a_crash(tmp_path):
    path = tmp_path / "f.mlxfn"
    mx.export_function(str(path), lambda x, y: [mx.sin(x) @ y, x.T], mx.ones((2, 3)),
                       mx.ones((3, 2)), metadata="m")
    data = path.read_bytes()
    bad = tmp_path / "bad.mlxfn"
    for cut in range(len(data)):
        bad.write_bytes(data[:cut])
        with pytest.raises(ValueError):
            mx.import_function(str(bad))
    rng = np.random.default_rng(0)
    for pos in rng.integers(0, len(data), 300):
        corrupt = bytearray(data)
        corrupt[pos] ^= 0xFF
        bad.write_bytes(bytes(corrupt))
        try:
            mx.import_function(str(bad))  # a flipped constant or shape may still read
        except ValueError:
            pass
