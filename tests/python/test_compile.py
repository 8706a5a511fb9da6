"""mx.compile: results against NumPy and against eager Tessera, tracing once per signature, the
decorator forms, captured state (a compiled training step), composition with grad, the kernel
cache shared by processes, and the path without a C++ compiler."""

import os
import subprocess
import sys
import textwrap
import time
from functools import partial

import numpy as np
import pytest

import tessera.core as mx


@pytest.fixture(autouse=True)
def kernel_cache(tmp_path_factory, monkeypatch):
    # One cache for the session's tests (kernels built once); subprocesses get their own.
    d = tmp_path_factory.getbasetemp() / "kernels"
    monkeypatch.setenv("TESSERA_COMPILE_CACHE_DIR", str(d))
    yield d


def chain(v):
    return mx.tanh(mx.exp(-v * v) * 0.5 + mx.sin(v) - mx.cos(v) * v / 3 + 1)


def chain_np(v):
    return np.tanh(np.exp(-v * v) * 0.5 + np.sin(v) - np.cos(v) * v / 3 + 1)


def test_chain_matches_numpy_and_eager():
    x = np.random.default_rng(0).standard_normal((300, 7)).astype(np.float32) * 3
    got = mx.compile(chain)(mx.array(x))
    np.testing.assert_allclose(np.asarray(got), chain_np(x.astype(np.float64)), rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(np.asarray(got), np.asarray(chain(mx.array(x))), rtol=1e-6, atol=1e-6)


def test_integer_results_are_bitwise_eager():
    rng = np.random.default_rng(1)
    a = mx.array(rng.integers(-1000, 1000, 257, dtype=np.int32))
    b = mx.array(rng.integers(1, 50, 257, dtype=np.int32))

    def f(a, b):
        return (a * b + a) % 7, (a // b) ^ (a << 2), mx.maximum(a, b) - mx.abs(a)

    for got, want in zip(mx.compile(f)(a, b), f(a, b)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    na, nb = np.asarray(a), np.asarray(b)
    np.testing.assert_array_equal(np.asarray(mx.compile(f)(a, b)[0]), (na * nb + na) % 7)


def test_decorator_forms_and_methods():
    @mx.compile
    def plain(x):
        return x * 2 + 1

    @mx.compile(shapeless=True)
    def no_shape(x):
        return mx.exp(x) - x

    @partial(mx.compile, shapeless=True)
    def with_partial(x):
        return x * x

    class Scale:
        def __init__(self, k):
            self.k = k

        @mx.compile
        def apply(self, x, k):
            return x * k

    x = mx.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(np.asarray(plain(x)), [3, 5, 7])
    for n in (3, 5):
        v = mx.arange(n, dtype=mx.float32)
        np.testing.assert_allclose(np.asarray(no_shape(v)), np.exp(np.arange(n)) - np.arange(n), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(with_partial(v)), np.arange(n) ** 2)
    # A plain object is not a tree of arrays: its method gets it as a constant-free argument
    # only through functools.partial binding; a non-array, non-constant argument is refused.
    with pytest.raises(ValueError, match="Scale"):
        Scale(3).apply(x, 3)


def test_traces_once_per_signature_and_constants_retrace():
    calls = []

    def f(x, scale, name=None):
        calls.append(1)
        return {"out": x * scale, "tag": name}

    cf = mx.compile(f)
    x = mx.ones(4)
    assert cf(x, 2.0)["tag"] is None
    cf(x + 1, 2.0)
    assert len(calls) == 1
    out = cf(x, 3.0)  # a new constant value
    assert len(calls) == 2
    np.testing.assert_allclose(np.asarray(out["out"]), [3, 3, 3, 3])
    assert cf(x, 3.0, name="a")["tag"] == "a"
    assert len(calls) == 3
    cf(mx.ones(5), 3.0)  # a new shape
    assert len(calls) == 4
    cf(mx.ones(5, dtype=mx.float16), 3.0)  # a new dtype
    assert len(calls) == 5


def test_shapeless_recompiles_only_on_rank_or_dtype():
    calls = []

    def f(x, y):
        calls.append(1)
        return mx.exp(x) * y + x

    cf = mx.compile(f, shapeless=True)
    for n in (2, 9, 33):
        x = np.linspace(-1, 1, 2 * n, dtype=np.float32).reshape(n, 2)
        got = cf(mx.array(x), mx.array(x * 2))
        np.testing.assert_allclose(np.asarray(got), np.exp(x) * x * 2 + x, rtol=1e-6)
    assert len(calls) == 1
    cf(mx.ones(3), mx.ones(3))
    assert len(calls) == 2
    # Scalars and a broadcast bias follow the new shapes.
    g = mx.compile(lambda x, b: mx.maximum(x * 2 + b, 0.5), shapeless=True)
    for n in (2, 5):
        x = np.arange(3 * n, dtype=np.float32).reshape(n, 3) - 4
        b = np.array([0.5, -1.0, 2.0], dtype=np.float32)
        np.testing.assert_allclose(np.asarray(g(mx.array(x), mx.array(b))), np.maximum(x * 2 + b, 0.5))


def test_shapeless_normalisation_and_its_gradient_use_each_call_shape():
    # A layer norm's mean and variance divide by the row length of each call, and so does the
    # gradient (NumPy reference: the closed form of the normalisation and of d sum(mean) / dx).
    def norm(x):
        mu = mx.mean(x, axis=-1, keepdims=True)
        return (x - mu) * mx.rsqrt(mx.var(x, axis=-1, keepdims=True) + 1e-5)

    cnorm = mx.compile(norm, shapeless=True)
    cgrad = mx.compile(mx.grad(lambda x: mx.mean(x, axis=1).sum()), shapeless=True)
    rng = np.random.default_rng(3)
    for shape in ((2, 8), (5, 3), (1, 17)):
        x = rng.standard_normal(shape).astype(np.float32)
        want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
        np.testing.assert_allclose(np.asarray(cnorm(mx.array(x))), want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(np.asarray(cgrad(mx.array(x))), np.full(shape, 1 / shape[1]),
                                   rtol=1e-6)


def test_softmax_and_logsumexp_written_with_reductions_fuse_per_row():
    # Row fusion (one kernel per row: CompiledRows) against NumPy in float64, and the gradient
    # of an attention-style softmax (3-d, rows of 77) through it against eager.
    def softmax(x):
        e = mx.exp(x - mx.max(x, axis=-1, keepdims=True))
        return e / mx.sum(e, axis=-1, keepdims=True)

    def lse(x):
        m = mx.max(x, axis=-1, keepdims=True)
        return m + mx.log(mx.sum(mx.exp(x - m), axis=-1, keepdims=True))

    def lse_flat(x):  # without keepdims: [..., None] undoes the reduction's squeeze
        m = mx.max(x, axis=-1)
        return m + mx.log(mx.sum(mx.exp(x - m[..., None]), axis=-1))

    rng = np.random.default_rng(7)
    for shape in ((256, 1000), (2, 3, 77), (5, 20)):
        x = (rng.standard_normal(shape) * 5).astype(np.float32)
        xd = x.astype(np.float64)
        e = np.exp(xd - xd.max(-1, keepdims=True))
        np.testing.assert_allclose(np.asarray(mx.compile(softmax)(mx.array(x))),
                                   e / e.sum(-1, keepdims=True), rtol=2e-6, atol=1e-9)
        np.testing.assert_allclose(np.asarray(mx.compile(lse)(mx.array(x))),
                                   np.log(e.sum(-1, keepdims=True)) + xd.max(-1, keepdims=True),
                                   rtol=2e-6)
        np.testing.assert_allclose(np.asarray(mx.compile(lse_flat)(mx.array(x))),
                                   np.log(e.sum(-1)) + xd.max(-1), rtol=2e-6)
    x = mx.array((rng.standard_normal((4, 3, 77)) * 3).astype(np.float32))
    loss = lambda x: (softmax(x) * x).sum()
    np.testing.assert_allclose(np.asarray(mx.grad(mx.compile(loss))(x)),
                               np.asarray(mx.grad(loss)(x)), rtol=1e-5, atol=1e-7)


def test_shapeless_batched_products_broadcasts_and_slice_updates_follow_new_shapes():
    rng = np.random.default_rng(4)
    calls = []

    def grads(a, b):
        calls.append(1)
        return mx.grad(lambda p: (p[0] @ p[1]).sum())((a, b))

    cgrads = mx.compile(grads, shapeless=True)
    cprod = mx.compile(lambda a, b: a @ b, shapeless=True)
    for sa, sb in (((2, 1, 4, 2), (3, 2, 5)), ((3, 1, 4, 2), (2, 2, 5)), ((1, 4, 2), (2, 2, 5))):
        a = rng.standard_normal(sa).astype(np.float32)
        b = rng.standard_normal(sb).astype(np.float32)
        np.testing.assert_allclose(np.asarray(cprod(mx.array(a), mx.array(b))), a @ b, rtol=1e-5)
        ga, gb = cgrads(mx.array(a), mx.array(b))
        # d sum(a @ b) / da = ones @ b^T summed over the broadcast batch dims (and likewise b).
        ones = np.ones(np.broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-1]), np.float32)
        wa = ones @ np.swapaxes(b, -1, -2)
        wb = np.swapaxes(a, -1, -2) @ ones
        wa = wa.sum(axis=tuple(range(wa.ndim - len(sa)))).sum(
            axis=tuple(i for i, n in enumerate(sa) if n == 1), keepdims=True)
        wb = wb.sum(axis=tuple(range(wb.ndim - len(sb)))).sum(
            axis=tuple(i for i, n in enumerate(sb) if n == 1 and i < len(sb) - 2), keepdims=True)
        np.testing.assert_allclose(np.asarray(ga), wa.reshape(sa), rtol=1e-5)
        np.testing.assert_allclose(np.asarray(gb), wb.reshape(sb), rtol=1e-5)
    assert len(calls) == 2  # the third call has a new rank
    both = mx.compile(lambda a, b: mx.broadcast_arrays(a, b), shapeless=True)
    for sa, sb in (((), (2, 2)), ((3, 1), (1, 4))):
        x, y = both(mx.zeros(sa), mx.ones(sb))
        assert x.shape == y.shape == np.broadcast_shapes(sa, sb)

    def put(x):
        x[2] = mx.array([3.0])
        return x

    cput = mx.compile(put, shapeless=True)
    for n in (4, 6):
        want = np.arange(n, dtype=np.float32)
        want[2] = 3.0
        np.testing.assert_array_equal(np.asarray(cput(mx.arange(n, dtype=mx.float32))), want)
    with pytest.raises(ValueError, match="does not fit"):
        cput(mx.arange(2, dtype=mx.float32))


def test_shapeless_vmapped_products_broadcast_batch_dims_of_each_call():
    # vmap of a batched product inside a shapeless compile: the broadcasts of the batch dims
    # follow the operands (batched ones included) on every replay, not the traced shapes.
    rng = np.random.default_rng(9)
    calls = []

    def prod(x, y):
        calls.append(1)
        return mx.matmul(x, y)

    def want(x, y, ax_y):
        # Example i of x (axis 0) times example i of y (axis ax_y; every example when None).
        ys = [y if ax_y is None else np.take(y, i, axis=ax_y) for i in range(x.shape[0])]
        return np.stack([xi @ yi for xi, yi in zip(x, ys)])

    for ax_y, shapes in (
        (1, (((2, 3, 1, 4, 5), (1, 2, 5, 6)), ((3, 2, 1, 4, 5), (2, 3, 5, 6)))),
        (None, (((2, 3, 1, 4, 5), (1, 2, 5, 6)), ((2, 3, 1, 7, 2), (1, 2, 2, 3)))),
    ):
        calls.clear()
        cf = mx.compile(mx.vmap(prod, in_axes=(0, ax_y)), shapeless=True)
        for sx, sy in shapes:
            x = rng.standard_normal(sx).astype(np.float32)
            y = rng.standard_normal(sy).astype(np.float32)
            got = np.asarray(cf(mx.array(x), mx.array(y)))
            np.testing.assert_allclose(got, want(x, y, ax_y), rtol=1e-5, atol=1e-6)
        assert len(calls) == 1  # traced once: the second shapes replay


def test_shapeless_vmapped_fills_follow_each_calls_shapes():
    # zeros_like / ones_like / full_like of a batched value inside vmap inside a shapeless
    # compile fill the shape of each call (batch axis 0 or 1, fill values batched or not), and a
    # fill of a fixed shape stays that shape.
    rng = np.random.default_rng(10)
    cases = (
        # (function of one example, in_axes, shape sets, NumPy per example)
        (lambda r: mx.zeros_like(r) + 2 * r, 0, ((2, 3), (4, 5)), lambda r: 2 * r),
        (lambda r: mx.ones_like(r) * r.sum(), 1, ((3, 2), (5, 4)),
         lambda r: np.ones_like(r) * r.sum()),
        (lambda r: mx.full((3,), 3.0) + r, 0, ((2, 3), (5, 3)), lambda r: 3.0 + r),
        # a batched fill too: each example's own sum
        (lambda r: mx.full_like(r, r.sum()) * r, 1, ((3, 2), (5, 4)),
         lambda r: np.full_like(r, r.sum()) * r),
    )
    for fn, ax, shapes, want in cases:
        calls = []

        def traced(r, fn=fn):
            calls.append(1)
            return fn(r)

        cf = mx.compile(mx.vmap(traced, in_axes=ax), shapeless=True)
        for s in shapes:
            x = rng.standard_normal(s).astype(np.float32)
            ref = np.stack([want(np.take(x, i, axis=ax)) for i in range(x.shape[ax])])
            np.testing.assert_allclose(np.asarray(cf(mx.array(x))), ref, rtol=1e-5, atol=1e-6)
        assert len(calls) == 1


def test_random_state_is_compile_state():
    # mx.random.state holds the implicit key: a compiled function taking it as inputs / outputs
    # draws new numbers on every call, the same as the eager calls from the same seed.
    assert isinstance(mx.random.state, list) and len(mx.random.state) == 1
    draw = partial(mx.compile, inputs=mx.random.state, outputs=mx.random.state)(
        lambda: mx.random.uniform(shape=(4, 3)))
    mx.random.seed(5)
    compiled = [np.asarray(draw()) for _ in range(3)]
    mx.random.seed(5)
    eager = [np.asarray(mx.random.uniform(shape=(4, 3))) for _ in range(3)]
    for c, e in zip(compiled, eager):
        np.testing.assert_array_equal(c, e)
    assert not np.array_equal(compiled[0], compiled[1])
    # The state is the key explicit calls would use next.
    mx.random.seed(9)
    k = mx.random.state[0]
    first, second = mx.random.split(k)
    np.testing.assert_array_equal(np.asarray(mx.random.uniform(shape=(2,))),
                                  np.asarray(mx.random.uniform(shape=(2,), key=second)))
    np.testing.assert_array_equal(np.asarray(mx.random.state[0]), np.asarray(first))


def test_captured_state_training_step_matches_eager():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((64, 3)).astype(np.float32)
    w_true = np.array([[1.5], [-2.0], [0.5]], dtype=np.float32)
    Y = X @ w_true + 0.1

    def loss(params, x, y):
        return mx.mean(mx.square(x @ params["w"] + params["b"] - y))

    def run(compiled):
        params = {"w": mx.zeros((3, 1)), "b": mx.zeros((1,))}
        state = [params]

        def step(x, y):
            lval, grads = mx.value_and_grad(loss)(state[0], x, y)
            state[0] = {k: state[0][k] - 0.1 * grads[k] for k in grads}
            return lval

        if compiled:
            step = mx.compile(step, inputs=state, outputs=state)
        losses = []
        for _ in range(60):
            losses.append(step(mx.array(X), mx.array(Y)).item())
        return state[0], losses

    (p_c, l_c), (p_e, l_e) = run(True), run(False)
    np.testing.assert_allclose(l_c, l_e, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(p_c["w"]), w_true, atol=0.02)
    np.testing.assert_allclose(np.asarray(p_c["b"]), [0.1], atol=0.02)
    assert l_c[-1] < l_c[0] * 0.01


def test_two_regions_reading_each_others_values_through_outside_nodes_stay_apart():
    # a -> sum -> b and c -> sum -> d: fusing {a, d} and {c, b} would make each wait for the
    # other (a cycle). One such pair made mlx-lm's LoRA training step fail to compile.
    def f(x, y):
        a = mx.exp(x)
        c = y * 3.0
        b = c + mx.broadcast_to(mx.sum(a, axis=0, keepdims=True), c.shape)
        d = a * mx.broadcast_to(mx.sum(c, axis=0, keepdims=True), a.shape)
        return b, d

    rng = np.random.default_rng(5)
    x, y = (rng.standard_normal((5, 7)).astype(np.float32) for _ in range(2))
    b, d = mx.compile(f)(mx.array(x), mx.array(y))
    a, c = np.exp(x), y * 3.0
    np.testing.assert_allclose(np.asarray(b), c + a.sum(0, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(d), a * c.sum(0, keepdims=True), rtol=1e-5)


def test_grad_of_compiled_and_compiled_grad():
    def f(x, y):
        return mx.sum(mx.sin(x) * y + mx.exp(-x * y))

    x, y = mx.array([0.1, 0.5, -1.0]), mx.array([2.0, -1.0, 0.3])
    want = mx.grad(f, argnums=(0, 1))(x, y)
    for got in (mx.grad(mx.compile(f), argnums=(0, 1))(x, y), mx.compile(mx.grad(f, argnums=(0, 1)))(x, y)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-7)
    xn, yn = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    dx = np.cos(xn) * yn - yn * np.exp(-xn * yn)
    np.testing.assert_allclose(np.asarray(want[0]), dx, rtol=1e-5)


def test_disable_and_enable_compile():
    calls = []

    def f(x):
        calls.append(1)
        return x + 1

    cf = mx.compile(f)
    mx.disable_compile()
    try:
        cf(mx.array(1.0))
        cf(mx.array(1.0))
        assert len(calls) == 2
    finally:
        mx.enable_compile()
    cf(mx.array(1.0))
    cf(mx.array(1.0))
    assert len(calls) == 3


def test_eval_inside_compiled_function_is_an_error():
    @mx.compile
    def f(x):
        return x * mx.sum(x).item()

    with pytest.raises(ValueError, match=r"\[compile\]"):
        f(mx.array([1.0, 2.0]))


SCRIPT = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    import tessera.core as mx
    start = float(sys.argv[1])
    while time.time() < start:
        time.sleep(0.001)
    x = np.linspace(-2, 2, 1000, dtype=np.float32)
    got = mx.compile(lambda v: mx.tanh(v * 1.2345 + mx.sin(v)) * 2)(mx.array(x))
    np.testing.assert_allclose(np.asarray(got), np.tanh(x * 1.2345 + np.sin(x)) * 2, rtol=1e-5, atol=1e-6)
    got = mx.compile(lambda v: mx.exp(v) * 2 + v)(mx.array(x))
    np.testing.assert_allclose(np.asarray(got), np.exp(x) * 2 + x, rtol=1e-5, atol=1e-6)
    print("ok")
    """
)


def run_script(env, args=()):
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_four_processes_build_the_same_kernels_at_once(tmp_path):
    env = dict(os.environ, TESSERA_COMPILE_CACHE_DIR=str(tmp_path / "cache"), TESSERA_NUM_THREADS="1")
    start = str(time.time() + 1.0)
    procs = [run_script(env, [start]) for _ in range(4)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert out.strip() == "ok"
    files = sorted(os.listdir(tmp_path / "cache"))
    assert len(files) == 2 and all(f.endswith(".so") for f in files), files  # no temporaries


def test_without_a_compiler_warns_once_and_runs_unfused(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path), TESSERA_COMPILE_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("TESSERA_COMPILE_CXX", None)
    p = run_script(env, ["0"])
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert out.strip() == "ok"
    assert err.count("no C++ compiler found") == 1, err
    assert "c++, g++ and clang++" in err
    assert not (tmp_path / "cache").exists() or not os.listdir(tmp_path / "cache")


def test_state_the_function_adds_and_attributes_and_tree_types():
    state = {}

    @partial(mx.compile, inputs=state, outputs=state)
    def accumulate(x):
        """Adds x to the state."""
        y = state.get("y", mx.array(0))
        state["y"] = x + y
        return x + 2 * y

    assert accumulate(mx.array(1)).item() == 1 and state["y"].item() == 1
    assert accumulate(mx.array(1)).item() == 3 and state["y"].item() == 2  # traced again: new state
    assert accumulate.__name__ == "accumulate" and accumulate.__doc__ == "Adds x to the state."

    class Pair(list):
        pass

    out = mx.compile(lambda p: Pair([p[0] + 1, p[1] * 2]))(Pair([mx.array(1), mx.array(2)]))
    assert isinstance(out, Pair) and [v.item() for v in out] == [2, 4]


def test_bfloat16_kernels_take_the_vector_loop_with_the_eager_bits():
    # A fused bfloat16 chain (casts, sigmoid, products, sums: SwiGLU's gradient) runs in the
    # 16-lane loop, bfloat16 values rounded where each step rounds: the same bits as eager ops,
    # NaN, infinities, huge and tiny values and a length that is not a multiple of 16 included.
    def f(a, b, g):
        s = mx.sigmoid(a.astype(mx.float32))
        y = (g * b).astype(mx.float32) * s * (1 + a.astype(mx.float32) * (1 - s))
        return y.astype(mx.bfloat16), a * b + g

    rng = np.random.default_rng(5)
    vals = [rng.standard_normal(4099).astype(np.float32) * 4 for _ in range(3)]
    vals[0][:6] = [np.nan, np.inf, -np.inf, 3e38, 1e-39, -0.0]
    vals[1][10:13] = [np.nan, 1e30, -1e-30]
    a, b, g = (mx.array(v).astype(mx.bfloat16) for v in vals)
    want = f(a, b, g)
    got = mx.compile(f)(a, b, g)
    for w, o in zip(want, got):
        assert o.dtype == mx.bfloat16
        np.testing.assert_array_equal(np.array(o.view(mx.uint16)), np.array(w.view(mx.uint16)))

    # Broadcast inputs (a value per row, a row for every row, a scalar): the strided loop's
    # 16-lane inner runs, rows of 37 (two vectors and a tail).
    def h(x, r, w, g):
        gy = (g * w).astype(mx.float32)
        return (gy * r + x.astype(mx.float32) * r * 0.5).astype(mx.bfloat16), gy

    x = mx.array(vals[0][:110 * 37].reshape(110, 37)).astype(mx.bfloat16)
    gg = mx.array(vals[1][:110 * 37].reshape(110, 37)).astype(mx.bfloat16)
    w = mx.array(vals[2][:37]).astype(mx.bfloat16)
    r = mx.array(rng.standard_normal((110, 1)).astype(np.float32))
    for wv, ov in zip(h(x, r, w, gg), mx.compile(h)(x, r, w, gg)):
        bits = mx.uint16 if wv.dtype == mx.bfloat16 else mx.uint32
        np.testing.assert_array_equal(np.array(ov.view(bits)), np.array(wv.view(bits)))
