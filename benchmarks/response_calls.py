"""Calls and tokens of response relevancy, per exchange and for a 10-exchange conversation.

Runs judgegraph's response relevancy through the real langchain-openai clients
(ChatOpenAI for the questions, OpenAIEmbeddings for the vectors) against the
loopback OpenAI-compatible server, counts the HTTP requests the server received
and the tokens it reported, and prints them beside:

* the design judgegraph did NOT choose, measured the same way: N separate
  sampled calls per exchange, one question each (temperature 0.7, judge cache
  off — with the cache on, N identical requests would collapse into one call);
* ragas ``ResponseRelevancy`` / ``collections.AnswerRelevancy`` and promptfoo
  ``answer-relevance``: the requests their code makes (read from their code and
  /work/shared/ANCHORS.md; not run here: neither is installed).

    python benchmarks/response_calls.py                 # 10 exchanges, N=3, 0.2 s per request
    python benchmarks/response_calls.py --exchanges 20 --n 5 --latency 0.5 --dup-rate 0.3

``--dup-rate`` makes that share of first answers repeat a question, to show what
the distinctness check's re-ask costs.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import re
import time

import _loopback  # noqa: F401 - puts the repository root on sys.path, for tests.kit
from langchain_openai import ChatOpenAI, OpenAIEmbeddings

from judgegraph.data.results import Usage
from judgegraph.judges.limiter import CallLimiter
from judgegraph.judges.llm import LLMJudge
from judgegraph.metrics.response import create_response_relevancy_metric, questions_request
from tests.kit.openai_server import FakeOpenAIServer, structured

TOPICS = ["refund", "password reset", "delivery", "invoice", "plan upgrade", "warranty", "roaming", "booking",
          "gift card", "loyalty points"]
ANGLES = ["How does {t} work for order {o}?", "What are the steps of the {t} process?",
          "How long does {t} take for my order {o}?", "What must I check first for {t}?",
          "Which confirmation do I get for {t}?", "When is {t} done for order {o}?", "Who handles {t} requests?"]


def conversation(exchanges: int) -> dict:
    turns = []
    for e in range(exchanges):
        topic, order = TOPICS[e % len(TOPICS)], 4100 + e
        turns.append({"role": "user", "content": f"How does the {topic} process work for my order {order}?"})
        turns.append({"role": "assistant", "content": (
            f"For order {order}, the {topic} process has three steps: we check the order details, you confirm "
            f"by email, and the {topic} is completed within two working days.")})
    return {"id": "bench", "turns": turns}


def make_responder(dup_rate: float):
    def respond(request):
        response = request.text.split("<response>")[1].split("</response>")[0].strip()
        n = int(re.search(r"write (\d+) different questions", request.text).group(1))
        topic = next((t for t in TOPICS if t in response), "order")
        order = re.search(r"order (\d+)", response).group(1)
        qs = [ANGLES[i % len(ANGLES)].format(t=topic, o=order) for i in range(n)]
        reasked = "could not be used" in request.text
        bucket = int(hashlib.sha256(response.encode()).hexdigest(), 16) % 1000 / 1000
        if n > 1 and not reasked and bucket < dup_rate:
            qs[1] = qs[0].lower()  # a duplicate after normalisation: the validator rejects it
        return structured({"reason": f"It explains the {topic} process for order {order} and commits to an answer.",
                           "questions": [{"question": q, "noncommittal": False} for q in qs]})

    return respond


async def ours(server, conv, n, temperature=0.0):
    model = ChatOpenAI(model="gpt-4.1-mini", base_url=server.base_url, api_key="k", temperature=temperature)
    emb = OpenAIEmbeddings(model="text-embedding-3-small", base_url=server.base_url, api_key="k",
                           check_embedding_ctx_length=False)
    graph = create_response_relevancy_metric(model=model, embeddings=emb, n_questions=n)
    server.reset()
    t0 = time.perf_counter()
    res = (await graph.ainvoke({"conversation": conv}))["results"]["response_relevancy"]
    wall = time.perf_counter() - t0
    assert not res.errors, res.errors
    return server.calls["/v1/chat/completions"], server.calls["/v1/embeddings"], res.usage, wall


async def sampled(server, conv, n):
    """The alternative: N calls per exchange, one question each, all in parallel."""
    judge = LLMJudge(ChatOpenAI(model="gpt-4.1-mini", base_url=server.base_url, api_key="k", temperature=0.7),
                     limiter=CallLimiter(16))
    judge.cache = None
    emb = OpenAIEmbeddings(model="text-embedding-3-small", base_url=server.base_url, api_key="k",
                           check_embedding_ctx_length=False)
    pairs = [(conv["turns"][i]["content"], conv["turns"][i + 1]["content"]) for i in range(0, len(conv["turns"]), 2)]
    server.reset()
    t0 = time.perf_counter()

    async def one(user, response):
        outs = await asyncio.gather(*(judge.arun(questions_request(response, 1)) for _ in range(n)))
        await emb.aembed_documents([user, *(o.value.questions[0].question for o in outs)])
        return Usage.total(o.usage for o in outs)

    usage = Usage.total(await asyncio.gather(*(one(u, r) for u, r in pairs)))
    wall = time.perf_counter() - t0
    return server.calls["/v1/chat/completions"], server.calls["/v1/embeddings"], usage, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exchanges", type=int, default=10)
    ap.add_argument("--n", type=int, default=3, help="questions per exchange (ragas's strictness, default 3)")
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per request at the loopback server")
    ap.add_argument("--dup-rate", type=float, default=0.2, help="share of first answers with a repeated question")
    args = ap.parse_args()
    conv, n, x = conversation(args.exchanges), args.n, args.exchanges

    async def run_all():
        with FakeOpenAIServer(make_responder(0.0), latency=args.latency) as clean:
            a = await ours(clean, conv, n)
            c = await sampled(clean, conv, n)
        with FakeOpenAIServer(make_responder(args.dup_rate), latency=args.latency) as dupes:
            b = await ours(dupes, conv, n)
        return a, b, c

    a, b, c = asyncio.run(run_all())
    print(f"response relevancy, {x} exchanges, N={n} questions, {args.latency:.2f} s per request (loopback server)\n")
    head = f"{'design':58} {'gen/exch':>8} {'emb/exch':>8} {'calls total':>11} {'tokens in/out':>15} {'wall':>7}"
    print(head)
    print("-" * len(head))

    def row(name, gen, emb, usage, wall):
        total = gen + emb
        tok = f"{usage.input_tokens}/{usage.output_tokens}" if usage else "—"
        w = f"{wall:.2f}s" if wall is not None else "—"
        print(f"{name:58} {gen / x:8.2f} {emb / x:8.2f} {total:11d} {tok:>15} {w:>7}")

    row("judgegraph: 1 call for N distinct questions + 1 embed", a[0], a[1], a[2], a[3])
    row(f"judgegraph, {b[0] - x}/{x} first answers repeat a question (re-asked)", b[0], b[1], b[2], b[3])
    row("alternative: N sampled calls (temperature 0.7) + 1 embed", c[0], c[1], c[2], c[3])
    # ragas (both ResponseRelevancy and collections.AnswerRelevancy): N generations one after another,
    # then embed_query(user_input) + embed_documents(questions): two embeddings requests per exchange
    print(f"{'ragas: N sequential calls + 1 query embed + 1 batch (code)':58} {n:8.2f} {2:8.2f} {(n + 2) * x:11d}"
          f" {'—':>15} {'—':>7}")
    print(f"{'promptfoo answer-relevance: 3 sequential + 4 embeds (code)':58} {3:8.2f} {4:8.2f} {7 * x:11d}"
          f" {'—':>15} {'—':>7}")
    print("(ragas and promptfoo rows: request counts read from their code, not run here)")
    print(f"\nper exchange, judgegraph: {a[2].input_tokens / x:.0f} input + {a[2].output_tokens / x:.0f} output tokens;"
          f" the sampled alternative: {c[2].input_tokens / x:.0f} + {c[2].output_tokens / x:.0f}"
          f" ({c[2].input_tokens / max(a[2].input_tokens, 1):.2f}x the input tokens)")


if __name__ == "__main__":
    main()
