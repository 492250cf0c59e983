#!/usr/bin/env python3
"""Turns `tram bench serve --result-json` files into a markdown table and a
plot of p50/p99 TTFT and TPOT against the request rate (matplotlib)."""
import argparse
import json
import platform
import subprocess


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--md", required=True)
    p.add_argument("--png", required=True)
    p.add_argument("--setup", default="")
    p.add_argument("results", nargs="+")
    args = p.parse_args()
    runs = sorted((json.load(open(f)) for f in args.results), key=lambda r: r["request_rate"])
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                         capture_output=True, text=True).stdout.strip()
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    lines = [
        "# tram serve: serving benchmark (`tram bench serve`)",
        "",
        f"Machine: {cpu or platform.processor()}, {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores, CPU backend.",
        f"Workload: {args.setup}; Poisson arrivals; streaming completions, greedy, ignore_eos;",
        "goodput SLOs: TTFT <= 1000 ms and TPOT <= 250 ms.  Regenerate with `sh bench/serve_sweep.sh`.",
        f"Load average when the report was written: {load} (other jobs share the machine; the",
        "CPU backend is the f32 reference, so these numbers measure the server's plumbing more than speed).",
        "",
        "| rate (req/s) | done | req/s | out tok/s | goodput | TTFT p50 / p90 / p99 (ms) | TPOT p50 / p99 (ms) | ITL p50 / p99 (ms) | E2E p50 / p99 (ms) |",
        "|---:|---:|---:|---:|---:|---|---|---|---|",
    ]
    for r in runs:
        t, o, i, e = r["ttft_ms"], r["tpot_ms"], r["itl_ms"], r["e2el_ms"]
        lines.append(
            f"| {r['request_rate']:g} | {r['completed']}/{r['num_prompts']} | {r['request_throughput']:.2f} "
            f"| {r['output_throughput']:.1f} | {r.get('goodput', 0):.2f} "
            f"| {t['median']:.0f} / {t['p90']:.0f} / {t['p99']:.0f} | {o['median']:.0f} / {o['p99']:.0f} "
            f"| {i['median']:.0f} / {i['p99']:.0f} | {e['median']:.0f} / {e['p99']:.0f} |")
    lines.append("")
    lines.append(f"![p50/p99 TTFT and TPOT against request rate]({args.png.split('/')[-1]})")
    with open(args.md, "w") as f:
        f.write("\n".join(lines) + "\n")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rates = [r["request_rate"] for r in runs]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, title in ((axes[0], "ttft_ms", "TTFT"), (axes[1], "tpot_ms", "TPOT")):
        for stat, style in (("median", "o-"), ("p99", "s--")):
            ax.plot(rates, [r[key][stat] for r in runs], style, label=f"{'p50' if stat == 'median' else 'p99'}")
        ax.set_xlabel("request rate (req/s)")
        ax.set_ylabel(f"{title} (ms)")
        ax.set_title(f"{title} vs request rate")
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(args.png, dpi=100)


if __name__ == "__main__":
    main()
