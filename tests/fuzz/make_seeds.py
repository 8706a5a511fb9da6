"""Writes the seed inputs of the fuzz targets (tests/fuzz/corpus/<target>/seed-*):
small valid files from NumPy, the safetensors and gguf packages (the formats' own writers), a
few dtypes and shapes each, and hand-written texts and messages for the other parsers. Run once; the seeds are checked in, and libFuzzer's findings are
added beside them (`make fuzz`). Needs numpy, safetensors and gguf (build/venv has them)."""

import io
import os
import sys

import numpy as np

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(target, name, data):
    os.makedirs(os.path.join(HERE, target), exist_ok=True)
    with open(os.path.join(HERE, target, f"seed-{name}"), "wb") as f:
        f.write(data)


def arrays():
    rng = np.random.default_rng(0)
    return {"f32": rng.standard_normal((3, 4)).astype(np.float32),
            "f16": rng.standard_normal(5).astype(np.float16),
            "i64": np.arange(6, dtype=np.int64).reshape(2, 3),
            "u8": np.arange(7, dtype=np.uint8),
            "bool": np.array([True, False, True]),
            "scalar": np.float64(2.5),
            "empty": np.zeros((0, 3), np.float32)}


def main():
    for name, a in arrays().items():
        buf = io.BytesIO()
        np.save(buf, a)
        write("npy", name, buf.getvalue())
    fortran = io.BytesIO()
    np.save(fortran, np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)))
    write("npy", "fortran", fortran.getvalue())
    small = {k: v for k, v in arrays().items() if k in ("f32", "i64", "bool")}
    for compressed in (False, True):
        buf = io.BytesIO()
        (np.savez_compressed if compressed else np.savez)(buf, **small)
        write("npz", "deflate" if compressed else "stored", buf.getvalue())

    from safetensors.numpy import save

    tensors = {k: np.ascontiguousarray(v) for k, v in arrays().items() if k != "scalar"}
    write("safetensors", "dtypes", save(tensors, metadata={"format": "np"}))
    write("safetensors", "one", save({"w": np.ones((2, 2), np.float32)}))

    import gguf

    for name, extra in (("f32", {}), ("q8_0", {"q": True})):
        path = os.path.join(HERE, f".{name}.gguf")
        w = gguf.GGUFWriter(path, "llama")
        w.add_uint32("test.count", 3)
        w.add_string("test.name", "seed")
        w.add_array("test.list", [1, 2, 3])
        w.add_float32("test.eps", 1e-5)
        if extra:
            data = np.arange(64, dtype=np.float32).reshape(2, 32) / 7
            q = gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor("w", q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor("w", np.arange(8, dtype=np.float32).reshape(2, 4))
            w.add_tensor("b", np.arange(3, dtype=np.float16))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        with open(path, "rb") as f:
            write("gguf", name, f.read())
        os.remove(path)
    text_seeds()


def u32(v):
    return v.to_bytes(4, "big")


def text_seeds():
    """Hostfiles in each form the parsers accept; the launcher's and the agent's frames."""
    write("hostfile", "ring", b'[["127.0.0.1:5000"], ["127.0.0.1:5001", "10.0.0.2:5001"]]')
    write("hostfile", "ring-ipv6", b'[["[::1]:5000"], ["[fe80::1%eth0]:5001"]]')
    write("hostfile", "launcher-list",
          b'[{"ssh": "node0", "ips": ["10.0.0.1"]}, {"ssh": "node1", "ips": ["10.0.0.2"], '
          b'"rdma": [null, "mlx5_0"]}]')
    write("hostfile", "launcher-object",
          b'{"backend": "ring", "envs": ["A=1", "B=two"], "hosts": '
          b'[{"ssh": "a", "ips": ["192.168.1.2"]}, {"ssh": "b", "ips": []}]}')
    write("agent_frames", "launcher", b"D" + u32(5) + b"hello" + b"H" + b"S\x0f" + b"E")
    write("agent_frames", "agent", b"O" + u32(0) + u32(3) + b"hi\n" + b"R" + u32(1) + u32(4) +
          b"err\n" + b"X" + u32(1) + u32(3))
    write("agent_frames", "partial", b"D" + u32(100) + b"abc")
    write("rendezvous", "registration",
          b'{"tessera_rendezvous": 1, "rank": 1, "size": 2, "address": "10.0.0.2:40000", '
          b'"host": "node1", "nonce": "00ff"}')
    write("rendezvous", "answer", b'{"ok": true, "table": [["10.0.0.1:4000"], ["10.0.0.2:40000"]]}')
    write("config_inputs", "interfaces",
          b'[{"ifindex": 1, "ifname": "lo", "flags": ["LOOPBACK", "UP"], "operstate": "UNKNOWN", '
          b'"addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8}]}, '
          b'{"ifindex": 2, "ifname": "eth0", "flags": ["BROADCAST", "UP"], "operstate": "UP", '
          b'"addr_info": [{"family": "inet", "local": "10.0.0.2", "prefixlen": 24}, '
          b'{"family": "inet6", "local": "fe80::1", "prefixlen": 64, "scope": "link"}]}]'
          b'\n---\neth0 10000\nlo -1\n')
    write("config_inputs", "probe",
          b'{"reached": [{"target": "10.0.0.3", "host": 2, "via": "10.0.0.2"}, '
          b'{"target": "fe80::3%eth1", "host": 3, "via": "fe80::2%eth1"}]}')
    import struct

    def hello(client, server, index, kind, has_token):
        return struct.pack("<IHHIIIIIIQ32s32s", 0x5453484B, 2, has_token, client, server, index,
                           kind, 4, 0, 2, bytes(32), bytes(range(32)))

    header = struct.pack("<IBBBBQQQ", 0x54535244, 1, 10, 0, 1, 5, 7, 28)
    write("ring_wire", "ring", hello(0, 1, 0, 0, 0) + header)
    write("ring_wire", "control-token", hello(2, 1, 0, 2, 1) + header)
    write("ring_wire", "http", b"GET / HTTP/1.0\r\n\r\n")
    write("rendezvous", "refusal", b'{"ok": false, "error": "rank 0: two jobs share it"}')


if __name__ == "__main__":
    sys.exit(main())
