"""Several API keys: repeatable --api-key, --api-key-file with tenant names
(read again on SIGHUP), per-tenant metrics and response-cache entries, and
/metrics behind --metrics-api-key."""
import json
import signal
import subprocess
import time

import pytest

from conftest import BIN, MODEL, Server

CHAT = {"messages": [{"role": "user", "content": "Say yes"}], "max_tokens": 2, "temperature": 0}


def auth(key):
    return {"Authorization": f"Bearer {key}"}


def chat(server, key):
    return server.post("/v1/chat/completions", {"model": server.model, **CHAT}, auth(key))


def metrics_text(server, key=None):
    status, _, data = server.request("GET", "/metrics", headers=auth(key) if key else None)
    return status, data.decode()


@pytest.fixture(scope="module")
def tenants(tmp_path_factory):
    path = tmp_path_factory.mktemp("keys") / "keys.txt"
    path.write_text("# two tenants\nsk-alice-1 alice\nsk-bob-1 bob  # bob's\n")
    s = Server("--api-key", "sk-flag", "--api-key-file", str(path), "--response-cache", "deterministic",
               "--metrics-api-key", "sk-metrics")
    s.key_file = path
    yield s
    assert s.stop() == 0, s.final_log


def test_every_key_passes_and_nothing_else_does(tenants):
    for key in ("sk-flag", "sk-alice-1", "sk-bob-1"):
        assert chat(tenants, key)[0] == 200, key
    for key in ("sk-alice", "alice", "sk-metrics", ""):
        status, _, resp = chat(tenants, key)
        assert status == 401 and resp["error"]["code"] == "invalid_api_key", (key, resp)
    assert tenants.post("/v1/chat/completions", {"model": tenants.model, **CHAT})[0] == 401


def test_one_tenant_never_gets_another_tenants_cached_reply(tenants):
    body = {"model": tenants.model, **CHAT, "messages": [{"role": "user", "content": "Cache me per tenant"}]}
    first = tenants.post("/v1/chat/completions", body, auth("sk-alice-1"))
    again = tenants.post("/v1/chat/completions", body, auth("sk-alice-1"))
    other = tenants.post("/v1/chat/completions", body, auth("sk-bob-1"))
    assert [r[0] for r in (first, again, other)] == [200, 200, 200]
    assert first[1]["x-tram-cache"] == "miss" and again[1]["x-tram-cache"] == "hit"
    assert other[1]["x-tram-cache"] == "miss", "bob was served alice's entry"


def test_metrics_are_labelled_by_tenant_name_never_by_key_and_need_their_key(tenants):
    before = chat(tenants, "sk-bob-1")
    assert before[0] == 200
    assert metrics_text(tenants)[0] == 401
    assert metrics_text(tenants, "sk-alice-1")[0] == 401, "a tenant's key does not open /metrics"
    status, text = metrics_text(tenants, "sk-metrics")
    assert status == 200
    labels = {line.split('tenant="')[1].split('"')[0] for line in text.splitlines()
              if line.startswith("tram:tenant_requests_total{")}
    assert {"alice", "bob", "key1"} <= labels, labels
    assert "sk-" not in text, "a key shows in /metrics"


def test_sighup_reloads_the_file_and_a_bad_file_keeps_the_keys(tenants):
    def wait_for(key, status):
        deadline = time.time() + 30
        while chat(tenants, key)[0] != status:
            assert time.time() < deadline, f"{key} never answered {status}: {tenants.log_text()}"
            time.sleep(0.1)

    tenants.key_file.write_text("sk-carol-1 carol\nsk-bob-1 bob\n")
    tenants.proc.send_signal(signal.SIGHUP)
    wait_for("sk-carol-1", 200)
    assert chat(tenants, "sk-alice-1")[0] == 401, "a key removed from the file still passes"
    assert chat(tenants, "sk-flag")[0] == 200, "the command line's key stays"
    tenants.key_file.write_text("sk-dave-1 dave\nsk-dave-1 dave2\n")
    tenants.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 30
    while "api keys not reloaded" not in tenants.log_text():
        assert time.time() < deadline, tenants.log_text()
        time.sleep(0.1)
    assert ":2: the key is given twice" in tenants.log_text()
    assert chat(tenants, "sk-carol-1")[0] == 200 and chat(tenants, "sk-dave-1")[0] == 401


@pytest.mark.parametrize("text, words", [
    ("sk-a a\nsk-b b extra\n", ":2: expected a key and at most a tenant name"),
    ("# only comments\n", "holds no key")])
def test_a_bad_key_file_stops_serve_naming_the_line(tmp_path, text, words):
    path = tmp_path / "keys.txt"
    path.write_text(text)
    r = subprocess.run([BIN, "serve", "-m", MODEL, "--port", "0", "--api-key-file", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--api-key-file" in r.stderr and words in r.stderr, r.stderr


def test_tram_api_key_is_the_key_when_no_flag_gives_one(monkeypatch):
    monkeypatch.setenv("TRAM_API_KEY", "sk-from-env")
    s = Server()
    try:
        assert chat(s, "sk-from-env")[0] == 200
        assert chat(s, "sk-other")[0] == 401
        assert metrics_text(s)[0] == 200, "/metrics stays open without --metrics-api-key"
    finally:
        assert s.stop() == 0, s.final_log


PRELOADED = {"prompt": "Preloaded for the one tenant:", "max_tokens": 3, "temperature": 0}


def write_preload(tmp_path):
    path = tmp_path / "hot.jsonl"
    path.write_text(json.dumps({"custom_id": "hot", "method": "POST", "url": "/v1/completions",
                                "body": PRELOADED}) + "\n")
    return path


def test_one_key_and_a_preload_serve_the_preloaded_reply_to_that_key(tmp_path):
    s = Server("--api-key", "sk-only", "--response-cache", "deterministic",
               "--response-cache-preload", str(write_preload(tmp_path)))
    try:
        status, hdrs, _ = s.post("/v1/completions", {"model": s.model, **PRELOADED}, auth("sk-only"))
        assert status == 200 and hdrs["x-tram-cache"] == "hit", hdrs
    finally:
        assert s.stop() == 0, s.final_log


def test_keys_of_several_tenants_and_a_preload_are_refused_at_start(tmp_path):
    r = subprocess.run([BIN, "serve", "-m", MODEL, "--port", "0", "--api-key", "sk-a", "--api-key", "sk-b",
                        "--response-cache", "deterministic",
                        "--response-cache-preload", str(write_preload(tmp_path))],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "2 tenants" in r.stderr, r.stderr
