"""tessera.nn.Module semantics (entries and attributes, parameter trees, update, freeze, modes,
weights on disk), tessera.utils' tree functions, Linear / Bilinear / Sequential against NumPy,
and nn.value_and_grad against a closed-form gradient."""

import numpy as np
import pytest

import tessera.core as mx
import tessera.nn as nn
from tessera.utils import (tree_flatten, tree_map, tree_map_with_path, tree_merge, tree_reduce,
                           tree_unflatten)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.scale = mx.ones((4,))
        self._private = mx.zeros((2,))  # not a parameter (leading underscore)
        self.name = "block"  # not an entry
        self.extras = {"gain": mx.full((1,), 2.0), "taps": [mx.zeros((2,)), mx.ones((3,))]}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = [Block(), Block()]
        self.head = nn.Linear(4, 2, bias=False)


def keys(tree):
    return [k for k, _ in tree_flatten(tree)]


def test_entries_attributes_and_parameter_trees():
    b = Block()
    assert "fc" in b and "scale" in b and "_private" in b and "name" not in b
    assert b.name == "block" and b.scale is b["scale"]
    assert keys(b.parameters()) == ["fc.weight", "fc.bias", "scale", "extras.gain", "extras.taps.0",
                                    "extras.taps.1"]
    # An attribute replaced by an array becomes an entry, and back.
    b.name = mx.zeros((1,))
    assert "name" in b
    b.name = 3
    assert "name" not in b and b.name == 3
    del b.scale
    assert "scale" not in b
    with pytest.raises(AttributeError, match="scale"):
        b.scale
    net = Net()
    assert [k for k, _ in tree_flatten(net.children(), is_leaf=nn.Module.is_module)] == [
        "blocks.0", "blocks.1", "head"]
    assert [type(m).__name__ for _, m in tree_flatten(net.leaf_modules(), is_leaf=nn.Module.is_module)] == [
        "Linear", "Linear", "Linear"]
    names = [n for n, _ in net.named_modules()]
    assert sorted(names) == ["", "blocks.0", "blocks.0.fc", "blocks.1", "blocks.1.fc", "head"]
    assert len(net.modules()) == 6
    assert "Linear(input_dims=4, output_dims=2, bias=False)" in repr(net)


def test_update_is_strict_about_keys_types_and_indices():
    net = Net()
    w = mx.full((2, 4), 0.5)
    net.update({"head": {"weight": w}})
    assert net.head.weight is w
    with pytest.raises(ValueError, match='no parameter named "head.bogus"'):
        net.update({"head": {"bogus": w}})
    with pytest.raises(ValueError, match="head.weight must be an array, not int"):
        net.update({"head": {"weight": 3}})
    with pytest.raises(ValueError, match="list index 2 at 'blocks' is past the end"):
        net.update({"blocks": [{}, {}, {"scale": w}]})
    net.update({"head": {"bogus": w}}, strict=False)  # ignored
    assert "bogus" not in net.head
    # apply maps every parameter; update_modules swaps modules.
    net.apply(lambda p: p * 0)
    assert all(float(mx.abs(v).sum()) == 0 for _, v in tree_flatten(net.parameters()))
    new_head = nn.Linear(4, 2)
    net.update_modules({"head": new_head})
    assert net.head is new_head
    with pytest.raises(ValueError, match='no sub-module named "tail"'):
        net.update_modules({"tail": new_head})


class Configured(nn.Module):
    """A model holding non-array leaves, as mlx-lm's models do (layer_types, a None slot)."""

    def __init__(self):
        super().__init__()
        self.layer_types = ["full_attention", "sliding_attention"]
        self.options = {"window": 128, "missing": None}
        self.proj = nn.Linear(2, 2)


def test_update_leaves_non_array_leaves_alone_as_mlx_does():
    m = Configured()
    # The tree parameters() gives has {} where the model has a non-array leaf: update accepts
    # its own output back (mlx-lm's load_weights / optimizer updates do this), strictly.
    params = m.parameters()
    assert params["layer_types"] == [{}, {}] and params["options"] == {"window": {}, "missing": {}}
    w = mx.full((2, 2), 3.0)
    params["proj"]["weight"] = w
    m.update(params)
    assert m.proj.weight is w
    assert m.layer_types == ["full_attention", "sliding_attention"]
    assert m.options == {"window": 128, "missing": None}
    m.update_modules(m.children())
    m.load_weights([("proj.weight", mx.zeros((2, 2))), ("proj.bias", mx.zeros((2,)))])
    assert float(mx.abs(m.proj.weight).sum()) == 0
    # Anything else where the model has a non-array leaf is still an error under strict.
    with pytest.raises(ValueError, match="layer_types.0 is a str in the model"):
        m.update({"layer_types": [{"x": w}]})
    with pytest.raises(ValueError, match="options.window is a int in the model"):
        m.update({"options": {"window": w}})
    m.update({"options": {"window": w}}, strict=False)
    assert m.options["window"] == 128


def test_freeze_unfreeze_and_modes():
    net = Net()
    net.freeze(keys="bias")
    assert "blocks.0.fc.bias" not in keys(net.trainable_parameters())
    assert "blocks.0.fc.weight" in keys(net.trainable_parameters())
    with pytest.raises(KeyError, match="nothing"):
        net.freeze(keys="nothing", strict=True)
    net.unfreeze(keys="bias")
    assert keys(net.trainable_parameters()) == keys(net.parameters())
    net.blocks[0].freeze()
    assert not any(k.startswith("blocks.0.") for k in keys(net.trainable_parameters()))
    net.blocks[0].freeze(recurse=False, keys=["scale"])
    net.unfreeze()
    assert keys(net.trainable_parameters()) == keys(net.parameters())
    assert net.training and net.blocks[1].fc.training
    net.eval()
    assert not net.training and not net.blocks[1].fc.training
    net.train()
    assert net.blocks[0].training
    net.set_dtype(mx.float16)
    assert {v.dtype for _, v in tree_flatten(net.parameters())} == {mx.float16}


@pytest.mark.parametrize("ext", [".npz", ".safetensors"])
def test_weights_round_trip_and_strict_loading(tmp_path, ext):
    a, b = Net(), Net()
    path = str(tmp_path / ("w" + ext))
    a.save_weights(path)
    b.load_weights(path)
    for (ka, va), (kb, vb) in zip(tree_flatten(a.parameters()), tree_flatten(b.parameters())):
        assert ka == kb and np.array_equal(np.asarray(va), np.asarray(vb))
    flat = tree_flatten(a.parameters())
    with pytest.raises(ValueError, match="missing: head.weight"):
        b.load_weights([kv for kv in flat if kv[0] != "head.weight"])
    with pytest.raises(ValueError, match="not in the model: head.extra"):
        b.load_weights(flat + [("head.extra", mx.zeros((1,)))])
    bad = [(k, mx.zeros((5, 5)) if k == "head.weight" else v) for k, v in flat]
    with pytest.raises(ValueError, match=r"head.weight has shape \(5, 5\) in the weights but \(2, 4\)"):
        b.load_weights(bad)
    # Not strict: a subset loads and the rest stays.
    before = np.asarray(b.blocks[0].scale)
    b.load_weights([("head.weight", mx.full((2, 4), 7.0))], strict=False)
    assert np.all(np.asarray(b.head.weight) == 7) and np.array_equal(np.asarray(b.blocks[0].scale), before)
    with pytest.raises(ValueError, match="npz or \\*.safetensors"):
        a.save_weights(str(tmp_path / "w.bin"))
    corrupt = tmp_path / ("c" + ext)
    corrupt.write_bytes(open(path, "rb").read()[:40])
    with pytest.raises(Exception):
        b.load_weights(str(corrupt))


def test_tree_functions():
    tree = {"a": [1, (2, 3)], "b": {"c": 4}}
    assert tree_flatten(tree) == [("a.0", 1), ("a.1.0", 2), ("a.1.1", 3), ("b.c", 4)]
    assert tree_flatten(tree, prefix=".p") == [("p.a.0", 1), ("p.a.1.0", 2), ("p.a.1.1", 3), ("p.b.c", 4)]
    assert tree_flatten(tree, destination={}) == {"a.0": 1, "a.1.0": 2, "a.1.1": 3, "b.c": 4}
    assert tree_flatten(tree, is_leaf=lambda x: isinstance(x, tuple))[1] == ("a.1", (2, 3))
    assert tree_unflatten(tree_flatten(tree)) == {"a": [1, [2, 3]], "b": {"c": 4}}
    assert tree_unflatten([("x.2", 1)]) == {"x": [{}, {}, 1]}
    assert tree_unflatten([("", 5)]) == 5
    assert tree_map(lambda x, y: x * 10 + y, tree, tree) == {"a": [11, (22, 33)], "b": {"c": 44}}
    assert tree_map_with_path(lambda p, x: p, tree) == {"a": ["a.0", ("a.1.0", "a.1.1")], "b": {"c": "b.c"}}
    assert tree_reduce(lambda acc, x: acc + x, tree, 0) == 10
    assert tree_reduce(lambda acc, x: max(acc, x), tree) == 4
    assert tree_merge({"a": [1, {}], "b": {}}, {"a": [{}, 2], "c": 3}) == {"a": [1, 2], "b": {}, "c": 3}
    with pytest.raises(ValueError, match="merge_fn"):
        tree_merge({"a": 1}, {"a": 2})
    assert tree_merge({"a": 1}, {"a": 2}, lambda x, y: x + y) == {"a": 3}
    with pytest.raises(ValueError, match="destination"):
        tree_flatten(tree, destination=5)


def test_linear_bilinear_sequential_against_numpy():
    rng = np.random.default_rng(0)
    lin = nn.Linear(5, 3)
    x = rng.standard_normal((4, 2, 5)).astype(np.float32)
    w, b = np.asarray(lin.weight), np.asarray(lin.bias)
    assert w.shape == (3, 5) and np.all(np.abs(w) <= 1 / np.sqrt(5))
    np.testing.assert_allclose(np.asarray(lin(mx.array(x))), x @ w.T + b, rtol=1e-5, atol=1e-6)
    bil = nn.Bilinear(3, 4, 2)
    x1 = rng.standard_normal((6, 3)).astype(np.float32)
    x2 = rng.standard_normal((6, 4)).astype(np.float32)
    W, B = np.asarray(bil.weight), np.asarray(bil.bias)
    want = np.einsum("ni,oji,nj->no", x1, W, x2) + B
    np.testing.assert_allclose(np.asarray(bil(mx.array(x1), mx.array(x2))), want, rtol=1e-4, atol=1e-5)
    seq = nn.Sequential(lin, lambda t: t * 2, nn.Identity(7, k=1))
    np.testing.assert_allclose(np.asarray(seq(mx.array(x))), 2 * (x @ w.T + b), rtol=1e-5, atol=1e-6)


def test_value_and_grad_is_the_closed_form_gradient():
    # loss = mean((x W^T + b - y)^2): dW = 2/n (r^T x), db = 2/n sum(r), r the residuals.
    rng = np.random.default_rng(1)
    model = nn.Linear(3, 2)
    x = rng.standard_normal((8, 3)).astype(np.float32)
    y = rng.standard_normal((8, 2)).astype(np.float32)

    def loss(xs, ys):
        return mx.mean(mx.square(model(xs) - ys))

    value, grads = nn.value_and_grad(model, loss)(mx.array(x), mx.array(y))
    w, b = np.asarray(model.weight), np.asarray(model.bias)
    r = x @ w.T + b - y
    n = r.size
    np.testing.assert_allclose(float(value), np.mean(r * r), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(grads["weight"]), 2 / n * r.T @ x, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.asarray(grads["bias"]), 2 / n * r.sum(0), rtol=1e-4, atol=1e-6)
    # Frozen parameters get no gradient.
    model.freeze(keys="bias")
    _, grads = nn.value_and_grad(model, loss)(mx.array(x), mx.array(y))
    assert list(grads) == ["weight"]
    # checkpoint recomputes in the backward pass but gives the same gradient.
    model.unfreeze()
    ck = nn.checkpoint(model)
    _, g1 = nn.value_and_grad(model, lambda t: mx.sum(ck(t) ** 2))(mx.array(x))
    _, g2 = nn.value_and_grad(model, lambda t: mx.sum(model(t) ** 2))(mx.array(x))
    assert float(mx.abs(g2["weight"]).sum()) > 0
    np.testing.assert_allclose(np.asarray(g1["weight"]), np.asarray(g2["weight"]), rtol=1e-6)


def test_grad_of_a_function_of_the_model_itself():
    # mx.grad(loss)(model): the function receives a model (attributes work), the caller's model
    # is left as it was, and the gradient is a plain dict tree (as MLX returns it).
    model = Net()
    x = mx.ones((3,))
    seen = []

    def loss(m):
        seen.append(type(m).__name__)
        return mx.sum(m.head(m.blocks[0].fc(x) * m.blocks[0].scale))

    g = mx.grad(loss)(model)
    assert seen == ["Net"] and type(g) is dict and type(g["blocks"][0]) is dict
    w = np.asarray(model.head.weight)
    h = np.asarray(model.blocks[0].fc(x) * model.blocks[0].scale)
    np.testing.assert_allclose(np.asarray(g["head"]["weight"]), np.tile(h, (2, 1)), rtol=1e-6)
    assert np.asarray(g["blocks"][0]["scale"]).shape == (4,) and w.shape == (2, 4)
    assert isinstance(model.head.weight, mx.array) and model.head.weight.shape == (2, 4)
