"""32 concurrent streams, each with the text it gets alone."""
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
