"""The one wait for a server the bench scripts started: a free port to start
it on, and polling its /health until it answers 200, it exits, or the limit
passes (each script had its own copy of the loop, some without a limit)."""
import socket
import time
import urllib.request


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(proc, port, limit=600, interval=0.2):
    """Returns once GET /health on 127.0.0.1:port answers 200; RuntimeError
    when the process proc exits first or limit seconds pass."""
    deadline = time.time() + limit
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before it was healthy")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(interval)
    raise RuntimeError(f"the server on port {port} was not healthy after {limit} s")
