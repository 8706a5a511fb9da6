"""The demo's data: the Python standard library's own sources, a BPE tokenizer trained on them,
and the token stream split into training and validation by file, each rank reading its shard.

Every machine with Python has this corpus (about 30 MB of code in ~1,800 files). The tokenizer
(a byte-level BPE from the ``tokenizers`` package, as Llama-family models use) and the token
arrays are cached in one folder, keyed by the corpus's file list and sizes and the vocabulary
size, so a second run starts in a second.
"""

import glob
import hashlib
import json
import os
import time

import numpy as np

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>"]
# One file in VALIDATION_EVERY (by the hash of its path, so adding files does not reshuffle the
# split) is held out for validation.
VALIDATION_EVERY = 20
# mlx-lm's chat path is not what this model is for; the template just makes `mlx_lm.server`
# and chat clients work.
CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }}\n{% endfor %}"


def corpus_files(max_mb=0):
    """The standard library's .py files (third-party packages excluded), in a fixed order; with
    max_mb, only the first files, up to that many MB."""
    stdlib = os.path.dirname(os.__file__)
    files, total = [], 0
    for path in sorted(glob.glob(os.path.join(stdlib, "**", "*.py"), recursive=True)):
        rel = os.path.relpath(path, stdlib)
        if rel.split(os.sep)[0] in ("site-packages", "dist-packages"):
            continue
        files.append(path)
        total += os.path.getsize(path)
        if max_mb and total >= max_mb * 1e6:
            break
    if not files:
        raise SystemExit(f"no Python sources found under {stdlib}: this demo trains on the "
                         "standard library's sources, which this Python does not ship")
    return stdlib, files


def is_validation(rel_path):
    return int(hashlib.sha256(rel_path.encode()).hexdigest(), 16) % VALIDATION_EVERY == 0


def _corpus_key(stdlib, files, vocab_size):
    h = hashlib.sha256(f"v1 vocab={vocab_size}\n".encode())
    for path in files:
        h.update(f"{os.path.relpath(path, stdlib)} {os.path.getsize(path)}\n".encode())
    return h.hexdigest()[:16]


def _read(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", errors="replace")


def train_tokenizer(files, vocab_size):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator((_read(p) for p in files), trainer)
    return tok


def write_tokenizer_files(tok, folder):
    """tokenizer.json and the tokenizer_config.json that mlx-lm (transformers) loads with it."""
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>",
                   "eos_token": "</s>", "unk_token": "<unk>", "chat_template": CHAT_TEMPLATE,
                   "model_max_length": 1 << 20}, f, indent=1)


class Corpus:
    """The tokenized corpus: ``train`` and ``validation`` (uint16 token arrays: every file's
    tokens followed by ``</s>``), the tokenizer, and what the cache held."""

    def __init__(self, folder, tokenizer, train, validation, files, seconds, cached):
        self.folder, self.tokenizer = folder, tokenizer
        self.train, self.validation = train, validation
        self.files, self.seconds, self.cached = files, seconds, cached

    @property
    def vocab_size(self):
        return self.tokenizer.get_vocab_size()

    def tokenizer_files(self):
        return [os.path.join(self.folder, n) for n in ("tokenizer.json", "tokenizer_config.json")]


def prepare(cache_dir, vocab_size, max_mb=0, log=print):
    """Returns the Corpus, training the tokenizer and tokenizing on the first call for this
    corpus and vocabulary size (written to a temporary folder, then renamed: a run stopped
    midway leaves no half-written cache)."""
    from tokenizers import Tokenizer

    t0 = time.perf_counter()
    stdlib, files = corpus_files(max_mb)
    folder = os.path.join(cache_dir, f"corpus-{_corpus_key(stdlib, files, vocab_size)}")
    if os.path.isdir(folder):
        tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        # Mapped, not read: a rank touches only the pages of the sequences it trains on.
        train = np.load(os.path.join(folder, "train.npy"), mmap_mode="r")
        validation = np.load(os.path.join(folder, "validation.npy"), mmap_mode="r")
        return Corpus(folder, tok, train, validation, files, time.perf_counter() - t0, True)

    if vocab_size > 65535:
        raise SystemExit(f"--vocab {vocab_size} does not fit the uint16 token cache (at most 65535)")
    log(f"data: training a {vocab_size}-token BPE tokenizer on {len(files)} files of {stdlib} "
        "(once; cached)")
    rel = [os.path.relpath(p, stdlib) for p in files]
    train_files = [p for p, r in zip(files, rel) if not is_validation(r)]
    val_files = [p for p, r in zip(files, rel) if is_validation(r)]
    tok = train_tokenizer(train_files, vocab_size)
    eos = tok.token_to_id("</s>")

    def tokens(paths):
        out = []
        for i in range(0, len(paths), 64):
            for enc in tok.encode_batch([_read(p) for p in paths[i:i + 64]]):
                out.append(np.asarray(enc.ids, dtype=np.uint16))
                out.append(np.array([eos], dtype=np.uint16))
        return np.concatenate(out)

    train, validation = tokens(train_files), tokens(val_files)
    os.makedirs(cache_dir, exist_ok=True)
    tmp = f"{folder}.tmp{os.getpid()}"
    os.makedirs(tmp)
    write_tokenizer_files(tok, tmp)
    np.save(os.path.join(tmp, "train.npy"), train)
    np.save(os.path.join(tmp, "validation.npy"), validation)
    with open(os.path.join(tmp, "files.json"), "w") as f:
        json.dump({"stdlib": stdlib, "train": [os.path.relpath(p, stdlib) for p in train_files],
                   "validation": [os.path.relpath(p, stdlib) for p in val_files]}, f, indent=0)
    try:
        os.rename(tmp, folder)
    except OSError:  # another process made it first: theirs is as good
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    return Corpus(folder, tok, train, validation, files, time.perf_counter() - t0, False)


def unigram_entropy(tokens, vocab_size):
    """The entropy (nats) of the tokens' own frequencies: the loss of the best model that
    ignores context, which a trained model must beat."""
    counts = np.bincount(tokens, minlength=vocab_size).astype(np.float64)
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


class Shards:
    """Sequences of ``seq_len + 1`` tokens (input and shifted target) cut from the training
    stream; each epoch visits every sequence once in an order drawn from (seed, epoch), and each
    global batch of ``batch * world`` sequences gives rank r the r-th slice, so every token is
    seen by exactly one rank per epoch. A position is (epoch, index of the next batch)."""

    def __init__(self, tokens, seq_len, batch, rank, world, seed):
        self.tokens, self.seq_len, self.batch = tokens, seq_len, batch
        self.rank, self.world, self.seed = rank, world, seed
        self.n_sequences = (len(tokens) - 1) // seq_len
        self.batches_per_epoch = self.n_sequences // (batch * world)
        if self.batches_per_epoch == 0:
            raise SystemExit(f"the corpus's {len(tokens)} training tokens make "
                             f"{self.n_sequences} sequences of {seq_len}, fewer than one global "
                             f"batch ({batch} x {world} ranks); lower --batch or --seq-len")

    def order(self, epoch):
        return np.random.default_rng([self.seed, epoch]).permutation(self.n_sequences)

    def sequence_ids(self, epoch, index):
        """The sequences rank ``self.rank`` trains on in batch ``index`` of ``epoch``."""
        g = self.batch * self.world
        first = index * g + self.rank * self.batch
        return self.order(epoch)[first:first + self.batch]

    def batch_at(self, epoch, index):
        """(inputs, targets): int32 arrays of shape (batch, seq_len)."""
        ids = self.sequence_ids(epoch, index)
        starts = ids * self.seq_len
        rows = np.stack([self.tokens[s:s + self.seq_len + 1] for s in starts]).astype(np.int32)
        return rows[:, :-1], rows[:, 1:]

    def next_position(self, epoch, index):
        index += 1
        return (epoch + 1, 0) if index == self.batches_per_epoch else (epoch, index)


def validation_batches(tokens, seq_len, n_sequences, rank, world):
    """The fixed validation set (the first n_sequences sequences of the held-out files), this
    rank's share: sequences rank, rank + world, ..."""
    n = min(n_sequences, (len(tokens) - 1) // seq_len)
    mine = np.arange(rank, n, world)
    if len(mine) == 0:
        return np.zeros((0, seq_len), np.int32), np.zeros((0, seq_len), np.int32)
    rows = np.stack([tokens[i * seq_len:i * seq_len + seq_len + 1] for i in mine]).astype(np.int32)
    return rows[:, :-1], rows[:, 1:]
