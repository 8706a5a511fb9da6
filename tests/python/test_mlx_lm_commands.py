"""mlx-lm's commands on Tessera, started the way its users start them: the per-environment opt-in
(`tessera mlx enable`), `tessera launch` with modules and console scripts, sharded generation on
2 ranks and 2 simulated hosts, the server, convert -q, LoRA / DoRA / full fine-tuning with fuse,
data-parallel LoRA, and prompt caches.

Models come from tools/make_llm.py; values are checked against the float64 NumPy reference
(llm_reference.py), MLX's own converted files (tests/python/data/mlx_lm_converted, made with
mlx[cpu] by make_mlx_lm_converted.py), or a second run of a different kind (one rank against
two, the whole prompt against a cached one). Nothing reaches a model hub (HF_HUB_OFFLINE=1).
"""

import json
import os
import re
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
import venv
from pathlib import Path

import numpy as np
import pytest

from llm_reference import Reference, read_safetensors

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # this environment's console scripts: tessera, mlx_lm.*
DATA = Path(__file__).resolve().parent / "data"
SHARDED = Path(__file__).resolve().parent / "programs" / "sharded_generate.py"
ENV = dict(os.environ, HF_HUB_OFFLINE="1", PATH=f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}")


def run(args, timeout=300, **kw):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, env=kw.pop("env", ENV), **kw)


def mlx(*args, timeout=300):
    """`python -m tessera.mlx ARGS` (a console script name, a file, or -m module)."""
    return run([sys.executable, "-m", "tessera.mlx", *args], timeout=timeout)


def launch(*args, timeout=300):
    return run([BIN / "tessera", "launch", *args], timeout=timeout)


def make_model(folder, *args):
    run([sys.executable, ROOT / "tools" / "make_llm.py", folder, *args]).check_returncode()
    return folder


def rank_lines(out, rank):
    prefix = f"[{rank}] "
    return [line[len(prefix):] for line in out.splitlines() if line.startswith(prefix)]


def generated_text(stdout):
    """The text mlx_lm.generate prints between its two ==========  lines."""
    lines = stdout.splitlines()
    marks = [i for i, line in enumerate(lines) if line == "=" * 10]
    assert len(marks) >= 2, stdout
    return "\n".join(lines[marks[0] + 1:marks[1]])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    # scale 3 spreads the logits: greedy choices are far from ties.
    return make_model(tmp_path_factory.mktemp("tiny"), "--scale", "3")


# --- started the way users start it ---------------------------------------------------------


def test_enable_lets_console_scripts_import_mlx_and_disable_undoes_it(tiny, tmp_path):
    # A second environment that sees this one's packages (as if Tessera and mlx-lm were
    # installed there), with a console script pip would write for it.
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=False)
    py = env_dir / "bin" / "python"
    site = Path(run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
                .stdout.strip())
    installed = site / "tessera_under_test.pth"
    installed.write_text(sysconfig.get_paths()["purelib"] + "\n")
    script = env_dir / "bin" / "mlx_lm.generate"
    script.write_text(f"#!{py}\nimport sys\nfrom mlx_lm.generate import main\nsys.exit(main())\n")
    script.chmod(0o755)
    gen = [script, "--model", tiny, "--prompt", "def", "--max-tokens", "6", "--temp", "0"]

    r = run(gen)
    assert r.returncode != 0 and "No module named 'mlx'" in r.stderr, r.stderr
    r = run([py, "-m", "tessera._cli", "mlx", "enable"])
    assert r.returncode == 0 and "enabled" in r.stdout, r.stderr
    assert (site / "tessera-mlx.pth").exists()

    # Lazy: a Python that does not import mlx imports nothing of Tessera's.
    r = run([py, "-c", "import sys; print(sorted(m for m in sys.modules if "
                       "m.startswith(('tessera', 'mlx'))))"])
    assert r.stdout.strip() == "[]" and r.stderr == "", r.stderr
    # Every mlx path is Tessera's very module.
    r = run([py, "-c", "import mlx.core as mx, mlx.nn.layers.linear as L, tessera.core, tessera.nn;"
                       "print(mx is tessera.core, L.Linear is tessera.nn.Linear)"])
    assert r.stdout.split() == ["True", "True"], r.stderr
    # The console script runs and prints what `python -m tessera.mlx` makes it print.
    r = run(gen)
    assert r.returncode == 0, r.stderr
    assert generated_text(r.stdout) == generated_text(mlx("mlx_lm.generate", *gen[1:]).stdout)
    # ... and under `tessera launch` without --mlx, on 2 ranks.
    r = launch("-n", "2", *gen)
    assert r.returncode == 0, r.stderr
    assert "Generation: 6 tokens" in "\n".join(rank_lines(r.stdout, 0))
    assert "Generation: 6 tokens" in "\n".join(rank_lines(r.stdout, 1))
    assert "enabled" in run([py, "-m", "tessera._cli", "mlx", "status"]).stdout
    # ... and on 2 simulated hosts, where the remote one reaches the script over ssh.
    if os.geteuid() == 0 and simhosts_path().exists():
        r = run([simhosts_path(), "2", "--", BIN / "tessera", "launch", "--hosts", "node0,node1",
                 *gen])
        assert r.returncode == 0, r.stderr
        assert "Generation: 6 tokens" in "\n".join(rank_lines(r.stdout, 1))

    # A real MLX steps the hook aside (and `enable` refuses, naming it).
    fake = tmp_path / "real" / "mlx"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "core.py").write_text("REAL = True\n")
    with_real = dict(ENV, PYTHONPATH=str(fake.parent))
    r = run([py, "-c", "import mlx.core as mx; print(getattr(mx, 'REAL', False))"], env=with_real)
    assert r.stdout.strip() == "True", r.stderr
    r = run([py, "-m", "tessera._cli", "mlx", "enable"], env=with_real)
    assert r.returncode == 1 and "a real MLX is installed" in r.stderr and str(fake) in r.stderr

    # Tessera gone: the hook's line does nothing, silently.
    installed.unlink()
    r = run([py, "-c", "print('ok')"])
    assert r.stdout.strip() == "ok" and r.stderr == "", r.stderr
    installed.write_text(sysconfig.get_paths()["purelib"] + "\n")

    r = run([py, "-m", "tessera._cli", "mlx", "disable"])
    assert r.returncode == 0 and not (site / "tessera-mlx.pth").exists()
    assert "No module named 'mlx'" in run(gen).stderr


def test_launch_runs_modules_and_console_scripts_with_mlx(tiny):
    args = ["--model", tiny, "--prompt", "def", "--max-tokens", "5", "--temp", "0"]
    expected = generated_text(mlx("mlx_lm.generate", *args).stdout)
    for form in (["-m", "mlx_lm", "generate"], ["mlx_lm.generate"]):
        r = launch("--mlx", "-n", "2", *form, *args)
        assert r.returncode == 0, r.stderr
        for rank in (0, 1):
            assert generated_text("\n".join(rank_lines(r.stdout, rank))) == expected
    r = launch("--mlx", "-n", "1", "no_such_command")
    assert r.returncode != 0 and "'no_such_command' is neither a file" in r.stderr


# --- sharded generation ---------------------------------------------------------------------


def sharded_result(out, rank=0):
    lines = rank_lines(out, rank) if rank is not None else out.splitlines()
    return json.loads(next(line for line in lines if line.startswith("{")))


@pytest.fixture(scope="module")
def ministral3(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("ministral3"), "--arch", "ministral3", "--scale", "3")


@pytest.mark.parametrize("kind", ["tensor", "pipeline"])
def test_sharded_generation_on_two_ranks_gives_the_one_rank_tokens(kind, tiny, ministral3):
    model, flags = (tiny, []) if kind == "tensor" else (ministral3, ["--pipeline"])
    one = mlx(SHARDED, model, *flags)
    assert one.returncode == 0, one.stderr
    alone = sharded_result(one.stdout, rank=None)
    assert alone["size"] == 1 and len(alone["tokens"]) == 16
    assert min(alone["gaps"]) > 1e-3  # no near tie that float rounding could flip
    two = launch("--mlx", "-n", "2", SHARDED, model, *flags)
    assert two.returncode == 0, two.stderr
    assert "terminate called" not in two.stderr
    shared = sharded_result(two.stdout)
    assert shared["size"] == 2 and shared["tokens"] == alone["tokens"]
    for rank in (0, 1):
        assert f"rank {rank} done" in rank_lines(two.stdout, rank)


def simhosts_path():
    return Path(os.environ.get("TESSERA_TEST_PROGRAMS", ROOT / "build" / "py")) / "simhosts"


def simhosts():
    if os.geteuid() != 0 or not simhosts_path().exists():
        pytest.skip("needs root and the simhosts program of the test build (make test builds it)")
    return simhosts_path()


def test_launch_forms_across_two_simulated_hosts(tiny):
    # The remote host's ssh session has no virtual environment on PATH: the console script is
    # found among the interpreter's own scripts there.
    args = ["--model", tiny, "--prompt", "def", "--max-tokens", "4", "--temp", "0"]
    expected = generated_text(mlx("mlx_lm.generate", *args).stdout)
    for form in (["-m", "mlx_lm", "generate"], ["mlx_lm.generate"]):
        r = run([simhosts(), "2", "--", BIN / "tessera", "launch", "--hosts", "node0,node1",
                 "--mlx", *form, *args], env=dict(ENV, PATH="/usr/bin:/bin"))
        assert r.returncode == 0, r.stderr
        for rank in (0, 1):
            assert generated_text("\n".join(rank_lines(r.stdout, rank))) == expected


@pytest.mark.parametrize("kind", ["tensor", "pipeline"])
def test_sharded_generation_across_two_simulated_hosts(kind, tiny, ministral3):
    model, flags = (tiny, []) if kind == "tensor" else (ministral3, ["--pipeline"])
    alone = sharded_result(mlx(SHARDED, model, *flags).stdout, rank=None)
    r = run([simhosts(), "2", "--", BIN / "tessera", "launch", "--hosts", "node0,node1", "--mlx",
             SHARDED, model, *flags], timeout=300)
    assert r.returncode == 0, r.stderr
    assert sharded_result(r.stdout)["tokens"] == alone["tokens"]
    assert "rank 1 done" in rank_lines(r.stdout, 1)


# --- the server -----------------------------------------------------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=60)


def greedy_reference(folder, prompt, steps):
    """Greedy tokens and their log-probabilities from the float64 reference."""
    ref, tokens, logprobs = Reference(folder), list(prompt), []
    for _ in range(steps):
        logits = ref.logits(tokens)[-1]
        lp = logits - logits.max() - np.log(np.exp(logits - logits.max()).sum())
        top2 = np.sort(logits)[-2:]
        assert top2[1] - top2[0] > 1e-4 * np.abs(logits).max()  # clear of float32 rounding
        tokens.append(int(lp.argmax()))
        logprobs.append(float(lp.max()))
    return tokens[len(prompt):], logprobs


def test_server_answers_chat_completions_streaming_and_not(tiny):
    from transformers import AutoTokenizer

    messages = [{"role": "user", "content": "def quicksort(items):"}]
    prompt = AutoTokenizer.from_pretrained(str(tiny)).apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True)
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    want, want_lp = greedy_reference(tiny, prompt, 8)

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "tessera.mlx", "mlx_lm.server", "--model",
                               str(tiny), "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        body = {"model": "default_model", "messages": messages, "max_tokens": 8,
                "temperature": 0, "logprobs": True}
        for _ in range(600):  # up to 60 s for the server to listen
            try:
                answer = json.load(post(port, body))
                break
            except OSError:
                assert server.poll() is None, server.stderr.read()
                time.sleep(0.1)
        else:
            pytest.fail("mlx_lm.server did not answer within 60 s")
        choice = answer["choices"][0]
        got = choice["logprobs"]["content"]
        assert [t["id"] for t in got] == want
        np.testing.assert_allclose([t["logprob"] for t in got], want_lp, atol=1e-3)
        assert answer["usage"]["completion_tokens"] == 8
        assert answer["usage"]["prompt_tokens"] == len(prompt)

        deltas = []
        with post(port, dict(body, stream=True, logprobs=False)) as r:
            for line in r:
                line = line.decode().strip()
                if line.startswith("data: ") and line != "data: [DONE]":
                    for c in json.loads(line[6:])["choices"]:
                        deltas.append(c.get("delta", {}).get("content") or "")
        assert len([d for d in deltas if d]) >= 2  # streamed in pieces
        assert "".join(deltas) == choice["message"]["content"]
    finally:
        server.terminate()
        server.wait(timeout=30)


# --- convert -q -----------------------------------------------------------------------------

CONVERT_FORMS = {"q4g64": ["--q-bits", "4", "--q-group-size", "64"],
                 "q8g32": ["--q-bits", "8", "--q-group-size", "32"],
                 "mxfp4": ["--q-mode", "mxfp4"]}


@pytest.fixture(scope="module")
def fixture_source(tmp_path_factory):
    # The float32 model MLX's files were converted from (make_mlx_lm_converted.py).
    return make_model(tmp_path_factory.mktemp("fx"), "--hidden", "64", "--mlp", "64", "--vocab", "320")


@pytest.mark.parametrize("form", sorted(CONVERT_FORMS))
def test_convert_quantizes_as_mlx_does_and_mlx_files_give_the_reference(form, fixture_source,
                                                                       tmp_path):
    out = tmp_path / form
    r = mlx("-m", "mlx_lm", "convert", "--hf-path", fixture_source, "--mlx-path", out, "-q",
            *CONVERT_FORMS[form])
    assert r.returncode == 0, r.stderr
    mine = read_safetensors(out / "model.safetensors")
    theirs = read_safetensors(DATA / "mlx_lm_converted" / form / "model.safetensors")
    assert sorted(mine) == sorted(theirs)
    for name in theirs:
        assert mine[name].dtype == theirs[name].dtype and mine[name].shape == theirs[name].shape
        np.testing.assert_array_equal(mine[name], theirs[name], err_msg=name)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["quantization"] == json.loads(
        (DATA / "mlx_lm_converted" / form / "config.json").read_text())["quantization"]

    # MLX's files load on Tessera and compute the reference's logits on their dequantized weights.
    mlx_folder = tmp_path / "mlx"
    mlx_folder.mkdir()
    for f in (DATA / "mlx_lm_converted" / form).iterdir():
        (mlx_folder / f.name).write_bytes(f.read_bytes())
    for f in ("tokenizer.json", "tokenizer_config.json"):
        (mlx_folder / f).write_bytes((fixture_source / f).read_bytes())
    script = ("import sys, json, numpy as np, mlx.core as mx\n"
              "from mlx_lm import load\n"
              "model, tok = load(sys.argv[1])\n"
              "t = [int(x) for x in sys.argv[2].split(',')]\n"
              "print(json.dumps(np.array(model(mx.array(t)[None]))[0].tolist()))\n")
    tokens = [5, 77, 300, 12, 9, 250, 41, 3]
    r = mlx(tmp_script(tmp_path, script), mlx_folder, ",".join(map(str, tokens)))
    assert r.returncode == 0, r.stderr
    got = np.array(json.loads(r.stdout.strip().splitlines()[-1]))
    ref = Reference(mlx_folder).logits(tokens)
    assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()


def tmp_script(tmp_path, text):
    path = tmp_path / "script.py"
    path.write_text(text)
    return path


# --- fine-tuning ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("small"))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """train / valid / test .jsonl of the standard library's docstrings, each long enough that
    --max-seq-length 16 cuts every one to 16 tokens (equal token counts on every rank)."""
    import argparse
    import collections
    import json as json_module
    import textwrap

    texts = []
    for module in (argparse, collections, json_module, textwrap, os, socket):
        for name in sorted(dir(module)):
            doc = getattr(getattr(module, name), "__doc__", None)
            if isinstance(doc, str) and len(" ".join(doc.split())) >= 200:
                texts.append(" ".join(doc.split())[:400])
    texts = sorted(set(texts))
    assert len(texts) >= 48
    folder = tmp_path_factory.mktemp("data")
    for split, part in (("train", texts[:32]), ("valid", texts[32:40]), ("test", texts[40:48])):
        (folder / f"{split}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in part))
    return folder


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def losses(stdout):
    """{iteration: train loss} and {iteration: validation loss} from mlx_lm.lora's report."""
    text = ANSI.sub("", stdout)
    train = {int(i): float(v) for i, v in re.findall(r"^(?:\[0\] )?\s*(\d+)\s+([\d.]+) [▼▲]", text, re.M)}
    val = {int(i): float(v) for i, v in re.findall(r"^(?:\[0\] )?\s*(\d+)\s+val ([\d.]+)", text, re.M)}
    return train, val


def lora_args(model, data, adapters, iters, *extra, lr="5e-3"):
    return ["mlx_lm.lora", "--model", model, "--train", "--data", data, "--iters", str(iters),
            "--batch-size", "4", "--steps-per-report", "1", "--steps-per-eval", str(iters),
            "--val-batches", "2", "--adapter-path", adapters, "--learning-rate", lr,
            "--num-layers", "2", "--max-seq-length", "16", "--seed", "1", *extra]


def test_lora_trains_saves_and_fuses_into_the_weights(small, dataset, tmp_path):
    adapters = tmp_path / "adapters"
    r = mlx(*lora_args(small, dataset, adapters, 20))
    assert r.returncode == 0, r.stderr
    train, val = losses(r.stdout)
    assert sorted(train) == list(range(1, 21)) and sorted(val) == [1, 20]
    assert np.mean([train[i] for i in (18, 19, 20)]) < train[1] - 0.5
    # At this learning rate the path is chaotic: a kernel's last-bit change moves val[20] by
    # ~0.1 (6.21 and 6.30 for the same data across two correct versions of the fused gradients).
    assert val[20] < val[1] - 0.2

    # fuse writes W + scale * (A B)^T, A and B the saved adapters (LoRALinear's y = xW^T + s x A B).
    fused = tmp_path / "fused"
    r = mlx("mlx_lm.fuse", "--model", small, "--adapter-path", adapters, "--save-path", fused)
    assert r.returncode == 0, r.stderr
    scale = json.loads((adapters / "adapter_config.json").read_text())["lora_parameters"]["scale"]
    base = read_safetensors(small / "model.safetensors")
    lora = read_safetensors(adapters / "adapters.safetensors")
    after = read_safetensors(fused / "model.safetensors")
    names = sorted(k[: -len(".lora_a")] for k in lora if k.endswith(".lora_a"))
    assert len(names) == 7 * 2  # every linear layer of both blocks: mlx-lm's default keys
    for name in names:
        delta = scale * (lora[name + ".lora_a"] @ lora[name + ".lora_b"]).T
        assert np.abs(delta).max() > 1e-4
        np.testing.assert_allclose(after[name + ".weight"], base[name + ".weight"] + delta,
                                   rtol=1e-5, atol=1e-6)
    # The fused model generates what the base model with its adapters generates.
    args = ["--prompt", "def", "--max-tokens", "8", "--temp", "0"]
    with_adapters = mlx("mlx_lm.generate", "--model", small, "--adapter-path", adapters, *args)
    assert generated_text(with_adapters.stdout) == generated_text(
        mlx("mlx_lm.generate", "--model", fused, *args).stdout)


def test_data_parallel_lora_on_two_ranks_follows_the_one_rank_run(small, dataset, tmp_path):
    # SGD: Adam's normalised steps would turn float-level gradient differences on near-zero
    # entries into whole steps, hiding what is compared.
    sgd = ["--optimizer", "sgd"]
    one = mlx(*lora_args(small, dataset, tmp_path / "one", 6, *sgd, lr="0.05"))
    assert one.returncode == 0, one.stderr
    two = launch("--mlx", "-n", "2", *lora_args(small, dataset, tmp_path / "two", 6, *sgd, lr="0.05"))
    assert two.returncode == 0, two.stderr
    train_one, _ = losses(one.stdout)
    train_two, _ = losses(two.stdout)
    assert sorted(train_two) == sorted(train_one) == list(range(1, 7))
    np.testing.assert_allclose([train_two[i] for i in range(1, 7)],
                               [train_one[i] for i in range(1, 7)], atol=2e-3)  # printed rounded
    a = read_safetensors(tmp_path / "one" / "adapters.safetensors")
    b = read_safetensors(tmp_path / "two" / "adapters.safetensors")
    moved = 0.0
    for name in a:
        np.testing.assert_allclose(b[name], a[name], rtol=1e-4, atol=1e-6, err_msg=name)
        moved = max(moved, np.abs(a[name]).max())
    assert moved > 1e-3  # lora_b starts at zero: training moved it


@pytest.mark.long
@pytest.mark.parametrize("kind", ["dora", "full"])
def test_dora_and_full_fine_tuning_lower_the_loss(kind, small, dataset, tmp_path):
    adapters = tmp_path / "adapters"
    r = mlx(*lora_args(small, dataset, adapters, 12, "--fine-tune-type", kind))
    assert r.returncode == 0, r.stderr
    train, val = losses(r.stdout)
    assert val[12] < val[1] - 0.2
    r = mlx("mlx_lm.fuse", "--model", small, "--adapter-path", adapters, "--save-path",
            tmp_path / "fused")
    assert r.returncode == 0, r.stderr
    r = mlx("mlx_lm.lora", "--model", tmp_path / "fused", "--test", "--data", dataset,
            "--max-seq-length", "16", "--batch-size", "4", "--adapter-path", "")
    assert r.returncode == 0, r.stderr
    assert float(re.search(r"Test loss ([\d.]+)", r.stdout).group(1)) < val[1]


# --- prompt caches --------------------------------------------------------------------------


def test_a_saved_prompt_cache_continues_as_the_whole_prompt(small, tmp_path):
    # Without a chat template both commands take the prompt as it is.
    model = tmp_path / "plain"
    model.mkdir()
    for f in small.iterdir():
        (model / f.name).write_bytes(f.read_bytes())
    cfg = json.loads((model / "tokenizer_config.json").read_text())
    del cfg["chat_template"]
    (model / "tokenizer_config.json").write_text(json.dumps(cfg))
    head, tail = "def quicksort(items):\n", "    return sorted(items)\n"
    r = mlx("mlx_lm.cache_prompt", "--model", model, "--prompt", head, "--prompt-cache-file",
            tmp_path / "cache.safetensors")
    assert r.returncode == 0, r.stderr
    args = ["--model", model, "--max-tokens", "8", "--temp", "0"]
    cached = mlx("mlx_lm.generate", *args, "--prompt-cache-file", tmp_path / "cache.safetensors",
                 "--prompt", tail)
    whole = mlx("mlx_lm.generate", *args, "--prompt", head + tail)
    assert cached.returncode == 0, cached.stderr
    assert generated_text(cached.stdout) == generated_text(whole.stdout)
    assert "Prompt: 1" not in whole.stdout


def test_rotating_and_quantized_kv_caches_follow_the_plain_cache(tmp_path):
    # head_dim 32: 8-bit keys and values in groups of 32.
    model = make_model(tmp_path / "m", "--heads", "2", "--kv-heads", "1", "--scale", "2")
    script = tmp_script(tmp_path, (
        "import sys, json, numpy as np, mlx.core as mx\n"
        "from mlx_lm import load\n"
        "from mlx_lm.generate import generate_step\n"
        "model, tok = load(sys.argv[1])\n"
        "prompt = mx.array(tok.encode('def fibonacci(n):\\n    return'))\n"
        "out = {}\n"
        "for name, kw in [('plain', {}), ('rotating', {'max_kv_size': 64}),\n"
        "                 ('quantized', {'kv_bits': 8, 'kv_group_size': 32, 'quantized_kv_start': 0})]:\n"
        "    steps = list(generate_step(prompt, model, max_tokens=12, **kw))\n"
        "    out[name] = [[int(t) for t, _ in steps], [np.array(lp).tolist() for _, lp in steps]]\n"
        "print(json.dumps(out))\n"))
    r = mlx(script, model)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    plain = np.array(out["plain"][1])
    assert out["rotating"][0] == out["plain"][0]
    np.testing.assert_allclose(np.array(out["rotating"][1]), plain, rtol=1e-5, atol=1e-5)
    # 8-bit keys and values: close, not equal.
    quantized = np.array(out["quantized"][1])
    assert 0 < np.abs(quantized - plain).max() < 0.05 * np.abs(plain).max()
