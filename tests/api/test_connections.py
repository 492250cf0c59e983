"""Clients that leave, and the graceful drain on SIGTERM."""
import json
import signal
import socket
import time

import pytest

from conftest import Server, stream_raw


def wait_for(pred, timeout=30):
    """Polls pred() until it holds; returns the seconds it took."""
    start = time.time()
    while not pred():
        assert time.time() - start < timeout, "condition not reached"
        time.sleep(0.02)
    return time.time() - start


def test_client_dropping_mid_stream_frees_its_request(server):
    idle_kv = server.metric("kv_cache_usage_perc")
    seen = {}

    def on_chunk(i, payload, conn):
        if i == 3:
            seen["running"] = server.metric("num_requests_running")
            seen["kv"] = server.metric("kv_cache_usage_perc")
            conn.sock.shutdown(socket.SHUT_RDWR)
            return False

    body = {"model": server.model, "prompt": "Tell me a long story.", "max_tokens": 500,
            "temperature": 0, "ignore_eos": True, "stream": True}
    stream_raw(server.port, "/v1/completions", body, on_chunk)
    assert seen["running"] == 1 and seen["kv"] > idle_kv
    took = wait_for(lambda: server.metric("num_requests_running") == 0
                    and server.metric("kv_cache_usage_perc") == idle_kv)
    print(f"running and KV back to idle {took:.3f} s after the client left")
    assert server.metric("request_success_total", finished_reason="abort") >= 1
    assert server.request("GET", "/health")[0] == 200


def test_client_dropping_while_queued_or_waiting():
    s = Server("--max-num-seqs", "1")
    try:
        long_body = {"prompt": "Count slowly:", "max_tokens": 400, "temperature": 0, "ignore_eos": True,
                     "stream": True}
        first = socket.create_connection(("127.0.0.1", s.port))
        first.sendall(raw_post("/v1/completions", long_body))
        wait_for(lambda: s.metric("num_requests_running") == 1)
        queued = socket.create_connection(("127.0.0.1", s.port))
        queued.sendall(raw_post("/v1/completions", {**long_body, "stream": False}))
        wait_for(lambda: s.metric("num_requests_waiting") == 1)
        queued.close()
        took = wait_for(lambda: s.metric("num_requests_waiting") == 0)
        print(f"queued request dropped {took:.3f} s after its client left")
        assert s.metric("num_requests_running") == 1
        first.close()
        wait_for(lambda: s.metric("num_requests_running") == 0 and s.metric("kv_cache_usage_perc") == 0)
    finally:
        assert s.stop() == 0, s.final_log


def raw_post(path, body):
    data = json.dumps(body).encode()
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n").encode() + data


def stream_then_sigterm(drain_timeout, max_tokens):
    """Starts a server with --drain-timeout, streams a completion and sends
    SIGTERM at its first chunk; returns the server and the SSE payloads."""
    s = Server("--drain-timeout", drain_timeout)
    body = {"prompt": "Hello", "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True}

    def on_chunk(i, payload, conn):
        if i == 0:
            s.proc.send_signal(signal.SIGTERM)

    return s, stream_raw(s.port, "/v1/completions", body, on_chunk)


def test_sigterm_lets_a_stream_finish_then_exits_0():
    s, events = stream_then_sigterm("60", 12)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert sum(1 for c in chunks if c["choices"][0]["text"]) >= 1
    assert s.proc.wait(timeout=60) == 0
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", s.port), timeout=5)
    s.stop()


def test_drain_timeout_aborts_what_is_left():
    s, events = stream_then_sigterm("0.5", 2000)
    assert events[-1] == "[DONE]"
    assert json.loads(events[-2])["choices"][0]["finish_reason"] == "abort"
    assert s.proc.wait(timeout=60) == 0
    s.stop()


GET_ROUTES = ["/health", "/readyz", "/livez", "/v1/models", "/metrics", "/version"]


def read_response(sock, buf, head):
    """(status, headers, body, rest of buf) of one response read off a raw
    socket, framed by its Content-Length (none is read after a HEAD)."""
    while b"\r\n\r\n" not in buf:
        piece = sock.recv(65536)
        assert piece, f"connection closed inside the headers: {buf!r}"
        buf += piece
    header, buf = buf.split(b"\r\n\r\n", 1)
    lines = header.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    length = int(headers["content-length"])
    want = 0 if head else length
    while len(buf) < want:
        piece = sock.recv(65536)
        assert piece, "connection closed inside the body"
        buf += piece
    return status, headers, buf[:want], buf[want:]


@pytest.mark.parametrize("path", GET_ROUTES)
def test_head_sends_gets_headers_and_no_body_on_a_keep_alive_connection(server, path):
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    try:
        sock.sendall(f"HEAD {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        head_status, head_headers, _, rest = read_response(sock, b"", head=True)
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        status, headers, body, rest = read_response(sock, rest, head=False)
        assert rest == b"", "bytes after the GET's body: the HEAD sent a body"
        assert (head_status, status) == (200, 200)
        assert head_headers["content-type"] == headers["content-type"]
        if path != "/metrics":  # its counters move between the two
            assert head_headers["content-length"] == headers["content-length"]
            json.loads(body)
        else:
            assert b"# TYPE" in body
    finally:
        sock.close()


def test_head_of_a_post_route_is_a_framed_405(server):
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    try:
        sock.sendall(b"HEAD /v1/completions HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        status, headers, _, rest = read_response(sock, b"", head=True)
        assert status == 405 and int(headers["content-length"]) > 0
        assert read_response(sock, rest, head=False)[0] == 200
    finally:
        sock.close()
