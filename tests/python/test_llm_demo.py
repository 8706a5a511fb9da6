"""The main job (`make demo`, examples/python/llm): its data, sharding, checkpoints and resume,
a rank killed mid-run, the loss curve, generation from a checkpoint through mlx-lm, and a run on
2 simulated hosts. Tiny models on the first megabyte of the standard library, so the whole file
takes well under a minute of training.

References: the corpus files encoded one by one (the cache), SciPy's entropy (the unigram
entropy), a float64 NumPy Llama (llm_reference.py: the checkpoint's logits and the reported
validation loss), and an uninterrupted run (resume)."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from llm_reference import Reference

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "python" / "llm"
TRAIN = DEMO / "train.py"
BIN = Path(sys.executable).parent
ENV = dict(os.environ, HF_HUB_OFFLINE="1", PATH=f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}")
TINY = ["--max-corpus-mb", "1", "--vocab", "400", "--hidden", "32", "--layers", "2",
        "--heads", "2", "--kv-heads", "1", "--mlp", "64", "--seq-len", "32", "--batch", "2",
        "--warmup", "1", "--eval-sequences", "8", "--max-new-tokens", "4",
        "--require-margin", "-1"]

sys.path.insert(0, str(DEMO))
import data  # noqa: E402


def run(args, timeout=300):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, env=ENV)


def train(run_dir, cache, *args, ranks=2, timeout=300):
    cmd = [sys.executable, TRAIN] if ranks == 0 else [BIN / "tessera", "launch", "-n", ranks, TRAIN]
    return run([*cmd, "--run-dir", run_dir, "--cache-dir", cache, *TINY, *args], timeout=timeout)


def metrics(run_dir):
    with open(Path(run_dir) / "metrics.jsonl") as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo-cache")
    data.prepare(str(folder), 400, 1)
    return folder


def test_tokenizer_cache_and_split(cache):
    corpus = data.prepare(str(cache), 400, 1)
    assert corpus.cached and corpus.seconds < 5
    stdlib, files = data.corpus_files(1)
    assert corpus.files == files and sum(map(os.path.getsize, files[:-1])) < 1e6
    # The cache holds each file's tokens followed by </s>, training and validation split by file.
    eos = corpus.tokenizer.token_to_id("</s>")
    parts = {True: [], False: []}
    for path in files:
        text = open(path, "rb").read().decode("utf-8", errors="replace")
        ids = corpus.tokenizer.encode(text).ids
        assert corpus.tokenizer.decode(ids) == text
        parts[data.is_validation(os.path.relpath(path, stdlib))] += ids + [eos]
    assert parts[True] and parts[False]
    np.testing.assert_array_equal(corpus.validation, parts[True])
    np.testing.assert_array_equal(corpus.train, parts[False])
    # Another vocabulary is another cache entry; the first stays.
    other = data.prepare(str(cache), 300, 1)
    assert not other.cached and other.vocab_size == 300 and len(os.listdir(cache)) == 2


def test_unigram_entropy_matches_scipy():
    from scipy.stats import entropy

    tokens = np.random.default_rng(0).integers(0, 50, 5000).astype(np.uint16)
    assert data.unigram_entropy(tokens, 64) == pytest.approx(entropy(np.bincount(tokens)), rel=1e-12)


def test_each_token_seen_by_one_rank_per_epoch():
    tokens = np.arange(1000, dtype=np.uint16)
    world, batch, seq = 3, 2, 7
    shards = [data.Shards(tokens, seq, batch, r, world, seed=5) for r in range(world)]
    per_epoch = shards[0].batches_per_epoch
    assert per_epoch == (999 // seq) // (batch * world)
    for epoch in (0, 1):
        seen = []
        for index in range(per_epoch):
            for s in shards:
                x, y = s.batch_at(epoch, index)
                assert x.shape == y.shape == (batch, seq)
                np.testing.assert_array_equal(y[:, :-1], x[:, 1:])  # targets shifted by one
                seen.extend(x[:, 0] // seq)
                np.testing.assert_array_equal(x, x[:, :1] + np.arange(seq))  # contiguous text
        assert len(seen) == len(set(seen)) == per_epoch * batch * world
        if epoch == 0:
            first = seen
    assert first != seen  # each epoch has its own order
    assert shards[0].next_position(0, per_epoch - 1) == (1, 0)


def test_resume_equals_an_uninterrupted_run(tmp_path, cache):
    common = ["--steps", "6", "--checkpoint-every", "2", "--eval-every", "3", "--no-generate"]
    whole = train(tmp_path / "whole", cache, *common)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    part = tmp_path / "part"
    first = train(part, cache, *common, "--stop-after", "3")
    assert first.returncode == 0 and "stopped after step 3" in first.stdout
    assert os.readlink(part / "latest") == os.path.join("checkpoints", "step-000002")
    assert not (part / "finished").exists()
    second = train(part, cache, *common, "--resume")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "resumed from" in second.stdout and "(step 2)" in second.stdout
    a, b = metrics(tmp_path / "whole"), metrics(part)
    assert [r["step"] for r in b] == list(range(7))  # step 3 ran twice, logged once
    assert_same_metrics(a, b)
    ref_a = Reference(str(tmp_path / "whole" / "latest"))
    ref_b = Reference(str(part / "latest"))
    for name, value in ref_a.w.items():
        np.testing.assert_allclose(ref_b.w[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    # The training state: the step and every rank's data position (epoch, next batch).
    from safetensors.numpy import load_file

    state = load_file(str(part / "latest" / "training_state.safetensors"))
    assert int(state["step"]) == 6
    np.testing.assert_array_equal(state["data_positions"], [[0, 6], [0, 6]])
    # A finished run is kept under another name when the next one starts.
    third = train(part, cache, *common, "--resume", "--steps", "2", "--warmup", "1")
    assert third.returncode == 0 and "is kept as" in third.stdout
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("part-")]
    assert len(kept) == 1 and (kept[0] / "finished").exists()


@pytest.fixture(scope="module")
def finished(tmp_path_factory, cache):
    """One single-process run to the end, completions included: (run folder, its output)."""
    run_dir = tmp_path_factory.mktemp("finished") / "run"
    r = train(run_dir, cache, "--steps", "4", "--eval-every", "2", ranks=0)
    assert r.returncode == 0, r.stdout + r.stderr
    return run_dir, r


def test_checkpoint_loads_in_mlx_lm_and_reports_true_losses(finished, cache):
    """The loss curve, completions through mlx-lm, and the checkpoint's logits and validation
    loss against the float64 reference."""
    run_dir, r = finished
    for prompt in ("def fibonacci(n):", "class Stack:"):
        assert prompt in r.stdout
    png = (run_dir / "loss.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (700, 400)
    ckpt = run_dir / "latest"
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                 "training_state.safetensors"):
        assert (ckpt / name).exists(), name
    ref = Reference(str(ckpt))
    assert "lm_head.weight" not in ref.w  # tied, as config.json says

    # The reported validation loss is the reference's mean cross-entropy over the same sequences.
    corpus = data.prepare(str(cache), 400, 1)
    vx, vy = data.validation_batches(corpus.validation, 32, 8, 0, 1)
    losses = []
    for x, y in zip(vx, vy):
        logits = ref.logits(x)
        logits = logits - logits.max(-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        losses.append(-logp[np.arange(len(y)), y])
    assert metrics(run_dir)[-1]["val_loss"] == pytest.approx(np.mean(losses), rel=1e-4)

    # mlx-lm's own Llama, loaded from the folder through Tessera, gives the reference's logits.
    script = (
        "import sys, json, numpy as np, tessera.mlx; tessera.mlx.install()\n"
        "import mlx.core as mx\nfrom mlx_lm import load\n"
        "m, tok = load(sys.argv[1])\n"
        "ids = tok.encode('def fibonacci(n):\\n    return n')\n"
        "print(json.dumps({'ids': ids, 'logits': np.array(m(mx.array([ids]))[0]).tolist()}))\n")
    out = run([sys.executable, "-c", script, ckpt])
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.splitlines()[-1])
    np.testing.assert_allclose(got["logits"], ref.logits(got["ids"]), rtol=1e-4, atol=1e-4)


def test_the_checkpoint_is_served_by_mlx_lm_commands(finished):
    """`mlx_lm.generate` and `mlx_lm.server` (through tessera.mlx) answer from the checkpoint,
    greedily, with the same text."""
    import socket
    import urllib.request

    ckpt = finished[0] / "latest"
    prompt = "def fibonacci(n):"
    r = run([sys.executable, "-m", "tessera.mlx", "mlx_lm.generate", "--model", ckpt,
             "--prompt", prompt, "--max-tokens", "6", "--temp", "0", "--ignore-chat-template"])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    marks = [i for i, line in enumerate(lines) if line == "=" * 10]
    generated = "\n".join(lines[marks[0] + 1:marks[1]])
    assert generated

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "tessera.mlx", "mlx_lm.server", "--model",
                               str(ckpt), "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
    body = json.dumps({"prompt": prompt, "max_tokens": 6, "temperature": 0}).encode()
    try:
        for _ in range(600):  # up to 60 s for the server to listen
            try:
                req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                             headers={"Content-Type": "application/json"})
                answer = json.load(urllib.request.urlopen(req, timeout=60))
                break
            except OSError:
                assert server.poll() is None, server.stderr.read()
                time.sleep(0.1)
        else:
            pytest.fail("mlx_lm.server did not answer within 60 s")
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert answer["choices"][0]["text"] == generated
    assert answer["usage"]["completion_tokens"] == 6


def test_margin_below_the_requirement_fails(tmp_path, cache):
    r = train(tmp_path / "run", cache, "--steps", "2", "--no-generate", "--require-margin", "50",
              ranks=0)
    assert r.returncode == 1
    assert "FAILED: the validation loss is only" in r.stdout and "at least 50 is required" in r.stdout


def rank_pid(run_dir, rank, deadline):
    """The pid of the job's rank (its command line names run_dir; its environment the rank)."""
    while time.monotonic() < deadline:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
                env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            except OSError:
                continue
            if str(run_dir).encode() in cmd and f"TESSERA_RANK={rank}".encode() in env:
                return int(pid)
        time.sleep(0.1)
    raise AssertionError(f"rank {rank} of {run_dir} never started")


def kill_rank_1_mid_run(cmd, run_dir, after_rows):
    """Starts the job, kills its rank 1 with SIGKILL once metrics.jsonl has more than
    `after_rows` lines, and returns (status, stdout, stderr) of the launcher."""
    p = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=ENV)
    try:
        deadline = time.monotonic() + 120
        pid = rank_pid(run_dir, 1, deadline)
        while time.monotonic() < deadline:
            rows = metrics(run_dir) if (run_dir / "metrics.jsonl").exists() else []
            if len(rows) > after_rows:
                break
            time.sleep(0.01)
        os.kill(pid, signal.SIGKILL)
        out, err = p.communicate(timeout=180)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    return p.returncode, out, err


def assert_same_metrics(a, b):
    for ra, rb in zip(a, b):
        assert ra.keys() == rb.keys()
        for key in ra:
            assert rb[key] == pytest.approx(ra[key], rel=1e-5, abs=1e-6), (ra["step"], key)


def test_a_rank_killed_mid_run_fails_the_job_clearly(tmp_path, cache):
    run_dir = tmp_path / "run"
    status, _, err = kill_rank_1_mid_run(
        [BIN / "tessera", "launch", "-n", "2", TRAIN, "--run-dir", run_dir, "--cache-dir", cache,
         *TINY, "--steps", "100000", "--no-generate"], run_dir, after_rows=0)
    assert status == 128 + signal.SIGKILL, err
    assert "rank 1 failed first: it was killed by SIGKILL (signal 9)" in err


def simhosts_program():
    simhosts = (Path(os.environ.get("TESSERA_TEST_PROGRAMS", ROOT / "build" / "py")) / "simhosts").resolve()
    if os.geteuid() != 0 or not simhosts.exists():
        pytest.skip("needs root and the simhosts program of the test build (make test builds it)")
    return simhosts


def test_demo_hosts_two_simulated_hosts(tmp_path, cache):
    r = run([simhosts_program(), "2", "--", BIN / "tessera", "launch", "--hosts", "node0,node1", "-n", "2",
             TRAIN, "--run-dir", tmp_path / "run", "--cache-dir", cache, *TINY, "--steps", "3",
             "--no-generate"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "training: 4 rank(s)" in r.stdout and "trained 3 steps" in r.stdout
    # The same job on one host takes the same steps.
    local = train(tmp_path / "local", cache, "--steps", "3", "--no-generate", ranks=4)
    assert local.returncode == 0, local.stdout + local.stderr
    across, here = metrics(tmp_path / "run"), metrics(tmp_path / "local")
    assert [r["step"] for r in across] == [0, 1, 2, 3]
    assert_same_metrics(across, here)


@pytest.mark.parametrize("hosts", [0, 2])
def test_a_killed_rank_is_restarted_and_the_run_ends_as_if_uninterrupted(tmp_path, cache, hosts):
    """`tessera launch --max-restarts 1`: rank 1 killed with SIGKILL mid-run (on one host, or on
    the second of 2 simulated hosts); the launcher starts the job again
    (TESSERA_RESTART_COUNT=1), the program resumes from its latest checkpoint, and every logged
    loss and the final weights equal an uninterrupted run's."""
    common = [*TINY, "--steps", "200", "--checkpoint-every", "5", "--eval-every", "50",
              "--no-generate", "--cache-dir", cache]
    whole = run([BIN / "tessera", "launch", "-n", "2", TRAIN, "--run-dir", tmp_path / "whole",
                 *common])
    assert whole.returncode == 0, whole.stderr
    run_dir = tmp_path / "restarted"
    where = ["-n", "2"]
    prefix = []
    if hosts:
        where = ["--hosts", "node0,node1"]
        prefix = [simhosts_program(), "2", "--"]
    status, out, err = kill_rank_1_mid_run(  # past the first checkpoints
        [*prefix, BIN / "tessera", "launch", *where, "--max-restarts", "1", TRAIN, "--run-dir",
         run_dir, *common], run_dir, after_rows=12)
    assert status == 0, err
    assert re.search(r"rank 1( \(host node1\))? failed first: it was killed by SIGKILL", err), err
    assert re.search(r"\[launch\] restart 1 of 1 after rank 1( \(host node1\))? was killed by "
                     r"SIGKILL", err), err
    assert "run: resumed from" in out
    a, b = metrics(tmp_path / "whole"), metrics(run_dir)
    assert [r["step"] for r in b] == list(range(201))
    assert_same_metrics(a, b)
    ref_a, ref_b = Reference(str(tmp_path / "whole" / "latest")), Reference(str(run_dir / "latest"))
    for name, value in ref_a.w.items():
        np.testing.assert_allclose(ref_b.w[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
