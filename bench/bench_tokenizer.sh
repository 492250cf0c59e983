#!/bin/sh
# Encode throughput of tram's tokenizer beside HF `tokenizers` (PyPI), same
# machine, same run, same 10 MB of mixed text, one thread each; writes
# bench/results/tokenizer.md.  Needs `make` done and a Python with
# tokenizers + gguf (PYTHON=/path/to/python).
set -e
PYTHON=${PYTHON:-python3}
TEXT=${TMPDIR:-/tmp}/tram-bench-tokenizer.txt
make --no-print-directory build/libtram.a
cc -O2 -march=native -std=c11 -I. -D_GNU_SOURCE -o build/bench_tokenizer bench/bench_tokenizer.c build/libtram.a \
   $(pkg-config --libs openblas jansson libevent libevent_pthreads libpcre2-8 sentencepiece) -lstdc++ -lm -lpthread -fopenmp
$PYTHON bench/bench_tokenizer.py make "$TEXT"
tram=$(build/bench_tokenizer "$TEXT")
hf=$($PYTHON bench/bench_tokenizer.py run "$TEXT")
echo "$tram"
echo "$hf"
tram_tok=$(echo "$tram" | awk '{print $4}')
hf_tok=$(echo "$hf" | awk '{print $4}')
same=$([ "$tram_tok" = "$hf_tok" ] && echo "yes" || echo "NO")
{
    echo "# Tokenizer encode throughput"
    echo
    echo "Default model (SmolLM2-135M-Instruct, byte-level BPE, smollm pre-tokenizer), $(du -m "$TEXT" | cut -f1) MB"
    echo "of mixed text (the golden corpus: prose, code, CJK, Arabic, emoji, digits, whitespace runs)"
    echo "in ~8 KB documents, encoded one document at a time on one thread.  Same machine, same run."
    echo "Made by \`sh bench/bench_tokenizer.sh\` on $(date -u +%Y-%m-%d), $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')."
    echo
    echo "| tokenizer | MB/s | tokens | seconds |"
    echo "|---|---:|---:|---:|"
    echo "$tram" | awk '{printf "| tram (C, PCRE2 JIT) | %s | %s | %s |\n", $2, $4, $8}'
    echo "$hf" | awk '{printf "| HF tokenizers %s (Rust) | %s | %s | %s |\n", "'"$($PYTHON -c 'import tokenizers; print(tokenizers.__version__)')"'", $2, $4, $8}'
    echo
    echo "Identical token counts: $same."
} > bench/results/tokenizer.md
cat bench/results/tokenizer.md
