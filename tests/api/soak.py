"""A soak: many normal clients, a few sending bombs, /health polled all the
while, the server's RSS read before and after.  tests/api/test_concurrency.py
runs it briefly, bench/soak.py for minutes."""
import http.client
import json
import random
import threading
import time

from bombs import bombs


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.normal = self.bombs = 0
        self.bad = []            # (what, status, body head)
        self.health = []         # seconds per /health
        self.bomb_status = {}

    def add_bad(self, what, status, body):
        with self.lock:
            self.bad.append((what, status, body[:200]))


def post_raw(port, path, body, timeout=600):
    """POSTs a JSON body on a connection of its own: (status, raw reply)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def _normal_ok(status, data, stream):
    if status != 200:
        return False
    if stream:
        events = [e[6:] for e in data.decode().split("\n\n") if e.startswith("data: ")]
        if not events or events[-1] != "[DONE]":
            return False
        last = json.loads(events[-2])
        return last["choices"][0]["finish_reason"] in ("length", "stop")
    body = json.loads(data)
    return body["choices"][0]["finish_reason"] in ("length", "stop") and body["usage"]["completion_tokens"] > 0


def _normal_client(port, model, seed, until, tally):
    rng = random.Random(seed)
    while time.time() < until:
        stream = rng.random() < 0.5
        if rng.random() < 0.5:
            path, body = "/v1/completions", {"prompt": f"Count to {rng.randint(2, 9)}:"}
        else:
            path, body = "/v1/chat/completions", {"messages": [{"role": "user", "content": f"Name {rng.randint(2, 9)} colors."}]}
        body.update(model=model, max_tokens=rng.randint(2, 6), temperature=0, stream=stream)
        status, data = post_raw(port, path, json.dumps(body))
        ok = _normal_ok(status, data, stream)
        with tally.lock:
            tally.normal += 1
        if not ok:
            tally.add_bad(path, status, data)


def _bomb_client(port, made, seed, until, tally):
    rng = random.Random(seed)
    names = sorted(made)
    while time.time() < until:
        name = rng.choice(names)
        path, data = made[name]
        status, reply = post_raw(port, path, data)
        with tally.lock:
            tally.bombs += 1
            tally.bomb_status[(name, status)] = tally.bomb_status.get((name, status), 0) + 1
        try:
            parsed = json.loads(reply)
        except ValueError:
            parsed = None
        # a bomb is refused (400, naming why) or served; never a 5xx or a broken body
        if status not in (200, 400) or not isinstance(parsed, dict):
            tally.add_bad(name, status, reply)


def _health_poller(port, until, tally):
    while time.time() < until:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        start = time.perf_counter()
        try:
            c.request("GET", "/health")
            r = c.getresponse()
            r.read()
            status = r.status
        except OSError:
            status = 0
        finally:
            c.close()
        with tally.lock:
            tally.health.append(time.perf_counter() - start)
        if status != 200:
            tally.add_bad("/health", status, b"")
        time.sleep(0.05)


def run(port, model, seconds, clients, bomb_clients, scale):
    """Runs the load for `seconds` and returns the Tally."""
    made = {name: (path, json.dumps(body)) for name, (path, body) in bombs(model, scale).items()}
    until = time.time() + seconds
    tally = Tally()
    threads = [threading.Thread(target=_normal_client, args=(port, model, i, until, tally)) for i in range(clients)]
    threads += [threading.Thread(target=_bomb_client, args=(port, made, 1000 + i, until, tally))
                for i in range(bomb_clients)]
    threads.append(threading.Thread(target=_health_poller, args=(port, until, tally)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return tally


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))] if xs else float("nan")
