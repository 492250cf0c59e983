"""Speculative decoding's figures (bench/results/spec.md): greedy decode with
and without n-gram prompt lookup and the quantized self-draft (the model's
own Q4_1 blocks drafting for its f32 copy), through `tram bench throughput`.

- batch 1 on a grounded task (edit a given text: the output copies the input,
  where prompt lookup shines) and on free text (a story: little to copy);
- batches 1, 4, 16 and 32 of each task: output tok/s without speculation,
  with it under the automatic rule (engine/spec.h: a sequence's drafts are
  verified only when its acceptance outweighs the measured cost of the
  step's extra tokens), and with every proposal verified (always_verify:
  what the rule protects against), the acceptance rate and the mean
  accepted length;
- llama.cpp's prompt lookup (llama-lookup, batch 1 only: it decodes one
  sequence) on the same model and prompt, where PEERS holds a build
  (bench/compare_peers.sh).

Each figure is the median of REPEATS runs (3).  Environment: TRAM_BIN,
MODEL, THREADS (2), REPEATS, BATCHES ("1,4,16,32"), OUTPUT (128 tokens),
K (num_speculative_tokens, 4), PEERS (bench/peers).  Prints the table in its final markdown form
and writes it to bench/results/spec.md (OUT=path to write elsewhere)."""
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

BIN = os.environ.get("TRAM_BIN", "bin/tram")
MODEL = os.environ.get("MODEL", "models/SmolLM2-135M-Instruct.Q4_1.gguf")
THREADS = os.environ.get("THREADS", "2")
REPEATS = int(os.environ.get("REPEATS", "3"))
BATCHES = [int(b) for b in os.environ.get("BATCHES", "1,4,16,32").split(",")]
OUTPUT = int(os.environ.get("OUTPUT", "128"))
K = int(os.environ.get("K", "4"))
OUT = os.environ.get("OUT", "bench/results/spec.md")
LOOKUP = os.path.join(os.environ.get("PEERS", "bench/peers"), "llama-build-0.3.36/bin/llama-lookup")

TEXTS = [
    "The tram network of the city opened in 1881 with horse-drawn cars on two lines. Electric "
    "traction arrived in 1899, and by 1910 the network had grown to fourteen lines and more than "
    "two hundred cars. After the war many lines were replaced by buses, but the remaining routes "
    "were modernised in the 1990s with low-floor vehicles and priority at traffic lights.",
    "Our kitchen garden has four beds. The first bed grows tomatoes and basil, the second beans "
    "and peas, the third carrots, onions and beetroot, and the fourth strawberries. We water the "
    "beds every evening in summer and cover them with straw in winter so that the soil stays "
    "soft and the worms keep working.",
    "def mean(values):\n    total = 0\n    for v in values:\n        total += v\n    return total / "
    "len(values)\n\n\ndef variance(values):\n    m = mean(values)\n    total = 0\n    for v in "
    "values:\n        total += (v - m) ** 2\n    return total / len(values)\n",
]
STORIES = ["a lighthouse keeper who finds a map", "a robot learning to paint",
           "two friends lost in a desert town", "a dragon afraid of the dark"]


def grounded(i):
    text = TEXTS[i % len(TEXTS)]
    return ("Repeat the following text exactly, changing nothing.\n\nText:\n" + text +
            "\n\nRepeated text:\n")


def free(i):
    return "Write a short story about " + STORIES[i % len(STORIES)] + ".\n\nStory:\n"


def dataset(task, n, path):
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"prompt": task(i), "output_len": OUTPUT}) + "\n")


def tram_run(path, n, spec):
    cmd = [BIN, "bench", "throughput", "-m", MODEL, "--dataset", path, "--num-prompts", str(n),
           "--temperature", "0", "--no-peak", "-t", THREADS, "--max-num-seqs", str(max(n, 1))]
    if spec:
        cmd += ["--speculative-config", json.dumps(spec)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    row = [l for l in out.splitlines() if l.startswith("| batched")][0]
    tok_s = float(row.split("|")[4])
    m = re.search(r"acceptance rate ([\d.]+)%.*mean accepted length ([\d.]+)", out)
    return tok_s, (float(m.group(1)), float(m.group(2))) if m else None


def median_run(path, n, spec):
    runs = [tram_run(path, n, spec) for _ in range(REPEATS)]
    tok_s = statistics.median(r[0] for r in runs)
    acc = runs[0][1]  # greedy: every run accepts the same drafts
    return tok_s, acc


def lookup_run(prompt):
    """llama-lookup's decode speed and acceptance at batch 1, or None."""
    if not os.path.exists(LOOKUP):
        return None
    out = subprocess.run([LOOKUP, "-m", MODEL, "-p", prompt, "-n", str(OUTPUT), "--draft", str(K),
                          "-t", THREADS, "--temp", "0", "-no-cnv"],
                         capture_output=True, text=True).stderr
    speed = re.search(r"decoded\s+\d+ tokens in\s+[\d.]+ seconds, speed:\s+([\d.]+) t/s", out)
    drafted = re.search(r"n_drafted\s*=\s*(\d+)", out)
    accepted = re.search(r"n_accept\s*=\s*(\d+)", out)
    if not (speed and drafted and accepted):
        return None
    d, a = int(drafted.group(1)), int(accepted.group(1))
    return float(speed.group(1)), 100.0 * a / d if d else 0.0


def fmt_acc(acc):
    return f"{acc[0]:.0f}% | {acc[1]:.2f}" if acc else "— | —"


def main():
    ngram = {"method": "ngram", "num_speculative_tokens": K, "prompt_lookup_min": 1,
             "prompt_lookup_max": 4}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, task in (("grounded", grounded), ("free text", free)):
            for b in BATCHES:
                path = os.path.join(tmp, f"{name[0]}{b}.jsonl")
                dataset(task, b, path)
                base, _ = median_run(path, b, None)
                auto, acc = median_run(path, b, ngram)
                forced, facc = median_run(path, b, dict(ngram, always_verify=1))
                own, oacc = median_run(path, b, {"method": "self", "num_speculative_tokens": K})
                rows.append(f"| {name} | {b} | {base:.1f} | {auto:.1f} ({auto / base:.2f}x) | "
                            f"{forced:.1f} ({forced / base:.2f}x) | {fmt_acc(facc)} | "
                            f"{own:.1f} ({own / base:.2f}x) | {fmt_acc(oacc)} |")
                print(rows[-1], file=sys.stderr)
        peer = [(name, lookup_run(task(0))) for name, task in (("grounded", grounded), ("free text", free))]
    cpu = subprocess.run("lscpu | sed -n 's/^Model name: *//p'", shell=True, capture_output=True,
                         text=True).stdout.strip()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    load = os.getloadavg()[0]
    busy = (f"  **Measured under load** (load average {load:.1f} on {os.cpu_count()} CPUs at the end "
            "of the run): the ratios between columns of one row are what to read, the absolute "
            "figures are not the machine's.") if load > (os.cpu_count() or 1) else ""
    lines = [
        "# Speculative decoding: n-gram prompt lookup and the quantized self-draft",
        "",
        f"`python3 bench/spec.py` on {cpu}, {THREADS} threads, {datetime.date.today()}, commit "
        f"{commit}; the default model, greedy, {OUTPUT} output tokens per request, k = {K}, "
        f"median of {REPEATS} runs.  Output tok/s is `tram bench throughput`'s (prefill "
        "included).  \"auto\" is speculation under the automatic rule (a sequence's drafts are "
        "verified only when its recent acceptance outweighs the measured cost of the step's extra "
        "tokens: engine/spec.h); \"every proposal\" verifies all of them (always_verify), which is "
        "what the rule protects against.  Acceptance and mean accepted length (1 + accepted / "
        "drafts) are the every-proposal run's for n-gram.  \"self-draft\" is the model's own Q4_1 "
        "blocks drafting for its f32 copy (the target of every column), under the rule; its "
        "acceptance is that run's." + busy,
        "",
        "| task | batch | no speculation tok/s | n-gram, auto | n-gram, every proposal | acceptance | "
        "mean accepted length | self-draft, auto | acceptance | mean accepted length |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        "llama.cpp's prompt lookup (`llama-lookup --draft K`, batch 1, decode tok/s and "
        "acceptance):",
        "",
        "| task | llama-lookup tok/s | acceptance |",
        "|---|---:|---:|",
        *[f"| {n} | {p[0]:.1f} | {p[1]:.0f}% |" if p else f"| {n} | — (no build in bench/peers) | — |"
          for n, p in peer],
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    with open(OUT, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
