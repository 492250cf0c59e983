"""HF `tokenizers` side of bench_tokenizer.sh: makes the 10 MB text file from
the golden corpus (mode 'make') or encodes it one document at a time on one
thread (mode 'run'), with the same tokenizer the golden tests use."""
import os
import sys
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"
sys.path.insert(0, "tests/fixtures")
import json

mode, path = sys.argv[1], sys.argv[2]
if mode == "make":
    texts = [json.loads(line)["text"] for line in open("tests/fixtures/tokenizer/smollm_corpus.jsonl", encoding="utf-8")]
    texts = [t.replace("\f", " ") for t in texts if t]
    docs, size, i = [], 0, 0
    while size < 10_000_000:   # documents of about 8 KB of mixed text
        doc = []
        while sum(len(d.encode()) for d in doc) < 8000:
            doc.append(texts[i % len(texts)])
            i += 7
        s = "\n".join(doc)
        docs.append(s)
        size += len(s.encode()) + 1
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("\f".join(docs))
else:
    from make_tokenizer_fixtures import smollm_tokenizer
    tok = smollm_tokenizer()
    tok.encode_special_tokens = True   # as tram's parse_special = 0
    data = open(path, encoding="utf-8", newline="").read()
    docs = data.split("\f")
    t0 = time.perf_counter()
    tokens = sum(len(tok.encode(d, add_special_tokens=False).ids) for d in docs)
    secs = time.perf_counter() - t0
    print(f"hf {len(data.encode()) / 1e6 / secs:.2f} MB/s {tokens} tokens {len(docs)} docs {secs:.3f} s")
