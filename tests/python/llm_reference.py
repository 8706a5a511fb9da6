"""A float64 NumPy reference of the models tools/make_llm.py writes (Llama, Qwen2), and of their
quantized forms (`mlx_lm.convert -q`: affine 4 / 8-bit and mxfp4, dequantized here).

Reads the folder itself (its own safetensors reader and unpacking, after MLX's documented layout)
so that nothing of Tessera's is in the reference's path.
"""

import json
import os
import struct

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = memoryview(data)[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        raw = body[lo:hi]
        if info["dtype"] == "F32":
            values = np.frombuffer(raw, dtype="<f4").astype(np.float64)
        elif info["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            values = bits.view(np.float32).astype(np.float64)
        elif info["dtype"] in ("U32", "U8"):  # packed codes and mxfp4's exponents: kept as is
            values = np.frombuffer(raw, dtype="<u4" if info["dtype"] == "U32" else "u1")
        else:
            raise ValueError(f"{path}: {name} has dtype {info['dtype']}; "
                             "the reference reads F32, BF16, U32 and U8")
        out[name] = values.reshape(info["shape"])
    return out


# FP4 (E2M1) code -> value: sign bit 3, exponent bits 2..1, mantissa bit 0.
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def dequantize(packed, scales, biases, group_size, bits, mode):
    """MLX's layout: each uint32 holds 32 / bits codes, the first in the lowest bits; a row's codes
    in groups of group_size share one scale (and, affine, one bias): w = scale * q + bias; mxfp4:
    w = E2M1[q] * 2 ** (scale - 127), the scale an 8-bit exponent."""
    rows = packed.shape[0]
    per_word = 32 // bits
    shifts = np.arange(per_word, dtype=np.uint32) * bits
    q = (packed[..., None] >> shifts) & ((1 << bits) - 1)
    q = q.reshape(rows, -1, group_size)
    if mode == "affine":
        w = scales[..., None] * q + biases[..., None]
    elif mode == "mxfp4":
        w = E2M1[q] * np.exp2(scales.astype(np.float64) - 127)[..., None]
    else:
        raise ValueError(f"the reference dequantizes affine and mxfp4, not {mode}")
    return w.reshape(rows, -1)


class Reference:
    def __init__(self, folder):
        with open(os.path.join(folder, "config.json")) as f:
            self.cfg = json.load(f)
        self.w = read_safetensors(os.path.join(folder, "model.safetensors"))
        q = self.cfg.get("quantization")
        for name in [n for n in self.w if n.endswith(".scales")] if q else []:
            base = name[: -len(".scales")]
            self.w[base + ".weight"] = dequantize(
                self.w[base + ".weight"], self.w.pop(name),
                self.w.pop(base + ".biases", None), q["group_size"], q["bits"],
                q.get("mode", "affine"))

    def _norm(self, x, weight):
        eps = self.cfg["rms_norm_eps"]
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight

    def _rope(self, x):
        # x: (heads, L, D), rotating the two halves of each head (mlx-lm's non-traditional RoPE).
        d = x.shape[-1]
        freqs = self.cfg["rope_theta"] ** (-np.arange(0, d, 2) / d)
        angles = np.arange(x.shape[1])[:, None] * freqs[None, :]
        cos, sin = np.cos(angles), np.sin(angles)
        a, b = x[..., : d // 2], x[..., d // 2:]
        return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)

    def _linear(self, x, name):
        y = x @ self.w[name + ".weight"].T
        bias = self.w.get(name + ".bias")
        return y if bias is None else y + bias

    def logits(self, tokens):
        """Logits (L, vocab) of every position of one sequence."""
        c = self.cfg
        heads, kv_heads = c["num_attention_heads"], c["num_key_value_heads"]
        d = c["hidden_size"] // heads
        length = len(tokens)
        x = self.w["model.embed_tokens.weight"][np.asarray(tokens)]
        causal = np.triu(np.full((length, length), -np.inf), k=1)
        for i in range(c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            h = self._norm(x, self.w[p + "input_layernorm.weight"])
            def heads_of(name, n):
                return self._linear(h, p + name).reshape(length, n, d).transpose(1, 0, 2)

            q = heads_of("self_attn.q_proj", heads)
            k = heads_of("self_attn.k_proj", kv_heads)
            v = heads_of("self_attn.v_proj", kv_heads)
            q, k = self._rope(q), self._rope(k)
            rep = heads // kv_heads
            k, v = np.repeat(k, rep, axis=0), np.repeat(v, rep, axis=0)
            s = q @ k.transpose(0, 2, 1) / np.sqrt(d) + causal
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            o = (s @ v).transpose(1, 0, 2).reshape(length, heads * d)
            x = x + self._linear(o, p + "self_attn.o_proj")
            h = self._norm(x, self.w[p + "post_attention_layernorm.weight"])
            g = self._linear(h, p + "mlp.gate_proj")
            u = self._linear(h, p + "mlp.up_proj")
            x = x + self._linear(g / (1 + np.exp(-g)) * u, p + "mlp.down_proj")
        x = self._norm(x, self.w["model.norm.weight"])
        head = self.w.get("lm_head.weight", self.w["model.embed_tokens.weight"])
        return x @ head.T
