"""Speculative decoding's figures (bench/results/spec.md): greedy decode with
and without n-gram prompt lookup and the quantized self-draft (the model's
own Q4_1 blocks drafting for its f32 copy), through `tram bench throughput`.

- batch 1 on a grounded task (edit a given text: the output copies the input,
  where prompt lookup shines) and on free text (a story: little to copy);
- batches 1, 4, 16 and 32 of each task: decode tok/s (the steps after every
  request's first token: the prefill left out, as llama.cpp's tools count)
  and output tok/s (the whole run, prefill included) without speculation,
  with it under the automatic rule (engine/spec.h: each sequence verifies
  the number of drafts that makes the step's output fastest, from its
  acceptance per draft position and the measured cost of the step's extra
  tokens), and with every proposal verified (always_verify: what the rule
  protects against), for each proposer, with the acceptance rate and the
  mean accepted length;
- llama.cpp on the same GGUF at batch 1 (its examples decode one sequence),
  where PEERS holds a build (bench/compare_peers.sh): prompt lookup
  (llama-lookup) and draft-model speculation (llama-speculative), the draft
  being the Q4_1 file and the target its F32 requantization (llama-quantize
  --allow-requantize), as tram's self-draft, or the Q4_1 file itself where
  there is no llama-quantize; and llama-bench's decode speed without
  drafts.

Each figure is the median of REPEATS runs (3).  Environment: TRAM_BIN,
MODEL, THREADS (2), REPEATS, BATCHES ("1,4,16,32"), ROUNDS (3: batch B runs
3 B requests through --max-num-seqs B), TASKS ("grounded,free text"), OUTPUT
(128 tokens), K (num_speculative_tokens, 8), TRAM_FLAGS (more engine flags
for every tram run), PEERS
(bench/peers).  Prints the section in its final markdown form and puts it
at the top of bench/results/spec.md, above the earlier ones (OUT=path to
write elsewhere)."""
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
BATCHES = [int(b) for b in os.environ.get("BATCHES", "1,4,16,32").split(",") if b]
OUTPUT = int(os.environ.get("OUTPUT", "128"))
TRAM_FLAGS = os.environ.get("TRAM_FLAGS", "").split()  # e.g. --weight-format native (n-gram only)
K = int(os.environ.get("K", "8"))
# Requests per place in the batch: batch B runs B * ROUNDS requests through
# --max-num-seqs B, so that a finished sequence's place is taken by the next
# request, as in serving.  With B requests alone (ROUNDS=1) the batch runs
# down as its sequences finish, and a proposer that speeds some of them up
# leaves the rest to run at a smaller batch: at batch 4 on the grounded
# task, n-gram's steady steps paid, but the last sequence then ran alone
# for 31 of the run's 53 steps (bench/results/spec.md).
ROUNDS = int(os.environ.get("ROUNDS", "3"))
OUT = os.environ.get("OUT", "bench/results/spec.md")
TASKS = os.environ.get("TASKS", "grounded,free text").split(",")
PEER_BIN = os.path.join(os.environ.get("PEERS", "bench/peers"), "llama-build-0.3.36/bin")

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
    cmd = [BIN, "bench", "throughput", "-m", MODEL, "--dataset", path, "--num-prompts", str(n * ROUNDS),
           "--temperature", "0", "--no-peak", "-t", THREADS, "--max-num-seqs", str(max(n, 1))]
    if spec:
        cmd += ["--speculative-config", json.dumps(spec)]
    cmd += TRAM_FLAGS
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    cells = [l for l in out.splitlines() if l.startswith("| batched")][0].split("|")
    speeds = float(cells[11]), float(cells[4])  # decode tok/s, output tok/s
    m = re.search(r"acceptance rate ([\d.]+)%.*mean accepted length ([\d.]+)", out)
    return speeds, (float(m.group(1)), float(m.group(2))) if m else None


def median_runs(path, n, specs):
    """For each spec: (decode tok/s, output tok/s), medians, and the
    acceptance.  The repeats are interleaved (each round runs every spec
    once), so that a change in the machine's load falls on all of them."""
    rounds = [[tram_run(path, n, spec) for spec in specs] for _ in range(REPEATS)]
    out = []
    for i in range(len(specs)):
        runs = [r[i] for r in rounds]
        speeds = tuple(statistics.median(r[0][c] for r in runs) for c in range(2))
        out.append((speeds, runs[0][1]))  # greedy: every run accepts the same drafts
    return out


def peer(name):
    path = os.path.join(PEER_BIN, name)
    return path if os.path.exists(path) else None


def peer_decode(cmd):
    """A llama.cpp example's decode speed and acceptance (its last lines), or None."""
    out = subprocess.run(cmd, capture_output=True, text=True).stderr
    speed = re.search(r"decoded\s+\d+ tokens in\s+[\d.]+ seconds, speed:\s+([\d.]+) t/s", out)
    drafted = re.search(r"n_drafted\s*=\s*(\d+)", out)
    accepted = re.search(r"n_accept\s*=\s*(\d+)", out)
    if not (speed and drafted and accepted):
        return None
    d, a = int(drafted.group(1)), int(accepted.group(1))
    return float(speed.group(1)), 100.0 * a / d if d else 0.0


def peer_median(cmd):
    runs = [r for r in (peer_decode(cmd) for _ in range(REPEATS)) if r]
    return (statistics.median(r[0] for r in runs), runs[0][1]) if runs else None


def peer_target(tmp):
    """The F32 GGUF of MODEL's weights that llama-speculative verifies with
    (the Q4_1 file drafting, as tram's self-draft), or MODEL itself."""
    quantize = peer("llama-quantize")
    if not quantize:
        return MODEL, "Q4_1"
    path = os.path.join(tmp, "f32.gguf")
    done = subprocess.run([quantize, "--allow-requantize", MODEL, path, "F32"], capture_output=True)
    return (path, "F32") if done.returncode == 0 else (MODEL, "Q4_1")


def peer_plain():
    """llama-bench's decode tok/s (tg OUTPUT) on MODEL, or None."""
    bench = peer("llama-bench")
    if not bench:
        return None
    out = subprocess.run([bench, "-m", MODEL, "-p", "0", "-n", str(OUTPUT), "-t", THREADS,
                          "-r", str(REPEATS), "-o", "json"], capture_output=True, text=True).stdout
    try:
        return json.loads(out)[0]["avg_ts"]
    except (ValueError, LookupError, TypeError):
        return None


def peer_rows(tmp):
    """llama.cpp at batch 1 on each task: lookup and draft-model speculation."""
    lookup, spec = peer("llama-lookup"), peer("llama-speculative")
    target, fmt = peer_target(tmp) if spec else (MODEL, "Q4_1")
    common = ["-n", str(OUTPUT), "-t", THREADS, "--temp", "0"]
    rows = []
    for name, task in (("grounded", grounded), ("free text", free)):
        if name not in TASKS:
            continue
        prompt = task(0)
        lk = lookup and peer_median([lookup, "-m", MODEL, "-p", prompt, "--spec-draft-n-max", str(K)] + common)
        sp = spec and peer_median([spec, "-m", target, "-md", MODEL, "-p", prompt, "--spec-draft-n-max", str(K)] + common)
        rows.append((name, lk, sp))
    return rows, fmt


def fmt_peer(r, what):
    return f"{r[0]:.1f} | {r[1]:.0f}%" if r else f"— ({what}) | —"


def fmt_acc(acc):
    return f"{acc[0]:.0f}% | {acc[1]:.2f}" if acc else "— | —"


def fmt_vs(speed, base):
    return f"{speed:.1f} ({speed / base:.2f}x)"


def older_sections(path):
    """What path holds below its title: the earlier runs, kept under the new one."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    return lines[1:] if lines and lines[0].startswith("# ") else lines


def main():
    ngram = {"method": "ngram", "num_speculative_tokens": K, "prompt_lookup_min": 1,
             "prompt_lookup_max": 4}
    own = {"method": "self", "num_speculative_tokens": K}
    rows, load0 = [], os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        for name, task in (("grounded", grounded), ("free text", free)):
            if name not in TASKS:
                continue
            for b in BATCHES:
                path = os.path.join(tmp, f"{name[0]}{b}.jsonl")
                dataset(task, b * ROUNDS, path)
                specs = [None] + [c for spec in (ngram, own) for c in (spec, dict(spec, always_verify=1))]
                (base, _), *runs = median_runs(path, b, specs)
                cells = []
                for (auto, _), (forced, facc) in (runs[0:2], runs[2:4]):
                    cells.append(f"{fmt_vs(auto[0], base[0])} | {fmt_vs(auto[1], base[1])} | "
                                 f"{fmt_vs(forced[0], base[0])} | {fmt_acc(facc)}")
                rows.append(f"| {name} | {b} | {base[0]:.1f} | {base[1]:.1f} | " + " | ".join(cells) + " |")
                print(rows[-1], file=sys.stderr)
        peers, target_fmt = peer_rows(tmp)
        plain = peer_plain()
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
        f"## {datetime.date.today()}, commit {commit}",
        "",
        f"`python3 bench/spec.py` on {cpu}, {THREADS} threads, load average {load0:.1f} at the start "
        f"and {load:.1f} at the end; "
        f"the default model, greedy, {OUTPUT} output tokens per request, k = {K} "
        f"(num_speculative_tokens, the cap), median of {REPEATS} interleaved runs; batch B is "
        f"{ROUNDS} B requests through `--max-num-seqs B`, so that a finished sequence's place is "
        "taken by the next request.  Decode tok/s counts the steps that ran no prefill; output "
        "tok/s is the whole run's (prefill included).  \"auto\" is speculation under the automatic rule "
        "(engine/spec.h: each sequence verifies the j of its k drafts that makes the step's "
        "output fastest, j = argmax (P + g(j)) / T(N + j), g from its acceptance per draft "
        "position, T the measured step time by token count); \"every\" verifies every proposal "
        "(always_verify), which is what the rule protects against.  Acceptance and mean "
        "accepted length (1 + accepted / drafts) are the every-proposal run's.  \"self\" is the "
        "model's own Q4_1 blocks drafting for its f32 copy (the target of every column)." + busy,
        "",
        "| task | batch | no spec: decode tok/s | output tok/s | n-gram auto: decode | output | "
        "n-gram every: decode | acceptance | mean accepted length | self auto: decode | output | "
        "self every: decode | acceptance | mean accepted length |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
    ]
    if any(lk or sp for _, lk, sp in peers) or plain:
        lines += [
            f"llama.cpp at batch 1, decode tok/s (prompt excluded) and acceptance: `llama-lookup "
            f"--spec-draft-n-max {K}` on the Q4_1 file, `llama-speculative --spec-draft-n-max {K}` with "
            f"the Q4_1 file drafting for its {target_fmt} copy; without drafts, `llama-bench -p 0 -n "
            f"{OUTPUT}` on the Q4_1 file: " + (f"{plain:.1f} tok/s." if plain else "—."),
            "",
            "| task | llama-lookup tok/s | acceptance | llama-speculative tok/s | acceptance |",
            "|---|---:|---:|---:|---:|",
            *[f"| {n} | {fmt_peer(lk, 'no llama-lookup in bench/peers')} | "
              f"{fmt_peer(sp, 'no llama-speculative in bench/peers')} |" for n, lk, sp in peers],
            "",
        ]
    else:
        lines += ["llama.cpp: no build in bench/peers for this run.", ""]
    lines += older_sections(OUT)
    text = "\n".join(lines) + "\n"
    print(text)
    with open(OUT, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
