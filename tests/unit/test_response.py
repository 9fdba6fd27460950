"""Response relevancy: the arithmetic, the noncommittal rule, N distinct
questions (re-asked when not), judge and embeddings errors, the offline
fallback, the registry and the graph drawings."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings

from judgegraph.judges import resolve_judge
from judgegraph.judges.llm import LLMJudge, ModelConfigError
from judgegraph.judges.offline import EmbeddingJudge
from judgegraph.judges.scripted import ScriptedChatModel
from judgegraph.loaders import load_file
from judgegraph.metrics import create_metric, get_metric
from judgegraph.metrics.response import (
    EMBED_STEP,
    GENERATE_STEP,
    OFFLINE_MODE,
    create_response_relevancy_metric,
    normalise_question,
    questions_request,
    resolve_embeddings,
)
from judgegraph.report import create_report_graph

ROOT = Path(__file__).resolve().parents[2]

# fixed 2-d vectors: cosine with the user input [1, 0] is the first coordinate of a unit vector
VECTORS = {
    "What is 2+2?": [1.0, 0.0],
    "Which sum equals 4?": [1.0, 0.0],  # cos 1
    "What does 2+2 make?": [0.6, 0.8],  # cos 0.6
    "Is arithmetic fun?": [0.0, 1.0],  # cos 0
    "Tell me a joke": [0.0, 1.0],
    "Can you not say?": [0.0, 1.0],  # cos 1 with the joke request
    "Is it unclear?": [0.6, 0.8],  # cos 0.8
    "Who knows?": [0.8, 0.6],  # cos 0.6
    "Where is Paris?": [-1.0, 0.0],  # cos -1 with "What is 2+2?"
    "Which city is that?": [-0.6, -0.8],
    "Is Paris in France?": [-0.8, 0.6],
}


class FixedEmbeddings(Embeddings):
    """Deterministic vectors per text; records every call; raises for texts in ``fail_on``."""

    def __init__(self, vectors=VECTORS, fail_on=()):
        self.vectors = vectors
        self.fail_on = set(fail_on)
        self.calls: list[list[str]] = []
        self.threads: list[int] = []
        self._lock = threading.Lock()

    def embed_documents(self, texts):
        with self._lock:
            self.calls.append(list(texts))
            self.threads.append(threading.get_ident())
        if self.fail_on & set(texts):
            raise ConnectionError("embeddings endpoint unreachable")
        return [self.vectors[t] for t in texts]

    def embed_query(self, text):
        return self.embed_documents([text])[0]


class NativeAsyncEmbeddings(FixedEmbeddings):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.async_calls = 0

    async def aembed_documents(self, texts):
        self.async_calls += 1
        await asyncio.sleep(0)
        return [self.vectors[t] for t in texts]


def questions(*qs, noncommittal=False, reason="It states a sum."):
    flags = noncommittal if isinstance(noncommittal, (list, tuple)) else [noncommittal] * len(qs)
    return {"reason": reason, "questions": [{"question": q, "noncommittal": f} for q, f in zip(qs, flags)]}


GOOD = questions("Which sum equals 4?", "What does 2+2 make?", "Is arithmetic fun?")  # mean cos 1.6 / 3
EVASIVE = questions("Can you not say?", "Is it unclear?", "Who knows?", noncommittal=True)  # mean cos 0.8, zeroed
PARIS = questions("Where is Paris?", "Which city is that?", "Is Paris in France?")

CONV = {"id": "c", "turns": [
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "It is 4.", "retrieval_context": ["SECRET-CONTEXT: arithmetic facts"]},
    {"role": "user", "content": "Tell me a joke"},
    {"role": "assistant", "content": "I really could not say."},
]}


def model(rules=(), default=None, **kw):
    # keyed on the response being questioned: exchanges finish in any order
    return ScriptedChatModel(rules=list(rules), default=default, section="response", **kw)


def run(graph, conv=CONV):
    return graph.invoke({"conversation": conv})["results"]["response_relevancy"]


def two_exchange_model():
    return model([("It is 4.", [GOOD]), ("could not say", [EVASIVE])])


# -- the arithmetic --------------------------------------------------------------


def test_mean_cosine_per_exchange_all_noncommittal_zeroed_and_one_embedding_call_each():
    emb = FixedEmbeddings()
    m = two_exchange_model()
    res = run(create_response_relevancy_metric(model=m, embeddings=emb))
    first, second = res.verdicts
    assert first.similarities == pytest.approx([1.0, 0.6, 0.0])
    assert first.score == pytest.approx(1.6 / 3) and first.verdict == "yes" and first.noncommittal_count == 0
    assert second.mean_cosine == pytest.approx(0.8)  # kept for reading, but...
    assert second.score == 0.0 and second.all_noncommittal and second.noncommittal_count == 3  # ...ragas's rule
    assert second.verdict == "no" and second.turns == [3]
    assert res.score == pytest.approx((1.6 / 3 + 0.0) / 2)
    assert res.status == "failed" and res.passed is False
    # one embeddings call per exchange: [user_input, q1, q2, q3]
    assert sorted(emb.calls) == sorted([
        ["What is 2+2?", "Which sum equals 4?", "What does 2+2 make?", "Is arithmetic fun?"],
        ["Tell me a joke", "Can you not say?", "Is it unclear?", "Who knows?"],
    ])
    assert m.call_count == 2 and res.usage.calls == 2 and res.usage.input_tokens > 0
    assert res.details["embedding_calls"] == 2 and res.details["embedded_texts"] == 8
    assert res.details["noncommittal_questions"] == 3 and res.details["all_noncommittal_exchanges"] == 1
    assert res.details["n_questions"] == 3 and res.details["mode"].startswith("llm:")
    assert 'turn 4 "I really could not say." scored 0.00' in res.reason
    assert "all 3 generated questions noncommittal" in res.reason


def test_some_noncommittal_is_not_zeroed():
    mixed = questions("Can you not say?", "Is it unclear?", "Who knows?", noncommittal=[True, True, False])
    res = run(create_response_relevancy_metric(model=model([("It is 4.", [GOOD]), ("could not say", [mixed])]),
                                              embeddings=FixedEmbeddings()))
    second = res.verdicts[1]
    assert second.noncommittal == [True, True, False] and second.noncommittal_count == 2
    assert not second.all_noncommittal and second.score == pytest.approx(0.8)
    assert res.score == pytest.approx((1.6 / 3 + 0.8) / 2) and res.passed is True


def test_negative_mean_cosine_is_clamped_to_zero_but_recorded():
    conv = {"id": "p", "turns": [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "Paris!"}]}
    res = run(create_response_relevancy_metric(model=model(default=PARIS), embeddings=FixedEmbeddings()), conv)
    (v,) = res.verdicts
    assert v.mean_cosine == pytest.approx((-1.0 - 0.6 - 0.8) / 3)
    assert v.score == 0.0 and res.score == 0.0
    assert 'turn 2 "Paris!" scored 0.00 (it answers "Where is Paris?", asked "What is 2+2?")' in res.reason


def test_questions_are_generated_from_the_response_alone():
    m = two_exchange_model()
    run(create_response_relevancy_metric(model=m, embeddings=FixedEmbeddings()))
    prompt = next(p for p in m.prompts if "It is 4." in p)
    assert "<response>\nIt is 4.\n</response>" in prompt
    assert "What is 2+2?" not in prompt and "SECRET-CONTEXT" not in prompt  # no user input, no contexts
    assert "write 3 different questions" in prompt


def test_n_questions_is_asked_for_and_embedded():
    five = questions("Which sum equals 4?", "What does 2+2 make?", "Is arithmetic fun?", "What is 2+2?", "Tell me a joke")
    emb = FixedEmbeddings()
    conv = {"id": "n", "turns": CONV["turns"][:2]}
    m = model(default=five)
    res = run(create_response_relevancy_metric(model=m, embeddings=emb, n_questions=5), conv)
    assert "write 5 different questions" in m.prompts[0] and len(emb.calls[0]) == 6
    assert res.verdicts[0].similarities == pytest.approx([1.0, 0.6, 0.0, 1.0, 0.0])


def test_conversation_content_is_data_not_template():
    text = questions_request("Say {{ n_questions }} and {{ response }} {x}", 3).render()
    assert "<response>\nSay {{ n_questions }} and {{ response }} {x}\n</response>" in text


# -- N distinct questions ---------------------------------------------------------


def test_normalisation_ignores_case_punctuation_and_spacing():
    assert normalise_question("  What is X?? ") == normalise_question("what is x") == "what is x"
    assert normalise_question("Qu'est-ce que c'est ?") == "qu est ce que c est"
    assert normalise_question("What is X?") != normalise_question("What is Y?")


def test_duplicate_or_missing_questions_are_reasked_with_the_validation_error():
    dupes = questions("Which sum equals 4?", "which sum equals 4", "Is arithmetic fun?")
    one = questions("Which sum equals 4?")
    m = model([("It is 4.", [dupes, one, GOOD]), ("could not say", [EVASIVE])])
    res = run(create_response_relevancy_metric(model=m, embeddings=FixedEmbeddings()))
    first = res.verdicts[0]
    assert first.attempts == 3 and first.usage.calls == 3 and first.score == pytest.approx(1.6 / 3)
    reasks = [p.split("could not be used:")[-1] for p in m.prompts if "It is 4." in p and "could not be used" in p]
    assert len(reasks) == 2
    assert "questions 1 and 2 are the same" in reasks[0]
    assert "expected exactly 3 questions, got 1" in reasks[1]
    assert res.errors == [] and res.usage.calls == 4


def test_questions_that_never_become_distinct_are_a_counted_judge_error_and_the_rest_is_kept():
    same = questions("Which sum equals 4?", "Which sum equals 4?", "Which sum equals 4?")
    emb = FixedEmbeddings()
    m = model([("It is 4.", [same]), ("could not say", [EVASIVE])])
    res = run(create_response_relevancy_metric(model=resolve_judge(m, max_tries=2), embeddings=emb))
    bad, good = res.verdicts
    assert bad.verdict is None and bad.score is None and bad.attempts == 2 and bad.step == GENERATE_STEP
    assert "invalid output after 2 tries" in bad.error and "are the same" in bad.error
    assert [e.where for e in res.errors] == ["exchange 0 (turn 2)"] and res.errors[0].step == GENERATE_STEP
    assert len(emb.calls) == 1  # no embeddings call for the exchange without questions
    assert res.score == 0.0 and res.details["judged"] == 1  # the failed exchange is left out, not scored 0
    assert "1 exchange(s) not judged" in res.reason


def test_provider_exception_is_a_judge_error_for_that_exchange():
    m = model([("It is 4.", [RuntimeError("429 Too Many Requests")]), ("could not say", [EVASIVE])])
    res = run(create_response_relevancy_metric(model=m, embeddings=FixedEmbeddings()))
    assert res.verdicts[0].error == "RuntimeError: 429 Too Many Requests"
    assert [v.verdict for v in res.verdicts] == [None, "no"] and len(res.errors) == 1


def test_embeddings_failure_is_an_error_for_that_exchange_and_the_rest_is_kept():
    emb = FixedEmbeddings(fail_on={"Tell me a joke"})
    res = run(create_response_relevancy_metric(model=two_exchange_model(), embeddings=emb))
    good, bad = res.verdicts
    assert good.score == pytest.approx(1.6 / 3)
    assert bad.verdict is None and bad.step == EMBED_STEP
    assert bad.error == "ConnectionError: embeddings endpoint unreachable"
    assert bad.questions == ["Can you not say?", "Is it unclear?", "Who knows?"]  # the generation is kept
    assert res.errors[0].step == EMBED_STEP and res.errors[0].where == "exchange 1 (turn 4)"
    assert res.score == pytest.approx(1.6 / 3) and res.status == "passed"
    assert res.details["embedding_calls"] == 2  # the failed call was made: it counts


def test_wrong_number_of_vectors_is_an_embeddings_error():
    class Short(FixedEmbeddings):
        def embed_documents(self, texts):
            return super().embed_documents(texts)[:-1]

    res = run(create_response_relevancy_metric(model=two_exchange_model(), embeddings=Short()))
    assert res.status == "error" and res.score is None
    assert all("returned 3 vectors for 4 texts" in e.message for e in res.errors)


def test_every_exchange_failing_is_status_error_with_no_score():
    res = run(create_response_relevancy_metric(model=resolve_judge(model(default="not json"), max_tries=1), embeddings=FixedEmbeddings()))
    assert res.status == "error" and res.score is None and res.passed is None and len(res.errors) == 2


# -- what is judged ---------------------------------------------------------------


def test_no_exchange_is_not_applicable_and_a_greeting_before_the_user_joins_the_first_exchange():
    m = model(default=GOOD)
    emb = FixedEmbeddings()
    graph = create_response_relevancy_metric(model=m, embeddings=emb)
    res = run(graph, {"id": "u", "turns": [{"role": "user", "content": "hello?"}]})
    assert res.status == "not_applicable" and res.score is None and m.call_count == 0 and emb.calls == []
    greeting = {"id": "g", "turns": [{"role": "assistant", "content": "Hi! How can I help?"}, *CONV["turns"][:2]]}
    res = run(graph, greeting)
    # as in deepeval, the greeting is context of the first exchange, not an exchange of its own
    assert [v.exchange for v in res.verdicts] == [0] and m.call_count == 1
    assert not res.details.get("skipped") and "skipped" not in res.reason


def test_identical_responses_are_generated_once_but_embedded_per_exchange():
    conv = {"id": "d", "turns": [*CONV["turns"][:2], {"role": "user", "content": "Tell me a joke"},
                                 {"role": "assistant", "content": "It is 4."}]}
    emb = FixedEmbeddings()
    m = model(default=GOOD)
    res = run(create_response_relevancy_metric(model=m, embeddings=emb), conv)
    assert m.call_count == 1 and res.usage.calls == 1  # the judge's cache
    assert len(emb.calls) == 2 and res.verdicts[1].similarities == pytest.approx([0.0, 0.8, 1.0])


def test_strict_mode_needs_every_exchange_to_reach_the_threshold():
    mixed = questions("Can you not say?", "Is it unclear?", "Who knows?", noncommittal=[True, False, False])
    graph = create_response_relevancy_metric(model=model([("It is 4.", [GOOD]), ("could not say", [mixed])]),
                                            embeddings=FixedEmbeddings(), strict_mode=True, threshold=0.5)
    res = run(graph)
    assert res.score == 1.0 and res.threshold == 1.0 and res.passed  # 0.53 and 0.8 both reach 0.5
    res = run(create_response_relevancy_metric(model=two_exchange_model(), embeddings=FixedEmbeddings(), strict_mode=True))
    assert res.score == 0.0 and res.passed is False and "Strict mode: 1 of 2 exchanges reach 0.50" in res.reason


@pytest.mark.parametrize("kw,msg", [({"threshold": 1.5}, "threshold"), ({"n_questions": 0}, "n_questions"),
                                    ({"n_questions": 2.5}, "n_questions"), ({"embeddings": 42}, "Embeddings")])
def test_bad_settings_are_clear_errors(kw, msg):
    with pytest.raises((ValueError, TypeError), match=msg):
        create_response_relevancy_metric(model=model(), **({"embeddings": FixedEmbeddings()} | kw))


def test_invoke_ainvoke_batch_stream_agree_and_async_uses_native_aembed():
    emb = NativeAsyncEmbeddings()
    graph = create_response_relevancy_metric(model=two_exchange_model(), embeddings=emb)
    sync = run(graph).score
    out = asyncio.run(graph.ainvoke({"conversation": CONV}))["results"]["response_relevancy"]
    batch = graph.batch([{"conversation": CONV}] * 2)
    updates = [next(iter(chunk)) for chunk in graph.stream({"conversation": CONV}, stream_mode="updates")]
    assert sync == out.score == batch[1]["results"]["response_relevancy"].score == pytest.approx(0.8 / 3)
    assert emb.async_calls == 2  # ainvoke used aembed_documents
    assert updates == ["split_exchanges", "generate_questions", "generate_questions",
                       "embed_questions", "embed_questions", "reduce_score"]


def test_async_without_native_aembed_runs_embeddings_in_a_worker_thread():
    emb = FixedEmbeddings()
    graph = create_response_relevancy_metric(model=two_exchange_model(), embeddings=emb)

    async def go():
        loop_thread = threading.get_ident()
        out = await graph.ainvoke({"conversation": CONV})
        return loop_thread, out

    loop_thread, out = asyncio.run(go())
    assert out["results"]["response_relevancy"].score == pytest.approx(0.8 / 3)
    assert len(emb.threads) == 2 and loop_thread not in emb.threads


def test_composes_in_a_report_graph_with_precomputed_exchanges():
    graph = create_response_relevancy_metric(model=two_exchange_model(), embeddings=FixedEmbeddings())
    out = create_report_graph([graph]).invoke({"conversation": CONV})
    assert out["results"]["response_relevancy"].score == pytest.approx(0.8 / 3)


# -- offline fallback ---------------------------------------------------------------


def test_offline_judge_falls_back_to_cosine_of_response_and_input_with_its_own_embeddings():
    emb = FixedEmbeddings({**VECTORS, "It is 4.": [0.6, 0.8], "I really could not say.": [0.0, 1.0]})
    graph = create_response_relevancy_metric(model=EmbeddingJudge(emb))
    assert set(graph.get_graph().nodes) == {"__start__", "split_exchanges", "embed_response", "reduce_score", "__end__"}
    res = run(graph)
    assert [v.score for v in res.verdicts] == pytest.approx([0.6, 1.0])
    assert res.details["mode"] == OFFLINE_MODE and res.details["embedding_calls"] == 2
    assert sorted(emb.calls) == [["Tell me a joke", "I really could not say."], ["What is 2+2?", "It is 4."]]
    assert res.reason.startswith("Offline: cosine(response, input), no question generation without an LLM. "
                                 "Score 0.80 over 2 exchanges (>= threshold 0.50).")
    assert res.usage.calls == 0 and "n_questions" not in res.details


@pytest.mark.slow
def test_offline_fallback_on_the_ragas_examples_with_minilm():
    loaded = load_file(ROOT / "examples" / "ragas_samples.jsonl")
    assert loaded.ok and len(loaded.conversations) == 5
    graph = create_response_relevancy_metric()  # the offline judge, the real all-MiniLM-L6-v2
    results = {c.conversation.id: run(graph, c.conversation) for c in loaded.conversations}
    scores = {cid: r.score for cid, r in results.items()}
    relevant = [scores["ragas_samples:1"], scores["ragas_samples:2"], scores["ragas_samples:5"]]
    evasive, off_topic = scores["ragas_samples:3"], scores["ragas_samples:4"]
    assert min(relevant) > 0.5 > max(evasive, off_topic)
    for r in results.values():
        assert r.details["mode"] == OFFLINE_MODE and r.usage.calls == 0
        assert r.details["embedding_calls"] == 1 and r.details["embedded_texts"] == 2
        assert r.judge.startswith("offline:") and "no question generation without an LLM" in r.reason
    assert results["ragas_samples:4"].status == "failed" and "turn 2" in results["ragas_samples:4"].reason


# -- embeddings, registry, drawings ---------------------------------------------------


def test_resolve_embeddings_strings():
    from langchain_openai import OpenAIEmbeddings

    from judgegraph.embeddings.minilm import get_default_embeddings

    emb = resolve_embeddings("openai:text-embedding-3-small", base_url="http://127.0.0.1:9/v1")
    assert isinstance(emb, OpenAIEmbeddings) and emb.model == "text-embedding-3-small"
    assert emb.openai_api_base == "http://127.0.0.1:9/v1" and emb.check_embedding_ctx_length is False
    assert resolve_embeddings("minilm") is get_default_embeddings() is resolve_embeddings(None)
    with pytest.raises(ModelConfigError, match="OPENAI_API_KEY"):
        resolve_embeddings("openai:text-embedding-3-small")
    graph = create_response_relevancy_metric(model=model(), embeddings="openai:text-embedding-3-large",
                                            embeddings_base_url="http://127.0.0.1:9/v1")
    assert graph.get_graph().nodes  # built, nothing called


def test_embeddings_are_served_beside_an_openai_compatible_judge_by_default(monkeypatch):
    import judgegraph.metrics.response as response

    seen = {}
    real = response.resolve_embeddings
    monkeypatch.setattr(response, "resolve_embeddings", lambda e, **kw: seen.update(kw) or real(e, **kw))
    judge = resolve_judge("openai:gpt-4.1-mini", base_url="http://127.0.0.1:9/v1")
    create_response_relevancy_metric(model=judge, embeddings="openai:text-embedding-3-small")
    assert seen["base_url"] == "http://127.0.0.1:9/v1" and seen["api_key"]


def test_the_judge_says_where_it_is_served_and_the_embeddings_client_is_called_the_same_way():
    key = "sk-unit-ENDPOINTSECRET-0123456789"
    judge = resolve_judge("openai:gpt-4.1-mini", base_url="http://127.0.0.1:9/v1", api_key=key, timeout=30,
                          max_reply_bytes=4096)
    served = judge.endpoint
    assert (served.base_url, served.timeout, served.max_reply_bytes) == ("http://127.0.0.1:9/v1", 30, 4096)
    assert served.api_key.get_secret_value() == key and key not in repr(served) and key not in str(served)
    assert EmbeddingJudge().endpoint is None and LLMJudge(model()).endpoint is None  # not an OpenAI client
    assert EmbeddingJudge(FixedEmbeddings()).embeddings.__class__ is FixedEmbeddings and LLMJudge(model()).embeddings is None
    graph = create_response_relevancy_metric(model=judge, embeddings="openai:text-embedding-3-small")
    assert graph.get_graph().nodes  # built with the judge's server, key, deadline and reply limit; nothing called


def test_registered_for_the_cli_and_files():
    spec = get_metric("response-relevancy")
    assert spec.name == "response_relevancy" and spec.options == {"threshold", "strict_mode", "n_questions", "embeddings", "embeddings_base_url", "min_judged",
                                                               "max_concurrency"}
    graph = create_metric("response-relevancy", model=LLMJudge(model()), n_questions=2, embeddings=FixedEmbeddings())
    assert "generate_questions" in graph.get_graph().nodes


@pytest.mark.parametrize("offline", [False, True], ids=["llm", "offline"])
def test_mermaid_snapshot(offline, mermaid):
    kw = {"model": EmbeddingJudge(FixedEmbeddings())} if offline else {"model": model(), "embeddings": FixedEmbeddings()}
    drawing = create_response_relevancy_metric(**kw).get_graph().draw_mermaid(with_styles=False)
    assert drawing == mermaid
