# Writes mlx_gguf.npz beside this file: a GGUF file made with llama.cpp's `gguf` package (plain
# tensors, Q4_0 / Q4_1 / Q8_0 from its quantizers, random Q2_K / Q4_K / Q6_K blocks, metadata of
# every value type but FLOAT64, after which MLX 0.32.4 misreads the rest of the file and crashes)
# and what MLX's CPU package (mlx[cpu]) loads from it. The tests read the file and never need
# MLX. Run: python make_mlx_gguf.py
import os
import tempfile

import gguf
import numpy as np
import mlx.core as mx

Q = gguf.GGMLQuantizationType
# Byte offsets of the float16 scale fields in each block type (kept valid, not random).
HALF_FIELDS = {Q.Q2_K: (80, 82), Q.Q4_K: (0, 2), Q.Q6_K: (208,)}

rng = np.random.default_rng(21)


def random_blocks(qtype, rows, blocks):
    block, nbytes = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, (rows, blocks, nbytes), dtype=np.uint8)
    for off in HALF_FIELDS[qtype]:
        raw[..., off:off + 2] = rng.uniform(1e-3, 0.1, (rows, blocks)).astype(np.float16)[..., None].view(np.uint8)
    return raw.reshape(rows, blocks * nbytes)


path = os.path.join(tempfile.mkdtemp(), "mlx.gguf")
w = gguf.GGUFWriter(path, "tessera-test")
w.add_uint8("m.u8", 200)
w.add_int16("m.i16", -1234)
w.add_uint32("m.u32", 4000000000)
w.add_int64("m.i64", -(2**40))
w.add_float32("m.f32", 0.1)
w.add_bool("m.bool", True)
w.add_string("m.str", "héllo")
w.add_key_value("m.arr_i32", [1, -2, 3], gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.INT32)
w.add_key_value("m.arr_f32", [0.5, 1.5], gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.FLOAT32)
w.add_array("m.arr_str", ["a", "bc", ""])
w.add_tensor("plain.f32", rng.standard_normal((3, 5)).astype(np.float32))
w.add_tensor("plain.f16", rng.standard_normal((2, 3, 4)).astype(np.float16))
w.add_tensor("plain.i32", rng.integers(-1000, 1000, (7,), dtype=np.int32))
w.add_tensor("plain.i8", rng.integers(-128, 128, (4, 2), dtype=np.int8))
x = rng.standard_normal((4, 64)).astype(np.float32) * 3
for name, qt in (("q40", Q.Q4_0), ("q41", Q.Q4_1), ("q80", Q.Q8_0)):
    w.add_tensor(f"{name}.weight", gguf.quants.quantize(x, qt), raw_dtype=qt)
for name, qt in (("q2k", Q.Q2_K), ("q4k", Q.Q4_K), ("q6k", Q.Q6_K)):
    w.add_tensor(f"{name}.weight", random_blocks(qt, 3, 2), raw_dtype=qt)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()

arrays, meta = mx.load(path, return_metadata=True)
out = {"gguf_bytes": np.frombuffer(open(path, "rb").read(), np.uint8)}
for k, v in arrays.items():
    out["a:" + k] = np.array(v)
for k, v in meta.items():
    out["m:" + k] = np.array(v) if isinstance(v, (mx.array, list)) else np.array(v)
np.savez_compressed(os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlx_gguf.npz"), **out)
print(sorted(out))
