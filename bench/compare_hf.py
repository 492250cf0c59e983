"""The transformers side of `make compare` (runs in bench/peers/venv).

Loads the same GGUF file tram and llama.cpp read (transformers dequantizes it
to float32), warms up, then times each workload named on the command line
--runs times and prints one JSON object: {workload: [seconds of each run]}.

  python compare_hf.py --gguf models/X.gguf --runs 3 --threads 2 \
      offline:64:128:128 single:512:1 single:1:129 single:1:1

offline:N:IN:OUT  N random prompts of IN tokens in one batched generate() of
                  OUT new tokens each (EOS ignored: min_new_tokens = OUT)
single:IN:OUT     one prompt of IN tokens, OUT new tokens
"""
import argparse
import json
import os
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


def run_once(model, ids, out_len):
    with torch.inference_mode():
        t0 = time.perf_counter()
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=out_len,
                             min_new_tokens=out_len, do_sample=False, pad_token_id=0)
        t = time.perf_counter() - t0
    if out.shape[1] != ids.shape[1] + out_len:
        sys.exit(f"compare_hf: generated {out.shape[1] - ids.shape[1]} tokens, not {out_len}")
    return t


def parse_workload(w):
    kind, *nums = w.split(":")
    nums = [int(x) for x in nums]
    if kind == "offline" and len(nums) == 3:
        return nums
    if kind == "single" and len(nums) == 2:
        return [1] + nums
    sys.exit(f"compare_hf: bad workload '{w}' (offline:N:IN:OUT or single:IN:OUT)")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gguf", required=True)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--warmup", type=int, default=1, help="untimed warm-up generate() calls first")
    p.add_argument("workloads", nargs="+")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(os.path.abspath(args.gguf)),
                                                 gguf_file=os.path.basename(args.gguf),
                                                 dtype=torch.float32).eval()
    vocab = model.config.vocab_size
    special = [i for i in (model.config.bos_token_id, model.config.eos_token_id) if i is not None]
    for _ in range(args.warmup):
        run_once(model, prompts(4, 32, vocab, special, 1), 16)
    result = {}
    for w in args.workloads:
        n, in_len, out_len = parse_workload(w)
        ids = prompts(n, in_len, vocab, special, 0)
        result[w] = [run_once(model, ids, out_len) for _ in range(args.runs)]
        print(f"compare_hf: {w}: {result[w]}", file=sys.stderr)
    result["versions"] = {"torch": torch.__version__, "transformers": __import__("transformers").__version__}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
