"""Names MLX 0.32.4 has that Tessera added for it (test_mlx_names.py lists them all): each
against NumPy or MLX 0.32.4's observed behaviour (values, dtypes, the errors it raises)."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tessera.core as mx


def test_minmax_is_min_and_max_in_one_call():
    x = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
    a = mx.array(x)
    lo, hi = mx.minmax(a)
    assert lo.item() == x.min() and hi.item() == x.max()
    for axis, keepdims in [(1, False), ((0, 2), True), (-1, True)]:
        out = mx.minmax(a, axis=axis, keepdims=keepdims)
        assert isinstance(out, tuple) and len(out) == 2
        np.testing.assert_array_equal(np.array(out[0]), x.min(axis=axis, keepdims=keepdims))
        np.testing.assert_array_equal(np.array(out[1]), x.max(axis=axis, keepdims=keepdims))
    b = mx.array([3, 1, 2], dtype=mx.uint8)
    assert [v.item() for v in mx.minmax(b)] == [1, 3] and mx.minmax(b)[0].dtype == mx.uint8
    with pytest.raises(ValueError):
        mx.minmax(mx.zeros((0,)))


def test_mT_swaps_the_last_two_axes():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(np.array(mx.array(x).mT), np.swapaxes(x, -1, -2))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        mx.arange(3).mT


def test_array_helper_types_are_public():
    a = mx.array([[1, 2], [3, 4], [5, 6]])
    assert isinstance(a.at, mx.ArrayAt) and isinstance(a.at[0], mx.ArrayAt)
    assert a.at[mx.array([0, 0, 2])].add(10).tolist() == [[21, 22], [3, 4], [15, 16]]
    it = iter(a)
    assert isinstance(it, mx.ArrayIterator) and iter(it) is it
    assert next(it).tolist() == [1, 2]
    assert [r.tolist() for r in it] == [[3, 4], [5, 6]]
    with pytest.raises(StopIteration):
        next(it)
    with pytest.raises(TypeError):
        iter(mx.array(1.0))
    # A marker type whose constructor takes any object, as MLX's; not an array.
    assert isinstance(mx.ArrayLike(object()), mx.ArrayLike)
    with pytest.raises(ValueError):
        mx.array(mx.ArrayLike(1))


def test_matrix_norm_is_linalg_norm():
    assert mx.matrix_norm is mx.linalg.norm
    x = np.arange(9, dtype=np.float32).reshape(3, 3) - 4
    for ord_ in [None, "fro", 1, np.inf]:
        np.testing.assert_allclose(mx.matrix_norm(mx.array(x), ord=ord_).item(),
                                   np.linalg.norm(x, ord=ord_), rtol=1e-6)


def test_get_array_buffer_size_counts_each_buffer_once():
    a, b = mx.ones(10), mx.ones(1000)
    mx.eval(a, b)
    assert mx.get_array_buffer_size(a) == 40
    assert mx.get_array_buffer_size(a, a) == 40
    assert mx.get_array_buffer_size({"x": [a, b], "y": (a, 3, "s")}) == 4040
    assert mx.get_array_buffer_size() == 0 and mx.get_array_buffer_size(3, "x", None) == 0
    view = a[2:]
    mx.eval(view)
    assert mx.get_array_buffer_size(view) == 40  # the whole base buffer
    with pytest.raises(ValueError, match="must be evaluated"):
        mx.get_array_buffer_size(a + 1)


def test_gpu_kernels_say_there_is_no_gpu_back_end():
    kernel = mx.fast.metal_kernel(name="k", input_names=["x"], output_names=["y"],
                                  source="y[0] = x[0];", compile_options={"math_mode": "fast"})
    with pytest.raises(RuntimeError, match=r"\[metal_kernel\] No Metal back-end"):
        kernel(inputs=[mx.ones(1)], output_shapes=[(1,)], output_dtypes=[mx.float32],
               grid=(1, 1, 1), threadgroup=(1, 1, 1))
    with pytest.raises(ValueError, match="math_mode"):
        mx.fast.metal_kernel(name="k", input_names=[], output_names=[], source="",
                             compile_options={"math_mode": "reckless"})
    with pytest.raises(ValueError, match="Unknown compile option `foo`"):
        mx.fast.metal_kernel(name="k", input_names=[], output_names=[], source="",
                             compile_options={"foo": 1})
    with pytest.raises(RuntimeError, match=r"\[cuda_kernel\] No CUDA back-end"):
        mx.fast.cuda_kernel(name="k", input_names=["x"], output_names=["y"], source="")
    with pytest.raises(RuntimeError, match=r"\[cuda_kernel\] No CUDA back-end"):
        mx.fast.precompiled_cuda_kernel(name="k", compiled_source=b"", inputs=[],
                                        output_shapes=[], output_dtypes=[], scalars=[],
                                        grid=(1, 1, 1), threadgroup=(1, 1, 1))


def test_metal_memory_functions_forward_with_a_notice_on_stderr_once():
    code = textwrap.dedent("""
        import tessera.core as mx
        a = mx.ones(1000); mx.eval(a)
        assert mx.metal.get_active_memory() == mx.get_active_memory() >= 4000
        mx.metal.get_active_memory()
        assert mx.metal.device_info() == {}
        assert mx.metal.set_wired_limit(0) == 0
        mx.metal.start_capture("x.gputrace"); mx.metal.stop_capture()
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
    notices = [line for line in r.stderr.splitlines() if "is deprecated" in line]
    assert notices == [
        "mx.metal.get_active_memory is deprecated and will be removed in a future version. "
        "Use mx.get_active_memory instead.",
        "mx.metal.device_info is deprecated and will be removed in a future version. "
        "Use mx.device_info instead.",
        "mx.metal.set_wired_limit is deprecated and will be removed in a future version. "
        "Use mx.set_wired_limit instead.",
    ]


def _np_cross_entropy(logits, targets):
    x = logits.astype(np.float64)
    m = x.max(-1, keepdims=True)
    lse = np.log(np.exp(x - m).sum(-1)) + m[..., 0]
    return lse - np.take_along_axis(x, (targets % x.shape[-1])[..., None], -1)[..., 0]


def test_fast_cross_entropy_and_its_gradient_against_numpy():
    rng = np.random.default_rng(1)
    logits = (rng.standard_normal((2, 3, 7)) * 4).astype(np.float32)
    targets = rng.integers(-7, 7, (2, 3)).astype(np.int32)  # negatives count from the end
    out = mx.fast.cross_entropy(mx.array(logits), mx.array(targets))
    assert out.shape == (2, 3) and out.dtype == mx.float32
    np.testing.assert_allclose(np.array(out), _np_cross_entropy(logits, targets), rtol=1e-5, atol=1e-5)
    half = mx.fast.cross_entropy(mx.array(logits, dtype=mx.bfloat16), mx.array(targets))
    assert half.dtype == mx.float32
    np.testing.assert_allclose(np.array(half), _np_cross_entropy(
        np.array(mx.array(logits, dtype=mx.bfloat16).astype(mx.float32)), targets), rtol=1e-5)
    # d/dlogits of the summed loss: softmax minus the one-hot of the target.
    g = mx.grad(lambda x: mx.fast.cross_entropy(x, mx.array(targets)).sum())(mx.array(logits))
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    p[np.arange(2)[:, None], np.arange(3)[None, :], targets % 7] -= 1
    np.testing.assert_allclose(np.array(g), p, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="targets shape \\(2,3,1\\) does not match"):
        mx.fast.cross_entropy(mx.array(logits), mx.array(targets[..., None]))
    with pytest.raises(ValueError, match="integer class indices but got float32"):
        mx.fast.cross_entropy(mx.array(logits), mx.array(targets.astype(np.float32)))
    with pytest.raises(ValueError, match="unsupported logits type int32"):
        mx.fast.cross_entropy(mx.array(targets), mx.array(targets[..., 0]))


def test_fast_cross_entropy_is_one_pass_over_a_large_vocabulary():
    # 16 rows of 32000 classes in bf16 (an LLM's logits): the loss needs no (N, C) temporary,
    # the gradient is softmax minus one-hot in the logits' dtype; out-of-range targets give NaN.
    rng = np.random.default_rng(2)
    logits = mx.array((rng.standard_normal((16, 32000)) * 3).astype(np.float32)).astype(mx.bfloat16)
    targets = rng.integers(0, 32000, 16).astype(np.int32)
    mx.eval(logits)
    mx.reset_peak_memory()
    before = mx.get_active_memory()
    loss = mx.fast.cross_entropy(logits, mx.array(targets))
    mx.eval(loss)
    assert mx.get_peak_memory() - before < logits.nbytes // 4
    x = np.array(logits.astype(mx.float32), np.float64)
    np.testing.assert_allclose(np.array(loss), _np_cross_entropy(x, targets), rtol=1e-5)
    w = mx.array(rng.standard_normal(16).astype(np.float32))
    g = mx.grad(lambda z: (mx.fast.cross_entropy(z, mx.array(targets)) * w).sum())(logits)
    assert g.dtype == mx.bfloat16
    p = np.exp(x - x.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    p[np.arange(16), targets] -= 1
    np.testing.assert_allclose(np.array(g.astype(mx.float32)), p * np.array(w)[:, None],
                               atol=1e-2, rtol=1e-2)
    bad = mx.fast.cross_entropy(logits[:2], mx.array([32000, -32001]))
    assert np.isnan(np.array(bad)).all()


def test_fast_cross_entropy_row_widths_dtypes_and_special_values():
    # Widths around the 16-lane vectors (a tail alone, whole vectors, both), each float dtype,
    # a NaN logit (that row's loss is NaN), -inf logits (excluded classes), large logits.
    rng = np.random.default_rng(3)
    for n in (1, 16, 37, 100):
        x = (rng.standard_normal((5, n)) * 3).astype(np.float32)
        x[1] += 1e4
        if n > 1:
            x[2, 0] = -np.inf
            x[3, n // 2] = np.nan
        t = rng.integers(0, n, 5).astype(np.int32)
        t[2] = n - 1 if n > 1 else 0
        for dt in (mx.float32, mx.float16, mx.bfloat16):
            if dt == mx.float16:
                x16 = x.copy()
                x16[1] -= 1e4 - 60.0  # float16's range
            else:
                x16 = x
            xa = mx.array(x16).astype(dt)
            ref = np.array(xa.astype(mx.float32), np.float64)
            with np.errstate(invalid="ignore"):
                want = _np_cross_entropy(ref, t)
            got = np.array(mx.fast.cross_entropy(xa, mx.array(t)))
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=f"n={n} {dt}")
            # The gradient (softmax minus one-hot, times each row's cotangent) in x's dtype.
            w = rng.standard_normal(5).astype(np.float32)
            g = mx.grad(lambda z: (mx.fast.cross_entropy(z, mx.array(t)) * mx.array(w)).sum())(xa)
            assert g.dtype == dt
            with np.errstate(invalid="ignore"):
                p = np.exp(ref - ref.max(-1, keepdims=True))
                p /= p.sum(-1, keepdims=True)
            p[np.arange(5), t] -= 1
            tol = 2e-6 if dt == mx.float32 else 1e-2
            np.testing.assert_allclose(np.array(g.astype(mx.float32)), p * w[:, None], rtol=tol,
                                       atol=tol, err_msg=f"gradient, n={n} {dt}")


def _np_gated_delta(q, k, v, gamma, beta, state=None, mask=None):
    B, T, Hk, Dk = q.shape
    Hv, Dv = v.shape[2:]
    q, k = np.repeat(q, Hv // Hk, 2), np.repeat(k, Hv // Hk, 2)
    S = np.zeros((B, Hv, Dv, Dk)) if state is None else state.astype(np.float64)
    ys = np.zeros((B, T, Hv, Dv))
    for b in range(B):
        for h in range(Hv):
            s = S[b, h].copy()
            for t in range(T):
                if mask is not None and mask[b, t] == 0:
                    continue  # the state stays, the output is 0
                s = s * gamma[b, t, h]  # a scalar, or a Dk-vector over the columns
                s = s + np.outer(beta[b, t, h] * (v[b, t, h] - s @ k[b, t, h]), k[b, t, h])
                ys[b, t, h] = s @ q[b, t, h]
            S[b, h] = s
    return ys, S


@pytest.mark.parametrize("per_key_decay, with_state", [(False, False), (True, True)])
def test_fast_gated_delta_update_against_the_recurrence(per_key_decay, with_state):
    rng = np.random.default_rng(2)
    B, T, Hk, Hv, Dk, Dv = 2, 5, 2, 4, 3, 5
    q, k = (rng.standard_normal((B, T, Hk, Dk)).astype(np.float32) for _ in range(2))
    v = rng.standard_normal((B, T, Hv, Dv)).astype(np.float32)
    gamma = rng.uniform(0.5, 1, (B, T, Hv, Dk) if per_key_decay else (B, T, Hv)).astype(np.float32)
    beta = rng.uniform(0, 1, (B, T, Hv)).astype(np.float32)
    state = rng.standard_normal((B, Hv, Dv, Dk)).astype(np.float32) if with_state else None
    mask = np.array([[1, 1, 0, 1, 1], [1, 0, 1, 1, 0]]) if with_state else None
    y, s = mx.fast.gated_delta_update(
        mx.array(q), mx.array(k), mx.array(v), mx.array(gamma), mx.array(beta),
        None if state is None else mx.array(state), None if mask is None else mx.array(mask))
    want_y, want_s = _np_gated_delta(q, k, v, gamma, beta, state, mask)
    assert y.shape == (B, T, Hv, Dv) and s.shape == (B, Hv, Dv, Dk) and s.dtype == mx.float32
    np.testing.assert_allclose(np.array(y), want_y, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.array(s), want_s, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=r"initial_state must be \[B, Hv, Dv, Dk\]"):
        mx.fast.gated_delta_update(mx.array(q), mx.array(k), mx.array(v), mx.array(gamma),
                                   mx.array(beta), mx.zeros((B, Hv, Dk, Dv + 1)))


def _np_unique(x, size, fill=None):
    """MLX 0.32.4's unique through NumPy: the first `size` sorted uniques (every NaN its own),
    first indices, inverse (clamped to size - 1), counts; padding with fill / index[0] / 0."""
    flat = x.reshape(-1)
    order = np.argsort(flat, kind="stable")
    s = flat[order]
    starts = np.ones(len(s), bool)
    starts[1:] = ~(s[1:] == s[:-1])  # NaN != NaN: each its own group
    group = np.cumsum(starts) - 1
    firsts = np.flatnonzero(starts)
    vals, idx = s[firsts][:size], order[firsts][:size]
    counts = np.bincount(group, minlength=len(firsts))[:size]
    pad = size - len(vals)
    fill = s[0] if fill is None else fill
    vals = np.concatenate([vals, np.full(pad, fill, x.dtype)])
    idx = np.concatenate([idx, np.full(pad, idx[0] if len(idx) else 0)]).astype(np.uint32)
    counts = np.concatenate([counts, np.zeros(pad, int)]).astype(np.int32)
    inverse = np.empty(len(flat), np.uint32)
    inverse[order] = np.minimum(group, max(size - 1, 0))
    return vals, idx, inverse.reshape(x.shape), counts


def test_unique_matches_its_numpy_definition():
    a = np.array([2, 1, 2, 3, 1], dtype=np.int32)
    assert mx.unique(mx.array(a), 3).tolist() == [1, 2, 3]
    assert mx.unique(mx.array(a), 5).tolist() == [1, 2, 3, 1, 1]
    v, i, inv, c = mx.unique(mx.array(a), 4, True, True, True, fill_value=0)
    assert (v.tolist(), i.tolist(), inv.tolist(), c.tolist()) == (
        [1, 2, 3, 0], [1, 0, 3, 1], [1, 0, 1, 2, 0], [2, 2, 1, 0])
    assert (i.dtype, inv.dtype, c.dtype) == (mx.uint32, mx.uint32, mx.int32)
    rng = np.random.default_rng(3)
    x = rng.integers(0, 7, (4, 5)).astype(np.float32)
    x[0, 0], x[2, 3], x[1, 1], x[3, 4] = np.nan, np.nan, -0.0, 0.0
    for size in [0, 2, 6, 12]:
        got = mx.unique(mx.array(x), size, return_index=True, return_inverse=True,
                        return_counts=True)
        want = _np_unique(x, size)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.array(g), w)
        assert got[2].shape == x.shape
    with pytest.raises(ValueError, match="negative size -1"):
        mx.unique(mx.array(a), -1)
    with pytest.raises(ValueError, match="Fill value must have one element"):
        mx.unique(mx.array(a), 3, fill_value=mx.array([1, 2]))
    with pytest.raises(ValueError, match="fill value is required for an empty input"):
        mx.unique(mx.zeros((0,)), 2)
    assert mx.unique(mx.zeros((0,)), 2, fill_value=5).tolist() == [5.0, 5.0]


def _np_stft(x, n_fft, hop, window, center=True, pad_mode="reflect", norm="backward",
             onesided=True):
    w = np.zeros(n_fft)
    left = (n_fft - len(window)) // 2
    w[left:left + len(window)] = window
    if center:
        x = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(n_fft // 2, n_fft // 2)], mode=pad_mode)
    frames = 1 + (x.shape[-1] - n_fft) // hop
    framed = np.stack([x[..., f * hop:f * hop + n_fft] * w for f in range(frames)], -2)
    spec = np.fft.rfft(framed, n_fft, norm=norm) if onesided else np.fft.fft(framed, n_fft, norm=norm)
    return np.swapaxes(spec, -1, -2)


def test_stft_and_istft_against_numpy():
    # MLX 0.32.4's worked example (window centred, reflect padding) and its inverse.
    x = np.arange(8, dtype=np.float32)
    w = np.array([0, 0.5, 1, 0.5], np.float32)
    S = mx.fft.stft(mx.array(x), n_fft=4, hop_length=2, window=mx.array(w))
    assert S.shape == (3, 5) and S.dtype == mx.complex64
    np.testing.assert_allclose(np.array(S), [[1, 4, 8, 12, 12], [0, -2 + 1j, -4 + 1j, -6 + 1j, -6 - 1j],
                                             [-1, 0, 0, 0, 0]], atol=1e-5)
    back = mx.fft.istft(S, n_fft=4, hop_length=2, window=mx.array(w))
    assert back.dtype == mx.float32
    np.testing.assert_allclose(np.array(back), x, atol=1e-5)
    # A batch, a short rectangular window, each padding mode and norm.
    rng = np.random.default_rng(4)
    sig = rng.standard_normal((2, 50)).astype(np.float32)
    for mode, norm in [("reflect", "ortho"), ("edge", "forward"), ("constant", "backward")]:
        got = mx.fft.stft(mx.array(sig), n_fft=16, hop_length=4, win_length=10, pad_mode=mode,
                          norm=norm)
        want = _np_stft(sig, 16, 4, np.ones(10), pad_mode=mode, norm=norm)
        np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-4)
    # Two-sided, no centering; complex input defaults to two-sided.
    z = (sig[0] + 1j * sig[1]).astype(np.complex64)
    got = mx.fft.stft(mx.array(z), n_fft=8, hop_length=3, center=False)
    np.testing.assert_allclose(np.array(got), _np_stft(z, 8, 3, np.ones(8), center=False,
                                                        onesided=False), rtol=1e-4, atol=1e-4)
    # A Hann window at a quarter hop inverts exactly; length trims or pads with zeros.
    hann = np.hanning(32).astype(np.float32)
    spec = mx.fft.stft(mx.array(sig), n_fft=32, hop_length=8, window=mx.array(hann))
    rec = mx.fft.istft(spec, hop_length=8, window=mx.array(hann), length=50)
    np.testing.assert_allclose(np.array(rec), sig, atol=1e-4)
    # 7 frames span 80 padded samples, 64 past the centring offset: a longer output continues
    # into the reflected padding, then zeros.
    longer = np.array(mx.fft.istft(spec, hop_length=8, window=mx.array(hann), length=70))
    assert longer.shape == (2, 70) and not np.any(longer[:, 64:])
    padded = np.pad(sig, ((0, 0), (16, 16)), mode="reflect")
    np.testing.assert_allclose(longer[:, :63], padded[:, 16:79], atol=1e-4)  # w = 0 at 63
    with pytest.raises(ValueError, match="hop_length must be positive"):
        mx.fft.stft(mx.array(sig), n_fft=16, hop_length=0)
    with pytest.raises(ValueError, match="too short"):
        mx.fft.stft(mx.array(sig[:, :5]), n_fft=16, center=False)
    with pytest.raises(ValueError, match="must not exceed n_fft"):
        mx.fft.stft(mx.array(sig), n_fft=8, window=mx.ones(9))
    with pytest.raises(ValueError, match="at least two dimensions"):
        mx.fft.istft(mx.ones(4))
