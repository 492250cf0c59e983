"""LoRA adapters over HTTP, as vLLM serves them: --lora-modules, each adapter
a model of /v1/models with the base as its parent, chosen by `model`; the
greedy tokens of peft's PeftModel (tests/fixtures/make_lora_fixtures.py) for
each adapter, also with more adapters in flight than --max-loras slots; the
prefix cache kept apart per adapter; the runtime load and unload endpoints
and vllm:lora_requests_info (an unload refused while requests use the
adapter: tests/unit/test_lora.c, where the engine can be held mid-request);
bad adapters loaded at runtime (truncated, too high a rank, a module the
base lacks, another vocabulary), each a 400 naming it, the server serving on."""
import json
import os
import struct
import subprocess
import threading

import pytest

from conftest import BIN, Server

FIX = "tests/fixtures/lora"
ADAPTERS = ["sql", "chat", "code"]


def golden(name):
    with open(os.path.join(FIX, name + ".json")) as f:
        return json.load(f)["cases"]


def lora_server(*flags):
    modules = ",".join(f"{a}={FIX}/{a}" for a in ADAPTERS)
    s = Server("-m", f"{FIX}/base", "--lora-modules", modules, "--max-loras", "2", "--max-cpu-loras", "4",
               "--max-lora-rank", "16", *flags)
    s.model = "base"
    return s


@pytest.fixture(scope="module")
def lora():
    s = lora_server("--enable-lora-runtime-updates", "--metrics-prefix", "vllm")
    yield s
    assert s.stop() == 0, s.final_log


def complete(s, model, prompt, max_tokens=10, **extra):
    return s.post("/v1/completions", {"model": model, "prompt": prompt, "max_tokens": max_tokens,
                                      "temperature": 0, "ignore_eos": True, **extra})


def detokenize(s, ids):
    status, _, body = s.post("/detokenize", {"tokens": ids})
    assert status == 200, body
    return body["prompt"]


def test_models_lists_each_adapter_with_the_base_as_parent(lora):
    status, _, body = lora.request("GET", "/v1/models")
    assert status == 200
    models = {m["id"]: m for m in json.loads(body)["data"]}
    assert set(models) == {"base", *ADAPTERS}
    assert models["base"]["parent"] is None
    for a in ADAPTERS:
        assert models[a]["parent"] == "base"


@pytest.mark.parametrize("name", ["base", *ADAPTERS])
def test_each_model_gives_peft_greedy_tokens(lora, name):
    for case in golden(name):
        status, _, body = complete(lora, name, case["prompt_ids"])
        assert status == 200, body
        assert body["model"] == name
        assert body["choices"][0]["text"] == detokenize(lora, case["greedy_ids"])


def test_more_adapters_in_flight_than_slots_each_stay_exact(lora):
    """Three adapters and the base at once over two slots: the scheduler holds
    back what would need a third, and every answer is still peft's."""
    jobs = [(name, case) for name in ["base", *ADAPTERS] for case in golden(name)]
    answers = [None] * len(jobs)

    def run(i):
        answers[i] = complete(lora, jobs[i][0], jobs[i][1]["prompt_ids"])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (name, case), (status, _, body) in zip(jobs, answers):
        assert status == 200, body
        assert body["choices"][0]["text"] == detokenize(lora, case["greedy_ids"]), name


def test_an_unknown_model_is_a_404_naming_it(lora):
    status, _, body = complete(lora, "no-such-adapter", [1, 2, 3])
    assert status == 404
    assert body["error"]["param"] == "model"
    assert "'no-such-adapter' does not exist" in body["error"]["message"]


def test_two_adapters_never_share_prefix_cache_blocks(lora):
    prompt = list(range(100, 164))       # four full blocks of 16
    first = complete(lora, "sql", prompt, max_tokens=1)[2]
    again = complete(lora, "sql", prompt, max_tokens=1)[2]
    other = complete(lora, "chat", prompt, max_tokens=1)[2]
    base = complete(lora, "base", prompt, max_tokens=1)[2]
    cached = [r["usage"]["prompt_tokens_details"]["cached_tokens"] for r in (first, again, other, base)]
    assert cached[1] >= 48, cached       # the same adapter reuses its blocks
    assert cached[2] == 0 and cached[3] == 0, cached


def test_load_use_and_unload_at_runtime(lora):
    status, _, body = lora.post("/v1/load_lora_adapter", {"lora_name": "sql2", "lora_path": f"{FIX}/sql"})
    assert status == 200, body
    case = golden("sql")[0]
    assert complete(lora, "sql2", case["prompt_ids"])[2]["choices"][0]["text"] == detokenize(lora, case["greedy_ids"])
    status, _, body = lora.post("/v1/load_lora_adapter", {"lora_name": "sql2", "lora_path": f"{FIX}/sql"})
    assert status == 400 and "already loaded" in body["error"]["message"]
    assert lora.post("/v1/unload_lora_adapter", {"lora_name": "sql2"})[0] == 200
    assert complete(lora, "sql2", [1, 2])[0] == 404
    status, _, body = lora.post("/v1/unload_lora_adapter", {"lora_name": "sql2"})
    assert status == 404 and body["error"]["param"] == "lora_name"


@pytest.mark.parametrize("body, param, words", [
    ({"lora_name": "x", "lora_path": "/nonexistent/adapter"}, "lora_path", "/nonexistent/adapter"),
    ({"lora_name": "x"}, "lora_path", "'lora_path' must be"),
    ({"lora_path": f"{FIX}/sql"}, "lora_name", "'lora_name' must be"),
    ({"lora_name": "base", "lora_path": f"{FIX}/sql"}, "lora_name", "the base model's name"),
])
def test_a_bad_load_is_a_400_and_the_server_keeps_serving(lora, body, param, words):
    status, _, reply = lora.post("/v1/load_lora_adapter", body)
    assert status == 400, reply
    assert reply["error"]["param"] == param and words in reply["error"]["message"]
    assert complete(lora, "sql", [1, 2, 3], max_tokens=1)[0] == 200


def adapter_copy(tmp_path, config=None, tensors=None, truncate=None, tokens=None):
    """A copy of the sql adapter in tmp_path, its config updated with config,
    extra F32 tensors (name: shape, zeros) appended to its safetensors, the
    file cut to truncate bytes, or the base's tokenizer beside it with added
    tokens named by tokens."""
    d = tmp_path / "adapter"
    d.mkdir()
    with open(f"{FIX}/sql/adapter_config.json") as f:
        cfg = json.load(f)
    (d / "adapter_config.json").write_text(json.dumps({**cfg, **(config or {})}))
    with open(f"{FIX}/sql/adapter_model.safetensors", "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
    for name, shape in (tensors or {}).items():
        size = 4 * shape[0] * shape[1]
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + size]}
        data += bytes(size)
    text = json.dumps(header).encode()
    raw = struct.pack("<Q", len(text)) + text + data
    (d / "adapter_model.safetensors").write_bytes(raw[:truncate])
    if tokens is not None:
        with open(f"{FIX}/base/tokenizer.json") as f:
            tok = json.load(f)
        first = len(tok["model"]["vocab"])
        tok["added_tokens"] += [{"id": first + i, "content": t, "single_word": False, "lstrip": False,
                                 "rstrip": False, "normalized": False, "special": True} for i, t in enumerate(tokens)]
        (d / "tokenizer.json").write_text(json.dumps(tok))
        (d / "tokenizer_config.json").write_text(open(f"{FIX}/base/tokenizer_config.json").read())
    return d


@pytest.mark.parametrize("kind, words", [
    ("truncated", ["adapter_model.safetensors", "data_offsets"]),
    ("rank", ["rank 32 exceeds --max-lora-rank 16"]),
    ("target", ['target module "c_attn": the base model has no such projection']),
    ("head", ["base_model.model.lm_head.weight has a vocabulary of 3010 tokens, the base model's has 3008"]),
    ("tokenizer", ["the adapter's tokenizer has a vocabulary of 3001 tokens, the base model's has 3000"]),
])
def test_a_bad_adapter_is_a_400_naming_the_problem_and_the_server_keeps_serving(lora, tmp_path, kind, words):
    d = adapter_copy(tmp_path, **{
        "truncated": {"truncate": 4000},
        "rank": {"config": {"r": 32}},
        "target": {"config": {"target_modules": ["q_proj", "c_attn"]}},
        "head": {"tensors": {"base_model.model.lm_head.weight": [3010, 32]}},
        "tokenizer": {"tokens": ["<|new_tool|>"]},
    }[kind])
    status, _, reply = lora.post("/v1/load_lora_adapter", {"lora_name": "bad", "lora_path": str(d)})
    assert status == 400, reply
    assert reply["error"]["param"] == "lora_path"
    for w in words:
        assert w in reply["error"]["message"], reply["error"]["message"]
    case = golden("sql")[0]
    status, _, body = complete(lora, "sql", case["prompt_ids"])
    assert status == 200 and body["choices"][0]["text"] == detokenize(lora, case["greedy_ids"])
    assert complete(lora, "bad", [1, 2])[0] == 404


def test_an_adapter_carrying_the_base_tokenizer_loads(lora, tmp_path):
    d = adapter_copy(tmp_path, tokens=[])
    status, _, reply = lora.post("/v1/load_lora_adapter", {"lora_name": "with-tok", "lora_path": str(d)})
    assert status == 200, reply
    assert lora.post("/v1/unload_lora_adapter", {"lora_name": "with-tok"})[0] == 200


def test_a_gguf_adapter_serves_as_its_peft_directory(lora):
    """llama.cpp's GGUF LoRA layout (tests/fixtures/make_lora_gguf.py), loaded
    by path as a directory is: PeftModel's tokens for the adapter it was
    written from."""
    status, _, reply = lora.post("/v1/load_lora_adapter", {"lora_name": "code-gguf",
                                                            "lora_path": f"{FIX}/code.gguf"})
    assert status == 200, reply
    for case in golden("code"):
        status, _, body = complete(lora, "code-gguf", case["prompt_ids"])
        assert status == 200, body
        assert body["choices"][0]["text"] == detokenize(lora, case["greedy_ids"])
    assert lora.post("/v1/unload_lora_adapter", {"lora_name": "code-gguf"})[0] == 200


def test_lora_requests_info_as_vllm_writes_it(lora):
    """The info gauge the Inference Extension reads (what it lists while
    requests run: tests/unit/test_lora.c)."""
    _, _, text = lora.request("GET", "/metrics")
    lines = [l for l in text.decode().splitlines() if l.startswith("vllm:lora_requests_info")]
    assert lines == [lines[0]] and lines[0].startswith(
        'vllm:lora_requests_info{max_lora="2",waiting_lora_adapters="",running_lora_adapters=""} '), lines
    assert float(lines[0].rsplit(" ", 1)[1]) > 1.7e9   # the time of the scrape


def test_runtime_updates_are_off_without_the_flag_and_behind_the_api_key():
    s = lora_server("--api-key", "k")
    try:
        hdr = {"Authorization": "Bearer k"}
        status, _, body = s.post("/v1/load_lora_adapter", {"lora_name": "x", "lora_path": f"{FIX}/sql"}, hdr)
        assert status == 404 and "--enable-lora-runtime-updates" in body["error"]["message"]
        assert s.post("/v1/load_lora_adapter", {"lora_name": "x", "lora_path": f"{FIX}/sql"})[0] == 401
    finally:
        s.stop()


@pytest.mark.parametrize("module, words", [
    ("bad=/nonexistent/adapter", "/nonexistent/adapter"),
    ("=tests/fixtures/lora/sql", "NAME=PATH"),
])
def test_a_bad_lora_module_at_start_is_a_clear_error(module, words):
    r = subprocess.run([BIN, "serve", "-m", f"{FIX}/base", "--port", "0", "--lora-modules", module],
                       capture_output=True, timeout=60)
    assert r.returncode != 0
    assert words in r.stderr.decode()


def test_the_batch_cli_selects_adapters_by_model(tmp_path):
    case = golden("code")[0]
    request = {"method": "POST", "url": "/v1/completions"}
    lines = [{"custom_id": "code", **request, "body": {"model": "code", "prompt": case["prompt_ids"],
                                                       "max_tokens": 10, "temperature": 0, "ignore_eos": True}},
             {"custom_id": "nope", **request, "body": {"model": "nope", "prompt": [1, 2], "max_tokens": 2}}]
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(l) + "\n" for l in lines))
    r = subprocess.run([BIN, "generate", "-m", f"{FIX}/base", "--input", str(src), "--output", str(out),
                        "--lora-modules", f"code={FIX}/code", "--threads", "1"], capture_output=True, timeout=120)
    assert r.returncode == 1, r.stderr          # one line failed: the unknown model
    got = {o["custom_id"]: o["response"] for o in map(json.loads, out.read_text().splitlines())}
    assert got["nope"]["status_code"] == 404
    assert got["code"]["status_code"] == 200 and got["code"]["body"]["model"] == "code"
    s = lora_server()
    try:
        assert got["code"]["body"]["choices"][0]["text"] == detokenize(s, case["greedy_ids"])
    finally:
        s.stop()


def test_tram_info_shows_an_adapters_rank_alpha_and_targets(tmp_path):
    r = subprocess.run([BIN, "info", f"{FIX}/sql"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    fields = dict(line.split(None, 1) for line in r.stdout.splitlines())
    assert fields["rank"] == "8" and fields["alpha"] == "16" and fields["rslora"] == "no"
    assert fields["targets"] == "q_proj v_proj" and fields["scale"] == "2"
    with open(f"{FIX}/sql/adapter_config.json") as f:
        config = json.load(f)
    (tmp_path / "adapter_config.json").write_text(json.dumps({**config, "use_dora": True}))
    r = subprocess.run([BIN, "info", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and '"use_dora" is set: DoRA' in r.stderr
