"""Response relevancy through the real langchain-openai clients (ChatOpenAI for
the questions, OpenAIEmbeddings for the vectors) against a real HTTP server on
127.0.0.1 speaking chat completions and embeddings."""

from __future__ import annotations

import asyncio
import json
import math

import pytest
from langchain_openai import ChatOpenAI, OpenAIEmbeddings

from judgegraph.judges import resolve_judge
from judgegraph.metrics.response import EMBED_STEP, create_response_relevancy_metric
from tests.kit.openai_server import FakeOpenAIServer, ScriptedResponder, hashing_embedding, structured, text

pytestmark = pytest.mark.integration

CONV = {"id": "rag", "turns": [
    {"role": "user", "content": "When was the first Super Bowl played?"},
    {"role": "assistant", "content": "The first Super Bowl was played on January 15, 1967.",
     "retrieval_context": ["The First AFL-NFL World Championship Game was played on January 15, 1967."]},
    {"role": "user", "content": "How do I reset my router?"},
    {"role": "assistant", "content": "Premium members earn double loyalty points."},
    {"role": "user", "content": "Can I get a refund after 40 days?"},
    {"role": "assistant", "content": "It is hard to say, it depends."},
]}
QUESTIONS = {
    "Super Bowl": (["When was the first Super Bowl played?", "What date was the first Super Bowl?",
                    "In which year was the first Super Bowl played?"], False),
    "loyalty points": (["What do premium members earn?", "How many loyalty points do premium members get?",
                        "Which members earn double points?"], False),
    "hard to say": (["Is it hard to say?", "Does it depend?", "Can you tell me either way?"], True),
}


def reply_is(fragment):
    """Key a rule on the response being questioned, not on the whole prompt."""
    return lambda req: fragment in req.text.split("<response>")[-1]


def answer(fragment):
    qs, noncommittal = QUESTIONS[fragment]
    return structured({"reason": "What the response says.",
                       "questions": [{"question": q, "noncommittal": noncommittal} for q in qs]})


def responder(**overrides):
    return ScriptedResponder([(reply_is(f), overrides.get(f, answer(f))) for f in QUESTIONS])


def chat(server, **kw):
    return ChatOpenAI(model="gpt-4.1-mini", base_url=server.base_url, api_key="test-key", **kw)


def embeddings(server, **kw):
    return OpenAIEmbeddings(model="text-embedding-3-small", base_url=server.base_url, api_key="test-key",
                            check_embedding_ctx_length=False, **kw)


def expected(user_input, fragment):
    """ragas's arithmetic, recomputed from the server's own vectors."""
    qs, noncommittal = QUESTIONS[fragment]
    u = hashing_embedding(user_input)
    mean = sum(sum(a * b for a, b in zip(u, hashing_embedding(q))) for q in qs) / len(qs)
    return 0.0 if noncommittal else max(0.0, mean)


def result(out):
    return out["results"]["response_relevancy"]


def test_one_embeddings_request_per_exchange_holding_input_and_questions():
    with FakeOpenAIServer(responder()) as server:
        graph = create_response_relevancy_metric(model=chat(server), embeddings=embeddings(server))
        res = result(graph.invoke({"conversation": CONV}))
        emb_requests = server.embedding_requests
        assert server.calls["/v1/chat/completions"] == 3 and server.calls["/v1/embeddings"] == 3
    inputs = sorted(r["input"] for r in emb_requests)
    assert inputs == sorted([
        ["When was the first Super Bowl played?", *QUESTIONS["Super Bowl"][0]],
        ["How do I reset my router?", *QUESTIONS["loyalty points"][0]],
        ["Can I get a refund after 40 days?", *QUESTIONS["hard to say"][0]],
    ])
    scores = [v.score for v in res.verdicts]
    assert scores == pytest.approx([
        expected("When was the first Super Bowl played?", "Super Bowl"),
        expected("How do I reset my router?", "loyalty points"),
        0.0,  # all three noncommittal
    ])
    assert scores[0] > 0.5 > scores[1]
    assert res.score == pytest.approx(sum(scores) / 3)
    assert res.usage.calls == 3 and res.usage.input_tokens > 100 and not res.usage.estimated
    assert res.details["embedding_calls"] == 3 and res.details["embedded_texts"] == 12
    assert res.details["embeddings"] == "OpenAIEmbeddings:text-embedding-3-small"
    assert res.judge == "llm:gpt-4.1-mini" and res.verdicts[2].all_noncommittal


def test_duplicate_questions_are_reasked_over_http_with_the_validation_error():
    dupes = structured({"reason": "r", "questions": [
        {"question": "When was the first Super Bowl?", "noncommittal": False},
        {"question": "when was the first super bowl", "noncommittal": False},
        {"question": "Who played?", "noncommittal": False}]})
    with FakeOpenAIServer(responder(**{"Super Bowl": [dupes, answer("Super Bowl")]})) as server:
        graph = create_response_relevancy_metric(model=chat(server), embeddings="openai:text-embedding-3-small",
                                                embeddings_base_url=server.base_url)
        res = result(graph.invoke({"conversation": CONV}))
        reasks = [r for r in server.chat_requests if "could not be used" in json.dumps(r["messages"])]
    assert len(reasks) == 1 and "questions 1 and 2 are the same" in reasks[0]["messages"][-1]["content"]
    previous = reasks[0]["messages"][1]  # the model sees its own rejected answer
    assert previous["role"] == "assistant" and "when was the first super bowl" in previous["content"]
    assert res.verdicts[0].attempts == 2 and res.errors == [] and res.usage.calls == 4
    assert res.details["embeddings"] == "OpenAIEmbeddings:text-embedding-3-small" and res.details["embedding_calls"] == 3


def test_async_path_a_failing_embeddings_request_and_a_failing_generation():
    def embedder(texts):
        if "How do I reset my router?" in texts:
            raise RuntimeError("embedding backend down")
        return [hashing_embedding(t) for t in texts]

    never = text("I will not answer in JSON.")
    with FakeOpenAIServer(responder(**{"hard to say": never}), embedder=embedder) as server:
        graph = create_response_relevancy_metric(model=resolve_judge("openai:gpt-4.1-mini", base_url=server.base_url, max_tries=2),
                                                embeddings=embeddings(server, max_retries=0))
        res = result(asyncio.run(graph.ainvoke({"conversation": CONV})))  # one event loop for both clients
        assert server.calls["/v1/embeddings"] == 2
    ok, emb_failed, gen_failed = res.verdicts
    assert ok.score == pytest.approx(expected("When was the first Super Bowl played?", "Super Bowl"))
    assert emb_failed.verdict is None and emb_failed.step == EMBED_STEP and "InternalServerError" in emb_failed.error
    assert gen_failed.verdict is None and "invalid output after 2 tries" in gen_failed.error
    assert len(res.errors) == 2 and res.score == pytest.approx(ok.score) and res.details["judged"] == 1
    assert res.details["embedding_calls"] == 2  # the exchange without questions made no embeddings call
    assert not math.isnan(res.score)
