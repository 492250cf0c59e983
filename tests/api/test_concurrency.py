"""32 concurrent streams, each with the text it gets alone; and a soak with bombs mixed in."""
import asyncio

import openai

PROMPTS = [f"Question {i}: what is {i} plus {i + 1}? Answer:" for i in range(32)]


def test_32_concurrent_streams_match_solo_runs(server, client):
    kw = dict(model=server.model, max_tokens=6, temperature=0)
    solo = [client.completions.create(prompt=p, **kw).choices[0].text for p in PROMPTS]

    async def one(ac, prompt):
        text = ""
        stream = await ac.completions.create(prompt=prompt, stream=True, **kw)
        async for chunk in stream:
            text += chunk.choices[0].text
        return text

    async def all_at_once():
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="unused", max_retries=0,
                                      timeout=600) as ac:
            return await asyncio.gather(*(one(ac, p) for p in PROMPTS))

    together = asyncio.run(all_at_once())
    assert together == solo


def test_a_soak_with_bombs_mixed_in_keeps_every_reply_right_and_gives_memory_back():
    """24 normal clients and 2 sending bombs for 20 s: no bad reply, /health
    answers throughout, and the RSS comes back to within 10% of its start
    (bench/soak.py runs it for minutes and reports the latencies)."""
    from conftest import Server
    from soak import rss_bytes, run
    from test_connections import wait_for

    s = Server()
    try:
        run(s.port, s.model, 3, clients=4, bomb_clients=1, scale=0.05)  # warm: pools, caches, arenas
        wait_for(lambda: s.metric("num_requests_preparing") == 0 and s.metric("num_requests_running") == 0)
        start = rss_bytes(s.proc.pid)
        tally = run(s.port, s.model, 20, clients=24, bomb_clients=2, scale=0.05)
        wait_for(lambda: s.metric("num_requests_preparing") == 0 and s.metric("num_requests_running") == 0)
        end = rss_bytes(s.proc.pid)
        print(f"{tally.normal} normal, {tally.bombs} bombs {tally.bomb_status}, {len(tally.health)} /health; "
              f"RSS {start / 2**20:.0f} -> {end / 2**20:.0f} MiB")
        assert tally.bad == []
        assert tally.normal >= 24 and tally.bombs >= 2 and len(tally.health) >= 10
        assert end <= start * 1.10
    finally:
        assert s.stop() == 0, s.final_log
