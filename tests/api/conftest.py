"""Fixtures: real `tram serve` processes on loopback ports, and raw HTTP helpers.

The session server listens on TRAM_PORT (picked by run.sh); tests that need
other flags (an API key, a tiny queue, a drain) start their own on a free port.
"""
import http.client
import json
import os
import signal
import socket
import subprocess
import tempfile
import time

import pytest

BIN = os.environ.get("TRAM_BIN", "bin/tram")
MODEL = os.environ.get("TRAM_MODEL", "models/SmolLM2-135M-Instruct.Q4_1.gguf")
THREADS = os.environ.get("TRAM_TEST_THREADS")
MODEL_NAME = os.path.splitext(os.path.basename(MODEL))[0]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One `tram serve` process; its log goes to a temporary file."""

    def __init__(self, *flags, port=None, model=MODEL):
        self.port = port or free_port()
        self.log = tempfile.NamedTemporaryFile(prefix="tram-serve-", suffix=".log", delete=False)
        cmd = [BIN, "serve", "-m", model, "--port", str(self.port), *flags]
        if THREADS:
            cmd += ["--threads", THREADS]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.model = os.path.splitext(os.path.basename(model.rstrip("/")))[0]
        self.wait_ready()

    def wait_ready(self, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            assert self.proc.poll() is None, f"tram serve exited: {self.log_text()}"
            try:
                if self.request("GET", "/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"tram serve not ready after {timeout} s: {self.log_text()}")

    def log_text(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()[-4000:]

    def request(self, method, path, body=None, headers=None, timeout=120):
        """(status, headers dict with lower-case names, body bytes)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body)
                headers = {"Content-Type": "application/json", **(headers or {})}
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def post(self, path, body, headers=None):
        status, hdrs, data = self.request("POST", path, body, headers)
        return status, hdrs, json.loads(data) if data else None

    def metrics(self):
        """{series: value} for every sample line of /metrics."""
        status, _, data = self.request("GET", "/metrics")
        assert status == 200
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                series, value = line.rsplit(" ", 1)
                out[series] = float(value)
        return out

    def metric(self, name, prefix="tram", **labels):
        labels = {"model_name": self.model, **labels}
        inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
        return self.metrics()[f"{prefix}:{name}{{{inner}}}"]

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        finally:
            self.final_log = self.log_text()
            self.log.close()
            os.unlink(self.log.name)


@pytest.fixture(scope="session")
def server():
    port = int(os.environ["TRAM_PORT"]) if os.environ.get("TRAM_PORT") else None
    s = Server(port=port)
    yield s
    assert s.stop() == 0, s.final_log


@pytest.fixture(scope="session")
def client(server):
    import openai

    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=300)


def stream_raw(port, path, body, on_chunk=None, timeout=120):
    """POSTs a streaming request over http.client and returns the list of SSE
    data payloads (strings); on_chunk(i, payload, conn) may return False to
    stop reading (the connection is then closed by the caller)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200, r.read()
    assert r.getheader("Content-Type").startswith("text/event-stream")
    events = []
    buf = b""
    while True:
        piece = r.read1(65536)
        if not piece:
            break
        buf += piece
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            assert event.startswith(b"data: "), event
            payload = event[6:].decode()
            events.append(payload)
            if on_chunk and on_chunk(len(events) - 1, payload, conn) is False:
                conn.close()
                return events
    conn.close()
    return events
