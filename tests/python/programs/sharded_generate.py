"""Greedy generation with mlx-lm's sharded loader, as its sharded_generate example runs it: the
model split over the ranks of `mx.distributed.init()` (tensor parallel, or pipelined with
--pipeline), then `stream_generate`. Rank 0 prints one JSON line: the tokens and, per step, the gap
between the two largest log-probabilities (the test checks that no step is a near tie). Every rank
prints "rank <r> done" last.

    tessera launch --mlx -n 2 sharded_generate.py MODEL [--pipeline] [--prompt P] [--max-tokens N]
"""

import argparse
import json

import mlx.core as mx
from mlx_lm import stream_generate
from mlx_lm.utils import sharded_load

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("--pipeline", action="store_true")
ap.add_argument("--prompt", default="def quicksort(items):")
ap.add_argument("--max-tokens", type=int, default=16)
args = ap.parse_args()

group = mx.distributed.init()
model, tokenizer = sharded_load(args.model, group if args.pipeline else None,
                                None if args.pipeline else group)
prompt = tokenizer.apply_chat_template([{"role": "user", "content": args.prompt}],
                                       add_generation_prompt=True)
tokens, gaps = [], []
for response in stream_generate(model, tokenizer, prompt, max_tokens=args.max_tokens):
    tokens.append(response.token)
    top2 = mx.topk(response.logprobs.astype(mx.float32), 2)
    gaps.append(abs(top2[1] - top2[0]).item())
if group.rank() == 0:
    print(json.dumps({"tokens": tokens, "gaps": gaps, "size": group.size()}))
print(f"rank {group.rank()} done", flush=True)
