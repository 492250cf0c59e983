"""The request files of tests/api/test_batch.py, also run by bench/batch.sh:
greedy, short, and sharing an opening that the prefix cache serves, so that
a thousand lines cost a few thousand tokens."""

CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
# a shared opening two KV blocks long (31 tokens), so that the prefix cache serves
# it to every line and each prompt costs a token or two
OPENING = ("Here is a numbered list of short facts about the city of Lyon, France, one per line, as a tourist guide "
           "would write them for new visitors.")


def batch_line(custom_id, url, body):
    return {"custom_id": custom_id, "method": "POST", "url": url, "body": body}


def fact_lines(n, max_tokens=2, prefix="r"):
    """n distinct greedy requests, chat and completions in turn."""
    lines = []
    for i in range(n):
        if i % 2:
            body = {"messages": [{"role": "user", "content": f"{OPENING} Fact {i}:"}]}
            url = CHAT
        else:
            body, url = {"prompt": f"{OPENING}\n{i}."}, COMPLETIONS
        lines.append(batch_line(f"{prefix}{i}", url, {**body, "max_tokens": max_tokens, "temperature": 0}))
    return lines


# what the thousand lines vary, over prompts that share a cached opening: each
# costs a few prompt tokens and one or two decode steps
TOPICS = ["trams", "rivers", "bridges", "food", "silk", "music", "parks", "winter", "history", "football",
          "light", "wine", "theatre", "schools", "markets", "churches", "hills", "trains", "cinema", "museums"]
VARIANTS = [{}, {"stop": ["\n"]}, {"logit_bias": {"198": -100}}, {"presence_penalty": 0.5},
            {"frequency_penalty": 0.7}, {"repetition_penalty": 1.3}, {"seed": 7}, {"min_tokens": 1},
            {"stop_token_ids": [13]}, {"top_k": 1}, {"top_p": 0.5}, {"n": 2}, {"ignore_eos": True},
            {"stop": ["a", "e"]}, {"logit_bias": {"28": 3, "30": -2}}, {"min_p": 0.1}, {"presence_penalty": 0.2, "frequency_penalty": 0.2},
            {"max_completion_tokens": 1}, {"skip_special_tokens": False}, {"temperature": 0.0, "seed": 1}]


def thousand_lines():
    lines = []
    for t, topic in enumerate(TOPICS):
        for v, variant in enumerate(VARIANTS):
            for max_tokens in (1, 2, 3) if (t + v) % 2 == 0 else (1, 2):
                i = len(lines)
                if i % 5 == 0:
                    url, body = CHAT, {"messages": [{"role": "user", "content": f"{OPENING} {topic.title()}:"}]}
                else:
                    url, body = COMPLETIONS, {"prompt": f"{OPENING} {topic.title()}:"}
                if i % 7 == 3 and url == COMPLETIONS:
                    body["echo"] = True
                lines.append(batch_line(f"t{i}", url, {**body, "max_tokens": max_tokens, "temperature": 0,
                                                      **variant}))
    return lines[:1000]
