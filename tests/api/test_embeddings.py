"""POST /v1/embeddings through the openai SDK, on the fixture models of
tests/fixtures/make_embed_fixtures.py (a tiny Qwen3-Embedding-style model as a
sentence-transformers directory and as a GGUF): every input form and both
encodings against the sentence-transformers / transformers references, batch
invariance, Matryoshka dimensions, auth, metrics, and a 400 naming the field
for every bad input."""
import json
import math
import os
import subprocess

import openai
import pytest

from conftest import BIN, Server

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "embed")
ST_DIR = os.path.join(FIXTURES, "qwen3-st")
GGUF = os.path.join(FIXTURES, "qwen3-embed.gguf")
KEY = "embed-test-key"

with open(os.path.join(FIXTURES, "qwen3.json")) as f:
    CASES = json.load(f)["cases"]


@pytest.fixture(scope="module")
def st_server():
    s = Server("--api-key", KEY, "--max-model-len", "256", model=ST_DIR)
    yield s
    assert s.stop() == 0, s.final_log


@pytest.fixture(scope="module")
def st_client(st_server):
    return openai.OpenAI(base_url=st_server.base_url, api_key=KEY, max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def gguf_server():
    s = Server("--max-model-len", "256", model=GGUF)
    yield s
    assert s.stop() == 0, s.final_log


def cosine(a, b):
    assert len(a) == len(b)
    ab = sum(x * y for x, y in zip(a, b))
    return ab / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def assert_close(got, want):
    c = cosine(got, want)
    assert c >= 1 - 1e-4, c


def test_every_input_form(st_client):
    texts = [c["text"] for c in CASES]
    one = st_client.embeddings.create(model="qwen3-st", input=texts[0], encoding_format="float")
    assert_close(one.data[0].embedding, CASES[0]["sentence_transformers"])
    many = st_client.embeddings.create(model="qwen3-st", input=texts, encoding_format="float")
    assert [d.index for d in many.data] == list(range(len(CASES)))
    for d, c in zip(many.data, CASES):
        assert_close(d.embedding, c["sentence_transformers"])
    ids = st_client.embeddings.create(model="qwen3-st", input=CASES[1]["ids"], encoding_format="float")
    assert_close(ids.data[0].embedding, CASES[1]["last"])
    lists = st_client.embeddings.create(model="qwen3-st", input=[c["ids"] for c in CASES], encoding_format="float")
    for d, c in zip(lists.data, CASES):
        assert_close(d.embedding, c["last"])
    assert lists.usage.prompt_tokens == sum(len(c["ids"]) for c in CASES) == lists.usage.total_tokens
    assert lists.model == "qwen3-st"


def test_base64_is_the_same_vector(st_client):
    floats = st_client.embeddings.create(model="qwen3-st", input=CASES[2]["text"], encoding_format="float")
    # the SDK asks for base64 when no format is given, and decodes it
    default = st_client.embeddings.create(model="qwen3-st", input=CASES[2]["text"], user="someone")
    assert default.data[0].embedding == pytest.approx(floats.data[0].embedding, abs=1e-7)
    assert_close(default.data[0].embedding, CASES[2]["sentence_transformers"])


def test_batch_invariance(st_client):
    alone = st_client.embeddings.create(model="qwen3-st", input=CASES[2]["ids"], encoding_format="float")
    batch = [c["ids"] for c in CASES] * 13   # 65 inputs, the one of interest among them
    out = st_client.embeddings.create(model="qwen3-st", input=batch, encoding_format="float")
    assert len(out.data) == len(batch)
    for i in range(2, len(batch), len(CASES)):
        worst = max(abs(a - b) for a, b in zip(alone.data[0].embedding, out.data[i].embedding))
        assert worst <= 1e-6, (i, worst)


def test_matryoshka_dimensions(st_client, gguf_server):
    out = st_client.embeddings.create(model="qwen3-st", input=CASES[0]["ids"], dimensions=16, encoding_format="float")
    assert len(out.data[0].embedding) == 16
    assert_close(out.data[0].embedding, CASES[0]["last_dim16"])
    # the GGUF defines no Matryoshka truncation
    status, _, body = gguf_server.post("/v1/embeddings", {"input": "a", "dimensions": 16})
    assert status == 400 and body["error"]["param"] == "dimensions", body
    assert "Matryoshka" in body["error"]["message"]
    status, _, body = gguf_server.post("/v1/embeddings", {"input": CASES[3]["ids"], "encoding_format": "float"})
    assert status == 200, body
    assert_close(body["data"][0]["embedding"], CASES[3]["last"])


BAD = [
    ({"input": ""}, "input"),
    ({"input": []}, "input"),
    ({"input": [[]]}, "input[0]"),
    ({"input": ["a", ""]}, "input[1]"),
    ({}, "input"),
    ({"input": 5}, "input"),
    ({"input": {"text": "a"}}, "input"),
    ({"input": ["a", [1, 2]]}, "input[1]"),
    ({"input": [1, "a"]}, "input"),
    ({"input": [-1]}, "input"),
    ({"input": [10 ** 7]}, "input"),
    ({"input": [1] * 300}, "input"),
    ({"input": ["a"] * 2049}, "input"),
    ({"input": "a", "encoding_format": "int8"}, "encoding_format"),
    ({"input": "a", "dimensions": 0}, "dimensions"),
    ({"input": "a", "dimensions": 33}, "dimensions"),
    ({"input": "a", "dimensions": "16"}, "dimensions"),
    ({"input": "a", "frobnicate": 1}, "frobnicate"),
    ({"input": "a", "model": "another-model"}, "model"),
]


@pytest.mark.parametrize("body,param", BAD, ids=[p + ":" + json.dumps(b)[:40] for b, p in BAD])
def test_bad_inputs_are_400s_naming_the_field(st_server, body, param):
    status, _, reply = st_server.post("/v1/embeddings", body, headers={"Authorization": "Bearer " + KEY})
    assert reply["error"]["param"] == param, reply
    assert status == (404 if param == "model" else 400), reply


# Every field the table refuses on /v1/embeddings, each with a value that would change the output.
REFUSED = {"truncate_prompt_tokens": 4, "normalize": False}


def test_every_refused_field_is_a_400_naming_it(st_server):
    out = subprocess.run([BIN, "fields"], check=True, capture_output=True, text=True).stdout
    assert set(REFUSED) == {l.split()[0] for l in out.splitlines() if l.split()[1:] == ["embeddings", "refused"]}
    for name, value in REFUSED.items():
        status, _, reply = st_server.post("/v1/embeddings", {"input": "a", name: value},
                                          headers={"Authorization": "Bearer " + KEY})
        assert status == 400 and reply["error"]["param"] == name and name in reply["error"]["message"], reply


def test_bad_input_through_the_sdk(st_client):
    with pytest.raises(openai.BadRequestError) as e:
        st_client.embeddings.create(model="qwen3-st", input=[1] * 300)
    assert "256 tokens" in str(e.value)


def test_auth_and_metrics(st_server, st_client):
    status, _, _ = st_server.post("/v1/embeddings", {"input": "a"})
    assert status == 401
    def served():
        return sum(v for k, v in st_server.metrics().items()
                   if k.startswith("tram:request_success_total") and 'finished_reason="stop"' in k)
    before = served()
    st_client.embeddings.create(model="qwen3-st", input=["a", "b"])
    assert served() == before + 1


def test_cli_embed(tmp_path):
    """`tram embed`: a JSONL file in (text, ids, objects with an id), one line per input out, in order."""
    import subprocess
    from conftest import BIN
    lines = [json.dumps(CASES[0]["text"]), json.dumps(CASES[1]["ids"]), json.dumps({"input": CASES[2]["text"], "id": "c"})]
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("\n".join(lines) + "\n")
    subprocess.run([BIN, "embed", "-m", ST_DIR, "-i", str(src), "-o", str(dst), "-t", "1", "--max-model-len", "256"],
                   check=True)
    out = [json.loads(l) for l in dst.read_text().splitlines()]
    assert [o["index"] for o in out] == [0, 1, 2] and out[2]["id"] == "c" and "id" not in out[0]
    assert_close(out[0]["embedding"], CASES[0]["sentence_transformers"])
    assert_close(out[1]["embedding"], CASES[1]["last"])
    assert_close(out[2]["embedding"], CASES[2]["sentence_transformers"])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input": 5}\n')
    r = subprocess.run([BIN, "embed", "-m", ST_DIR, "-i", str(bad), "-o", str(dst)], capture_output=True, text=True)
    assert r.returncode == 2 and "line 1" in r.stderr, r.stderr


def test_embedding_only_model(tmp_path):
    """A base model saved without lm_head and untied serves embeddings and refuses completions."""
    import shutil
    d = tmp_path / "headless"
    shutil.copytree(ST_DIR, d)
    config = json.loads((d / "config.json").read_text())
    config["tie_word_embeddings"] = False
    (d / "config.json").write_text(json.dumps(config))
    s = Server("--max-model-len", "256", model=str(d))
    try:
        status, _, body = s.post("/v1/embeddings", {"input": CASES[0]["ids"], "encoding_format": "float"})
        assert status == 200, body
        assert_close(body["data"][0]["embedding"], CASES[0]["last"])
        status, _, body = s.post("/v1/completions", {"prompt": "a", "max_tokens": 2})
        assert status == 400 and "embeddings only" in body["error"]["message"], body
    finally:
        assert s.stop() == 0, s.final_log


def test_post_processor_eos_is_appended(tmp_path):
    """A tokenizer.json whose post-processor puts a special token after the text
    (Qwen3-Embedding's TemplateProcessing [$A, <|endoftext|>]): text inputs get
    it, as the HF tokenizer adds it, and add_special_tokens false leaves it out."""
    import shutil
    d = tmp_path / "with-eos"
    shutil.copytree(ST_DIR, d)
    tok = json.loads((d / "tokenizer.json").read_text())
    tok["post_processor"] = {"type": "TemplateProcessing",
                             "single": [{"Sequence": {"id": "A", "type_id": 0}},
                                        {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
                             "pair": [], "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [0],
                                                                             "tokens": ["<|endoftext|>"]}}}
    (d / "tokenizer.json").write_text(json.dumps(tok))
    s = Server("--max-model-len", "256", model=str(d))
    try:
        case = CASES[0]
        def embed(body):
            status, _, reply = s.post("/v1/embeddings", {"encoding_format": "float", **body})
            assert status == 200, reply
            return reply
        text = embed({"input": case["text"]})
        assert text["usage"]["prompt_tokens"] == len(case["ids"]) + 1
        ids = embed({"input": case["ids"] + [0]})
        assert max(abs(a - b) for a, b in zip(text["data"][0]["embedding"], ids["data"][0]["embedding"])) < 1e-6
        bare = embed({"input": case["text"], "add_special_tokens": False})
        assert bare["usage"]["prompt_tokens"] == len(case["ids"])
        assert_close(bare["data"][0]["embedding"], case["sentence_transformers"])
    finally:
        assert s.stop() == 0, s.final_log
