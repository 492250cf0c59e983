"""The transformers side of `make compare` (runs in bench/peers/venv).

Loads the same GGUF file tram and llama.cpp read (transformers dequantizes it
to float32), warms up, then times each workload named on the command line
--runs times and prints one JSON object: {workload: [seconds of each run]}.

  python compare_hf.py --gguf models/X.gguf --runs 3 --threads 2 --batch 64 \
      offline:64:128:128 single:512:1 single:1:129 single:1:1

offline:N:IN:OUT  N random prompts of IN tokens, OUT new tokens each (EOS
                  ignored: min_new_tokens = OUT), in generate() calls of at
                  most --batch prompts one after another (equal lengths, no
                  padding)
single:IN:OUT     one prompt of IN tokens, OUT new tokens
"""
import os

# The OpenMP wait policy bin/tram sets for itself (cli/main.c): a short spin.
# libgomp's default long spin starves the other thread on a busy 2-core machine
# (a 1-token forward measured 4-6x slower on 2 threads than on 1 at load 6);
# libgomp reads it when torch loads it, so before the import.
if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["GOMP_SPINCOUNT"] = "10000"

import argparse
import json
import sys
import time

import torch
from transformers import AutoModelForCausalLM


def prompts(n, length, vocab, special, seed):
    """Random ordinary token ids, like tram bench throughput's prompts."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (n, length), generator=g)
    for s in special:  # redraw the few special ids, avoiding them
        ids[ids == s] = (s + 1) % vocab
    return ids


def generate(model, ids, out_len):
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=out_len,
                         min_new_tokens=out_len, do_sample=False, pad_token_id=0)
    if out.shape[1] != ids.shape[1] + out_len:
        sys.exit(f"compare_hf: generated {out.shape[1] - ids.shape[1]} tokens, not {out_len}")


def run_once(model, ids, out_len, batch):
    """Seconds to generate out_len tokens for every row of ids, batch rows per call."""
    with torch.inference_mode():
        t0 = time.perf_counter()
        for i in range(0, ids.shape[0], batch):
            generate(model, ids[i:i + batch], out_len)
        return time.perf_counter() - t0


def parse_workload(w):
    kind, *nums = w.split(":")
    try:
        nums = [int(x) for x in nums]
    except ValueError:
        nums = []
    if kind == "offline" and len(nums) == 3 and min(nums) > 0:
        return nums
    if kind == "single" and len(nums) == 2 and min(nums) > 0:
        return [1] + nums
    sys.exit(f"compare_hf: bad workload '{w}' (offline:N:IN:OUT or single:IN:OUT, positive numbers)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gguf", required=True)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--batch", type=int, default=0, help="most prompts per generate() call (0: all N)")
    p.add_argument("--warmup", type=int, default=1, help="untimed warm-up generate() calls first")
    p.add_argument("workloads", nargs="+")
    args = p.parse_args()
    if args.runs < 1 or args.threads < 1 or args.batch < 0:
        p.error("--runs and --threads must be at least 1, --batch at least 0")
    workloads = [(w, *parse_workload(w)) for w in args.workloads]  # bad input fails before the load
    torch.set_num_threads(args.threads)
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(os.path.abspath(args.gguf)),
                                                 gguf_file=os.path.basename(args.gguf),
                                                 dtype=torch.float32).eval()
    vocab = model.config.vocab_size
    special = [i for i in (model.config.bos_token_id, model.config.eos_token_id) if i is not None]
    for _ in range(args.warmup):
        run_once(model, prompts(4, 32, vocab, special, 1), 16, 4)
    result = {}
    for w, n, in_len, out_len in workloads:
        ids = prompts(n, in_len, vocab, special, 0)
        result[w] = [run_once(model, ids, out_len, args.batch or n) for _ in range(args.runs)]
        print(f"compare_hf: {w}: {result[w]}", file=sys.stderr, flush=True)
    result["versions"] = {"torch": torch.__version__, "transformers": __import__("transformers").__version__}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
