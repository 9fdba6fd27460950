"""Response relevancy (ragas ``ResponseRelevancy`` semantics; docs/response_relevancy.md).

    START → split_exchanges ─Send per exchange→ generate_questions → embed_questions → reduce_score → END

The offline judge writes no questions: ``embed_response`` scores cosine(response, input).
"""

from __future__ import annotations

__all__ = [
    "EmbeddingRunner",
    "ExchangeVerdict",
    "GeneratedQuestion",
    "GeneratedQuestions",
    "ResponseRelevancySettings",
    "ResponseRelevancyState",
    "build_response_relevancy_graph",
    "create_response_relevancy_metric",
    "normalise_question",
    "questions_request",
    "questions_schema",
    "resolve_embeddings",
]

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import Annotated, Any, ClassVar, Literal

from langchain_core.embeddings import Embeddings
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send
from pydantic import BaseModel, Field, create_model, field_validator, model_validator
from typing_extensions import TypedDict  # pydantic reads these schemas; typing's TypedDict needs 3.12

from ..core.nodes import Node, in_scope, judge_step, quote, score_node, scoring_edges, turn_label
from ..core.scoring import MetricOptions, check_whole, option
from ..core.state import MetricInput, MetricOutput, MetricState, conversation_of
from ..data.conversation import Conversation
from ..data.results import JudgeAttempt, MetricResult, Usage, Verdict, Vote, merge_verdicts
from ..data.windows import Exchange, exchanges
from ..embeddings.base import cosines, embeddings_name
from ..embeddings.resolve import resolve_embeddings
from ..embeddings.runner import EmbeddingRunner
from ..judges import JudgeOutcome, JudgeRequest
from ..judges.base import JurorAnswer
from . import MetricSpec
from ._renamed import renamed

GENERATE_STEP = "response_relevancy/generate_questions"
EMBED_STEP = "response_relevancy/embed_questions"  # no prompt file: an embeddings call
OFFLINE_STEP = "response_relevancy/embed_response"  # no prompt file: an embeddings call

LLM_MODE = "llm: mean cosine(generated questions, input), x0 when every question is noncommittal"
OFFLINE_MODE = "offline: cosine(response, input) — no question generation without an LLM"


def normalise_question(text: str) -> str:
    """What two questions are compared on: NFKC, case-folded, no punctuation or extra spaces."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w]+", " ", text).split())


class GeneratedQuestion(BaseModel):
    question: str = Field(description="One question the response answers directly.")
    noncommittal: bool = Field(
        description="true if the response evades, hedges without answering, says it does not know, "
        "or refuses; false if it commits to an answer."
    )


class GeneratedQuestions(BaseModel):
    """The judge's answer for one response. The reason comes first so the
    model reads the response before it writes the questions."""

    n_questions: ClassVar[int] = 3

    reason: str = Field(description="What the response answers, and whether it commits to an answer.")
    questions: list[GeneratedQuestion] = Field(description="Different questions the response answers.")

    @field_validator("questions", mode="before")
    @classmethod
    def _accept_strings(cls, value: Any) -> Any:
        # a bare string means a committal question; anything else is validated as given
        if isinstance(value, list):
            return [{"question": v, "noncommittal": False} if isinstance(v, str) else v for v in value]
        return value

    @classmethod
    def placeholder(cls) -> dict[str, Any]:
        """A valid answer: N distinct committal questions."""
        return {"reason": "placeholder",
                "questions": [{"question": f"question {i}", "noncommittal": False} for i in range(1, cls.n_questions + 1)]}

    @model_validator(mode="after")
    def _exactly_n_distinct(self) -> GeneratedQuestions:
        n = type(self).n_questions
        got = len(self.questions)
        if got != n:
            raise ValueError(f"questions: expected exactly {n} questions, got {got}; write {n} different questions")
        seen: dict[str, int] = {}
        for i, q in enumerate(self.questions, start=1):
            key = normalise_question(q.question)
            if not key:
                raise ValueError(f"questions: question {i} is empty; write {n} non-empty questions")
            if key in seen:
                raise ValueError(
                    f"questions: questions {seen[key]} and {i} are the same ({q.question.strip()!r}) once case"
                    f" and punctuation are ignored; write {n} questions that differ in wording or angle"
                )
            seen[key] = i
        return self


@cache
def questions_schema(n: int) -> type[GeneratedQuestions]:
    """The structured-output schema asking for exactly ``n`` distinct questions."""
    model = create_model(
        "GeneratedQuestions",
        __base__=GeneratedQuestions,
        __doc__=GeneratedQuestions.__doc__,
        questions=(list[GeneratedQuestion], Field(description=f"Exactly {n} different questions the response answers.")),
    )
    model.n_questions = n
    return model


class ExchangeVerdict(Verdict):
    """One exchange's judgement: its ``score``, and ``verdict`` "yes" when that reaches the threshold."""

    id_fields: ClassVar[tuple[str, ...]] = ("exchange",)

    exchange: int  # index of the exchange in the conversation
    verdict: Literal["yes", "no"] | None = None
    user_input: str = ""
    response: str = ""
    questions: list[str] = Field(default_factory=list)
    noncommittal: list[bool] = Field(default_factory=list)  # one flag per question
    noncommittal_count: int = 0
    all_noncommittal: bool = False  # ragas's rule fired: the score was multiplied by 0
    similarities: list[float] = Field(default_factory=list)  # cosine(q_i, input); offline: [cosine(response, input)]
    mean_cosine: float | None = None  # before clamping and the noncommittal rule
    embedded_texts: int = 0  # texts sent in this exchange's single embeddings call (0: no call)
    step: str | None = None  # the step that failed, when ``error`` is set


class Skipped(TypedDict):
    exchange: int
    turns: list[int]
    why: str


class Question(TypedDict):
    question: str
    noncommittal: bool


class JurorQuestions(TypedDict):
    judge: str
    repeat: int
    questions: list[Question]
    error: str | None


class Generation(TypedDict):
    """What generate_questions produced for one exchange."""

    exchange: int
    questions: list[Question]
    reason: str
    error: str | None
    attempts: int
    usage: Usage
    transcript: list[JudgeAttempt]
    jurors: list[JurorQuestions]  # a jury's: each juror's, scored alike


class ResponseRelevancyState(MetricState, total=False):
    exchanges: list[Exchange]
    skipped: list[Skipped]
    verdicts: Annotated[list[ExchangeVerdict], merge_verdicts]


class ExchangeTask(TypedDict):
    exchange: int
    turns: list[int]  # the reply's turn indices
    user_input: str
    response: str


class EmbedTask(ExchangeTask):
    generation: Generation


@dataclass(frozen=True, kw_only=True)
class ResponseRelevancySettings(MetricOptions):
    """The shared options, the embeddings and how many questions are written per reply."""

    embeddings: Embeddings | str | None = option(
        None, help="an Embeddings object or a model string (None: the offline judge's, else all-MiniLM-L6-v2)")
    embeddings_base_url: str | None = option(
        None, help="the embeddings server (default: the OpenAI-compatible server of the judge)")
    n_questions: int = option(3, help="questions written from each reply")
    max_concurrency: int = option(16, help="embeddings calls in flight (judge calls are bounded by the judge)")

    def check(self) -> None:
        super().check()
        check_whole(self.n_questions, "n_questions")
        # served beside an OpenAI-compatible judge by default, called as the judge is (deadline, reply limit)
        served, call = self.judge.endpoint, dict[str, Any]()
        if served is not None:
            call = {"api_key": served.api_key, "max_reply_bytes": served.max_reply_bytes}
            if served.timeout is not None:
                call["timeout"] = served.timeout
        self.normalise(embeddings=resolve_embeddings(
            self.judge.embeddings if self.embeddings is None else self.embeddings,
            base_url=self.embeddings_base_url or (served.base_url if served else None), **call))


def _reply_text(ex: Exchange) -> str:
    return "\n\n".join(t.turn.content for t in ex.assistant if t.turn.content.strip())


def split_exchanges(state: ResponseRelevancyState, config: RunnableConfig) -> ResponseRelevancyState:
    conversation = conversation_of(state)
    exs = in_scope(exchanges(conversation), config)
    skipped: list[Skipped] = []
    for ex in exs:
        why = ("no user message before the reply (the assistant spoke first): nothing to compare it with"
               if not ex.user_text.strip() else None if _reply_text(ex) else "the reply has no text")
        if why:
            skipped.append({"exchange": ex.index, "turns": list(ex.reply_turn_indices), "why": why})
    return {"conversation": conversation, "exchanges": exs, "skipped": skipped}


def _fan_out(target: str) -> Callable[[ResponseRelevancyState], list[Send] | str]:
    def fan_out_exchanges(state: ResponseRelevancyState) -> list[Send] | str:
        skipped = {s["exchange"] for s in state.get("skipped") or []}
        tasks = [
            Send(target, ExchangeTask(exchange=ex.index, turns=list(ex.reply_turn_indices),
                                      user_input=ex.user_text, response=_reply_text(ex)))
            for ex in state.get("exchanges") or []
            if ex.index not in skipped
        ]
        return tasks or "reduce_score"

    return fan_out_exchanges


def questions_request(response: str, n_questions: int) -> JudgeRequest:
    return JudgeRequest(task="response_questions", step=GENERATE_STEP, schema=questions_schema(n_questions),
                        values={"n_questions": str(n_questions), "response": response},
                        inputs={"response": response, "n_questions": n_questions})


def _generate_questions(settings: ResponseRelevancySettings) -> RunnableLambda:
    def build(task: ExchangeTask) -> JudgeRequest:
        return questions_request(task["response"], settings.n_questions)

    def finish(task: ExchangeTask, outcome: JudgeOutcome) -> Command:
        value = outcome.value if outcome.ok else None
        record = Generation(
            exchange=task["exchange"], questions=_questions(value), reason=getattr(value, "reason", ""),
            error=None if value is not None else (outcome.error or "no questions"), attempts=outcome.attempts,
            usage=outcome.usage, transcript=outcome.transcript, jurors=[_juror_questions(j) for j in outcome.jurors])
        update: ResponseRelevancyState = {}
        if value is None:  # the exchange's verdict is this judge error (embed_questions writes it again, no call)
            update["verdicts"] = [_verdict(task, settings.threshold, error=record["error"], step=GENERATE_STEP,
                                           attempts=outcome.attempts, usage=outcome.usage,
                                           transcript=outcome.transcript)]
        # every exchange goes on to embed_questions, so the reduce node runs once, after all of them
        return Command(update=update, goto=Send("embed_questions", EmbedTask(**task, generation=record)))

    return judge_step("generate_questions", settings.judge, build, finish)


def _verdict(task: ExchangeTask, threshold: float, **kw: Any) -> ExchangeVerdict:
    score = kw.get("score")
    verdict: Literal["yes", "no"] | None = (
        None if kw.get("error") or score is None else ("yes" if score >= threshold else "no"))
    return ExchangeVerdict(exchange=task["exchange"], turns=list(task["turns"]), user_input=task["user_input"],
                           response=task["response"], verdict=verdict, **kw)


def _questions(value: Any) -> list[Question]:
    return [Question(question=q.question, noncommittal=q.noncommittal) for q in getattr(value, "questions", [])]


def _juror_questions(juror: JurorAnswer) -> JurorQuestions:
    value = juror.outcome.value if juror.outcome.ok else None
    return {"judge": juror.judge, "repeat": juror.repeat, "questions": _questions(value),
            "error": None if value is not None else (juror.outcome.error or "no questions")}


def _votes(jurors: list[JurorQuestions], sims: list[float], threshold: float) -> list[Vote]:
    """Each juror's vote: its own questions scored as the verdict's are (``sims``: theirs, in order)."""
    votes = []
    for juror in jurors:
        mine, sims = sims[:len(juror["questions"])], sims[len(juror["questions"]):]
        if juror["error"] is not None or not mine:
            votes.append(Vote(judge=juror["judge"], repeat=juror["repeat"], error=juror["error"] or "no questions"))
            continue
        flags = [bool(q["noncommittal"]) for q in juror["questions"]]
        score = 0.0 if all(flags) else max(0.0, sum(mine) / len(mine))
        votes.append(Vote(judge=juror["judge"], repeat=juror["repeat"], score=score,
                          verdict="yes" if score >= threshold else "no", reason=f"{len(mine)} questions"))
    return votes


def _embedding_node(name: str, runner: EmbeddingRunner, texts_of: Callable[[Any], list[str] | None],
                    finish: Callable[[Any, list[str] | None, list[float] | str | None], ResponseRelevancyState]
                    ) -> RunnableLambda:
    """A node: one embeddings call for ``texts_of(task)`` (None: no call), then ``finish(task, texts, sims)``:
    cosine(each text, the first), or the failed call's description (a judge error for this exchange)."""

    def run(task: Any) -> ResponseRelevancyState:
        texts = texts_of(task)
        try:
            sims: list[float] | str | None = None if texts is None else cosines(runner.embed(texts))
        except Exception as exc:  # noqa: BLE001 - an embeddings failure is a judge error for this exchange
            sims = runner.describe(exc)
        return finish(task, texts, sims)

    async def arun(task: Any) -> ResponseRelevancyState:
        texts = texts_of(task)
        try:
            sims: list[float] | str | None = None if texts is None else cosines(await runner.aembed(texts))
        except Exception as exc:  # noqa: BLE001
            sims = runner.describe(exc)
        return finish(task, texts, sims)

    return RunnableLambda(run, afunc=arun, name=name)


def _embed_questions(settings: ResponseRelevancySettings, runner: EmbeddingRunner) -> RunnableLambda:
    def texts_for(task: EmbedTask) -> list[str] | None:
        gen = task["generation"]
        if gen["error"] is not None:
            return None
        return [task["user_input"], *(q["question"] for q in gen["questions"]),
                *(q["question"] for j in gen["jurors"] for q in j["questions"])]

    def finish(task: EmbedTask, texts: list[str] | None, sims: list[float] | str | None) -> ResponseRelevancyState:
        gen = task["generation"]
        base = {"attempts": gen["attempts"], "usage": gen["usage"], "transcript": gen["transcript"]}
        if texts is None:  # the generation failed: reported, no embeddings call
            return {"verdicts": [_verdict(task, settings.threshold, error=gen["error"], step=GENERATE_STEP, **base)]}
        questions = [q["question"] for q in gen["questions"]]
        flags = [bool(q["noncommittal"]) for q in gen["questions"]]
        common = {"questions": questions, "noncommittal": flags, "noncommittal_count": sum(flags),
                  "all_noncommittal": all(flags), "reason": gen["reason"], "embedded_texts": len(texts), **base}
        if isinstance(sims, str) or sims is None:
            return {"verdicts": [_verdict(task, settings.threshold, error=sims, step=EMBED_STEP, **common)]}
        sims, votes = sims[:len(questions)], _votes(gen["jurors"], sims[len(questions):], settings.threshold)
        mean = sum(sims) / len(sims)
        score = 0.0 if all(flags) else max(0.0, mean)
        return {"verdicts": [_verdict(task, settings.threshold, similarities=sims, mean_cosine=mean,
                                      score=score, votes=votes, **common)]}

    return _embedding_node("embed_questions", runner, texts_for, finish)


def _embed_response(settings: ResponseRelevancySettings, runner: EmbeddingRunner) -> RunnableLambda:
    """The offline fallback: cosine(response, input), one embeddings call per exchange."""

    def finish(task: ExchangeTask, texts: list[str] | None, sims: list[float] | str | None) -> ResponseRelevancyState:
        if isinstance(sims, str) or sims is None:
            return {"verdicts": [_verdict(task, settings.threshold, error=sims, step=OFFLINE_STEP, embedded_texts=2)]}
        (sim,) = sims
        return {"verdicts": [_verdict(task, settings.threshold, similarities=[sim], mean_cosine=sim,
                                      score=max(0.0, sim), embedded_texts=2,
                                      reason=f"offline: cosine(response, input) = {sim:.2f}")]}

    return _embedding_node("embed_response", runner, lambda task: [task["user_input"], task["response"]], finish)


def deterministic_reason(
    score: float | None, settings: ResponseRelevancySettings, verdicts: list[ExchangeVerdict],
    skipped: list[Skipped],
) -> str:
    prefix = "Offline: cosine(response, input), no question generation without an LLM. " if settings.offline else ""
    valid = [v for v in verdicts if v.verdict is not None]
    failed = [v for v in verdicts if v.verdict is None]
    if not verdicts:
        why = "no exchange with both a user message and a reply" if skipped else "no user→assistant exchange"
        return prefix + f"Nothing to judge: {why}."
    if not valid:
        return prefix + f"No exchange could be judged: {len(failed)} error(s); see errors."
    threshold = settings.effective_threshold
    cmp = ">=" if score is not None and score >= threshold else "<"
    if settings.strict_mode:
        reached = sum(1 for v in valid if v.verdict == "yes")
        head = (f"Strict mode: {reached} of {len(valid)} exchanges reach {settings.threshold:.2f}"
                f" (score {score:.2f} {cmp} threshold {threshold:.2f}).")
    else:
        k = len(valid)
        head = f"Score {score:.2f} over {k} exchange{'s' if k != 1 else ''} ({cmp} threshold {threshold:.2f})."
    parts = [prefix + head]
    if low := [_low_item(v) for v in valid if v.verdict == "no"]:
        parts.append(f"Below {settings.threshold:.2f}: " + "; ".join(low) + ".")
    if failed:
        parts.append(f"{len(failed)} exchange(s) not judged (judge or embeddings error), left out of the score.")
    if skipped:
        parts.append(f"{len(skipped)} exchange(s) skipped (no user message or no reply text).")
    return " ".join(parts)


def _low_item(v: ExchangeVerdict) -> str:
    item = f"{turn_label(v.turns)} {quote(v.response)} scored {v.score:.2f}"
    if v.all_noncommittal:
        return f"{item} (all {len(v.questions)} generated questions noncommittal: score set to 0)"
    return f"{item} (it answers {quote(v.questions[0], 80)}, asked {quote(v.user_input, 80)})" if v.questions else item


def exchange_score(verdict: ExchangeVerdict) -> float:
    """An exchange's score: the judge's, or 1 / 0 when a person reviewed the verdict ("yes" / "no")."""
    if verdict.review is not None:
        return 1.0 if verdict.verdict == "yes" else 0.0
    return verdict.score or 0.0


def _reduce_score(settings: ResponseRelevancySettings) -> Node:
    # The score is the mean exchange score; strict mode asks every exchange to reach the threshold (verdict "yes").
    policy = settings.policy(
        judge=settings.judge.name,  # by name: the mode is in details, no judge_rule
        step=GENERATE_STEP, where=lambda v: f"exchange {getattr(v, 'exchange', '?')} ({turn_label(v.turns)})",
        score=lambda judged: (float(all(v.verdict == "yes" for v in judged)) if settings.strict_mode
                              else sum(exchange_score(v) for v in judged) / len(judged)),
    )

    def score(state: ResponseRelevancyState, conversation: Conversation, verdicts: list[Any]) -> MetricResult:
        skipped = list(state.get("skipped") or [])
        valid = [v for v in verdicts if v.verdict is not None]
        details: dict[str, Any] = {
            "mode": OFFLINE_MODE if settings.offline else LLM_MODE, "exchanges": len(verdicts) + len(skipped),
            "judged": len(valid), "embeddings": embeddings_name(settings.embeddings),
            "embedding_calls": sum(1 for v in verdicts if v.embedded_texts),
            "embedded_texts": sum(v.embedded_texts for v in verdicts)}
        if not settings.offline:
            details.update(n_questions=settings.n_questions,
                           noncommittal_questions=sum(v.noncommittal_count for v in verdicts),
                           all_noncommittal_exchanges=sum(1 for v in valid if v.all_noncommittal))
        if skipped:
            details["skipped"] = skipped
        return replace(policy, reason=lambda t: deterministic_reason(t.score, settings, verdicts, skipped)).result(
            conversation, verdicts, details=details)

    return score_node(settings.name, score, order=lambda v: v.exchange)


def build_response_relevancy_graph(settings: ResponseRelevancySettings) -> StateGraph:
    """The uncompiled graph (offline: ``embed_response`` instead of the question nodes)."""
    runner = EmbeddingRunner(settings.embeddings, max_concurrency=settings.max_concurrency)
    builder = StateGraph(ResponseRelevancyState, input_schema=MetricInput, output_schema=MetricOutput)
    builder.add_node("split_exchanges", split_exchanges)
    builder.add_edge(START, "split_exchanges")
    if settings.offline:
        builder.add_node("embed_response", _embed_response(settings, runner))
        builder.add_conditional_edges("split_exchanges", _fan_out("embed_response"), ["embed_response", "reduce_score"])
    else:
        builder.add_node("generate_questions", _generate_questions(settings), destinations=("embed_questions",))
        builder.add_node("embed_questions", _embed_questions(settings, runner))
        builder.add_conditional_edges("split_exchanges", _fan_out("generate_questions"),
                                      ["generate_questions", "reduce_score"])
    scoring_edges(builder, ["embed_response" if settings.offline else "embed_questions"], review=settings.review,
                  metric=settings.name)
    builder.add_node("reduce_score", _reduce_score(settings))
    builder.add_edge("reduce_score", END)
    return builder


RESPONSE_RELEVANCY = MetricSpec(
    "response_relevancy", settings=ResponseRelevancySettings, build=build_response_relevancy_graph,
    needs=frozenset({"embeddings"}),
    summary="Does each reply answer what was asked? Mean cosine of N questions written from the reply to the "
            "user's message (ragas); offline: cosine(reply, message)",
    prompt_values={GENERATE_STEP: {"n_questions", "response"}})
create_response_relevancy_metric = RESPONSE_RELEVANCY.factory
__getattr__ = renamed(__name__)  # create_<name>_judge: deprecated, renamed in 0.2
