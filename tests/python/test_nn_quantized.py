"""Quantized layers (QuantizedLinear, QuantizedEmbedding, nn.quantize and the quantized sharded
linear layers): MLX's parameter names, shapes, dtypes and reprs; forwards against a NumPy
unpacking of the packed weights; frozen parameters; checkpoints; and, across real processes
started by `tessera launch`, the sharded layers against the unsharded one."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tessera.core as mx
import tessera.nn as nn
from tessera.utils import tree_flatten

RNG = np.random.default_rng(20250701)
TESSERA = os.path.join(os.path.dirname(sys.executable), "tessera")


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def f64(a):
    return np.asarray(a.astype(mx.float32), dtype=np.float64)


def unpack(packed, bits):
    """The integers packed in a uint32 matrix, as MLX packs them: a little-endian bit stream,
    ``bits`` bits per value, lowest bits first."""
    words = np.asarray(packed).astype("<u4")
    stream = np.unpackbits(words.view(np.uint8).reshape(*words.shape[:-1], -1), axis=-1,
                           bitorder="little")
    values = stream.reshape(*words.shape[:-1], -1, bits).astype(np.int64)
    return (values << np.arange(bits)).sum(-1)


def np_dequantize(layer):
    """``scale * q + bias`` of every group of a quantized layer's weight, in float64."""
    q = unpack(layer.weight, layer.bits)
    gs = layer.group_size
    return (np.repeat(f64(layer.scales), gs, axis=-1) * q
            + np.repeat(f64(layer.biases), gs, axis=-1))


def trainable_keys(module):
    return sorted(k for k, _ in tree_flatten(module.trainable_parameters()))


# ---- QuantizedLinear ----

@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 8])
@pytest.mark.parametrize("group_size", [32, 64, 128])
def test_quantized_linear_parameters_have_mlx_names_shapes_and_dtypes(bits, group_size):
    layer = nn.QuantizedLinear(256, 24, group_size=group_size, bits=bits)
    shapes = {k: (tuple(v.shape), v.dtype) for k, v in tree_flatten(layer.parameters())}
    assert shapes == {
        "weight": ((24, 256 * bits // 32), mx.uint32),
        "scales": ((24, 256 // group_size), mx.float32),
        "biases": ((24, 256 // group_size), mx.float32),
        "bias": ((24,), mx.float32),
    }
    assert (layer.group_size, layer.bits, layer.mode) == (group_size, bits, "affine")
    np.testing.assert_array_equal(np.array(layer.bias), 0)
    assert "bias" not in nn.QuantizedLinear(256, 24, bias=False, group_size=group_size, bits=bits)


def test_quantized_linear_defaults_are_mlx_affine_64_4():
    layer = nn.QuantizedLinear(128, 8)
    assert (layer.group_size, layer.bits, layer.mode) == (64, 4, "affine")
    assert layer.weight.shape == (8, 16) and layer.scales.shape == (8, 2)


@pytest.mark.parametrize("bits,group_size", [(4, 64), (3, 32), (8, 128), (2, 32), (6, 64)])
@pytest.mark.parametrize("bias", [True, False])
def test_quantized_linear_forward_is_x_times_dequantized_weight_plus_bias(bits, group_size, bias):
    lin = nn.Linear(256, 20, bias=bias)
    layer = nn.QuantizedLinear.from_linear(lin, group_size=group_size, bits=bits)
    w = np_dequantize(layer)
    core = mx.dequantize(layer.weight, layer.scales, layer.biases, group_size=group_size, bits=bits)
    np.testing.assert_allclose(f64(core), w, rtol=1e-6, atol=1e-6)
    for shape in [(3, 256), (256,), (2, 5, 256), (0, 256)]:
        x = randn(*shape)
        ref = x.astype(np.float64) @ w.T + (f64(lin.bias) if bias else 0)
        y = layer(mx.array(x))
        assert y.shape == shape[:-1] + (20,) and y.dtype == mx.float32
        np.testing.assert_allclose(f64(y), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16])
@pytest.mark.parametrize("bits", [2, 4, 8])
def test_from_linear_round_trip_is_within_one_quantization_step(dtype, bits):
    lin = nn.Linear(128, 16)
    lin.set_dtype(dtype)
    layer = lin.to_quantized(group_size=32, bits=bits)
    assert layer.scales.dtype == dtype and layer.biases.dtype == dtype
    assert layer.bias is lin.bias
    w = f64(lin.weight)
    step = np.repeat(np.abs(f64(layer.scales)), 32, axis=-1)
    err = np.abs(np_dequantize(layer) - w)
    # MLX's scales put one edge of the group and zero on the grid, so the other edge may be
    # clipped: within one step of the group's grid, not half of one, plus the rounding of the
    # scale and bias to the dtype (it matters for 8 bits in bfloat16).
    eps = {mx.float32: 1e-6, mx.float16: 2.0**-11, mx.bfloat16: 2.0**-8}[dtype]
    bias = np.repeat(np.abs(f64(layer.biases)), 32, axis=-1)
    tol = 1.001 * step + eps * (np.abs(w) + bias)
    assert np.all(err <= tol), (err / tol).max()
    x = randn(4, 128)
    ref = x.astype(np.float64) @ w.T + f64(lin.bias)
    bound = np.abs(x).astype(np.float64) @ tol.T + 1e-2
    assert np.all(np.abs(f64(layer(mx.array(x).astype(dtype))) - ref) <= bound)


def test_quantized_linear_repr_is_mlx_text():
    for bits in [3, 4, 5]:
        text = repr(nn.QuantizedLinear(192, 48, bits=bits, group_size=32))
        assert text == (f"QuantizedLinear(input_dims=192, output_dims=48, bias=True, "
                        f"group_size=32, bits={bits}, mode=affine)")
    assert repr(nn.QuantizedLinear(64, 8, bias=False)) == (
        "QuantizedLinear(input_dims=64, output_dims=8, bias=False, group_size=64, bits=4, mode=affine)")


# ---- freezing and training ----

def test_quantized_parameters_are_frozen_and_from_linear_keeps_the_linear_bias_trainable():
    assert trainable_keys(nn.QuantizedLinear(64, 8)) == []
    assert trainable_keys(nn.QuantizedEmbedding(10, 64)) == []
    # As in MLX: from_linear freezes the quantized weight; the copied bias stays trainable.
    assert trainable_keys(nn.Linear(64, 8).to_quantized()) == ["bias"]
    assert trainable_keys(nn.Linear(64, 8, bias=False).to_quantized()) == []
    assert trainable_keys(nn.Embedding(10, 64).to_quantized()) == []
    assert sorted(k for k, _ in tree_flatten(nn.QuantizedLinear(64, 8).parameters())) == [
        "bias", "biases", "scales", "weight"]


def test_unfreeze_makes_quantized_linear_scales_trainable_with_gradients():
    layer = nn.Linear(64, 8).to_quantized()
    layer.unfreeze(keys=["scales", "biases"])
    assert trainable_keys(layer) == ["bias", "biases", "scales"]
    x = mx.array(randn(5, 64))
    _, grads = nn.value_and_grad(layer, lambda t: mx.sum(layer(t) ** 2))(x)
    assert sorted(grads) == ["bias", "biases", "scales"]
    # d(sum y^2)/d scales[o, g] = sum_b 2 y[b, o] * sum_{k in g} x[b, k] q[o, k].
    y = f64(layer(x))
    q = unpack(layer.weight, 4).reshape(8, 1, 64)
    xg = f64(x).reshape(5, 1, 1, 64)
    per_group = (xg * q).reshape(5, 8, 1, 64)  # one group of 64
    want = np.einsum("bo,bog->og", 2 * y, per_group.sum(-1))
    np.testing.assert_allclose(f64(grads["scales"]), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(f64(grads["bias"]), 2 * y.sum(0), rtol=1e-5, atol=1e-5)
    layer.freeze()
    assert trainable_keys(layer) == []


def test_quantize_leaves_other_layers_trainable():
    model = nn.Sequential(nn.Linear(64, 64), nn.LayerNorm(64), nn.Linear(64, 4))
    nn.quantize(model, group_size=32, bits=8)
    assert trainable_keys(model) == ["layers.0.bias", "layers.1.bias", "layers.1.weight",
                                     "layers.2.bias"]


# ---- nn.quantize ----

def make_model():
    return nn.Sequential(nn.Embedding(10, 64), nn.ReLU(), nn.Linear(64, 64), nn.Linear(64, 32))


def test_quantize_replaces_every_layer_with_to_quantized():
    model = make_model()
    dense = model.layers[2]
    nn.quantize(model)
    kinds = [type(m).__name__ for m in model.layers]
    assert kinds == ["QuantizedEmbedding", "ReLU", "QuantizedLinear", "QuantizedLinear"]
    assert all((m.group_size, m.bits) == (64, 4) for m in model.layers if hasattr(m, "bits"))
    np.testing.assert_array_equal(np.array(model.layers[2].weight),
                                  np.array(mx.quantize(dense.weight)[0]))
    # Nothing left to quantize the second time.
    before = model.layers[2]
    nn.quantize(model)
    assert model.layers[2] is before


def test_quantize_arguments_reach_every_layer():
    model = make_model()
    nn.quantize(model, 32, 8, mode="affine")
    assert all((m.group_size, m.bits) == (32, 8) for m in model.layers if hasattr(m, "bits"))
    assert model.layers[3].weight.shape == (32, 16)


def test_quantize_with_a_boolean_predicate_gets_the_dotted_path():
    model = make_model()
    seen = []

    def only_linear(path, module):
        seen.append(path)
        return isinstance(module, nn.Linear)

    nn.quantize(model, class_predicate=only_linear)
    assert seen == ["layers.0", "layers.1", "layers.2", "layers.3"]
    kinds = [type(m).__name__ for m in model.layers]
    assert kinds == ["Embedding", "ReLU", "QuantizedLinear", "QuantizedLinear"]


def test_quantize_with_a_dict_predicate_passes_its_arguments():
    model = make_model()
    settings = {"group_size": 32, "bits": 8, "quantize_input": False}

    def per_layer(path, module):
        if path == "layers.3":
            return settings
        return isinstance(module, nn.Linear)

    nn.quantize(model, group_size=64, bits=2, class_predicate=per_layer)
    assert isinstance(model.layers[0], nn.Embedding)
    assert (model.layers[2].group_size, model.layers[2].bits) == (64, 2)
    assert (model.layers[3].group_size, model.layers[3].bits) == (32, 8)
    assert settings == {"group_size": 32, "bits": 8, "quantize_input": False}  # not modified


def test_quantize_rejects_bad_predicates():
    with pytest.raises(ValueError, match=r"returned 'yes' for layers.0; it must return a bool"):
        nn.quantize(make_model(), class_predicate=lambda p, m: "yes")
    with pytest.raises(ValueError, match=r"chose layers.1 \(ReLU\), which has no to_quantized"):
        nn.quantize(make_model(), class_predicate=lambda p, m: True)
    with pytest.raises(ValueError, match="quantize_input=True is not supported for embeddings"):
        nn.quantize(make_model(), quantize_input=True)
    with pytest.raises(ValueError, match="'nvfp4' and 'mxfp8' modes"):
        nn.quantize(make_model(), quantize_input=True,
                    class_predicate=lambda p, m: isinstance(m, nn.Linear))


# ---- QQLinear: the input quantized too ----

@pytest.mark.parametrize("mode", ["nvfp4", "mxfp8"])
def test_qqlinear_trains_on_floats_and_evaluates_packed(mode):
    lin = nn.Linear(64, 32, bias=False)
    q = lin.to_quantized(mode=mode, quantize_input=True)
    assert isinstance(q, nn.QQLinear) and q.weight.dtype == mx.float32  # training: floats
    # 32 rows: dw = qqmm(g^T, x^T) quantizes along the rows too.
    x = mx.array(RNG.standard_normal((32, 64)).astype(np.float32))
    xd = mx.dequantize(*mx.quantize(x, mode=mode), mode=mode, dtype=mx.float32)
    wd = mx.dequantize(*mx.quantize(lin.weight, mode=mode), mode=mode, dtype=mx.float32)
    want = np.array(xd, np.float64) @ np.array(wd, np.float64).T
    np.testing.assert_allclose(np.array(q(x)), want, rtol=1e-4, atol=1e-4)
    # Gradients as MLX's: products of quantized operands.
    g = mx.ones((32, 32))
    gq = mx.dequantize(*mx.quantize(g, mode=mode), mode=mode, dtype=mx.float32)
    wt = mx.dequantize(*mx.quantize(lin.weight.T, mode=mode), mode=mode, dtype=mx.float32)
    dx = mx.grad(lambda x: q(x).sum())(x)
    np.testing.assert_allclose(np.array(dx), np.array(gq, np.float64) @ np.array(wt, np.float64).T,
                               rtol=1e-4, atol=1e-4)
    dw = mx.grad(lambda w: mx.qqmm(x, w, mode=mode).sum())(lin.weight)
    gt = mx.dequantize(*mx.quantize(g.T, mode=mode), mode=mode, dtype=mx.float32)
    xt = mx.dequantize(*mx.quantize(x.T, mode=mode), mode=mode, dtype=mx.float32)
    np.testing.assert_allclose(np.array(dw), np.array(gt, np.float64) @ np.array(xt, np.float64).T,
                               rtol=1e-4, atol=1e-4)
    q.eval()
    assert q.weight.dtype == mx.uint32 and q.scales.dtype == mx.uint8
    np.testing.assert_allclose(np.array(q(x)), want, rtol=1e-4, atol=1e-4)
    q.train()
    assert q.weight.dtype == mx.float32 and "scales" not in q
    with pytest.raises(NotImplementedError, match="has a bias"):
        nn.Linear(64, 32).to_quantized(mode=mode, quantize_input=True)
    with pytest.raises(ValueError, match="'nvfp4' and 'mxfp8' modes"):
        lin.to_quantized(mode="affine", quantize_input=True)


# ---- checkpoints ----

@pytest.mark.parametrize("ext", ["npz", "safetensors"])
def test_save_and_load_weights_round_trip(tmp_path, ext):
    model = make_model()
    nn.quantize(model, group_size=32, bits=3)
    path = str(tmp_path / f"q.{ext}")
    model.save_weights(path)
    loaded = make_model()
    nn.quantize(loaded, group_size=32, bits=3)
    loaded.load_weights(path)
    for (k, a), (k2, b) in zip(tree_flatten(model.parameters()), tree_flatten(loaded.parameters())):
        assert k == k2 and a.dtype == b.dtype
        np.testing.assert_array_equal(np.array(a), np.array(b), err_msg=k)
    x = mx.array(randn(2, 64))
    np.testing.assert_array_equal(np.array(model.layers[3](x)), np.array(loaded.layers[3](x)))
    # Loading never unfreezes.
    assert trainable_keys(loaded.layers[0]) == []
    # Weights quantized with other bits do not fit: the mismatch is named.
    other = make_model()
    nn.quantize(other, group_size=32, bits=4)
    with pytest.raises(ValueError, match="layers.0.weight has shape"):
        other.load_weights(path)


# ---- QuantizedEmbedding ----

def test_quantized_embedding_parameters_and_repr():
    emb = nn.QuantizedEmbedding(32, 256, group_size=32, bits=8)
    shapes = {k: (tuple(v.shape), v.dtype) for k, v in tree_flatten(emb.parameters())}
    assert shapes == {"weight": ((32, 64), mx.uint32), "scales": ((32, 8), mx.float32),
                      "biases": ((32, 8), mx.float32)}
    assert (emb.num_embeddings, emb.dims) == (32, 256)
    assert repr(emb) == "QuantizedEmbedding(32, 256, group_size=32, bits=8, mode=affine)"
    assert repr(nn.QuantizedEmbedding(5, 64)) == (
        "QuantizedEmbedding(5, 64, group_size=64, bits=4, mode=affine)")


@pytest.mark.parametrize("bits", [3, 4, 8])
def test_quantized_embedding_lookup_and_as_linear_use_the_dequantized_table(bits):
    emb = nn.Embedding(40, 128)
    q = nn.QuantizedEmbedding.from_embedding(emb, group_size=64, bits=bits)
    table = np_dequantize(q)
    idx = np.array([[2, 6, 9], [3, 0, 39]])
    np.testing.assert_allclose(f64(q(mx.array(idx))), table[idx], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(f64(q(mx.array(7))), table[7], rtol=1e-6, atol=1e-6)
    assert q(mx.array(np.zeros((0,), np.int32))).shape == (0, 128)
    step = np.repeat(np.abs(f64(q.scales)), 64, axis=-1)
    assert np.all(np.abs(table - f64(emb.weight)) <= 1.001 * step + 1e-6)
    x = randn(2, 5, 128)
    np.testing.assert_allclose(f64(q.as_linear(mx.array(x))), x.astype(np.float64) @ table.T,
                               rtol=1e-5, atol=1e-5)


def test_embedding_to_quantized():
    q = nn.Embedding(10, 64).to_quantized(group_size=32, bits=2)
    assert isinstance(q, nn.QuantizedEmbedding)
    assert (q.group_size, q.bits, q.mode) == (32, 2, "affine") and q.weight.shape == (10, 4)


# ---- errors ----

@pytest.mark.parametrize("mode", ["mxfp4", "mxfp8", "nvfp4"])
def test_fp_modes_quantize_every_layer(mode):
    # The layers in MLX's fp modes: no biases, uint8 scales; outputs against the core ops.
    x = mx.array(RNG.standard_normal((3, 64)).astype(np.float32))
    lin = nn.Linear(64, 8)
    q = lin.to_quantized(mode=mode)
    assert q.biases is None and q.scales.dtype == mx.uint8 and q.mode == mode
    wd = mx.dequantize(q.weight, q.scales, mode=mode, dtype=mx.float32)
    np.testing.assert_allclose(np.array(q(x)), np.array(x @ wd.T + lin.bias), rtol=1e-5,
                               atol=1e-5)
    emb = nn.QuantizedEmbedding(4, 64, mode=mode)
    idx = mx.array([[3, 0], [1, 1]])
    rows = mx.dequantize(emb.weight, emb.scales, mode=mode)
    np.testing.assert_array_equal(np.array(emb(idx).astype(mx.float32)),
                                  np.array(rows.astype(mx.float32))[np.array(idx)])
    model = make_model()
    nn.quantize(model, mode=mode)
    assert [type(m).__name__ for m in model.layers] == [
        "QuantizedEmbedding", "ReLU", "QuantizedLinear", "QuantizedLinear"]
    with pytest.raises(ValueError, match=f"mode '{mode}' packs groups of"):
        nn.QuantizedLinear(64, 8, group_size=16 if mode == "mxfp4" else 64, mode=mode)


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="quantization mode 'int4' is unknown; use one of 'affine'"):
        nn.QuantizedLinear(64, 8, mode="int4")
    with pytest.raises(ValueError, match="QuantizedLinear: input_dims=96 is not a multiple of group_size=64"):
        nn.QuantizedLinear(96, 8)
    with pytest.raises(ValueError, match="QuantizedEmbedding: dims=48 is not a multiple of group_size=32"):
        nn.QuantizedEmbedding(4, 48, group_size=32)
    with pytest.raises(ValueError, match="QuantizedLinear: output_dims=0 must be a positive integer"):
        nn.QuantizedLinear(64, 0)
    with pytest.raises(ValueError, match="group_size 48 is not supported"):
        nn.QuantizedLinear(96, 8, group_size=48)
    with pytest.raises(ValueError, match="bits"):
        nn.QuantizedLinear(64, 8, bits=7)
    with pytest.raises(ValueError, match="QuantizedLinear: input_dims=100"):
        nn.Linear(100, 4).to_quantized()


# ---- sharded, one process ----

def test_quantized_sharded_layers_on_one_rank_equal_the_quantized_layer():
    group = mx.distributed.init()
    assert group.size() == 1
    qlin = nn.Linear(128, 48).to_quantized(group_size=32, bits=4)
    x = mx.array(randn(3, 128))
    want = np.array(qlin(x))
    for sharding, cls in [("all-to-sharded", nn.QuantizedAllToShardedLinear),
                          ("sharded-to-all", nn.QuantizedShardedToAllLinear)]:
        s = nn.shard_linear(qlin, sharding)
        assert type(s) is cls and (s.group_size, s.bits, s.mode) == (32, 4, "affine")
        for k, v in tree_flatten(qlin.parameters()):
            np.testing.assert_array_equal(np.array(s[k]), np.array(v), err_msg=k)
        np.testing.assert_allclose(np.array(s(x)), want, rtol=1e-6, atol=1e-6)
        assert repr(s) == (f"{cls.__name__}(input_dims=128, output_dims=48, bias=True, "
                           "group_size=32, bits=4, mode=affine)")
        # MLX's sharded quantized layers stay frozen through unfreeze.
        assert trainable_keys(s) == []
        assert trainable_keys(s.unfreeze()) == []
        s2 = cls.from_quantized_linear(qlin, segments=2, group=group)
        np.testing.assert_allclose(np.array(s2(x)), want, rtol=1e-6, atol=1e-6)
    # The constructors: MLX's defaults and shapes.
    a = nn.QuantizedAllToShardedLinear(128, 16)
    assert (a.group_size, a.bits) == (64, 4) and a.weight.shape == (16, 16)
    assert "bias" not in nn.QuantizedShardedToAllLinear(128, 16, bias=False)
    # The dense layers are still sharded as before.
    assert type(nn.shard_linear(nn.Linear(8, 4), "all-to-sharded")) is nn.AllToShardedLinear


def test_quantized_sharded_construction_for_every_bit_width():
    # MLX's own check: the slice of a packed weight on one rank is the whole packed weight.
    for bits in [2, 3, 4, 5, 6, 8]:
        qlin = nn.Linear(192, 64).to_quantized(bits=bits, group_size=64)
        for cls in (nn.QuantizedAllToShardedLinear, nn.QuantizedShardedToAllLinear):
            s = cls.from_quantized_linear(qlin)
            assert s.weight.shape == qlin.weight.shape and s.bits == bits
            assert f"input_dims=192, output_dims=64" in repr(s)


def test_shard_inplace_of_a_quantized_linear_on_one_rank_keeps_it():
    qlin = nn.Linear(64, 8).to_quantized()
    before = {k: np.array(v) for k, v in tree_flatten(qlin.parameters())}
    nn.shard_inplace(qlin, "all-to-sharded")
    for k, v in tree_flatten(qlin.parameters()):
        np.testing.assert_array_equal(np.array(v), before[k], err_msg=k)
    assert trainable_keys(qlin) == ["bias"]


def test_shard_linear_rejects_other_modules():
    with pytest.raises(ValueError, match="expected an nn.Linear or nn.QuantizedLinear, got Embedding"):
        nn.shard_linear(nn.Embedding(4, 64), "all-to-sharded")
    with pytest.raises(ValueError, match="sharding must be"):
        nn.shard_linear(nn.Linear(64, 8).to_quantized(), "rows")


# ---- sharded, several processes ----

def launch(tmp_path, script, n, timeout=180):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(script))
    r = subprocess.run([TESSERA, "launch", "-n", str(n), str(path)], capture_output=True,
                       text=True, timeout=timeout, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


SHARDED = """
    import numpy as np
    import pytest
    import tessera.core as mx
    import tessera.nn as nn

    g = mx.distributed.init()
    n, r = g.size(), g.rank()
    mx.random.seed(11)  # the same layers and inputs on every rank
    d_in, d_hidden, d_out = 128, 64 * n, 5
    up = nn.Linear(d_in, d_hidden).to_quantized(group_size=64, bits=4)
    down = nn.Linear(d_hidden, d_out).to_quantized(group_size=32, bits=3)
    x = mx.random.normal((3, d_in))
    h = mx.random.normal((3, d_hidden))
    rows = slice(r * d_hidden // n, (r + 1) * d_hidden // n)

    # All-to-sharded: this rank's rows of the packed weight, scales, biases and bias, and so
    # of the outputs.
    sup = nn.shard_linear(up, "all-to-sharded")
    assert isinstance(sup, nn.QuantizedAllToShardedLinear)
    for k in ("weight", "scales", "biases", "bias"):
        np.testing.assert_array_equal(np.array(sup[k]), np.array(up[k])[rows], err_msg=k)
    np.testing.assert_allclose(np.array(sup(x)), np.array(up(x))[:, rows], rtol=1e-6, atol=1e-6)

    # Sharded-to-all: every rank gets the whole output from its slice of the inputs (3 bits:
    # the packed words of a slice hold whole groups).
    sdown = nn.shard_linear(down, "sharded-to-all")
    assert isinstance(sdown, nn.QuantizedShardedToAllLinear)
    assert sdown.weight.shape == (d_out, 64 * 3 // 32) and sdown.scales.shape == (d_out, 2)
    np.testing.assert_allclose(np.array(sdown(h[:, rows])), np.array(down(h)), rtol=1e-5, atol=1e-5)

    # The two together (Megatron-style MLP) equal the unsharded quantized MLP, and the input's
    # gradient (summed over the ranks by sum_gradients) equals the unsharded one.
    mid = nn.Linear(d_hidden, d_in).to_quantized(group_size=32, bits=8)
    smid = nn.shard_linear(mid, "sharded-to-all")
    def dense(t):
        return mid(mx.maximum(up(t), 0))
    def sharded(t):
        return smid(mx.maximum(sup(t), 0))
    np.testing.assert_allclose(np.array(sharded(x)), np.array(dense(x)), rtol=1e-5, atol=1e-5)
    gd = mx.grad(lambda t: mx.sum(dense(t) ** 2))(x)
    gs = mx.grad(lambda t: mx.sum(sharded(t) ** 2))(x)
    np.testing.assert_allclose(np.array(gs), np.array(gd), rtol=1e-4, atol=1e-4)

    # shard_inplace slices a QuantizedLinear's parameters the same way.
    inplace = nn.Linear(d_in, d_hidden).to_quantized(group_size=64, bits=4)
    inplace.update(up.parameters())
    nn.shard_inplace(inplace, "all-to-sharded")
    np.testing.assert_allclose(np.array(inplace(x)), np.array(up(x))[:, rows], rtol=1e-6, atol=1e-6)

    # A slice of the inputs that is not whole groups (2 ranks) or not whole (3) is refused.
    with pytest.raises(ValueError, match="whole quantization groups|not divisible by the group size"):
        nn.shard_linear(nn.Linear(64, 4).to_quantized(group_size=64), "sharded-to-all")
    print("ok", r)
"""


@pytest.mark.parametrize("n", [2, 3])
def test_quantized_sharded_layers_equal_the_unsharded_layer_on_every_rank(tmp_path, n):
    out = launch(tmp_path, SHARDED, n)
    assert out.count("ok") == n
