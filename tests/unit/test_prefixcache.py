"""The prompt-cache rules (judgegraph.providers.prefixcache). OpenAI's: a prefix already sent is served when it is at least
1,024 tokens long, in steps of 128 tokens; any earlier request counts, not only the one before. Anthropic's: only
a prefix marked ``cache_control``, written from the model's minimum, then read."""

from __future__ import annotations

from judgegraph.providers.prefixcache import PrefixCache, cacheable_share, chat_parts, request_tokens


def test_a_shared_prefix_is_served_in_steps_of_128_from_1024_tokens():
    cache = PrefixCache()
    first = list(range(2000))
    assert cache.serve(first) == 0  # nothing was sent before
    assert cache.serve(first[:1500] + [-5] * 700) == 1408  # 1,500 shared tokens: 11 steps of 128
    assert cache.serve(first[:1000] + [-6] * 900) == 0  # 1,000 shared: under the minimum
    assert cache.serve(first) == 1920  # the whole request again: 15 full steps (the last 80 tokens never)


def test_any_earlier_request_counts_not_only_the_last():
    cache = PrefixCache()
    a, b = list(range(3000)), list(range(10_000, 13_000))
    cache.serve(a)
    cache.serve(b)
    assert cache.serve(a[:2048] + [1]) == 2048


def test_the_cacheable_share_of_a_sequence_of_requests():
    shared = list(range(1024))
    served, total = cacheable_share([shared + [1] * 10, shared + [2] * 10, [3] * 50])
    assert (served, total) == (1024, 1034 + 1034 + 50)


def test_a_request_is_its_schema_then_each_message_role_and_content():
    parts = chat_parts('{"type": "object"}', [("user", "hello")])
    assert parts == ['{"type": "object"}', "user", "hello"]
    assert len(request_tokens(parts)) > 3
    assert chat_parts(None, [("user", "x")]) == ["user", "x"]


def test_anthropic_s_rule_caches_only_a_marked_prefix_from_the_minimum():
    from judgegraph.providers.anthropic import MarkedCache, marked_parts

    long_text = " ".join(f"word{i}" for i in range(1500))

    def body(marked: bool, stable: str, changing: str = "judge this") -> dict:
        block: dict = {"type": "text", "text": stable}
        if marked:
            block["cache_control"] = {"type": "ephemeral"}
        return {"tools": [{"name": "Verdict", "input_schema": {}}],
                "messages": [{"role": "user", "content": [block, {"type": "text", "text": changing}]}]}

    parts, marked = marked_parts(body(True, long_text))
    assert marked == 2 and parts[1].startswith("user:word0") and parts[2] == "judge this"  # tools, then blocks
    cache = MarkedCache(1024)
    assert cache.serve(*marked_parts(body(False, long_text))) == (0, 0)  # unmarked: nothing cached, ever
    read, written = cache.serve(*marked_parts(body(True, long_text)))
    assert read == 0 and written > 1024  # the first marked sending writes
    assert cache.serve(*marked_parts(body(True, long_text, "another reply"))) == (written, 0)  # then it is read
    short = MarkedCache(4096)  # a model whose minimum is over the prefix: never written, never read
    assert short.serve(*marked_parts(body(True, long_text))) == short.serve(*marked_parts(body(True, long_text))) \
        == (0, 0)
