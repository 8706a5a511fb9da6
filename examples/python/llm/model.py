"""A Llama-architecture decoder written with tessera.nn, its parameters named as mlx-lm names
them (``model.layers.0.self_attn.q_proj.weight``, ...), so a checkpoint's model.safetensors and
config.json load in ``mlx_lm.load`` as they are."""

from dataclasses import asdict, dataclass

import tessera.core as mx
import tessera.nn as nn


@dataclass
class Config:
    vocab_size: int = 4096
    hidden_size: int = 256
    num_hidden_layers: int = 6
    num_attention_heads: int = 4
    num_key_value_heads: int = 4
    intermediate_size: int = 768
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    max_position_embeddings: int = 1024
    tie_word_embeddings: bool = True

    @property
    def head_dim(self):
        return self.hidden_size // self.num_attention_heads

    def to_hf(self, bos_token_id, eos_token_id, dtype="float32"):
        """config.json as mlx-lm (and Hugging Face) read it."""
        cfg = asdict(self)
        cfg.update(model_type="llama", architectures=["LlamaForCausalLM"], head_dim=self.head_dim,
                   torch_dtype=dtype, bos_token_id=bos_token_id, eos_token_id=eos_token_id)
        return cfg

    @classmethod
    def from_hf(cls, cfg):
        return cls(**{k: cfg[k] for k in cls.__dataclass_fields__})


class Attention(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.n_heads, self.n_kv = c.num_attention_heads, c.num_key_value_heads
        self.scale = c.head_dim ** -0.5
        self.q_proj = nn.Linear(c.hidden_size, self.n_heads * c.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, self.n_kv * c.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, self.n_kv * c.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_heads * c.head_dim, c.hidden_size, bias=False)
        self.rope = nn.RoPE(c.head_dim, traditional=False, base=c.rope_theta)

    def __call__(self, x):
        b, length, _ = x.shape
        q = self.q_proj(x).reshape(b, length, self.n_heads, -1).transpose(0, 2, 1, 3)
        k = self.k_proj(x).reshape(b, length, self.n_kv, -1).transpose(0, 2, 1, 3)
        v = self.v_proj(x).reshape(b, length, self.n_kv, -1).transpose(0, 2, 1, 3)
        q, k = self.rope(q), self.rope(k)
        out = mx.fast.scaled_dot_product_attention(q, k, v, scale=self.scale, mask="causal")
        return self.o_proj(out.transpose(0, 2, 1, 3).reshape(b, length, -1))


class MLP(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def __call__(self, x):
        return self.down_proj(nn.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.self_attn = Attention(c)
        self.mlp = MLP(c)
        self.input_layernorm = nn.RMSNorm(c.hidden_size, eps=c.rms_norm_eps)
        self.post_attention_layernorm = nn.RMSNorm(c.hidden_size, eps=c.rms_norm_eps)

    def __call__(self, x):
        h = x + self.self_attn(self.input_layernorm(x))
        return h + self.mlp(self.post_attention_layernorm(h))


class Decoder(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = [Block(c) for _ in range(c.num_hidden_layers)]
        self.norm = nn.RMSNorm(c.hidden_size, eps=c.rms_norm_eps)

    def __call__(self, tokens):
        x = self.embed_tokens(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class Llama(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.config = c
        self.model = Decoder(c)
        if not c.tie_word_embeddings:
            self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)

    def __call__(self, tokens):
        h = self.model(tokens)
        if self.config.tie_word_embeddings:
            return self.model.embed_tokens.as_linear(h)
        return self.lm_head(h)


def init_weights(model: Llama, seed: int):
    """GPT-2's initialisation: normal(0, 0.02) everywhere, the projections into the residual
    stream (o_proj, down_proj) scaled down by sqrt(2 * layers); norms at 1."""
    import math

    import tessera.utils as utils

    residual_std = 0.02 / math.sqrt(2 * model.config.num_hidden_layers)
    flat = utils.tree_flatten(model.parameters())
    keys = mx.random.split(mx.random.key(seed), len(flat))
    new = []
    for i, (name, p) in enumerate(flat):
        if name.endswith("norm.weight"):
            new.append((name, mx.ones_like(p)))
            continue
        std = residual_std if name.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
        new.append((name, std * mx.random.normal(p.shape, key=keys[i])))
    model.update(utils.tree_unflatten(new))


def parameter_count(model):
    import tessera.utils as utils

    return sum(p.size for _, p in utils.tree_flatten(model.parameters()))
