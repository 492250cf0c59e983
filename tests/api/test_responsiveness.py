"""Nothing heavy on the event loop: while a bomb of a request is being
prepared (parsed, rendered, tokenized, its grammar compiled) on a
preparation thread, /health is answered and a small streamed chat request
from another client is prepared, accepted and started.  The pass condition
is an order of events, never a time (bench/responsiveness.py measures the
latencies: on a loaded 2-core box the small request's 8 decode steps alone
take seconds, so its end is not ordered against the bomb's)."""
import http.client
import json
import threading

import pytest

from bombs import bombs, small_chat
from conftest import Server, stream_raw
from soak import post_raw
from test_connections import wait_for

# sizes that take half a second or more to prepare on an idle 2-core box
# and seconds on a loaded one (the sizes take up to tens of
# seconds): the compilers are linear now, and a bomb prepared in about the
# time the small chat needs for its own preparation and first step raced it
SCALE = {"gbnf_chain": 3.0, "choice": 2.0, "messages": 0.2, "tokenize": 1.0}


@pytest.fixture(scope="module")
def srv():
    s = Server()
    yield s
    assert s.stop() == 0, s.final_log


class Log:
    """Events in the order they happened, from several threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.events = []

    def add(self, name):
        with self.lock:
            self.events.append(name)


@pytest.mark.parametrize("name", sorted(SCALE))
def test_health_and_a_small_chat_are_served_while_a_bomb_is_prepared(srv, name):
    path, body = bombs(srv.model, SCALE[name])[name]
    data = json.dumps(body)
    log, bomb = Log(), {}

    def run_bomb():
        bomb["reply"] = post_raw(srv.port, path, data, timeout=300)
        log.add("bomb answered")

    t = threading.Thread(target=run_bomb)
    t.start()
    # /metrics answering while the bomb is prepared is already half the point
    wait_for(lambda: "bomb answered" in log.events or srv.metric("num_requests_preparing") >= 1)
    if "bomb answered" in log.events:
        # the grammar compilers are linear now: on a quiet machine the chain
        # may be prepared before a poll sees it, and then it stalled no one
        t.join()
        assert bomb["reply"][0] in (200, 400), bomb["reply"]
        pytest.skip(f"the {name} bomb was prepared before /metrics could show it: nothing to stall")
    log.add("bomb preparing")
    assert srv.request("GET", "/health")[0] == 200
    log.add("health answered")
    events = stream_raw(srv.port, "/v1/chat/completions",
                        {**small_chat(srv.model), "stream": True, "stream_options": {"include_usage": True}},
                        lambda i, payload, conn: log.add("small chat started") if i == 0 else None)
    assert json.loads(events[-2])["usage"]["completion_tokens"] == 8, events
    t.join()
    status, reply = bomb["reply"]
    assert status in (200, 400), reply
    json.loads(reply)
    assert log.events[:3] == ["bomb preparing", "health answered", "small chat started"], log.events


def test_a_client_that_leaves_while_its_request_is_prepared_is_dropped(srv):
    path, body = bombs(srv.model, SCALE["messages"])["messages"]
    body = {**body, "max_tokens": 8, "messages": body["messages"][:20000]}
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    wait_for(lambda: srv.metric("num_requests_preparing") >= 1)
    conn.close()
    wait_for(lambda: srv.metric("num_requests_preparing") == 0)
    assert srv.metric("num_requests_running") == 0 and srv.metric("num_requests_waiting") == 0
    assert "499 the client left while its request was prepared" in srv.log_text()
    assert srv.request("GET", "/health")[0] == 200
