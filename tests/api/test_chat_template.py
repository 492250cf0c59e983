"""--chat-template FILE and chat_template_kwargs: a template of the user's
instead of the model's, and more variables for it, as vLLM takes them."""
import json
import subprocess

import pytest

from conftest import BIN, MODEL, Server

# ChatML like the default model's, with one variable of the caller's
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
            "{% if shout is defined and shout %}!!{% endif %}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
MESSAGES = [{"role": "user", "content": "Say yes"}]


def ids_of(server, body):
    status, _, resp = server.post("/tokenize", body)
    assert status == 200, resp
    return resp["tokens"]


@pytest.fixture(scope="module")
def templated(tmp_path_factory):
    path = tmp_path_factory.mktemp("tmpl") / "shout.jinja"
    path.write_text(TEMPLATE)
    s = Server("--chat-template", str(path))
    yield s
    assert s.stop() == 0, s.final_log


def test_the_file_replaces_the_model_template_and_kwargs_reach_it(templated):
    def text(shout):
        return f"<|im_start|>user\nSay yes{'!!' if shout else ''}<|im_end|>\n<|im_start|>assistant\n"

    plain = ids_of(templated, {"messages": MESSAGES})
    loud = ids_of(templated, {"messages": MESSAGES, "chat_template_kwargs": {"shout": True}})
    assert plain == ids_of(templated, {"prompt": text(False), "add_special_tokens": False})
    assert loud == ids_of(templated, {"prompt": text(True), "add_special_tokens": False})
    status, _, resp = templated.post("/v1/chat/completions", {
        "model": templated.model, "messages": MESSAGES, "max_tokens": 4, "temperature": 0,
        "chat_template_kwargs": {"shout": True}})
    assert status == 200, resp
    assert resp["usage"]["prompt_tokens"] == len(loud)


@pytest.mark.parametrize("kwargs, words", [
    ({"messages": []}, "cannot set 'messages'"),
    ({"add_generation_prompt": False}, "cannot set 'add_generation_prompt'"),
    (5, "must be an object"),
    (["x"], "must be an object")])
def test_bad_kwargs_are_400_naming_the_field(server, kwargs, words):
    status, _, resp = server.post("/v1/chat/completions", {
        "model": server.model, "messages": MESSAGES, "max_tokens": 1, "chat_template_kwargs": kwargs})
    assert status == 400, resp
    assert resp["error"]["param"] == "chat_template_kwargs" and words in resp["error"]["message"], resp


@pytest.mark.parametrize("content, words", [
    (None, "a readable file of Jinja"),
    ("{% for m in messages %}{{ m.content }", "a chat template that parses")])
def test_a_bad_template_file_stops_serve_with_one_sentence(tmp_path, content, words):
    path = tmp_path / "t.jinja"
    if content is not None:
        path.write_text(content)
    r = subprocess.run([BIN, "serve", "-m", MODEL, "--port", "0", "--chat-template", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "--chat-template" in r.stderr and words in r.stderr, r.stderr


# Templates nested 200,000 deep in the ways the parser reads without recursion
# (chains) and by recursion (brackets, blocks): ~400 KB each, generated here.
DEEP = {
    "attributes": "{{ x" + ".y" * 200000 + " }}",
    "filters": "{{ x" + "|upper" * 200000 + " }}",
    "concatenation": "{{ 'a'" + " ~ 'a'" * 200000 + " }}",
    "lists": "{{ " + "[" * 200000 + "]" * 200000 + " }}",
    "ifs": "{% if x %}" * 200000 + "{% endif %}" * 200000,
    "elifs": "{% if x %}" + "{% elif x %}" * 200000 + "{% endif %}",
}
RECURSIVE = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"


def under_2_mib_stack(*args):
    """`tram ARGS...` with the stack limit a crash needed to show (the default 8 MiB hid it)."""
    return subprocess.run(["sh", "-c", 'ulimit -s 2048; exec "$@"', "sh", BIN, *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("shape", sorted(DEEP))
def test_a_deep_template_is_exit_2_not_a_crash_under_a_small_stack(tmp_path, shape):
    path, msgs = tmp_path / "t.jinja", tmp_path / "m.json"
    path.write_text(DEEP[shape])
    msgs.write_text(json.dumps(MESSAGES))
    for args in (["chat-template", "-m", MODEL, "--chat-template", str(path), str(msgs)],
                 ["serve", "-m", MODEL, "--port", "0", "--chat-template", str(path)]):
        r = under_2_mib_stack(*args)
        assert r.returncode == 2, (args[0], r.returncode, r.stderr[-400:])
        assert "--chat-template" in r.stderr and "deeper than" in r.stderr, r.stderr[-400:]


def test_a_template_that_recurses_when_rendered_is_an_error_not_a_crash(tmp_path):
    path, msgs = tmp_path / "t.jinja", tmp_path / "m.json"
    path.write_text(RECURSIVE)
    msgs.write_text(json.dumps(MESSAGES))
    r = under_2_mib_stack("chat-template", "-m", MODEL, "--chat-template", str(path), str(msgs))
    assert r.returncode == 1 and "deeper than" in r.stderr, (r.returncode, r.stderr[-400:])
    s = Server("--chat-template", str(path))
    try:
        status, _, resp = s.post("/v1/chat/completions", {"model": s.model, "messages": MESSAGES, "max_tokens": 1})
        assert status == 400 and "deeper than" in resp["error"]["message"], resp
        assert s.request("GET", "/health")[0] == 200
    finally:
        assert s.stop() == 0, s.final_log


def test_the_prompt_ends_as_add_generation_prompt_and_continue_final_message_say(templated):
    turns = MESSAGES + [{"role": "assistant", "content": "Yes, and"}]
    head = "<|im_start|>user\nSay yes<|im_end|>\n<|im_start|>assistant\nYes, and"

    def ids(body):
        return ids_of(templated, {"messages": turns, **body})

    def text_ids(text):
        return ids_of(templated, {"prompt": text, "add_special_tokens": False})

    assert ids({}) == text_ids(head + "<|im_end|>\n<|im_start|>assistant\n")
    assert ids({"add_generation_prompt": False}) == text_ids(head + "<|im_end|>\n")
    assert ids({"add_generation_prompt": False, "continue_final_message": True}) == text_ids(head)
    status, _, resp = templated.post("/v1/chat/completions", {
        "model": templated.model, "messages": turns, "max_tokens": 3, "temperature": 0,
        "add_generation_prompt": False, "continue_final_message": True})
    assert status == 200, resp
    assert resp["usage"]["prompt_tokens"] == len(text_ids(head))
    status, _, resp = templated.post("/v1/chat/completions", {
        "model": templated.model, "messages": turns, "max_tokens": 3, "continue_final_message": True})
    assert status == 400 and resp["error"]["param"] == "continue_final_message", resp
