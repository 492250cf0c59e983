#!/usr/bin/env python3
"""Multi-LoRA throughput on the CPU: the same batch of requests against the
base model alone and spread over 1, 4 and 16 distinct rank-16 adapters (all
seven projections) in one `tram serve` with --max-loras 16.

    python3 bench/lora.py [--model M] [--requests 16] [--max-tokens 64]

The adapters are random, written as PEFT writes them (safetensors of BF16
lora_A/lora_B, adapter_config.json) into a temporary directory sized from
`tram info` of the model; the values are random bytes made into bf16 of
magnitude 2^-7..2^-6 (the standard library only, at C speed).  Each configuration sends --requests
concurrent completions (ignore_eos, greedy) after a warm-up round and
reports completion tokens per second over the wall time, and the overhead
against the base.  Prints the table in its final markdown form (for
bench/results/lora.md); a run takes a few minutes on 2 cores.
"""
import argparse
import json
import os
import platform
import struct
import subprocess
import tempfile
import threading
import time
import urllib.request

from health import free_port, wait_healthy  # bench/health.py

RANK = 16
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def model_dims(binary, model):
    info = subprocess.run([binary, "info", model], capture_output=True, text=True, check=True).stdout
    kv = dict(line.split(None, 1) for line in info.splitlines() if len(line.split(None, 1)) == 2)
    dim, heads = int(kv["embedding_length"]), int(kv["attention.head_count"])
    kv_heads, ffn = int(kv["attention.head_count_kv"]), int(kv["feed_forward_length"])
    qd, kd = dim, dim // heads * kv_heads
    shapes = {"q_proj": (dim, qd), "k_proj": (dim, kd), "v_proj": (dim, kd), "o_proj": (qd, dim),
              "gate_proj": (dim, ffn), "up_proj": (dim, ffn), "down_proj": (ffn, dim)}
    return int(kv["block_count"]), shapes


# bf16's high byte for magnitude 2^-7..2^-6: the sign from the random byte's top bit
HIGH = bytes(0x3C | (b & 0x80) for b in range(256))


def random_bf16(count):
    """count random bf16 values, little-endian: a random low byte (the
    exponent's last bit and the mantissa), a high byte of sign and exponent."""
    buf = bytearray(2 * count)
    buf[0::2] = os.urandom(count)
    buf[1::2] = os.urandom(count).translate(HIGH)
    return bytes(buf)


def write_safetensors(path, shapes):
    header, offset = {}, 0
    for name, shape in shapes.items():
        size = 2 * shape[0] * shape[1]
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for shape in shapes.values():
            f.write(random_bf16(shape[0] * shape[1]))


def make_adapter(directory, layers, shapes):
    os.makedirs(directory)
    tensors = {}
    for layer in range(layers):
        for t in TARGETS:
            module = "self_attn" if t in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"
            base = f"base_model.model.model.layers.{layer}.{module}.{t}"
            fan_in, fan_out = shapes[t]
            tensors[base + ".lora_A.weight"] = (RANK, fan_in)
            tensors[base + ".lora_B.weight"] = (fan_out, RANK)
    write_safetensors(os.path.join(directory, "adapter_model.safetensors"), tensors)
    with open(os.path.join(directory, "adapter_config.json"), "w") as f:
        json.dump({"peft_type": "LORA", "r": RANK, "lora_alpha": 32, "target_modules": TARGETS, "bias": "none"}, f)


def post(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)


def run_round(port, models, n, max_tokens):
    """n concurrent requests, model i % len(models); (completion tokens, seconds)."""
    tokens = [0] * n

    def one(i):
        body = {"model": models[i % len(models)], "prompt": f"Request {i}: tell me a story about the number {i}.",
                "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
        tokens[i] = post(port, body)["usage"]["completion_tokens"]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(tokens), time.time() - t0


def cpu_name():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next(l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("Model name"))
    except (OSError, StopIteration):
        return platform.processor()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="bin/tram")
    ap.add_argument("--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    layers, shapes = model_dims(args.bin, args.model)
    tmp = tempfile.mkdtemp(prefix="tram-lora-bench-")
    names = [f"a{i}" for i in range(16)]
    for name in names:
        make_adapter(os.path.join(tmp, name), layers, shapes)
    port = free_port()
    modules = ",".join(f"{n}={tmp}/{n}" for n in names)
    proc = subprocess.Popen([args.bin, "serve", "-m", args.model, "--port", str(port), "--threads", str(args.threads),
                             "--lora-modules", modules, "--max-loras", "16", "--max-cpu-loras", "16",
                             "--max-num-seqs", str(args.requests), "--no-enable-prefix-caching"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(proc, port)
        configs = [("base model alone", [os.path.splitext(os.path.basename(args.model))[0]]),
                   ("1 adapter", names[:1]), ("4 adapters", names[:4]), ("16 adapters", names[:16])]
        rows = []
        for label, models in configs:
            run_round(port, models, args.requests, 8)                # warm-up: slots loaded, caches warm
            tokens, secs = run_round(port, models, args.requests, args.max_tokens)
            rows.append((label, tokens / secs))
    finally:
        proc.terminate()
        proc.wait()
        subprocess.run(["rm", "-rf", tmp])
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"CPU: {cpu_name()}, {args.threads} threads; {time.strftime('%Y-%m-%d')}; commit {commit}")
    print(f"{args.requests} concurrent requests x {args.max_tokens} tokens, rank-{RANK} adapters on all seven "
          f"projections, {args.model}\n")
    print("| batch | completion tok/s | overhead vs base |")
    print("|---|---|---|")
    base = rows[0][1]
    for label, rate in rows:
        print(f"| {label} | {rate:.1f} | {'—' if label.startswith('base') else f'{(base / rate - 1) * 100:+.1f} %'} |")


if __name__ == "__main__":
    main()
