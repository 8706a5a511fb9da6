"""Transforms over pytrees: grad / value_and_grad (argnums, argnames), vjp, jvp, vmap,
custom_function, checkpoint, eval; gradients against closed forms and finite differences."""

import numpy as np
import pytest

import tessera.core as mx


def test_grad_of_a_scalar_function_is_its_closed_form():
    g = mx.grad(lambda x: (x * x * x).sum())
    x = mx.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(np.asarray(g(x)), 3 * np.asarray(x) ** 2, rtol=1e-6)
    d2 = mx.grad(mx.grad(lambda x: mx.sin(x)))
    np.testing.assert_allclose(d2(mx.array(0.7)).item(), -np.sin(0.7), rtol=1e-6)


def test_value_and_grad_over_trees_with_aux_outputs():
    def loss(params, x):
        y = params["w"] * x + params["b"][0]
        return (y * y).sum(), y

    params = {"w": mx.array([1.0, 2.0]), "b": [mx.array(0.5), []]}
    x = mx.array([3.0, -1.0])
    (value, y), grads = mx.value_and_grad(loss)(params, x)
    w, b, xv = np.array([1.0, 2.0]), 0.5, np.array([3.0, -1.0])
    yv = w * xv + b
    np.testing.assert_allclose(value.item(), (yv ** 2).sum(), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(y), yv, rtol=1e-6)
    assert set(grads) == {"w", "b"} and grads["b"][1] == []  # empty containers pass through
    np.testing.assert_allclose(np.asarray(grads["w"]), 2 * yv * xv, rtol=1e-6)
    np.testing.assert_allclose(grads["b"][0].item(), (2 * yv).sum(), rtol=1e-6)
    # Any other leaf in a differentiated tree is an error naming it (as MLX); the arguments not
    # differentiated may hold anything.
    with pytest.raises(ValueError, match="argument 0 holds a leaf of type int"):
        mx.value_and_grad(loss)({"w": mx.array([1.0, 2.0]), "b": [mx.array(0.5), 3]}, x)
    with pytest.raises(ValueError, match="keyword argument 'p' holds a leaf of type float"):
        mx.grad(lambda p: p["x"] * 2.0, argnames="p")(p={"x": 0.5})
    assert mx.grad(lambda a, cfg: a * cfg["k"])(mx.array(1.0), {"k": 3.0}).item() == 3.0


def test_grad_traces_inside_the_callers_own_lists_and_dicts():
    # As MLX: the function gets the caller's containers with tracers written into them, what it
    # stores there stays, and the arrays it was given are back in place afterwards.
    arrs = [mx.array(1.0), mx.array(2.0), mx.array(3.0)]
    a0, a1, a2 = arrs
    seen = []

    def fun(xs):
        seen.append(xs)
        xs[1] = xs[0] * xs[2]
        return xs[1]

    g = mx.grad(fun)(arrs)
    assert seen[0] is arrs and arrs[0] is a0 and arrs[2] is a2 and arrs[1] is not a1
    assert arrs[1].item() == 3.0  # the function's value, computed from the real inputs
    assert [v.item() for v in g] == [3.0, 0.0, 1.0]
    state = {"w": mx.array(2.0), "calls": 0}
    w = state["w"]

    def count(s):
        s["calls"] += 1
        return s["w"] ** 2

    with pytest.raises(ValueError, match="holds a leaf of type int"):
        mx.grad(count)(state)
    assert mx.grad(lambda s, extra: count(extra) * s["w"])(
        {"w": mx.array(3.0)}, state)["w"].item() == 4.0
    assert state["calls"] == 1 and state["w"] is w
    # An exception in the function still puts the arrays back.
    model = {"layers": [{"w": mx.array(1.0)}], "t": (mx.array(2.0),)}
    inner = model["layers"][0]
    w0 = inner["w"]

    def boom(m):
        assert m["layers"][0]["w"] is not w0 and m["layers"][0] is inner
        raise KeyError("boom")

    with pytest.raises(KeyError):
        mx.grad(boom)(model)
    assert model["layers"][0] is inner and inner["w"] is w0


def test_argnums_and_argnames():
    def f(a, b, *, c):
        return (a * b * c).sum()

    a, b, c = mx.array(2.0), mx.array(3.0), mx.array(5.0)
    ga, gb = mx.grad(f, argnums=(0, 1))(a, b, c=c)
    assert (ga.item(), gb.item()) == (15.0, 10.0)
    assert mx.grad(f, argnums=-1)(a, b, c=c).item() == 10.0
    pos, kw = mx.grad(f, argnums=0, argnames="c")(a, b, c=c)
    assert pos.item() == 15.0 and kw["c"].item() == 6.0
    pos, kw = mx.grad(f, argnames=["c"])(a, b, c=c)
    assert pos is None and kw["c"].item() == 6.0
    with pytest.raises(ValueError, match="argnums"):
        mx.grad(f, argnums=3)(a, b, c=c)
    with pytest.raises(ValueError, match="both empty"):
        mx.grad(f, argnums=())
    with pytest.raises(ValueError, match="repeated"):
        mx.value_and_grad(f, argnums=(1, 1))
    with pytest.raises(ValueError, match="scalar"):
        mx.grad(lambda x: x * 2)(mx.array([1.0, 2.0]))


def test_vjp_and_jvp_against_finite_differences():
    f = lambda x, y: [mx.sin(x) * y]  # noqa: E731
    x, y = mx.array([0.3, 1.2]), mx.array([2.0, -1.0])
    out, vjps = mx.vjp(f, [x, y], [mx.array([1.0, 1.0])])
    np.testing.assert_allclose(np.asarray(vjps[0]), np.cos([0.3, 1.2]) * [2.0, -1.0], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(vjps[1]), np.sin([0.3, 1.2]), rtol=1e-6)
    _, jvps = mx.jvp(f, [x, y], [mx.array([1.0, 0.0]), mx.array([0.0, 0.0])])
    eps = 1e-3
    fd = (np.sin(0.3 + eps) - np.sin(0.3 - eps)) / (2 * eps) * 2.0
    np.testing.assert_allclose(np.asarray(jvps[0])[0], fd, rtol=1e-4)


def test_vmap_with_axes_trees():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = mx.vmap(lambda a: a.sum())(mx.array(x))
    np.testing.assert_allclose(np.asarray(v), x.sum(1))
    v = mx.vmap(lambda a: a * 2, in_axes=1, out_axes=1)(mx.array(x))
    np.testing.assert_allclose(np.asarray(v), x * 2)
    w = np.ones(4, np.float32)
    v = mx.vmap(lambda d: d["x"] @ d["w"], in_axes=({"x": 0, "w": None},))({"x": mx.array(x), "w": mx.array(w)})
    np.testing.assert_allclose(np.asarray(v), x @ w)
    v = mx.vmap(lambda a, b: a + b, in_axes=(0, None))(mx.array(x), mx.array(w))
    np.testing.assert_allclose(np.asarray(v), x + w)
    with pytest.raises(ValueError, match="in_axes"):
        mx.vmap(lambda a, b: a + b, in_axes=(0,))(mx.array(x), mx.array(w))


def test_custom_function_rules_are_used():
    @mx.custom_function
    def f(x):
        return mx.exp(x)

    @f.vjp
    def f_vjp(primals, cotangent, output):
        return cotangent * 7.0

    x = mx.array(0.5)
    assert f(x).item() == pytest.approx(np.exp(0.5))
    assert mx.grad(lambda t: f(t).sum())(x).item() == 7.0


def test_custom_function_rules_receive_arguments_as_mlx_passes_them():
    # One argument (here a list) is passed as itself, several as a tuple; the tangent of an input
    # not differentiated is None.
    @mx.custom_function
    def total(parts):
        return parts[0] + 2 * parts[1]

    @total.vjp
    def total_vjp(parts, cotangent, output):
        assert isinstance(parts, list) and len(parts) == 2
        return [cotangent * 10, cotangent * 20]

    a, b = mx.array([1.0, 2.0]), mx.array([3.0, 4.0])
    ga, gb = mx.grad(lambda p: total(p).sum())([a, b])
    assert ga.tolist() == [10.0, 10.0] and gb.tolist() == [20.0, 20.0]

    @mx.custom_function
    def mul(x, y):
        return x * y

    seen = []

    @mul.jvp
    def mul_jvp(primals, tangents):
        x, y = primals
        tx, ty = tangents
        seen.append((tx is None, ty is None))
        return tx * y * 3

    _, (t,) = mx.jvp(lambda x: mul(x, b), [a], [mx.ones(2)])
    assert seen == [(False, True)] and t.tolist() == [9.0, 12.0]

    @mx.custom_function
    def twice(x):
        return 2 * x

    @twice.vmap
    def twice_vmap(x, axis):
        assert axis == 0
        return 2 * x + 1, 0

    assert mx.vmap(twice)(mx.zeros((3, 2))).tolist() == [[1.0, 1.0]] * 3


def test_checkpoint_gives_the_same_gradient():
    f = lambda x: mx.sin(x * x).sum()  # noqa: E731
    x = mx.array([0.1, 0.7, -1.3])
    np.testing.assert_allclose(np.asarray(mx.grad(mx.checkpoint(f))(x)), np.asarray(mx.grad(f)(x)),
                               rtol=1e-6)
    # Keyword arguments pass through (their arrays are inputs too).
    g = lambda x, scale=None: (mx.sin(x) * scale).sum()  # noqa: E731
    s = mx.array([2.0, 3.0, 4.0])
    got = mx.grad(lambda t: mx.checkpoint(g)(t, scale=s))(x)
    np.testing.assert_allclose(np.asarray(got), np.cos(np.asarray(x)) * np.asarray(s), rtol=1e-6)


def test_eval_takes_trees_and_stop_gradient_blocks():
    tree = {"a": [mx.array(1.0) + 1, (mx.array(2.0) * 3,)], "b": 4}
    mx.eval(tree)
    mx.async_eval(tree["a"])
    assert tree["a"][1][0].item() == 6.0
    g = mx.grad(lambda x: (mx.stop_gradient(x) * x).sum())(mx.array(3.0))
    assert g.item() == 3.0


def test_vmap_axes_may_be_negative_or_a_one_tuple_and_are_checked():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    # in_axes=-1 maps over the last axis (not "unbatched"), out_axes=-1 puts the batch last.
    v = mx.vmap(lambda a: a * 2 + a.sum(), in_axes=-1, out_axes=-1)(mx.array(x))
    want = np.stack([x[:, :, i] * 2 + x[:, :, i].sum() for i in range(4)], axis=-1)
    np.testing.assert_allclose(np.asarray(v), want)
    b = np.arange(8, dtype=np.float32).reshape(4, 2)
    # A lone output takes out_axes=(1,) as 1, as MLX does.
    v = mx.vmap(mx.matmul, in_axes=(1, None), out_axes=(1,))(mx.array(x), mx.array(b))
    np.testing.assert_allclose(np.asarray(v), np.moveaxis(np.moveaxis(x, 1, 0) @ b, 0, 1))
    for kwargs in ({"in_axes": 2}, {"in_axes": -2}, {"out_axes": 2}, {"out_axes": -2}):
        with pytest.raises(ValueError, match="out of range"):
            mx.vmap(mx.exp, **kwargs)(mx.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="ints or None"):
        mx.vmap(mx.exp, in_axes="hello")(mx.array([0.0, 1.0]))


def test_async_eval_of_a_traced_value_is_refused_as_in_mlx():
    def fun(x):
        y = x + 1.0
        mx.async_eval(y)
        return mx.exp(y)

    with pytest.raises(ValueError, match="async_eval"):
        mx.grad(fun)(mx.array(1.0))
    with pytest.raises(ValueError, match="async_eval"):
        mx.vmap(fun)(mx.ones((2, 2)))
    # Outside transforms it computes, and synchronize takes a device as well as a stream.
    y = mx.exp(mx.array([0.0, 1.0]))
    mx.async_eval(y)
    mx.synchronize(mx.cpu)
    mx.synchronize(mx.default_stream(mx.cpu))
    np.testing.assert_allclose(np.asarray(y), np.exp([0.0, 1.0]), rtol=1e-6)


def test_synchronize_raises_the_error_of_work_async_eval_started():
    bad = mx.linalg.inv(mx.array([[1.0, 2.0], [2.0, 4.0]]))
    mx.async_eval(bad)
    with pytest.raises(ValueError, match="singular"):
        mx.synchronize()
    mx.synchronize()  # raised once: the stream is usable again
    with pytest.raises(ValueError, match="singular"):
        mx.eval(bad)  # the array keeps its error
    s = mx.new_stream(mx.cpu)
    good = mx.exp(mx.array([0.0, 1.0]), stream=s)
    mx.async_eval(good, mx.linalg.inv(mx.zeros((2, 2)), stream=s))
    with pytest.raises(ValueError, match="singular"):
        mx.synchronize(s)
    np.testing.assert_allclose(np.asarray(good), np.exp([0.0, 1.0]), rtol=1e-6)
    # A blocking eval raises itself and leaves nothing behind for synchronize.
    with pytest.raises(ValueError, match="singular"):
        mx.eval(mx.linalg.inv(mx.zeros((2, 2)), stream=s))
    mx.synchronize(s)


@pytest.mark.parametrize("transform", ["grad", "value_and_grad", "vmap", "checkpoint",
                                       "custom_function", "compile"])
def test_transformed_functions_in_reference_cycles_are_freed(transform):
    import gc
    import weakref

    make = getattr(mx, transform)
    gc.collect()
    mx.synchronize()
    before = mx.get_active_memory()
    refs = []
    for _ in range(3):
        d = {}

        def f(x):
            return d["x"]

        d["f"] = make(f)  # d -> transformed f -> f -> its closure -> d
        d["x"] = mx.zeros((1000,))
        mx.eval(d["x"])
        refs.append(weakref.ref(f))
        del d, f
        gc.collect()
    assert all(r() is None for r in refs)
    assert mx.get_active_memory() == before


def test_grad_needs_a_scalar_array_and_value_and_grad_takes_auxiliary_values():
    def fun(x, y):
        loss = (x * y).sum()
        return loss, {"loss": loss, "bar": [1, 2, y]}

    (loss, aux), g = mx.value_and_grad(fun)(mx.ones((2, 2)), mx.full((2, 2), 3.0))
    assert loss.item() == 12.0 and aux["loss"].item() == 12.0 and aux["bar"][:2] == [1, 2]
    np.testing.assert_array_equal(np.asarray(g), np.full((2, 2), 3.0))
    with pytest.raises(ValueError, match="value_and_grad"):
        mx.grad(fun)(mx.ones((2, 2)), mx.ones((2, 2)))
    assert mx.grad(lambda x: (x * x).sum())(mx.array([1.0, 2.0])).tolist() == [2.0, 4.0]
