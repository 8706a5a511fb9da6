"""Array IO: files written by NumPy and by the safetensors package load bit for bit, ours load
in them, and corrupt or truncated files are ValueErrors naming the file."""

import io
import os

import numpy as np
import pytest

import tessera.core as mx

DTYPES = [np.bool_, np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64,
          np.int64, np.float16, np.float32, np.float64, np.complex64]


def sample(dt, shape=(3, 4)):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape) * 50
    if np.issubdtype(dt, np.complexfloating):
        return (x + 1j * x[::-1]).astype(dt)
    return x.astype(dt)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_npy_round_trips_with_numpy_bit_for_bit(tmp_path, dt):
    x = sample(dt)
    np.save(tmp_path / "np.npy", x)
    a = mx.load(str(tmp_path / "np.npy"))
    assert a.shape == x.shape
    np.testing.assert_array_equal(np.asarray(a.astype(a.dtype)), x)
    mx.save(str(tmp_path / "ours"), a)  # the extension is added
    y = np.load(tmp_path / "ours.npy")
    assert y.dtype == x.dtype and y.tobytes() == x.tobytes()


def test_npy_fortran_order_and_big_endian_from_numpy(tmp_path):
    x = np.asfortranarray(sample(np.float32, (3, 5)))
    np.save(tmp_path / "f.npy", x)
    np.testing.assert_array_equal(np.asarray(mx.load(str(tmp_path / "f.npy"))), x)
    b = sample(np.int32, (2, 3)).astype(">i4")
    np.save(tmp_path / "b.npy", b)
    np.testing.assert_array_equal(np.asarray(mx.load(str(tmp_path / "b.npy"))), b.astype("<i4"))


@pytest.mark.parametrize("compressed", [False, True])
def test_npz_both_ways(tmp_path, compressed):
    xs = {"a": sample(np.float32), "b": sample(np.int64, (5,)), "c": np.array(3.5, np.float16)}
    (np.savez_compressed if compressed else np.savez)(tmp_path / "np.npz", **xs)
    loaded = mx.load(str(tmp_path / "np.npz"))
    assert set(loaded) == set(xs)
    for k in xs:
        np.testing.assert_array_equal(np.asarray(loaded[k]), xs[k])
    (mx.savez_compressed if compressed else mx.savez)(str(tmp_path / "ours.npz"),
                                                      mx.array([1, 2]), w=loaded["a"])
    with np.load(tmp_path / "ours.npz") as z:
        assert sorted(z.files) == ["arr_0", "w"]
        np.testing.assert_array_equal(z["arr_0"], [1, 2])
        np.testing.assert_array_equal(z["w"], xs["a"])


def test_safetensors_both_ways_with_metadata(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    xs = {"w": sample(np.float32), "i": sample(np.int32, (7,)), "h": sample(np.float16, (2, 2))}
    st.save_file(xs, str(tmp_path / "ref.safetensors"), metadata={"format": "np"})
    arrays, meta = mx.load(str(tmp_path / "ref.safetensors"), return_metadata=True)
    assert meta == {"format": "np"}
    for k in xs:
        np.testing.assert_array_equal(np.asarray(arrays[k]), xs[k])
    mx.save_safetensors(str(tmp_path / "ours.safetensors"), arrays, metadata={"epoch": "3"})
    back = st.load_file(str(tmp_path / "ours.safetensors"))
    for k in xs:
        assert back[k].dtype == xs[k].dtype and back[k].tobytes() == xs[k].tobytes()
    from safetensors import safe_open

    with safe_open(str(tmp_path / "ours.safetensors"), framework="np") as f:
        assert f.metadata() == {"epoch": "3"}
    # bfloat16 (NumPy has no such dtype, so the safetensors package cannot read it as NumPy):
    # our own round trip, and the raw bytes are the high halves of the float32 values.
    bf = mx.array([1.5, -2.25], dtype=mx.bfloat16)
    mx.save_safetensors(str(tmp_path / "bf.safetensors"), {"bf": bf})
    mine = mx.load(str(tmp_path / "bf.safetensors"))
    assert mine["bf"].dtype == mx.bfloat16 and mine["bf"].astype(mx.float32).tolist() == [1.5, -2.25]
    raw = (tmp_path / "bf.safetensors").read_bytes()[-4:]
    halves = np.frombuffer(np.array([1.5, -2.25], np.float32).tobytes(), np.uint16)[1::2]
    assert raw == halves.tobytes()


def test_file_objects_and_pathlike(tmp_path):
    buf = io.BytesIO()
    mx.save(buf, mx.arange(4))
    np.testing.assert_array_equal(np.load(io.BytesIO(buf.getvalue())), np.arange(4))
    buf.seek(0)
    assert mx.load(buf, format="npy").tolist() == [0, 1, 2, 3]
    mx.savez(tmp_path / "p.npz", x=mx.ones(2))  # os.PathLike
    assert mx.load(tmp_path / "p.npz")["x"].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="format"):
        mx.load(io.BytesIO(b""))
    mx.savez(str(tmp_path / "f.npz"), y=mx.arange(3))
    with open(tmp_path / "f.npz", "rb") as f:  # the extension comes from the file's name
        assert mx.load(f)["y"].tolist() == [0, 1, 2]


def test_corrupt_and_truncated_files_are_value_errors_naming_the_file(tmp_path):
    x = sample(np.float32, (64, 64))
    np.save(tmp_path / "ok.npy", x)
    good = (tmp_path / "ok.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(good[: len(good) // 2])
    with pytest.raises(ValueError, match="cut.npy"):
        mx.load(str(tmp_path / "cut.npy"))
    st = pytest.importorskip("safetensors.numpy")
    st.save_file({"t": x}, str(tmp_path / "ok.safetensors"))
    raw = bytearray((tmp_path / "ok.safetensors").read_bytes())
    hlen = int.from_bytes(raw[:8], "little")
    header = raw[8:8 + hlen].decode()
    bad = header.replace(str(x.nbytes), str(x.nbytes * 4))  # offsets past the end of the file
    (tmp_path / "bad.safetensors").write_bytes(
        len(bad).to_bytes(8, "little") + bad.encode() + raw[8 + hlen:])
    with pytest.raises(ValueError, match="bad.safetensors"):
        mx.load(str(tmp_path / "bad.safetensors"))
    with pytest.raises(ValueError, match="No such file|cannot open|missing"):
        mx.load(str(tmp_path / "missing.npy"))
    with pytest.raises(ValueError, match="unknown format"):
        mx.load(str(tmp_path / "x.bin"))


def test_file_loads_read_when_evaluated_and_their_buffer_is_donated(tmp_path):
    x = sample(np.float32, (256, 64))  # 64 KiB
    np.save(tmp_path / "x.npy", x)
    f = str(tmp_path / "x.npy")
    scale = mx.array(2.0)
    mx.eval(scale)
    y = mx.load(f)
    mx.eval(y)
    del y
    mx.synchronize()
    mx.reset_peak_memory()
    base = mx.get_active_memory()
    y = mx.load(f)
    mx.eval(y)
    load_only = mx.get_peak_memory() - base
    del y
    mx.reset_peak_memory()
    y = mx.load(f) * scale  # the read's buffer becomes the product's
    mx.eval(y)
    assert mx.get_peak_memory() - base == load_only >= x.nbytes
    np.testing.assert_array_equal(np.asarray(y), x * 2)
    # Read on the stream given, from the file load() opened (its name may go meanwhile).
    s = mx.new_stream(mx.cpu)
    z = mx.load(f, stream=s)
    os.remove(f)
    np.testing.assert_array_equal(np.asarray(z + 1), x + 1)


def test_random_corruptions_never_crash(tmp_path):
    rng = np.random.default_rng(3)
    np.savez_compressed(tmp_path / "z.npz", a=sample(np.float32), b=sample(np.int8, (9,)))
    good = (tmp_path / "z.npz").read_bytes()
    for i in range(300):
        data = bytearray(good)
        for _ in range(rng.integers(1, 8)):
            data[rng.integers(len(data))] = rng.integers(256)
        if rng.random() < 0.3:
            data = data[: rng.integers(len(data))]
        p = tmp_path / f"m{i % 4}.npz"
        p.write_bytes(bytes(data))
        try:
            mx.load(str(p))
        except ValueError:
            pass
