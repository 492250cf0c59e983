"""Request bombs: bodies whose preparation (parse, render, tokenize, grammar
compilation) costs seconds, built here at a scale the caller picks (1.0 is
the size issue 21 measured; tests take a fraction).  Shared by the
responsiveness tests, the soak and bench/responsiveness.py."""


def forward_chain(n):
    """GBNF of n rules, each referring to the next one (defined after it)."""
    rules = ["root ::= r0"] + [f'r{i} ::= "a" r{i + 1}' for i in range(n - 1)] + [f'r{n - 1} ::= "a"']
    return "\n".join(rules)


def _chat(model, **fields):
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, **fields}


def bombs(model, scale):
    """{name: (path, body)}: a 32,000-rule forward GBNF chain, a choice of
    100,000 strings, 100,000 tiny messages and a 3.9 MB /tokenize prompt,
    each times scale."""
    return {
        "gbnf_chain": ("/v1/chat/completions",
                       _chat(model, structured_outputs={"grammar": forward_chain(int(32000 * scale))})),
        "choice": ("/v1/chat/completions",
                   _chat(model, structured_outputs={"choice": [f"v{i:06d}" for i in range(int(100000 * scale))]})),
        "messages": ("/v1/chat/completions",
                     _chat(model, messages=[{"role": "user", "content": "x"}] * int(100000 * scale))),
        "tokenize": ("/tokenize", {"model": model, "prompt": "hello world " * int(325000 * scale)}),
    }


def small_chat(model):
    """The plain request that must not wait behind a bomb: 8 tokens."""
    return {"model": model, "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8,
            "temperature": 0, "ignore_eos": True}
