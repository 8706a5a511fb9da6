"""GGUF files against llama.cpp's own Python package (`gguf`: its writer, reader and NumPy
dequantizers are the reference) and against what MLX's CPU package loads from the same file
(data/mlx_gguf.npz, made by data/make_mlx_gguf.py): every tensor type we read, metadata of every
value type, round trips, and the errors for corrupt, truncated and unsupported input."""

import os
import struct

import gguf
import numpy as np
import pytest

import tessera.core as mx

Q = gguf.GGMLQuantizationType
V = gguf.GGUFValueType
RNG = np.random.default_rng(17)
MLX = np.load(os.path.join(os.path.dirname(__file__), "data", "mlx_gguf.npz"))

# Byte offsets of the float16 scale fields of each block type: set to valid values so that random
# blocks decode to finite numbers.
HALF_FIELDS = {
    Q.Q5_0: (0,), Q.Q5_1: (0, 2), Q.Q2_K: (80, 82), Q.Q3_K: (108,),
    Q.Q4_K: (0, 2), Q.Q5_K: (0, 2), Q.Q6_K: (208,),
}


def random_blocks(qtype, rows, blocks):
    _, nbytes = gguf.GGML_QUANT_SIZES[qtype]
    raw = RNG.integers(0, 256, (rows, blocks, nbytes), dtype=np.uint8)
    for off in HALF_FIELDS[qtype]:
        raw[..., off:off + 2] = RNG.uniform(-0.1, 0.1, (rows, blocks)).astype(np.float16)[..., None].view(np.uint8)
    return raw.reshape(rows, blocks * nbytes)


def write(path, tensors=(), kv=()):
    """A GGUF file by gguf's writer: tensors are (name, data, raw_dtype), kv (method, key, value)."""
    w = gguf.GGUFWriter(str(path), "tessera-test")
    for method, key, *value in kv:
        getattr(w, method)(key, *value)
    for name, data, raw in tensors:
        w.add_tensor(name, data, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def test_plain_tensors_and_metadata_written_by_gguf(tmp_path):
    f32 = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    f16 = RNG.standard_normal((6,)).astype(np.float16)
    bf16 = RNG.standard_normal((2, 3)).astype(np.float32).view(np.uint32) >> 16
    bf16 = bf16.astype(np.uint16)
    f64 = RNG.standard_normal((2, 2))
    ints = {np.int8: Q.I8, np.int16: Q.I16, np.int32: Q.I32, np.int64: Q.I64}
    tensors = [("f32", f32, None), ("f16", f16, None), ("bf16", bf16, Q.BF16), ("f64", f64, None)]
    for t in ints:
        tensors.append((np.dtype(t).name, RNG.integers(-100, 100, (4, 3)).astype(t), None))
    kv = [("add_uint8", "u8", 250), ("add_int8", "i8", -5), ("add_uint16", "u16", 65000),
          ("add_int16", "i16", -30000), ("add_uint32", "u32", 4_000_000_000), ("add_int32", "i32", -7),
          ("add_uint64", "u64", 2**63 + 5), ("add_int64", "i64", -(2**50)), ("add_float32", "f32", 0.1),
          ("add_float64", "f64", 0.1), ("add_bool", "b", True), ("add_string", "s", "héllo, wörld"),
          ("add_key_value", "ai", [3, -1, 4], V.ARRAY, V.INT64),
          ("add_key_value", "af", [0.25, -8.5], V.ARRAY, V.FLOAT64),
          ("add_key_value", "ab", [True, False], V.ARRAY, V.BOOL),
          ("add_array", "as", ["x", "", "yz"])]
    path = write(tmp_path / "plain.gguf", tensors, kv)
    arrays, meta = mx.load(path, return_metadata=True)
    assert sorted(arrays) == sorted(n for n, _, _ in tensors)
    np.testing.assert_array_equal(np.array(arrays["f32"]), f32)
    np.testing.assert_array_equal(np.array(arrays["f16"]), f16)
    assert arrays["bf16"].dtype == mx.bfloat16
    np.testing.assert_array_equal(np.array(arrays["bf16"].astype(mx.float32)),
                                  (bf16.astype(np.uint32) << 16).view(np.float32))
    np.testing.assert_array_equal(np.array(arrays["f64"]), f64)
    for name, data, _ in tensors[4:]:
        assert np.array(arrays[name]).dtype == data.dtype
        np.testing.assert_array_equal(np.array(arrays[name]), data)
    expect = {"u8": (250, mx.uint8), "i8": (-5, mx.int8), "u16": (65000, mx.uint16),
              "i16": (-30000, mx.int16), "u32": (4_000_000_000, mx.uint32), "i32": (-7, mx.int32),
              "u64": (2**63 + 5, mx.uint64), "i64": (-(2**50), mx.int64), "b": (True, mx.bool_)}
    for key, (value, dt) in expect.items():
        assert meta[key].dtype == dt and meta[key].ndim == 0 and meta[key].item() == value, key
    assert meta["f32"].dtype == mx.float32 and meta["f32"].item() == np.float32(0.1)
    assert meta["f64"].dtype == mx.float64 and meta["f64"].item() == 0.1  # MLX: float32
    assert meta["s"] == "héllo, wörld"
    assert meta["as"] == ["x", "", "yz"]
    np.testing.assert_array_equal(np.array(meta["ai"]), np.array([3, -1, 4], np.int64))
    np.testing.assert_array_equal(np.array(meta["af"]), [0.25, -8.5])
    np.testing.assert_array_equal(np.array(meta["ab"]), [True, False])
    assert meta["general.architecture"] == "tessera-test"


@pytest.mark.parametrize("qtype, bits", [(Q.Q4_0, 4), (Q.Q4_1, 4), (Q.Q8_0, 8)])
def test_q4_and_q8_load_as_mlx_affine_triples(tmp_path, qtype, bits):
    x = (RNG.standard_normal((2, 3, 96)) * 2).astype(np.float32)
    q = gguf.quants.quantize(x.reshape(6, 96), qtype).reshape(2, 3, -1)
    path = write(tmp_path / "q.gguf", [("blk.0.attn.weight", q, qtype), ("other", q, qtype)])
    arrays = mx.load(path)
    assert sorted(arrays) == ["blk.0.attn.biases", "blk.0.attn.scales", "blk.0.attn.weight",
                              "other", "other.biases", "other.scales"]
    w, s, b = arrays["blk.0.attn.weight"], arrays["blk.0.attn.scales"], arrays["blk.0.attn.biases"]
    assert w.dtype == mx.uint32 and w.shape == (2, 3, 96 * bits // 32)
    assert s.dtype == mx.float16 and s.shape == (2, 3, 3) and b.shape == (2, 3, 3)
    ref = gguf.quants.dequantize(q.reshape(6, -1), qtype).reshape(x.shape)
    got = mx.dequantize(w, s.astype(mx.float32), b.astype(mx.float32), group_size=32, bits=bits)
    np.testing.assert_array_equal(np.array(got), ref)
    # ... and the packed codes multiply as MLX's quantized_matmul would.
    v = RNG.standard_normal((5, 96)).astype(np.float32)
    y = mx.quantized_matmul(mx.array(v), w[0], s[0].astype(mx.float32), b[0].astype(mx.float32),
                            transpose=True, group_size=32, bits=bits)
    np.testing.assert_allclose(np.array(y), v @ ref[0].T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("qtype", [Q.Q5_0, Q.Q5_1, Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K])
def test_other_block_types_decode_to_float16_as_gguf(tmp_path, qtype):
    raw = random_blocks(qtype, 4, 3)
    path = write(tmp_path / "k.gguf", [("t", raw, qtype)])
    t = mx.load(path)["t"]
    ref = gguf.quants.dequantize(raw, qtype)
    assert t.dtype == mx.float16 and t.shape == ref.shape
    np.testing.assert_array_equal(np.array(t), ref.astype(np.float16))


def test_same_arrays_and_metadata_as_mlx(tmp_path):
    path = tmp_path / "mlx.gguf"
    path.write_bytes(MLX["gguf_bytes"].tobytes())
    arrays, meta = mx.load(str(path), return_metadata=True)
    want_arrays = {k[2:] for k in MLX.files if k.startswith("a:")}
    want_meta = {k[2:] for k in MLX.files if k.startswith("m:")}
    assert set(arrays) == want_arrays and set(meta) == want_meta
    for k in want_arrays:
        a, ref = np.array(arrays[k]), MLX["a:" + k]
        assert a.dtype == ref.dtype, k
        if k == "q4k.weight":
            # MLX (through gguflib) decodes each odd 32-element sub-block of Q4_K with the even
            # one's scale and min; ggml, gguf and Tessera use its own (checked above).
            even = (np.arange(a.shape[-1]) // 32) % 2 == 0
            a, ref = a[..., even], ref[..., even]
        np.testing.assert_array_equal(a, ref, err_msg=k)
    for k in want_meta:
        ref = MLX["m:" + k]
        got = meta[k]
        if isinstance(got, str):
            assert ref.ndim == 0 and got == str(ref), k
        elif isinstance(got, list):
            assert got == ref.tolist(), k
        else:
            assert np.array(got).dtype == ref.dtype, k
            np.testing.assert_array_equal(np.array(got), ref, err_msg=k)


def test_saved_files_read_back_by_gguf_and_by_us(tmp_path):
    arrays = {
        "f32": mx.array(RNG.standard_normal((3, 4)).astype(np.float32)),
        "f16": mx.array(RNG.standard_normal((5,)).astype(np.float16)),
        "bf16": mx.array(RNG.standard_normal((2, 2)).astype(np.float32)).astype(mx.bfloat16),
        "f64": mx.array(RNG.standard_normal((2, 3, 2)), dtype=mx.float64),
        "i8": mx.array(np.arange(-3, 3, dtype=np.int8)),
        "i64": mx.array(np.array([2**40, -1], np.int64)),
        "strided": mx.array(np.arange(12, dtype=np.float32).reshape(3, 4)).T,
        "scalar": mx.array(3.5),
    }
    meta = {"name": "tessera", "vocab": ["<s>", "</s>", "é"], "n": mx.array(7, dtype=mx.uint64),
            "f": mx.array(0.1, dtype=mx.float64), "flags": mx.array([True, False]),
            "ids": mx.array([1, 2, 3], dtype=mx.int16), "pyint": 5, "pyfloat": 2.5}
    path = str(tmp_path / "ours")
    mx.save_gguf(path, arrays, meta)
    path += ".gguf"  # appended, as MLX does
    r = gguf.GGUFReader(path)
    by_name = {t.name: t for t in r.tensors}
    assert sorted(by_name) == sorted(arrays)
    types = {"f32": Q.F32, "f16": Q.F16, "bf16": Q.BF16, "f64": Q.F64, "i8": Q.I8, "i64": Q.I64,
             "strided": Q.F32, "scalar": Q.F32}
    for k, a in arrays.items():
        t = by_name[k]
        assert t.tensor_type == types[k], k
        assert t.data_offset % 32 == 0
        assert tuple(int(d) for d in reversed(t.shape.tolist())) == tuple(a.shape) or a.ndim == 0
        data = np.asarray(t.data)
        if k == "bf16":
            data = (data.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
            np.testing.assert_array_equal(data.reshape(a.shape), np.array(a.astype(mx.float32)))
        else:
            np.testing.assert_array_equal(data.reshape(a.shape), np.array(a), err_msg=k)
    f = r.fields
    assert f["name"].contents() == "tessera"
    assert f["vocab"].contents() == ["<s>", "</s>", "é"]
    assert f["n"].types == [V.UINT64] and f["n"].contents() == 7
    assert f["f"].types == [V.FLOAT64] and f["f"].contents() == 0.1
    assert f["flags"].types == [V.ARRAY, V.BOOL] and f["flags"].contents() == [True, False]
    assert f["ids"].types == [V.ARRAY, V.INT16] and f["ids"].contents() == [1, 2, 3]
    assert f["pyint"].types == [V.INT32] and f["pyfloat"].types == [V.FLOAT32]
    back, meta2 = mx.load(path, return_metadata=True)
    for k, a in arrays.items():
        assert back[k].dtype == a.dtype and back[k].shape == a.shape
        np.testing.assert_array_equal(np.array(back[k].astype(mx.float64)), np.array(a.astype(mx.float64)))
    assert meta2["vocab"] == meta["vocab"] and meta2["n"].item() == 7 and meta2["f"].item() == 0.1
    # The same bytes through a file object.
    import io
    buf = io.BytesIO()
    mx.save_gguf(buf, arrays, meta)
    assert buf.getvalue() == open(path, "rb").read()
    buf.seek(0)
    assert sorted(mx.load(buf, format="gguf")) == sorted(arrays)


def test_alignment_from_metadata(tmp_path):
    path = str(tmp_path / "a.gguf")
    mx.save_gguf(path, {"a": mx.ones((3,)), "b": mx.ones((5,), dtype=mx.int8)},
                 {"general.alignment": mx.array(64, dtype=mx.uint32)})
    r = gguf.GGUFReader(path)
    assert r.alignment == 64 and all(t.data_offset % 64 == 0 for t in r.tensors)
    assert np.array(mx.load(path)["b"]).tolist() == [1] * 5
    with pytest.raises(ValueError, match="not a power of two"):
        mx.save_gguf(path, {}, {"general.alignment": mx.array(48, dtype=mx.uint32)})
    with pytest.raises(ValueError, match="uint32 scalar"):
        mx.save_gguf(path, {}, {"general.alignment": 64})


def test_save_refuses_what_gguf_cannot_hold(tmp_path):
    path = str(tmp_path / "bad.gguf")
    for arrays, meta, match in [
        ({"u8": mx.ones((2,), dtype=mx.uint8)}, {}, "'u8' has dtype uint8, which GGUF tensors cannot hold"),
        ({"c": mx.ones((2,), dtype=mx.complex64)}, {}, "dtype complex64"),
        ({}, {"m": mx.ones((2, 2))}, "'m' has 2 dimensions"),
        ({}, {"h": mx.ones((2,), dtype=mx.float16)}, "'h' has dtype float16, which GGUF metadata cannot hold"),
        ({}, {"l": ["a", 1]}, "non-string item 1"),
        ({}, {"d": {"x": 1}}, "'d' is a dict"),
    ]:
        with pytest.raises(ValueError, match=match):
            mx.save_gguf(path, arrays, meta)
        assert not os.path.exists(path)  # nothing half written


def small_file(tmp_path):
    return write(tmp_path / "s.gguf", [("w", np.arange(8, dtype=np.float32), None)],
                 [("add_uint32", "k", 1)])


def corrupt(tmp_path, data, name="c.gguf"):
    p = tmp_path / name
    p.write_bytes(bytes(data))
    return str(p)


def test_truncated_files_are_errors_at_every_cut(tmp_path):
    data = open(small_file(tmp_path), "rb").read()
    for cut in range(0, len(data) - 1, 7):
        with pytest.raises(ValueError, match="truncated|not a GGUF|runs past the end"):
            mx.load(corrupt(tmp_path, data[:cut]), format="gguf")


def test_corrupt_headers_name_the_problem(tmp_path):
    good = bytearray(open(small_file(tmp_path), "rb").read())
    cases = []
    b = bytearray(good); b[0:4] = b"GGUX"; cases.append((b, "not a GGUF file"))
    b = bytearray(good); b[4:8] = struct.pack("<I", 1); cases.append((b, "version 1 is not supported"))
    b = bytearray(good); b[4:8] = struct.pack(">I", 3); cases.append((b, "big-endian"))
    b = bytearray(good); b[16:24] = struct.pack("<Q", 2**40); cases.append((b, "1099511627776 metadata entries"))
    b = bytearray(good); b[8:16] = struct.pack("<Q", 2**40); cases.append((b, "1099511627776 tensors"))
    # The tensor info follows the two metadata entries: find its type field after the name "w".
    at = good.index(b"\x01\x00\x00\x00\x00\x00\x00\x00w") + 9
    ndim_at, type_at = at, at + 4 + 8
    b = bytearray(good); b[type_at:type_at + 4] = struct.pack("<I", Q.IQ2_XXS); cases.append((b, "IQ2_XXS"))
    b = bytearray(good); b[type_at:type_at + 4] = struct.pack("<I", 99); cases.append((b, "99, which ggml does not define"))
    b = bytearray(good); b[type_at:type_at + 4] = struct.pack("<I", Q.Q4_0); cases.append((b, "rows of 8 elements, not a multiple of its block of 32"))
    b = bytearray(good); b[ndim_at:ndim_at + 4] = struct.pack("<I", 9); cases.append((b, "9 dimensions"))
    b = bytearray(good); b[type_at + 4:type_at + 12] = struct.pack("<Q", 4); cases.append((b, "not a multiple of the alignment"))
    b = bytearray(good); b[type_at + 4:type_at + 12] = struct.pack("<Q", 2**20); cases.append((b, "runs past the end of the file"))
    for data, match in cases:
        with pytest.raises(ValueError, match=match):
            mx.load(corrupt(tmp_path, data), format="gguf")


def test_duplicates_nesting_and_overlaps_are_errors(tmp_path):
    w = gguf.GGUFWriter(str(tmp_path / "n.gguf"), "t")
    w.add_key_value("nested", [[1, 2], [3]], V.ARRAY, V.ARRAY)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    with pytest.raises(ValueError, match="'nested' is an array of arrays"):
        mx.load(str(tmp_path / "n.gguf"))
    # Two keys with one name: rename the second key of a file with keys "ka" and "kb".
    path = write(tmp_path / "keys.gguf", kv=[("add_uint32", "ka", 1), ("add_uint32", "kb", 2)])
    keys = open(path, "rb").read().replace(b"\x02\x00\x00\x00\x00\x00\x00\x00kb", b"\x02\x00\x00\x00\x00\x00\x00\x00ka")
    with pytest.raises(ValueError, match="metadata key 'ka' appears twice"):
        mx.load(corrupt(tmp_path, keys), format="gguf")
    # Two tensors with one name, and two tensors sharing bytes.
    path = write(tmp_path / "two.gguf", [("w", np.zeros(8, np.float32), None), ("v", np.zeros(8, np.float32), None)])
    two = bytearray(open(path, "rb").read())
    two = two.replace(b"\x01\x00\x00\x00\x00\x00\x00\x00v", b"\x01\x00\x00\x00\x00\x00\x00\x00w")
    with pytest.raises(ValueError, match="tensor 'w' appears twice"):
        mx.load(corrupt(tmp_path, two), format="gguf")
    two = bytearray(open(path, "rb").read())
    at = two.index(b"\x01\x00\x00\x00\x00\x00\x00\x00v") + 9 + 4 + 8 + 4
    two[at:at + 8] = struct.pack("<Q", 0)  # v's data at w's
    with pytest.raises(ValueError, match="overlap"):
        mx.load(corrupt(tmp_path, two), format="gguf")
