"""The local fleet test: three `tram serve` replicas on loopback behind nginx
(least connections, retries on 503 and on connection errors), under a
bounded load.  One replica gets SIGTERM (it must drain: finish what it holds,
take nothing new), another SIGKILL.  Every request must end with the correct
body, or, only when it was in flight on the killed replica, with a clean
error (an HTTP error status or a stream cut short, never a wrong text).
Then 16 identical concurrent requests to the survivor must leave its engine
counters showing one computation.  Prints the counts; exits 1 on a failure.

Run by tests/fleet/run.sh (TRAM_BIN, TRAM_MODEL, TRAM_TEST_THREADS)."""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

BIN = os.environ.get("TRAM_BIN", "bin/tram")
MODEL = os.environ.get("TRAM_MODEL", "models/SmolLM2-135M-Instruct.Q4_1.gguf")
THREADS = os.environ.get("TRAM_TEST_THREADS", "1")
NGINX = os.environ.get("NGINX", "/usr/sbin/nginx")

PROMPTS = ["The sky is", "My favourite food is", "In the morning I", "A good book"]
MAX_TOKENS = 6
CLIENTS = 6          # concurrent clients: the bounded load
REQUESTS = 30        # in all
SIGTERM_AT = 4       # completed requests before the drain starts
SIGKILL_AT = 10      # ... before the kill


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, body=None, headers=None, timeout=120):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = json.dumps(body) if body is not None else None
        conn.request(method, path, body=data,
                     headers={"Content-Type": "application/json", **(headers or {})})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def metric(port, name):
    """The sum of a /metrics series over its labels."""
    _, _, data = request(port, "GET", "/metrics")
    total = 0.0
    for line in data.decode().splitlines():
        if line.startswith(f"tram:{name}{{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


class Replica:
    def __init__(self, index, workdir):
        self.port = free_port()
        self.log_path = os.path.join(workdir, f"replica{index}.log")
        self.log = open(self.log_path, "w")
        # the cache is on, as in production; the load opts out per request so
        # that it exercises the engines
        self.proc = subprocess.Popen(
            [BIN, "serve", "-m", MODEL, "--port", str(self.port), "--threads", THREADS,
             "--served-model-name", "tram", "--response-cache", "deterministic",
             "--drain-timeout", "60"], stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout=180):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                sys.exit(f"replica on {self.port} exited: {open(self.log_path).read()[-3000:]}")
            try:
                if request(self.port, "GET", "/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        sys.exit(f"replica on {self.port} not ready after {timeout} s")


NGINX_CONF = """
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 512; }}
http {{
    log_format fleet '$request_uri $status upstream=$upstream_addr statuses=$upstream_status';
    access_log {dir}/access.log fleet;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    upstream tram {{
        least_conn;
{servers}
        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://tram;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 300s;
            # a draining replica answers 503, a dead one refuses or resets:
            # both are safe to send elsewhere (generation has no side effects)
            proxy_next_upstream error timeout http_503 non_idempotent;
            proxy_next_upstream_tries 3;
            add_header X-Upstream $upstream_addr always;
        }}
    }}
}}
"""


def start_nginx(workdir, replicas):
    port = free_port()
    servers = "\n".join(f"        server 127.0.0.1:{r.port} max_fails=0;" for r in replicas)
    conf = os.path.join(workdir, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(dir=workdir, servers=servers, port=port))
    proc = subprocess.Popen([NGINX, "-p", workdir, "-e", os.path.join(workdir, "error.log"),
                             "-c", conf, "-g", "daemon off; master_process off;"])
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    sys.exit("nginx did not start")


def one_request(port, prompt, stream):
    """(outcome, text, upstream): outcome 'ok', or 'error' with what happened."""
    body = {"model": "tram", "prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0,
            "ignore_eos": True, "stream": stream}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    upstream = ""
    try:
        conn.request("POST", "/v1/completions", body=json.dumps(body),
                     headers={"Content-Type": "application/json", "Cache-Control": "no-cache"})
        r = conn.getresponse()
        upstream = r.getheader("X-Upstream", "")
        data = r.read()
        if r.status != 200:
            return "error", f"HTTP {r.status}", upstream
        if not stream:
            return "ok", json.loads(data)["choices"][0]["text"], upstream
        events = [e[6:].decode() for e in data.split(b"\n\n") if e.startswith(b"data: ")]
        if not events or events[-1] != "[DONE]":
            return "error", "stream cut short", upstream
        return "ok", "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1]), upstream
    except (OSError, http.client.HTTPException) as e:
        return "error", f"{type(e).__name__}", upstream
    finally:
        conn.close()


class Load:
    """CLIENTS threads sending REQUESTS requests in all, one at a time each."""

    def __init__(self, port):
        self.port = port
        self.results = []
        self.lock = threading.Lock()
        self.next = 0

    def take(self):
        with self.lock:
            if self.next >= REQUESTS:
                return None
            self.next += 1
            return self.next - 1

    def client(self):
        while (i := self.take()) is not None:
            prompt = PROMPTS[i % len(PROMPTS)]
            started = time.time()
            outcome, text, upstream = one_request(self.port, prompt, stream=i % 2 == 0)
            with self.lock:
                self.results.append((i, prompt, outcome, text, upstream, started, time.time()))

    def done(self):
        with self.lock:
            return len(self.results)

    def run(self):
        self.threads = [threading.Thread(target=self.client) for _ in range(CLIENTS)]
        for t in self.threads:
            t.start()

    def join(self):
        for t in self.threads:
            t.join()


def wait_for(pred, what, timeout=120):
    deadline = time.time() + timeout
    while not pred():
        if time.time() > deadline:
            sys.exit(f"timed out waiting for {what}")
        time.sleep(0.01)


def expected_texts(port):
    """Each prompt's greedy text, from one replica, before the load."""
    out = {}
    for p in PROMPTS:
        outcome, text, _ = one_request(port, p, stream=False)
        assert outcome == "ok", text
        out[p] = text
    return out


def ready(port):
    try:
        return request(port, "GET", "/readyz", timeout=5)[0] == 200
    except OSError:
        return False


def busy(port):
    try:
        return metric(port, "num_requests_running") > 0
    except OSError:
        return False


def check(results, expected, killed, drained, drain_started):
    failures = []
    killed_addr, drained_addr = f"127.0.0.1:{killed.port}", f"127.0.0.1:{drained.port}"
    for i, prompt, outcome, text, upstream, started, _ in results:
        if outcome == "ok" and text != expected[prompt]:
            failures.append(f"request {i}: wrong text {text!r} (expected {expected[prompt]!r})")
        if outcome == "error" and killed_addr not in upstream:
            failures.append(f"request {i}: {text} via {upstream or 'no replica'}, "
                            "not the killed replica")
        if drained_addr in upstream.split(", ")[-1:] and outcome != "ok":
            failures.append(f"request {i}: the draining replica failed it ({text})")
        # a request the draining replica answered reached it before the drain:
        # after SIGTERM it refuses (503 or no connection) and nginx goes elsewhere
        if drained_addr in upstream.split(", ")[-1:] and started > drain_started:
            failures.append(f"request {i}: sent after the drain began, answered by the "
                            "draining replica")
    return failures


def single_flight(port):
    """16 identical concurrent requests to one replica: one computation."""
    body = {"model": "tram", "prompt": "Sixteen clients ask the same thing:", "max_tokens": 8,
            "temperature": 0, "ignore_eos": True}
    before = metric(port, "generation_tokens_total"), metric(port, "prompt_tokens_total")
    replies = [None] * 16

    def ask(k):
        replies[k] = request(port, "POST", "/v1/completions", body)

    threads = [threading.Thread(target=ask, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bodies = [json.loads(r[2]) for r in replies]
    assert all(r[0] == 200 for r in replies), [r[0] for r in replies]
    texts = {b["choices"][0]["text"] for b in bodies}
    generated = metric(port, "generation_tokens_total") - before[0]
    prompted = metric(port, "prompt_tokens_total") - before[1]
    states = [r[1].get("x-tram-cache") for r in replies]
    print(f"single-flight: 16 identical requests -> {len(texts)} distinct text, engine generated "
          f"{generated:.0f} tokens (one request: 8) for {prompted:.0f} prompt tokens (one prompt: "
          f"{bodies[0]['usage']['prompt_tokens']}); miss={states.count('miss')} "
          f"coalesced={states.count('coalesced')} hit={states.count('hit')}")
    ok = (len(texts) == 1 and generated == 8 and prompted == bodies[0]["usage"]["prompt_tokens"]
          and states.count("miss") == 1)
    return [] if ok else ["single-flight: the 16 requests were not one computation"]


def main():
    workdir = tempfile.mkdtemp(prefix="tram-fleet-")
    replicas = [Replica(i, workdir) for i in range(3)]
    nginx = None
    try:
        t0 = time.time()
        for r in replicas:
            r.wait_ready()
        print(f"fleet: three replicas ready in {time.time() - t0:.1f} s")
        nginx, port = start_nginx(workdir, replicas)
        expected = expected_texts(replicas[0].port)
        drained, killed, survivor = replicas
        load = Load(port)
        load.run()
        wait_for(lambda: load.done() >= SIGTERM_AT and busy(drained.port), "a busy replica to drain")
        drained.proc.send_signal(signal.SIGTERM)
        # the drain begins when the replica's loop has taken the signal: a
        # request that reached it before then is still its to answer
        wait_for(lambda: not ready(drained.port), "the replica to start draining")
        drain_started = time.time()
        wait_for(lambda: load.done() >= SIGKILL_AT and busy(killed.port), "a busy replica to kill")
        killed.proc.kill()
        load.join()
        drained_rc = drained.proc.wait(timeout=90)
        results = sorted(load.results)
        failures = check(results, expected, killed, drained, drain_started)
        if drained_rc != 0:
            failures.append(f"the drained replica exited {drained_rc}")
        ok = sum(1 for r in results if r[2] == "ok")
        errors = [r for r in results if r[2] == "error"]
        by = {rep.port: sum(1 for r in results if f":{rep.port}" in r[4].split(", ")[-1])
              for rep in replicas}
        with open(os.path.join(workdir, "access.log")) as f:
            retried = sum(1 for line in f if "," in line.split("statuses=")[1])
        print(f"fleet: {len(results)} requests: {ok} correct, {len(errors)} clean errors "
              f"(in flight on the killed replica: {', '.join(e[3] for e in errors) or 'none'}); "
              f"answered by drained/killed/survivor: {by[drained.port]}/{by[killed.port]}/"
              f"{by[survivor.port]}; retried by nginx on another replica: {retried}; "
              f"drained replica exit code {drained_rc}")
        failures += single_flight(survivor.port)
        for f in failures:
            print("FAIL", f)
        return 1 if failures else 0
    finally:
        for r in replicas:
            if r.proc.poll() is None:
                r.proc.send_signal(signal.SIGTERM)
                r.proc.wait(timeout=90)
        if nginx:
            nginx.send_signal(signal.SIGQUIT)
            nginx.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
