#!/usr/bin/env python3
"""Writes a small LLM with random weights in mlx-lm's folder layout.

    python tools/make_llm.py OUT [--arch llama|qwen2|ministral3] [--hidden 64] [--layers 2] [--heads 4]
                                 [--kv-heads 2] [--mlp 128] [--vocab 512] [--dtype float32|bfloat16]
                                 [--scale 1.0] [--seed 0] [--tie]

OUT gets config.json, model.safetensors (Hugging Face tensor names, which mlx-lm's loaders
read) with its model.safetensors.index.json (which mlx-lm's pipelined loader reads), tokenizer.json (a byte-level BPE trained with the `tokenizers` package on the Python
standard library's own sources, which every machine has) and tokenizer_config.json with a chat
template. `llama` is the Llama architecture; `qwen2` is Llama with biased q/k/v projections;
`ministral3` is Llama's weights with Llama 4's attention scaling, an architecture mlx-lm can run
pipelined as well as tensor-parallel (sharded_load with a pipeline group). Weights are normal with standard
deviation scale / sqrt(fan_in) (embeddings: scale), norms 1 + 0.1 * scale * normal, so a larger
scale spreads the logits (and widens the gaps between the top tokens, which sharded-generation
checks need). The result depends only on the arguments (and the standard library's text).
Needs numpy, tokenizers and tessera (to write bfloat16).
"""

import argparse
import glob
import json
import os
import sys

import numpy as np

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}</s>\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def corpus_files(max_bytes):
    """The standard library's top-level sources, in a fixed order, up to max_bytes of text."""
    stdlib = os.path.dirname(os.__file__)
    files, total = [], 0
    for path in sorted(glob.glob(os.path.join(stdlib, "*.py"))):
        files.append(path)
        total += os.path.getsize(path)
        if total >= max_bytes:
            break
    return files


def train_tokenizer(vocab_size):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    # About 200 bytes of text per vocabulary entry learns every merge asked for.
    tok.train(corpus_files(max(1 << 20, 200 * vocab_size)), trainer)
    return tok


def make_weights(args, vocab):
    """(name, float64 values) one tensor at a time, in a fixed order (a 1 B model never holds
    more than one float64 tensor)."""
    rng = np.random.default_rng(args.seed)
    head_dim = args.hidden // args.heads
    q_out, kv_out = args.heads * head_dim, args.kv_heads * head_dim

    def linear(out_dim, in_dim):
        return rng.standard_normal((out_dim, in_dim)) * (args.scale / np.sqrt(in_dim))

    def norm(dim):
        return 1.0 + 0.1 * args.scale * rng.standard_normal(dim)

    yield "model.embed_tokens.weight", rng.standard_normal((vocab, args.hidden)) * args.scale
    for i in range(args.layers):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", norm(args.hidden)
        yield p + "self_attn.q_proj.weight", linear(q_out, args.hidden)
        yield p + "self_attn.k_proj.weight", linear(kv_out, args.hidden)
        yield p + "self_attn.v_proj.weight", linear(kv_out, args.hidden)
        if args.arch == "qwen2":
            for name, dim in (("q", q_out), ("k", kv_out), ("v", kv_out)):
                yield p + f"self_attn.{name}_proj.bias", 0.1 * args.scale * rng.standard_normal(dim)
        yield p + "self_attn.o_proj.weight", linear(args.hidden, q_out)
        yield p + "post_attention_layernorm.weight", norm(args.hidden)
        yield p + "mlp.gate_proj.weight", linear(args.mlp, args.hidden)
        yield p + "mlp.up_proj.weight", linear(args.mlp, args.hidden)
        yield p + "mlp.down_proj.weight", linear(args.hidden, args.mlp)
    yield "model.norm.weight", norm(args.hidden)
    if not args.tie:
        yield "lm_head.weight", linear(vocab, args.hidden)


def config(args, vocab, tok):
    cfg = {
        "model_type": args.arch,
        "architectures": [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                           "ministral3": "Ministral3ForCausalLM"}[args.arch]],
        "hidden_size": args.hidden,
        "num_hidden_layers": args.layers,
        "intermediate_size": args.mlp,
        "num_attention_heads": args.heads,
        "num_key_value_heads": args.kv_heads,
        "head_dim": args.hidden // args.heads,
        "rms_norm_eps": 1e-5,
        "vocab_size": vocab,
        "rope_theta": 10000.0,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": bool(args.tie),
        "torch_dtype": args.dtype,
        "bos_token_id": tok.token_to_id("<s>"),
        "eos_token_id": tok.token_to_id("</s>"),
    }
    if args.arch == "qwen2":
        del cfg["head_dim"]  # qwen2 derives it from hidden_size / heads
    if args.arch == "ministral3":
        cfg["rope_parameters"] = {"rope_type": "default", "rope_theta": cfg.pop("rope_theta"),
                                  "llama_4_scaling_beta": 0.1,
                                  "original_max_position_embeddings": 64}
    return cfg


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--arch", choices=("llama", "qwen2", "ministral3"), default="llama")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--mlp", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tie", action="store_true", help="tie the output head to the embeddings")
    args = ap.parse_args(argv)
    for name in ("hidden", "layers", "heads", "kv_heads", "mlp"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.hidden % args.heads or args.heads % args.kv_heads:
        ap.error(f"--hidden ({args.hidden}) must be a multiple of --heads ({args.heads}) and "
                 f"--heads of --kv-heads ({args.kv_heads})")
    if args.vocab < 300:
        ap.error(f"--vocab must be at least 300 (256 bytes and the special tokens), "
                 f"got {args.vocab}")

    import tessera.core as mx

    os.makedirs(args.out, exist_ok=True)
    tok = train_tokenizer(args.vocab)
    vocab = tok.get_vocab_size()
    tok.save(os.path.join(args.out, "tokenizer.json"))
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>",
                   "eos_token": "</s>", "unk_token": "<unk>", "chat_template": CHAT_TEMPLATE,
                   "model_max_length": 4096}, f, indent=1)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config(args, vocab, tok), f, indent=1)
    dtype = getattr(mx, args.dtype)
    weights = {}
    for k, v in make_weights(args, vocab):
        weights[k] = mx.array(v.astype(np.float32)).astype(dtype)
        mx.eval(weights[k])
    mx.save_safetensors(os.path.join(args.out, "model.safetensors"), weights,
                        metadata={"format": "pt"})
    with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(v.nbytes for v in weights.values())},
                   "weight_map": {k: "model.safetensors" for k in sorted(weights)}}, f, indent=1)
    n = sum(v.size for v in weights.values())
    print(f"{args.out}: {args.arch}, {n} parameters ({args.dtype}), vocabulary {vocab}")


if __name__ == "__main__":
    sys.exit(main())
