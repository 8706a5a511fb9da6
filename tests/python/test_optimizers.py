"""tessera.optimizers: every update rule against a NumPy version of it written here (several
steps, on a tree of float32 parameters, with fixed and scheduled learning rates), the state's
layout and a save / load / resume round trip, the schedules against their closed forms,
clip_grad_norm, MultiOptimizer, compile, and the argument checks.

The NumPy references work in float64 from the textbook formulas; the implementation works in
float32, hence the tolerances.
"""

import math
import re
from functools import partial

import numpy as np
import pytest

import tessera.core as mx
import tessera.optimizers as optim
from tessera.utils import tree_flatten, tree_map, tree_unflatten

STEPS = 4

# Parameter shapes, as a tree: 1-D, 2-D (wide and tall), 3-D, inside dicts, a list and a tuple.
SHAPES = {
    "w": (4, 3),
    "b": (3,),
    "layers": [{"k": (2, 4, 3)}, (5,)],
    "pair": ((2,), (3, 5)),
}


def _is_shape(x):
    return isinstance(x, tuple) and all(isinstance(d, int) for d in x)


def make_tree(rng, shapes=SHAPES, scale=1.0):
    """A tree of float32 arrays with the structure of ``shapes`` and NumPy copies, flat."""

    def build(node):
        if _is_shape(node):
            return mx.array((scale * rng.standard_normal(node)).astype(np.float32))
        if isinstance(node, dict):
            return {k: build(v) for k, v in node.items()}
        kind = type(node)
        return kind(build(v) for v in node)

    return build(shapes)


def flat_np(tree):
    return {k: np.array(v, dtype=np.float64) for k, v in tree_flatten(tree)}


# ------------------------------------------------------------------------------------------
# NumPy references: (init(p) -> state dict, update(g, p, state, lr, t) -> new p), t counts from
# 1 (the step after the increment), lr is the learning rate the schedule gives for step t - 1.


def ref_sgd(momentum=0.0, weight_decay=0.0, dampening=0.0, nesterov=False):
    def init(p):
        return {"v": np.zeros_like(p)}

    def update(g, p, s, lr, t):
        if weight_decay:
            g = g + weight_decay * p
        if momentum <= 0:
            return p - lr * g
        s["v"] = momentum * s["v"] + (1 - dampening) * g
        step = g + momentum * s["v"] if nesterov else s["v"]
        return p - lr * step

    return init, update


def ref_rmsprop(alpha=0.99, eps=1e-8):
    def init(p):
        return {"v": np.zeros_like(p)}

    def update(g, p, s, lr, t):
        s["v"] = alpha * s["v"] + (1 - alpha) * g * g
        return p - lr * g / (np.sqrt(s["v"]) + eps)

    return init, update


def ref_adagrad(eps=1e-8):
    def init(p):
        return {"v": np.zeros_like(p)}

    def update(g, p, s, lr, t):
        s["v"] = s["v"] + g * g
        return p - lr * g / (np.sqrt(s["v"]) + eps)

    return init, update


def ref_adadelta(rho=0.9, eps=1e-6):
    def init(p):
        return {"v": np.zeros_like(p), "u": np.zeros_like(p)}

    def update(g, p, s, lr, t):
        s["v"] = rho * s["v"] + (1 - rho) * g * g
        delta = np.sqrt(s["u"] + eps) / np.sqrt(s["v"] + eps) * g
        s["u"] = rho * s["u"] + (1 - rho) * delta * delta
        return p - lr * delta

    return init, update


def ref_adam(betas=(0.9, 0.999), eps=1e-8, bias_correction=False, weight_decay=0.0):
    b1, b2 = betas

    def init(p):
        return {"m": np.zeros_like(p), "v": np.zeros_like(p)}

    def update(g, p, s, lr, t):
        p = p * (1 - lr * weight_decay)
        s["m"] = b1 * s["m"] + (1 - b1) * g
        s["v"] = b2 * s["v"] + (1 - b2) * g * g
        if bias_correction:
            # 1 - beta^t cancels: take beta as the float32 the implementation computes with.
            f1, f2 = float(np.float32(b1)), float(np.float32(b2))
            m_hat = s["m"] / (1 - f1**t)
            v_hat_sqrt = np.sqrt(s["v"]) / np.sqrt(1 - f2**t)
            return p - lr * m_hat / (v_hat_sqrt + eps)
        return p - lr * s["m"] / (np.sqrt(s["v"]) + eps)

    return init, update


def ref_adamax(betas=(0.9, 0.999), eps=1e-8):
    b1, b2 = betas

    def init(p):
        return {"m": np.zeros_like(p), "v": np.zeros_like(p)}

    def update(g, p, s, lr, t):
        s["m"] = b1 * s["m"] + (1 - b1) * g
        s["v"] = np.maximum(b2 * s["v"], np.abs(g))
        return p - lr * s["m"] / (s["v"] + eps)

    return init, update


def ref_lion(betas=(0.9, 0.99), weight_decay=0.0):
    b1, b2 = betas

    def init(p):
        return {"m": np.zeros_like(p)}

    def update(g, p, s, lr, t):
        direction = b1 * s["m"] + (1 - b1) * g
        s["m"] = b2 * s["m"] + (1 - b2) * g
        return p * (1 - lr * weight_decay) - lr * np.sign(direction)

    return init, update


def _rms(x):
    return np.sqrt(np.mean(np.square(x)))


def ref_adafactor(eps=(1e-30, 1e-3), clip_threshold=1.0, decay_rate=-0.8, beta_1=None,
                  weight_decay=0.0, scale_parameter=True, relative_step=True, warmup_init=False):
    def init(p):
        s = {}
        if p.ndim >= 2:
            s["row"] = np.zeros(p.shape[:-1])
            s["col"] = np.zeros(p.shape[:-2] + p.shape[-1:])
        else:
            s["sq"] = np.zeros_like(p)
        if beta_1 is not None:
            s["avg"] = np.zeros_like(p)
        return s

    def update(g, p, s, lr, t):
        if relative_step:
            size = min(1e-6 * t if warmup_init else 1e-2, 1 / math.sqrt(t))
        else:
            size = lr
        step_size = max(eps[1], _rms(p)) * size if scale_parameter else size
        beta2 = 1 - t**decay_rate
        sq = g * g + eps[0]
        if g.ndim >= 2:
            s["row"] = beta2 * s["row"] + (1 - beta2) * sq.mean(axis=-1)
            s["col"] = beta2 * s["col"] + (1 - beta2) * sq.mean(axis=-2)
            r = 1 / np.sqrt(s["row"] / s["row"].mean(axis=-1, keepdims=True))
            c = 1 / np.sqrt(s["col"])
            u = r[..., :, None] * c[..., None, :] * g
        else:
            s["sq"] = beta2 * s["sq"] + (1 - beta2) * sq
            u = g / np.sqrt(s["sq"])
        u = u / max(1.0, _rms(u) / clip_threshold)
        u = step_size * u
        if beta_1 is not None:
            s["avg"] = beta_1 * s["avg"] + (1 - beta_1) * u
            u = s["avg"]
        if weight_decay:
            p = p - weight_decay * step_size * p
        return p - u

    return init, update


def newton_schulz(x, steps):
    a, b, c = 3.4445, -4.7750, 2.0315
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    x = x / (np.linalg.norm(x) + 1e-7)
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if tall else x


def ref_muon(momentum=0.95, weight_decay=0.01, nesterov=True, ns_steps=5):
    def init(p):
        return {"v": np.zeros_like(p)}

    def update(g, p, s, lr, t):
        g = g + weight_decay * p
        s["v"] = momentum * s["v"] + (1 - momentum) * g
        u = (1 - momentum) * g + momentum * s["v"] if nesterov else s["v"]
        if u.ndim >= 2:
            shape = u.shape
            u = newton_schulz(u.reshape(shape[0], -1), ns_steps).reshape(shape)
            lr = lr * math.sqrt(max(1, shape[-2] / shape[-1]))
        return p - lr * u

    return init, update


# (name, optimizer class, keyword arguments, reference maker)
CASES = [
    ("sgd", optim.SGD, {}, ref_sgd),
    ("sgd-momentum-wd", optim.SGD, dict(momentum=0.9, weight_decay=0.05), ref_sgd),
    ("sgd-dampening", optim.SGD, dict(momentum=0.8, dampening=0.3), ref_sgd),
    ("sgd-nesterov", optim.SGD, dict(momentum=0.9, nesterov=True, weight_decay=0.01), ref_sgd),
    ("rmsprop", optim.RMSprop, dict(alpha=0.9), ref_rmsprop),
    ("adagrad", optim.Adagrad, dict(eps=1e-6), ref_adagrad),
    ("adadelta", optim.AdaDelta, dict(rho=0.8, eps=1e-5), ref_adadelta),
    ("adam", optim.Adam, {}, ref_adam),
    ("adam-bias", optim.Adam, dict(betas=[0.8, 0.95], bias_correction=True), ref_adam),
    ("adamw", optim.AdamW, dict(weight_decay=0.1), ref_adam),
    ("adamw-bias", optim.AdamW, dict(weight_decay=0.05, bias_correction=True), ref_adam),
    ("adamax", optim.Adamax, dict(betas=[0.8, 0.9]), ref_adamax),
    ("lion", optim.Lion, {}, ref_lion),
    ("lion-wd", optim.Lion, dict(weight_decay=0.2), ref_lion),
    ("adafactor", optim.Adafactor, {}, ref_adafactor),
    ("adafactor-lr", optim.Adafactor,
     dict(relative_step=False, beta_1=0.9, weight_decay=0.1, clip_threshold=0.5),
     ref_adafactor),
    ("adafactor-warmup", optim.Adafactor,
     dict(warmup_init=True, scale_parameter=False, decay_rate=-0.5), ref_adafactor),
    ("muon", optim.Muon, {}, ref_muon),
    ("muon-plain", optim.Muon, dict(momentum=0.9, nesterov=False, weight_decay=0.0, ns_steps=3),
     ref_muon),
]

# The learning rate: (what the optimizer gets, the value NumPy uses at step s).
LEARNING_RATES = {
    "fixed": (lambda: 0.05, lambda s: 0.05),
    "schedule": (lambda: optim.exponential_decay(0.1, 0.8), lambda s: 0.1 * 0.8**s),
}


def _ref_kwargs(name, kwargs):
    out = dict(kwargs)
    if name.startswith("adamw"):
        out.setdefault("weight_decay", 0.01)
    return out


def run_both(cls, kwargs, ref, lr_kind, seed=0, steps=STEPS, pscale=1.0):
    rng = np.random.default_rng(seed)
    params = make_tree(rng, scale=pscale)
    lr_arg, lr_np = LEARNING_RATES[lr_kind]
    opt = cls(learning_rate=lr_arg(), **kwargs)

    init, update = ref
    expected = flat_np(params)
    states = {k: init(p) for k, p in expected.items()}
    for t in range(1, steps + 1):
        grads = make_tree(rng, scale=0.5)
        params = opt.apply_gradients(grads, params)
        mx.eval(params)
        for k, g in flat_np(grads).items():
            expected[k] = update(g, expected[k], states[k], lr_np(t - 1), t)
    return opt, params, expected


# Parameters start as N(0, scale^2): smaller where the steps are tiny, so that rounding the
# parameter to float32 does not hide the step.
PARAM_SCALE = {"adadelta": 1e-2, "adafactor-warmup": 1e-4}
TOL = 2e-5


@pytest.mark.parametrize("lr_kind", sorted(LEARNING_RATES))
@pytest.mark.parametrize("name,cls,kwargs,make_ref", CASES, ids=[c[0] for c in CASES])
def test_matches_numpy(name, cls, kwargs, make_ref, lr_kind):
    scale = PARAM_SCALE.get(name, 1.0)
    start = flat_np(make_tree(np.random.default_rng(0), scale=scale))
    opt, params, expected = run_both(cls, kwargs, make_ref(**_ref_kwargs(name, kwargs)), lr_kind,
                                     pscale=scale)
    got = dict(tree_flatten(params))
    assert sorted(got) == sorted(expected)
    # Compare the distance travelled from the start, relative to the largest such distance.
    largest = max(np.max(np.abs(want - start[k])) for k, want in expected.items())
    assert largest > 0
    for k, want in expected.items():
        assert got[k].dtype == mx.float32, k
        assert got[k].shape == want.shape, k
        np.testing.assert_allclose(np.array(got[k], dtype=np.float64) - start[k], want - start[k],
                                   rtol=TOL, atol=TOL * largest, err_msg=k)
    assert opt.step.item() == STEPS
    assert opt.step.dtype == mx.uint64
    # The scheduled rate is the one of the last step taken (evaluated before the increment).
    assert opt.learning_rate.item() == pytest.approx(LEARNING_RATES[lr_kind][1](STEPS - 1),
                                                     rel=1e-6)


def test_result_keeps_structure_and_containers():
    rng = np.random.default_rng(1)
    params = make_tree(rng)
    out = optim.Adam(0.1).apply_gradients(make_tree(rng), params)
    assert isinstance(out["layers"], list) and isinstance(out["pair"], tuple)
    assert tree_map(lambda x: x.shape, out) == tree_map(lambda x: x.shape, params)


def test_parameters_may_be_a_superset_of_gradients():
    rng = np.random.default_rng(2)
    params = make_tree(rng)
    grads = {"w": mx.ones((4, 3)), "layers": [{}, mx.ones((5,))]}
    out = optim.SGD(0.5).apply_gradients(grads, params)
    assert sorted(out) == ["layers", "w"]
    assert out["layers"][0] == {}
    np.testing.assert_allclose(np.array(out["w"]), np.array(params["w"]) - 0.5, rtol=1e-6)
    np.testing.assert_allclose(np.array(out["layers"][1]), np.array(params["layers"][1]) - 0.5,
                               rtol=1e-6)


def test_float16_is_kept():
    params = {"w": mx.ones((5, 5), mx.float16), "b": mx.ones((5,), mx.float16)}
    grads = tree_map(lambda x: mx.full(x.shape, 0.5, x.dtype), params)
    for cls in ALL_CLASSES:
        opt = cls(learning_rate=0.1)
        for _ in range(2):
            out = opt.apply_gradients(grads, params)
        assert all(v.dtype == mx.float16 for _, v in tree_flatten(out)), cls.__name__
    opt = optim.Adam(1e-2, bias_correction=True)
    assert opt.apply_gradients(grads, params)["w"].dtype == mx.float16


ALL_CLASSES = [optim.SGD, optim.RMSprop, optim.Adagrad, optim.AdaDelta, optim.Adam, optim.AdamW,
               optim.Adamax, optim.Lion, optim.Adafactor, optim.Muon]


def test_every_optimizer_is_exported():
    found = {
        name for name in dir(optim)
        if isinstance(getattr(optim, name), type) and issubclass(getattr(optim, name), optim.Optimizer)
    }
    assert found == {c.__name__ for c in ALL_CLASSES} | {"Optimizer", "MultiOptimizer"}
    for name in ("exponential_decay", "step_decay", "cosine_decay", "linear_schedule",
                 "join_schedules", "clip_grad_norm"):
        assert callable(getattr(optim, name))
    assert optim.schedulers.join_schedules is optim.join_schedules
    assert optim.optimizers.Adam is optim.Adam


# ------------------------------------------------------------------------------------------
# State


EXPECTED_KEYS = {
    optim.SGD: ["v"], optim.RMSprop: ["v"], optim.Adagrad: ["v"], optim.AdaDelta: ["u", "v"],
    optim.Adam: ["m", "v"], optim.AdamW: ["m", "v"], optim.Adamax: ["m", "v"],
    optim.Lion: ["m"], optim.Muon: ["v"],
}


@pytest.mark.parametrize("cls", list(EXPECTED_KEYS), ids=lambda c: c.__name__)
def test_state_layout_after_init(cls):
    params = make_tree(np.random.default_rng(3))
    opt = cls(learning_rate=0.01)
    assert set(opt.state) == {"step", "learning_rate"}
    opt.init(params)
    state = opt.state
    assert state["step"].dtype == mx.uint64 and state["step"].item() == 0
    assert state["learning_rate"].dtype == mx.float32
    assert state["learning_rate"].item() == pytest.approx(0.01)
    assert list(state)[:2] == ["step", "learning_rate"]
    flat_params = dict(tree_flatten(params))
    flat_state = dict(tree_flatten(state))
    expected = {"step", "learning_rate"} | {f"{k}.{s}" for k in flat_params for s in EXPECTED_KEYS[cls]}
    assert set(flat_state) == expected
    for key, value in flat_state.items():
        if key in ("step", "learning_rate"):
            continue
        p = flat_params[key.rsplit(".", 1)[0]]
        assert value.shape == p.shape and value.dtype == p.dtype
        assert not np.any(np.array(value))


def test_adafactor_state_layout():
    params = {"m": mx.zeros((2, 3, 4)), "w": mx.zeros((3, 5)), "b": mx.zeros((5,))}
    opt = optim.Adafactor(beta_1=0.9)
    opt.init(params)
    s = opt.state
    assert "learning_rate" not in s
    assert s["m"]["exp_avg_sq_row"].shape == (2, 3) and s["m"]["exp_avg_sq_col"].shape == (2, 4)
    assert s["w"]["exp_avg_sq_row"].shape == (3,) and s["w"]["exp_avg_sq_col"].shape == (5,)
    assert s["b"]["exp_avg_sq"].shape == (5,) and set(s["b"]) == {"exp_avg_sq", "exp_avg"}
    assert s["w"]["exp_avg"].shape == (3, 5)
    # Without beta_1 there is no first moment.
    opt = optim.Adafactor()
    opt.init(params)
    assert set(opt.state["w"]) == {"exp_avg_sq_row", "exp_avg_sq_col"}


def test_adafactor_factored_estimate():
    row = np.array([[1.0, 4.0, 9.0], [16.0, 25.0, 36.0]], np.float32)
    col = np.array([[1.0, 4.0, 9.0, 16.0], [25.0, 36.0, 49.0, 64.0]], np.float32)
    got = np.array(optim.Adafactor()._approximate_exp_moving_avg(mx.array(row), mx.array(col)))
    r = 1 / np.sqrt(row / row.mean(axis=-1, keepdims=True))
    expected = r[..., :, None] * (1 / np.sqrt(col))[..., None, :]
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_lazy_and_explicit_init_agree():
    rng = np.random.default_rng(4)
    params, grads = make_tree(rng), make_tree(rng)
    lazy, explicit = optim.SGD(0.1, momentum=0.9), optim.SGD(0.1, momentum=0.9)
    explicit.init(params)
    a = lazy.apply_gradients(grads, params)
    b = explicit.apply_gradients(grads, params)
    for (ka, va), (kb, vb) in zip(tree_flatten(a), tree_flatten(b)):
        assert ka == kb and mx.array_equal(va, vb)
    # After one step the momentum is the gradient.
    state = dict(tree_flatten(lazy.state))
    for k, g in tree_flatten(grads):
        assert mx.array_equal(state[k + ".v"], g), k


def test_state_is_a_plain_mutable_dict():
    opt = optim.SGD(0.1)
    opt.state["hello"] = "world"
    assert opt.state["hello"] == "world"
    opt.state = {0: 1}
    assert opt.state == {0: 1}


def _continue(opt, params, grads_list):
    for grads in grads_list:
        params = opt.apply_gradients(grads, params)
        mx.eval(params)
    return params


SAVE_CASES = [
    ("adam", lambda: optim.Adam(optim.cosine_decay(0.1, 6, 0.01), bias_correction=True)),
    ("sgd", lambda: optim.SGD(optim.step_decay(0.1, 0.5, 2), momentum=0.9, weight_decay=0.01)),
    ("adafactor", lambda: optim.Adafactor(beta_1=0.9)),
    ("lion", lambda: optim.Lion(0.01, weight_decay=0.1)),
]


@pytest.mark.parametrize("fmt", ["safetensors", "npz"])
@pytest.mark.parametrize("name,make", SAVE_CASES, ids=[c[0] for c in SAVE_CASES])
def test_save_load_resume(tmp_path, fmt, name, make):
    rng = np.random.default_rng(5)
    params0 = make_tree(rng)
    grads = [make_tree(rng, scale=0.3) for _ in range(5)]

    straight = _continue(make(), params0, grads)

    first = make()
    halfway = _continue(first, params0, grads[:2])
    flat = dict(tree_flatten(first.state))
    path = str(tmp_path / f"state.{fmt}")
    if fmt == "safetensors":
        mx.save_safetensors(path, flat)
    else:
        mx.savez(path, **flat)
    loaded = mx.load(path)
    assert set(loaded) == set(flat)

    second = make()
    second.state = tree_unflatten(list(loaded.items()))
    assert second.step.item() == 2 and second.step.dtype == mx.uint64
    resumed = _continue(second, halfway, grads[2:])
    for (ka, va), (kb, vb) in zip(tree_flatten(straight), tree_flatten(resumed)):
        assert ka == kb
        assert mx.array_equal(va, vb), ka
    assert second.step.item() == 5


def test_state_restored_before_any_step():
    params = make_tree(np.random.default_rng(6))
    opt = optim.Adam(learning_rate=3e-4)
    opt.init(params)
    saved = tree_flatten(opt.state)
    other = optim.Adam(learning_rate=3e-4)
    other.state = tree_unflatten(saved)
    out = other.apply_gradients(params, params)
    assert tree_map(lambda x: x.shape, out) == tree_map(lambda x: x.shape, params)
    assert other.step.item() == 1


def test_restored_state_fills_in_missing_parameters():
    # A state that lacks a parameter (saved from a smaller model) gets it on the next step.
    opt = optim.Adam(0.1)
    opt.init({"a": mx.ones((2,))})
    state = tree_unflatten(tree_flatten(opt.state))
    opt2 = optim.Adam(0.1)
    opt2.state = state
    grads = {"a": mx.ones((2,)), "b": [mx.ones((3,))]}
    opt2.apply_gradients(grads, grads)
    assert opt2.state["b"][0]["m"].shape == (3,)


class TinyModule(dict):
    """The part of nn.Module the optimizers use: a dict of parameters with ``update`` and
    ``trainable_parameters``."""

    def trainable_parameters(self):
        return tree_map(lambda x: x, dict(self))

    def update(self, parameters):
        def merge(dst, src):
            items = src.items() if isinstance(src, dict) else enumerate(src)
            for k, v in items:
                if isinstance(v, (dict, list)) and isinstance(dst[k], (dict, list)):
                    merge(dst[k], v)
                else:
                    dst[k] = v

        merge(self, parameters)
        return self


def test_update_changes_the_model_in_place():
    rng = np.random.default_rng(7)
    model = TinyModule(w=mx.array(rng.standard_normal((3, 2)).astype(np.float32)),
                       layers=[{"b": mx.zeros((2,))}])
    before = {k: np.array(v) for k, v in tree_flatten(model)}
    grads = {"w": mx.ones((3, 2)), "layers": [{"b": mx.full((2,), 2.0)}]}
    reference = optim.SGD(0.1, momentum=0.5).apply_gradients(grads, model.trainable_parameters())
    opt = optim.SGD(0.1, momentum=0.5)
    opt.update(model, grads)
    assert isinstance(model, TinyModule)
    for k, v in tree_flatten(reference):
        assert mx.array_equal(dict(tree_flatten(model))[k], v)
    np.testing.assert_allclose(np.array(model["w"]), before["w"] - 0.1, rtol=1e-6)
    np.testing.assert_allclose(np.array(model["layers"][0]["b"]), before["layers.0.b"] - 0.2)


def test_learning_rate_setter_and_schedule_per_step():
    params = {"w": mx.ones((2,))}
    grads = {"w": mx.ones((2,))}
    opt = optim.SGD(1.0)
    opt.learning_rate = 0.25
    assert opt.learning_rate.dtype == mx.float32
    out = opt.apply_gradients(grads, params)
    np.testing.assert_allclose(np.array(out["w"]), 0.75)
    opt.learning_rate = mx.array(0.5)
    np.testing.assert_allclose(np.array(opt.apply_gradients(grads, params)["w"]), 0.5)

    for cls in ALL_CLASSES:
        opt = cls(learning_rate=optim.step_decay(1e-1, 0.9, 1))
        for it in range(4):
            opt.apply_gradients({"w": mx.ones((3, 3))}, {"w": mx.ones((3, 3))})
            assert opt.learning_rate.item() == pytest.approx(0.1 * 0.9**it, abs=1e-7)


def test_custom_optimizer_subclass():
    class SignDescent(optim.Optimizer):
        def __init__(self, learning_rate):
            super().__init__()
            self._maybe_schedule("learning_rate", learning_rate)

        def init_single(self, parameter, state):
            state["count"] = mx.zeros_like(parameter)

        def apply_single(self, gradient, parameter, state):
            state["count"] = state["count"] + 1
            return parameter - self.learning_rate * mx.sign(gradient)

    opt = SignDescent(lambda step: 0.5 / (step + 1))
    p = {"x": mx.array([1.0, -1.0])}
    g = {"x": mx.array([3.0, -0.1])}
    p = opt.apply_gradients(g, p)
    p = opt.apply_gradients(g, p)
    np.testing.assert_allclose(np.array(p["x"]), [1 - 0.5 - 0.25, -1 + 0.5 + 0.25])
    assert mx.array_equal(opt.state["x"]["count"], mx.array([2.0, 2.0]))


# ------------------------------------------------------------------------------------------
# MultiOptimizer


def _two_part_model():
    rng = np.random.default_rng(8)
    return {
        "l1": {"weight": mx.array(rng.standard_normal((3, 2)).astype(np.float32)),
               "bias": mx.array(rng.standard_normal((3,)).astype(np.float32))},
        "layers": [{}, {"weight": mx.array(rng.standard_normal((2, 2)).astype(np.float32)),
                        "bias": mx.array(rng.standard_normal((2,)).astype(np.float32))}],
    }


def test_multi_optimizer_matches_separate_optimizers():
    params = _two_part_model()
    rng = np.random.default_rng(12)
    seen = []

    def is_matrix(path, w):
        seen.append(path)
        return w.ndim > 1

    multi = optim.MultiOptimizer([optim.Adam(0.01), optim.SGD(0.1, momentum=0.9)], [is_matrix])
    adam, sgd = optim.Adam(0.01), optim.SGD(0.1, momentum=0.9)
    p_multi = p_sep = params
    for _ in range(3):
        grads = tree_map(lambda x: mx.array(rng.standard_normal(x.shape).astype(np.float32)),
                         params)
        p_multi = multi.apply_gradients(grads, p_multi)
        # The same step by hand: the weights' gradients to Adam, the biases' to SGD.
        flat_grads = tree_flatten(grads)
        weights = tree_unflatten([(k, g) for k, g in flat_grads if k.endswith("weight")])
        biases = tree_unflatten([(k, g) for k, g in flat_grads if k.endswith("bias")])
        flat = dict(tree_flatten(adam.apply_gradients(weights, p_sep)))
        flat.update(tree_flatten(sgd.apply_gradients(biases, p_sep)))
        p_sep = tree_unflatten(list(flat.items()))
    assert set(seen) == {"l1.weight", "l1.bias", "layers.1.weight", "layers.1.bias"}
    got = dict(tree_flatten(p_multi))
    assert sorted(got) == sorted(dict(tree_flatten(p_sep)))
    for k, v in tree_flatten(p_sep):
        assert mx.array_equal(got[k], v), k
    assert isinstance(p_multi["layers"], list) and p_multi["layers"][0] == {}

    states = multi.state["states"]
    assert len(states) == 2
    adam_keys = [k for k, _ in tree_flatten(states[0])]
    sgd_keys = [k for k, _ in tree_flatten(states[1])]
    assert not any("bias" in k for k in adam_keys) and not any("weight" in k for k in sgd_keys)
    assert (len(sgd_keys) - 2) * 2 == len(adam_keys) - 2

    multi.learning_rate = 0.5
    assert multi.learning_rate.item() == 0.5 and states[1]["learning_rate"].item() == 0.5
    assert multi.step.item() == 3


def test_multi_optimizer_state_round_trip_and_init():
    params = _two_part_model()
    make = lambda: optim.MultiOptimizer(  # noqa: E731
        [optim.Muon(0.01), optim.AdamW(0.01)], [lambda _, w: w.ndim >= 2])
    multi = make()
    multi.init(params)
    assert multi.state["states"][0]["l1"]["weight"]["v"].shape == (3, 2)
    other = make()
    other.state = tree_unflatten(tree_flatten(multi.state))
    grads = tree_map(mx.ones_like, params)
    a, b = multi.apply_gradients(grads, params), other.apply_gradients(grads, params)
    for (ka, va), (kb, vb) in zip(tree_flatten(a), tree_flatten(b)):
        assert ka == kb and mx.array_equal(va, vb)
        assert not mx.array_equal(va, dict(tree_flatten(params))[ka])
    with pytest.raises(ValueError, match="one state per optimizer"):
        other.state = {"states": [{}]}


# ------------------------------------------------------------------------------------------
# Muon's orthogonalisation


def test_newton_schulz_is_nearly_orthogonal():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((12, 5)).astype(np.float32)
    got = np.array(optim.Muon(0.1)._zeropower_via_newtonschulz5(mx.array(x), steps=5))
    np.testing.assert_allclose(got, newton_schulz(x.astype(np.float64), 5), atol=1e-4)
    singular = np.linalg.svd(got, compute_uv=False)
    assert np.all(singular > 0.6) and np.all(singular < 1.3)
    with pytest.raises(ValueError, match=re.escape("(2, 3, 4)")):
        optim.Muon(0.1)._zeropower_via_newtonschulz5(mx.zeros((2, 3, 4)), steps=1)


# ------------------------------------------------------------------------------------------
# compile: the state passes in and out of a compiled step


def test_compiled_step_matches_eager():
    rng = np.random.default_rng(10)
    params = {"w": mx.array(rng.standard_normal((4, 4)).astype(np.float32)),
              "b": mx.zeros((4,))}
    x = mx.array(rng.standard_normal((3, 4)).astype(np.float32))

    def loss(p, x):
        return mx.sum(mx.tanh(x @ p["w"] + p["b"]))

    eager_opt = optim.Adam(optim.cosine_decay(0.1, 5), bias_correction=True)
    eager = params
    for _ in range(3):
        eager = eager_opt.apply_gradients(mx.grad(loss)(eager, x), eager)

    opt = optim.Adam(optim.cosine_decay(0.1, 5), bias_correction=True)
    opt.init(params)

    @mx.compile
    def step(p, state, x):
        opt.state = state
        p = opt.apply_gradients(mx.grad(loss)(p, x), p)
        return p, opt.state

    compiled, state = params, opt.state
    for _ in range(3):
        compiled, state = step(compiled, state, x)
    for k in ("w", "b"):
        assert mx.allclose(compiled[k], eager[k], rtol=1e-5, atol=1e-6), k
    assert state["step"].item() == 3


def test_compiled_update_with_state_as_captured_inputs():
    params = {"w": mx.ones((5, 5))}
    grads = {"w": mx.ones((5, 5))}
    opt = optim.SGD(-1.0)

    @partial(mx.compile, inputs=opt.state)
    def update(grads):
        return opt.apply_gradients(grads, params)

    assert mx.allclose(update(grads)["w"], mx.full((5, 5), 2.0))
    opt.learning_rate = -2.0
    assert mx.allclose(update(grads)["w"], mx.full((5, 5), 3.0))

    schedule = optim.exponential_decay(1e-1, 0.9)
    opt = optim.SGD(learning_rate=schedule)

    @partial(mx.compile, inputs=opt.state, outputs=opt.state)
    def empty_step():
        opt.update(TinyModule(), {})

    for step in range(5):
        empty_step()
        assert opt.learning_rate.item() == pytest.approx(schedule(step), rel=1e-6)


# ------------------------------------------------------------------------------------------
# Schedules


def test_exponential_and_step_decay():
    s = optim.exponential_decay(0.1, 0.99)
    base = float(np.float32(0.99))  # the rate as the float32 array holds it
    for t in (0, 1, 10, 250):
        assert s(mx.array(t, mx.uint64)).item() == pytest.approx(0.1 * base**t, rel=1e-6)
    assert s(10) == pytest.approx(0.1 * 0.99**10)
    s = optim.step_decay(0.1, 0.9, 1000)
    for t in (0, 999, 1000, 2500, 7000):
        assert s(mx.array(t, mx.uint64)).item() == pytest.approx(0.1 * 0.9 ** (t // 1000),
                                                                 rel=1e-6)


def test_cosine_decay():
    s = optim.cosine_decay(0.1, 10)
    for t in range(0, 15):
        want = 0.1 * 0.5 * (1 + math.cos(math.pi * min(t, 10) / 10))
        assert s(mx.array(t, mx.uint64)).item() == pytest.approx(want, abs=1e-8)
    s = optim.cosine_decay(0.1, 10, 0.05)
    assert s(9).item() > 0.05
    assert s(20).item() == pytest.approx(0.05, abs=1e-8)
    assert s(4).item() == pytest.approx(0.05 + 0.05 * 0.5 * (1 + math.cos(math.pi * 0.4)),
                                        abs=1e-8)


def test_linear_schedule():
    s = optim.linear_schedule(0.0, 1e-1, 100)
    for t in (0, 1, 37, 100, 150):
        assert s(mx.array(t, mx.uint64)).item() == pytest.approx(1e-1 * min(t, 100) / 100,
                                                                 abs=1e-8)
    s = optim.linear_schedule(1.0, 0.5, 4)
    assert [round(s(t).item(), 6) for t in range(6)] == [1.0, 0.875, 0.75, 0.625, 0.5, 0.5]


def test_join_schedules():
    schedules = [lambda _: 3, lambda _: 4, lambda _: 5]
    s = optim.join_schedules(schedules, [2, 4])
    assert [s(t).item() for t in range(8)] == [3, 3, 4, 4, 5, 5, 5, 5]
    # A later schedule counts its steps from its boundary.
    s = optim.join_schedules([optim.linear_schedule(0.0, 1.0, 10), lambda t: t * 1.0], [10])
    assert [s(mx.array(t, mx.uint64)).item() for t in (0, 5, 9, 10, 13)] == pytest.approx(
        [0.0, 0.5, 0.9, 0.0, 3.0])

    warmup = optim.linear_schedule(0.0, 1e-5, 100)
    decay = optim.cosine_decay(1e-5, 100)
    joined = optim.join_schedules([warmup, decay], [101])
    opt = optim.Adam(learning_rate=joined)
    assert opt.learning_rate.item() == 0.0
    for _ in range(103):  # the last one evaluates the schedule at step 102
        opt.update(TinyModule(), {})
    assert opt.learning_rate.item() == pytest.approx(1e-5 * 0.5 * (1 + math.cos(math.pi / 100)))


def test_schedule_errors_name_the_value():
    with pytest.raises(ValueError, match="-3"):
        optim.step_decay(0.1, 0.9, -3)
    with pytest.raises(ValueError, match="got 0"):
        optim.cosine_decay(0.1, 0)
    with pytest.raises(ValueError, match="got 0"):
        optim.linear_schedule(0.0, 1.0, 0)
    with pytest.raises(ValueError, match="at least 1"):
        optim.join_schedules([], [])
    with pytest.raises(ValueError, match="3 boundaries but expected 2"):
        optim.join_schedules([lambda _: 1] * 3, [1, 2, 3])


# ------------------------------------------------------------------------------------------
# clip_grad_norm


def test_clip_grad_norm_against_numpy():
    rng = np.random.default_rng(11)
    grads = make_tree(rng)
    flat = flat_np(grads)
    norm = math.sqrt(sum(float(np.sum(g * g)) for g in flat.values()))

    clipped, total = optim.clip_grad_norm(grads, max_norm=norm / 4)
    assert total.item() == pytest.approx(norm, rel=1e-6)
    scale = (norm / 4) / (norm + 1e-6)
    for k, g in tree_flatten(clipped):
        np.testing.assert_allclose(np.array(g), flat[k] * scale, rtol=1e-6, atol=1e-7)
    assert math.sqrt(sum(float(np.sum(np.square(np.array(g)))) for _, g in tree_flatten(clipped))) \
        == pytest.approx(norm / 4, rel=1e-5)
    assert isinstance(clipped["pair"], tuple)

    unclipped, total = optim.clip_grad_norm(grads, max_norm=10 * norm)
    assert total.item() == pytest.approx(norm, rel=1e-6)
    for k, g in tree_flatten(unclipped):
        np.testing.assert_array_equal(np.array(g), flat[k].astype(np.float32))

    with pytest.raises(ValueError, match="-1.0"):
        optim.clip_grad_norm(grads, -1.0)


# ------------------------------------------------------------------------------------------
# Argument checks


@pytest.mark.parametrize(
    "make,value",
    [
        (lambda: optim.SGD(0.1, nesterov=True), "momentum=0.0"),
        (lambda: optim.SGD(0.1, momentum=0.9, dampening=0.1, nesterov=True), "dampening=0.1"),
        (lambda: optim.RMSprop(0.1, alpha=-0.5), "-0.5"),
        (lambda: optim.RMSprop(0.1, eps=0.0), "0.0"),
        (lambda: optim.Adagrad(0.1, eps=-1.0), "-1.0"),
        (lambda: optim.AdaDelta(0.1, rho=-0.25), "-0.25"),
        (lambda: optim.AdaDelta(0.1, eps=0.0), "0.0"),
        (lambda: optim.Adam(0.1, betas=[0.9, 1.0]), "beta2"),
        (lambda: optim.Adam(0.1, betas=[-0.1, 0.9]), "-0.1"),
        (lambda: optim.Adam(0.1, eps=-1e-3), "-0.001"),
        (lambda: optim.AdamW(0.1, betas=[1.5, 0.9]), "1.5"),
        (lambda: optim.Adamax(0.1, betas=[0.9, 2.0]), "2.0"),
        (lambda: optim.Lion(0.1, betas=[0.9, 1.0]), "1.0"),
        (lambda: optim.MultiOptimizer([optim.SGD(0.1), optim.Adam(0.1)]), "0 filters but 1"),
        (lambda: optim.MultiOptimizer([optim.SGD(0.1)], [lambda *_: True]), "1 filters but 0"),
    ],
)
def test_bad_arguments_raise(make, value):
    with pytest.raises(ValueError, match=re.escape(value)):
        make()


def test_top_level_must_be_a_dict():
    with pytest.raises(TypeError, match="list"):
        optim.SGD(0.1).apply_gradients([mx.ones((2,))], [mx.ones((2,))])


def test_epsilon_must_be_positive():
    for cls in (optim.RMSprop, optim.Adagrad, optim.AdaDelta):
        for eps in (-1.0, 0.0):
            with pytest.raises(ValueError, match=">0"):
                cls(learning_rate=1e-2, eps=eps)
