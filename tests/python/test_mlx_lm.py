"""mlx-lm, unmodified, on Tessera: its loader, its models and its generation loop.

Models come from tools/make_llm.py (random weights, a BPE tokenizer trained on the standard
library's sources); logits are checked against the float64 NumPy reference in llm_reference.py.
Other architectures of the Llama family are built by mlx-lm itself at a tiny size and checked
against a second algorithm: the whole prompt at once against one token at a time through
mlx-lm's KV cache.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from llm_reference import Reference

ROOT = Path(__file__).resolve().parents[2]
os.environ["HF_HUB_OFFLINE"] = "1"


@pytest.fixture(scope="module", autouse=True)
def mlx_shim():
    """`import mlx` gives Tessera for this module's tests; removed afterwards."""
    import tessera.mlx

    before = set(sys.modules)
    tessera.mlx.install()
    yield
    for name in set(sys.modules) - before:
        if name == "mlx" or name.startswith(("mlx.", "mlx_lm")):
            del sys.modules[name]


def make_model(folder, *args):
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_llm.py"), str(folder), *args],
                   check=True, capture_output=True, timeout=300)
    return folder


@pytest.fixture(scope="module")
def llama_f32(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("llama"), "--arch", "llama", "--scale", "2")


@pytest.fixture(scope="module")
def qwen2_bf16(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("qwen2"), "--arch", "qwen2", "--dtype", "bfloat16",
                      "--scale", "2", "--tie")


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def greedy_against_reference(folder, steps, tolerance):
    """mlx-lm's generate_step, greedy, `steps` tokens: each step's log-probabilities against
    the reference run on the same tokens (teacher-forced with what mlx-lm chose), and each
    choice against the reference's argmax wherever its top-2 gap is clear of the tolerance."""
    import mlx.core as mx
    from mlx_lm import load
    from mlx_lm.generate import generate_step

    model, tokenizer = load(str(folder))
    prompt = tokenizer.encode("def fibonacci(n):\n    return")
    chosen, logprobs = [], []
    for token, lp in generate_step(mx.array(prompt), model, max_tokens=steps):
        chosen.append(int(token))
        logprobs.append(np.array(lp.astype(mx.float32)))
    assert len(chosen) == steps
    ref = Reference(folder).logits(prompt + chosen[:-1])[len(prompt) - 1:]
    scale = np.abs(ref).max()
    ref_lp = log_softmax(ref)
    got = np.stack(logprobs)
    assert np.abs(got - ref_lp).max() <= tolerance * scale, np.abs(got - ref_lp).max() / scale
    top2 = np.sort(ref, axis=-1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 2 * tolerance * scale
    assert clear.sum() >= steps // 4  # the check below has teeth
    np.testing.assert_array_equal(np.array(chosen)[clear], ref.argmax(-1)[clear])


def test_llama_float32_generation_matches_the_float64_reference(llama_f32):
    greedy_against_reference(llama_f32, steps=32, tolerance=1e-4)


def test_qwen2_bfloat16_generation_matches_the_reference_of_its_rounded_weights(qwen2_bf16):
    # bf16 activations round at every op (8 bits of mantissa). On this model MLX 0.32.4's CPU
    # backend is 3.6e-2 of the largest logit away from the reference, Tessera 3.3e-2.
    greedy_against_reference(qwen2_bf16, steps=16, tolerance=5e-2)


def test_4bit_generation_matches_the_reference_of_the_dequantized_weights(tmp_path):
    # MLX's own 4-bit conversion (a committed fixture) of the generator's model; the reference
    # dequantizes its packed weights itself.
    source = make_model(tmp_path / "source", "--hidden", "64", "--mlp", "64", "--vocab", "320")
    folder = tmp_path / "q4"
    folder.mkdir()
    for f in (Path(__file__).parent / "data" / "mlx_lm_converted" / "q4g64").iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    for f in ("tokenizer.json", "tokenizer_config.json"):
        (folder / f).write_bytes((source / f).read_bytes())
    greedy_against_reference(folder, steps=32, tolerance=1e-4)


def test_batch_generate_gives_each_prompt_the_reference_tokens(llama_f32):
    from mlx_lm import batch_generate, load

    model, tokenizer = load(str(llama_f32))
    # Prompts of different lengths: the batch pads them on the left.
    prompts = [tokenizer.encode(p) for p in ("def fibonacci(n):", "import os\nimport sys\n", "x")]
    out = batch_generate(model, tokenizer, prompts, max_tokens=12, return_token_ids=True,
                         return_logprobs=True)
    reference = Reference(llama_f32)
    for prompt, ids, lps in zip(prompts, out.token_ids, out.logprobs):
        assert 1 <= len(ids) <= 12 and len(lps) == len(ids)
        ref = reference.logits(prompt + list(ids[:-1]))[len(prompt) - 1:]
        ref_lp = log_softmax(ref)
        np.testing.assert_array_equal(ids, ref.argmax(-1))
        np.testing.assert_allclose(lps, ref_lp[np.arange(len(ids)), ids],
                                   atol=1e-4 * np.abs(ref).max())


def test_kv_cache_updates_in_place_over_1000_decode_steps(llama_f32):
    # mlx-lm's KVCache writes each step's keys and values into its buffer with a slice update:
    # the update must reuse the buffer (the donation), so a step's extra memory does not grow
    # with the cache, except at the steps where mlx-lm itself grows the buffer (every 256).
    import mlx.core as mx
    from mlx_lm import load
    from mlx_lm.models.cache import make_prompt_cache

    model, _ = load(str(llama_f32))
    cache = make_prompt_cache(model)
    y = mx.array([[5]])
    extra = []
    for step in range(1000):
        mx.reset_peak_memory()
        before = mx.get_active_memory()
        y = mx.argmax(model(y, cache=cache)[:, -1], axis=-1)[None]
        mx.eval(y, [c.state for c in cache])
        extra.append(mx.get_peak_memory() - before)
    layer_cache = cache[0].keys.nbytes + cache[0].values.nbytes
    steady = [e for i, e in enumerate(extra) if i % 256 not in (0, 255)]
    # A copy of the buffer would add at least one layer's keys (half of layer_cache).
    assert max(steady) < layer_cache / 8, (max(steady), layer_cache)


def test_generate_command_runs_as_a_user_runs_it(llama_f32):
    script = Path(sys.executable).parent / "mlx_lm.generate"
    r = subprocess.run([sys.executable, "-m", "tessera.mlx", str(script), "--model", str(llama_f32),
                        "--prompt", "import os", "--max-tokens", "8", "--temp", "0"],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert r.returncode == 0, r.stderr
    assert "Generation: 8 tokens" in r.stdout, r.stdout


# Tiny configurations of mlx-lm architectures that MLX programs load (the Llama family and its
# relatives); every one of these failed to load or run on Tessera before MLX 0.32's API and its
# leniency in Module.update were matched.
TINY = dict(hidden_size=64, num_hidden_layers=2, intermediate_size=96, num_attention_heads=4,
            num_key_value_heads=2, rms_norm_eps=1e-5, vocab_size=128, head_dim=16)
ARCHITECTURES = {
    "llama": {},
    "llama3_1": {"model_type": "llama", "rope_scaling": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64}},
    "smollm3": {"no_rope_layer_interval": 2},
    "qwen3": {"max_position_embeddings": 512, "rope_theta": 10000.0, "tie_word_embeddings": True},
    "gpt_oss": {"num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": 4,
                "rope_theta": 10000, "layer_types": ["sliding_attention", "full_attention"]},
    "gemma3_text": {"query_pre_attn_scalar": 16, "sliding_window": 4, "sliding_window_pattern": 2,
                    "num_attention_heads": 4, "num_key_value_heads": 1},
    # A mixture of experts, 4-bit: mlx-lm's quantized expert layers call gather_qmm with
    # global_scale (None), which MLX 0.32 takes.
    "qwen3_moe-4bit": {"model_type": "qwen3_moe", "num_experts": 4, "num_experts_per_tok": 2,
                       "moe_intermediate_size": 32, "decoder_sparse_step": 1,
                       "mlp_only_layers": [], "norm_topk_prob": True, "rope_theta": 10000.0,
                       "max_position_embeddings": 256, "tie_word_embeddings": False},
}


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_architecture_loads_and_its_cached_decode_matches_the_full_forward(arch, tmp_path):
    import importlib

    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.models.cache import make_prompt_cache

    cfg = dict(TINY, model_type=arch)
    cfg.update(ARCHITECTURES[arch])
    quantized = arch.endswith("-4bit")
    module = importlib.import_module("mlx_lm.models." + cfg["model_type"])
    args = module.ModelArgs.from_dict(cfg)
    mx.random.seed(3)
    model = module.Model(args)
    # The round trip through a file exercises load_weights and update with the model's
    # non-array leaves (layer types, rope settings) in place.
    path = str(tmp_path / "weights.safetensors")
    mx.save_safetensors(path, dict(tree_flatten(model.parameters())))
    model = module.Model(args)
    model.load_weights(path)
    if quantized:
        import mlx.nn as nn

        nn.quantize(model, group_size=32, bits=4)

    tokens = mx.array(np.random.default_rng(1).integers(0, cfg["vocab_size"], size=(1, 10)))
    full = np.array(model(tokens))
    cache = make_prompt_cache(model)
    steps = [np.array(model(tokens[:, i:i + 1], cache=cache))[0, 0] for i in range(10)]
    assert np.isfinite(full).all()
    assert np.abs(full).max() > 1e-3
    np.testing.assert_allclose(np.stack(steps), full[0], rtol=1e-4, atol=1e-4 * np.abs(full).max())


def test_module_form_runs_mlx_lm_and_every_mlx_path_is_one_module(llama_f32):
    r = subprocess.run([sys.executable, "-m", "tessera.mlx", "-m", "mlx_lm", "generate", "--model",
                        str(llama_f32), "--prompt", "x", "--max-tokens", "3", "--temp", "0"],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert r.returncode == 0, r.stderr
    assert "Generation: 3 tokens" in r.stdout, r.stdout
    # Submodules imported by their mlx path are Tessera's module objects, not second copies.
    import mlx.nn as nn
    import mlx.nn.layers.distributed as dist
    import mlx.nn.layers.quantized as quantized
    import mlx.optimizers.optimizers as optimizers
    import tessera.nn.layers.distributed
    import tessera.optimizers

    assert dist is tessera.nn.layers.distributed
    assert quantized.QuantizedLinear is nn.QuantizedLinear
    assert optimizers.Adam is tessera.optimizers.Adam
    assert isinstance(nn.QuantizedLinear(64, 8), quantized.QuantizedLinear)
