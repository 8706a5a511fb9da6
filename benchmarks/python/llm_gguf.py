"""GGUF files of a tools/make_llm.py model for llama.cpp (`make bench-llm`): the same weights,
written with the `gguf` package under llama.cpp's tensor names, then quantized by llama.cpp itself
(llama_model_quantize through llama-cpp-python) to Q4_0 and Q4_K_M.

Facts from llama.cpp's convert_hf_to_gguf.py (read, not copied): a Llama model's q and k
projections are stored with the two rotary halves of each head interleaved (its rope pairs
neighbouring features, Hugging Face's rotates halves), the tokenizer of a byte-level BPE is
"gpt2" with its merges, norms stay float32.
"""

import json
import os
import struct

import numpy as np


def read_safetensors_raw(path):
    """name -> (dtype string, shape, bytes) without converting anything."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        body = f.read()
    out = {}
    for name, info in header.items():
        if name != "__metadata__":
            lo, hi = info["data_offsets"]
            out[name] = (info["dtype"], info["shape"], body[lo:hi])
    return out


def interleave_rotary_halves(w, heads):
    """(heads * head_dim, k) rows from Hugging Face's half-split rotary layout to llama.cpp's
    pairwise one."""
    rows = w.shape[0]
    return (w.reshape(heads, 2, rows // heads // 2, *w.shape[1:]).swapaxes(1, 2)
            .reshape(w.shape))


def write_bf16_gguf(folder, path):
    import gguf

    cfg = json.load(open(os.path.join(folder, "config.json")))
    tok = json.load(open(os.path.join(folder, "tokenizer.json")))
    tensors = read_safetensors_raw(os.path.join(folder, "model.safetensors"))
    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    head_dim = cfg["hidden_size"] // heads

    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_vocab_size(cfg["vocab_size"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)

    vocab = tok["model"]["vocab"]
    tokens = [None] * len(vocab)
    for text, i in vocab.items():
        tokens[i] = text
    special = {t["id"] for t in tok.get("added_tokens", [])}
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL
                       for i in range(len(tokens))])
    w.add_token_merges(merges)
    w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"])

    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight":
             "output_norm.weight", "lm_head.weight": "output.weight"}
    per_layer = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q",
                 "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
                 "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
                 "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
                 "mlp.down_proj": "ffn_down"}
    for i in range(cfg["num_hidden_layers"]):
        for hf, ll in per_layer.items():
            names[f"model.layers.{i}.{hf}.weight"] = f"blk.{i}.{ll}.weight"
    for name, (dtype, shape, raw) in tensors.items():
        assert dtype in ("BF16", "F32"), (name, dtype)
        data = np.frombuffer(raw, dtype=np.uint16 if dtype == "BF16" else np.float32).reshape(shape)
        if name.endswith("q_proj.weight"):
            data = interleave_rotary_halves(data, heads)
        elif name.endswith("k_proj.weight"):
            data = interleave_rotary_halves(data, kv_heads)
        if len(shape) == 1:  # norms: float32, as llama.cpp's converter keeps them
            if dtype == "BF16":
                data = (data.astype(np.uint32) << 16).view(np.float32)
            w.add_tensor(names[name], np.ascontiguousarray(data))
        elif dtype == "BF16":
            w.add_tensor(names[name], np.ascontiguousarray(data), raw_shape=data.shape,
                         raw_dtype=gguf.GGMLQuantizationType.BF16)
        else:
            w.add_tensor(names[name], np.ascontiguousarray(data))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quantize(src, dst, kind):
    """llama.cpp's own quantizer: kind "Q4_0" or "Q4_K_M"."""
    import ctypes

    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = {"Q4_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0,
                    "Q4_K_M": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M}[kind]
    params.nthread = 2
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params))
    if rc != 0:
        raise RuntimeError(f"llama_model_quantize({src} -> {kind}) returned {rc}")
