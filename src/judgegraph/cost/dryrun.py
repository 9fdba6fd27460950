"""What a run will cost, before it is made: ``judgegraph eval ... --dry-run``.

The run is made for real with a chat model that records instead of sending and
answers with schema-conforming placeholders; what is exact and what estimated:
docs/runs.md.
"""

from __future__ import annotations

import copy
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel, Field, PrivateAttr, ValidationError

from ..core.nodes import DeclaredGraph, WindowSteps
from ..data.results import Usage
from ..judges import Judge, JudgeCache, JudgeOutcome, JudgeRequest
from ..judges.limiter import CallLimiter
from ..judges.llm import LLMJudge
from ..judges.schema_example import example_from_schema
from ..judges.scripted import ScriptedChatModel, ScriptedRequest
from ..judges.tokens import PieceCounter, prompt_tokens
from ..providers import cache_rule, default_rule
from ..providers.prefixcache import CacheRule
from .pricing import Prices

#: Output tokens assumed per judge call (a short reason and a verdict as JSON).
ASSUMED_OUTPUT_TOKENS = 100

_step: ContextVar[str] = ContextVar("judgegraph_dry_run_step", default="unknown/unknown")


@contextmanager
def _at_step(step: str) -> Iterator[None]:
    """The requests made inside are counted against ``step``."""
    token = _step.set(step)
    try:
        yield
    finally:
        _step.reset(token)


def _at_least_one(schema: Any) -> Any:
    """The schema with every array asking for at least one item, so steps that
    fan out over an extraction are counted for one item each."""
    if isinstance(schema, dict):
        out = {k: _at_least_one(v) for k, v in schema.items()}
        if out.get("type") == "array":
            out["minItems"] = max(1, int(out.get("minItems") or 0))
        return out
    if isinstance(schema, list):
        return [_at_least_one(v) for v in schema]
    return schema


def placeholder_answer(schema: type[BaseModel] | dict[str, Any]) -> dict[str, Any]:
    """The schema's own ``placeholder()`` (for checks a generic example cannot pass), else an example."""
    if isinstance(schema, type):
        return json.loads(_placeholder_json(schema))  # made once per schema; a fresh copy each time
    return _placeholder(schema)


@lru_cache(maxsize=256)
def _placeholder_json(schema: type[BaseModel]) -> str:
    return json.dumps(_placeholder(schema))


@lru_cache(maxsize=256)
def _parsed_placeholder(schema: type[BaseModel]) -> BaseModel | None:
    """The placeholder as ``schema`` reads it (one instance, handed to every request of the schema: an answer
    is only read), or None when the schema refuses it."""
    try:
        return schema.model_validate(placeholder_answer(schema))
    except ValidationError:
        return None


def _placeholder(schema: type[BaseModel] | dict[str, Any]) -> dict[str, Any]:
    own = getattr(schema, "placeholder", None)
    if isinstance(schema, type) and callable(own):
        return dict(own())
    js = schema.model_json_schema() if isinstance(schema, type) else copy.deepcopy(schema.get("parameters", schema))
    value = example_from_schema(_at_least_one(js))
    return value if isinstance(value, dict) else {}


class RecordingChatModel(ScriptedChatModel):
    """A scripted chat model counting each request against the current step, answering with
    placeholders (usage zero: nothing was spent). What a provider's cache would serve is counted by
    ``rule``'s (the provider's) rule: for a ``marked`` rule the judge marks the prompt as for that provider's
    chat model (``marks_cache_control``), and what it marks is counted."""

    model_name: str = "dry-run"
    rule: CacheRule = Field(default_factory=default_rule)
    _tally: _Tally = PrivateAttr()

    def model_post_init(self, context: Any) -> None:
        """The counts and the provider's cache counter, made once: the bound copies (one per schema) share them."""
        super().model_post_init(context)
        from ..providers import get

        found = get(self.rule.provider)
        self._tally = _Tally(found.cache_counter(self.rule) if found is not None and self.rule.kind != "unknown"
                             else None)

    @property
    def counts(self) -> dict[str, Counter[str]]:
        """What was counted, by step: ``calls``, ``input_tokens``, ``cached_input_tokens``, ``more_answers``
        (a dense call's verdicts after its first), ``refused`` (re-asks)."""
        return self._tally.counts

    @property
    def marks_cache_control(self) -> bool:
        """Whether the judge sends this model its prompts marked for its provider's cache (judges/cache_hints.py)."""
        return self.rule.kind == "marked"

    def respond(self, request: ScriptedRequest) -> dict[str, Any]:
        self._tally.record(_step.get(), request)
        return placeholder_answer(request.schema) if request.schema is not None else {}

    def _usage(self, request: ScriptedRequest, reply: Any) -> dict[str, int]:
        return dict(_NO_USAGE)

    @property
    def _llm_type(self) -> str:
        return "judgegraph-dry-run"


class _Tally:
    """The recorder's counts, a plain object (a pydantic model's private attributes cost a lookup each, on every
    request): the requests by step, the pieces' token counts, the provider's cache counter."""

    def __init__(self, served: Callable[[ScriptedRequest, int], int] | None) -> None:
        self.counts: dict[str, Counter[str]] = {}
        self.lock = threading.Lock()  # requests arrive on several threads
        self.count = PieceCounter()  # the prompts' shared lines counted once
        self.served = served

    def record(self, step: str, request: ScriptedRequest) -> None:
        tokens = prompt_tokens(request.messages, self.count)
        reask = any(m.type == "ai" for m in request.messages)
        served = 0 if reask or self.served is None else self.served(request, tokens)
        schema = request.schema
        # a dense call (judgegraph.core._dense) answers one verdict per item: its output is counted per item
        items = placeholder_answer(schema).get("items") if getattr(schema, "dense", False) else None
        with self.lock:
            counts = self.counts.setdefault(step, Counter())
            if reask:
                # A re-ask: the placeholder did not pass the metric's own checks. Not a
                # call the real run would make; what follows this step is not counted.
                counts["refused"] += 1
            else:
                counts["calls"] += 1
                counts["input_tokens"] += tokens
                if served:
                    counts["cached_input_tokens"] += served
                if isinstance(items, list) and len(items) > 1:
                    counts["more_answers"] += len(items) - 1


#: The usage a recorded reply reports: nothing was spent.
_NO_USAGE = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}


class _Recorder:
    """What the dry run's judge sends a request through in place of the recorder's structured-output chain
    (its LangChain runnables, callbacks and worker threads, per request): the request recorded and answered
    at once, in the shape ``with_structured_output(include_raw=True)`` gives (a tool call of the
    placeholder answer, parsed by the schema)."""

    def __init__(self, chat: RecordingChatModel, schema: type[BaseModel]) -> None:
        self.chat, self.schema = chat, schema

    def invoke(self, messages: list[BaseMessage]) -> dict[str, Any]:
        request = ScriptedRequest(text="\n\n".join(m.text for m in messages), messages=list(messages),
                                  schema=self.schema)
        answer = self.chat.respond(request)
        raw = AIMessage(content="", usage_metadata=dict(_NO_USAGE),
                        tool_calls=[{"name": self.schema.__name__, "args": answer, "id": "call_dry_run"}])
        try:
            return {"raw": raw, "parsed": self.schema.model_validate(answer), "parsing_error": None}
        except ValidationError as exc:
            return {"raw": raw, "parsed": None, "parsing_error": exc}

    async def ainvoke(self, messages: list[BaseMessage]) -> dict[str, Any]:
        return self.invoke(messages)


class _RecordingLLMJudge(LLMJudge):
    """The LLM judge over the recorder: every step of a judgement as in the real run (the message and its
    cache marks, re-asks, transcripts), each request sent through a :class:`_Recorder`."""

    def _structured(self, schema: type) -> Any:
        if schema not in self._runnables:
            self._runnables[schema] = _Recorder(self.model, schema)  # type: ignore[arg-type]
        return self._runnables[schema]


class DryRunJudge(Judge):
    """An LLM judge that records instead of sending (see the module doc).
    ``name`` is the real judge's, so results and prices read the same."""

    kind = "llm"

    def __init__(self, name: str, *, max_tries: int = 3, rule: CacheRule | None = None) -> None:
        self.name = name
        self.max_tries = max_tries
        self.cache_rule = rule or default_rule()  # the provider's prompt cache (judgegraph.providers.prefixcache)
        self.chat = RecordingChatModel(rule=self.cache_rule)
        self._tally = self.chat._tally
        self._inner = _RecordingLLMJudge(self.chat, max_tries=max_tries, limiter=CallLimiter(64))
        self.cache = JudgeCache()  # identical requests are made once, as in the real run

    @classmethod
    def for_model(cls, model: str, *, max_tries: int = 3) -> DryRunJudge:
        """The dry run of the LLM judge ``model``, named as that judge (so prices are found),
        without a client (no API key needed); its provider's cache rule counts the cacheable tokens."""
        return cls(cls.name_for(model), max_tries=max_tries, rule=cache_rule(model))

    @staticmethod
    def name_for(model: str) -> str:
        """The name the LLM judge of ``model`` has (``llm:gpt-4.1-mini``), which prices are looked up by."""
        from ..providers import split_model

        return f"llm:{split_model(model)[1]}"

    def prepare(self, request: JudgeRequest) -> None:
        self._inner.prepare(request)

    def judge(self, request: JudgeRequest) -> JudgeOutcome:
        if (answered := self._answered(request)) is not None:
            return answered
        with _at_step(request.step):
            return self._inner.judge(request)

    async def ajudge(self, request: JudgeRequest) -> JudgeOutcome:
        if (answered := self._answered(request)) is not None:
            return answered
        with _at_step(request.step):
            return await self._inner.ajudge(request)

    def _answered(self, request: JudgeRequest) -> JudgeOutcome | None:
        """What the recording LLM judge does for a request its placeholder answers at the first ask, without its
        chat machinery: the same first message (:meth:`LLMJudge.first_request`), counted as the recorder counts it,
        and the placeholder as the answer (no transcript: a dry run keeps no results). None for the rest (a
        placeholder the schema refuses: re-asks; a request that cannot be sent: its error), which take the judge's
        whole path."""
        schema = request.schema
        parsed = _parsed_placeholder(schema) if isinstance(schema, type) else None
        if parsed is None:
            return None
        message = self._inner.first_request(request)
        if isinstance(message, str):
            return None
        self._tally.record(request.step, ScriptedRequest(text=request.rendered, messages=[message], schema=schema))
        return JudgeOutcome(parsed, None, 1, Usage(calls=1))

    def estimate(self, prices: Prices | None = None, *, jurors: int = 1) -> CostEstimate:
        """What the recorded requests cost; ``jurors``: how many jurors (models × repeats) each is sent to, every
        one the same request."""
        counts = sorted(self.chat.counts.items())
        steps = {step: StepCost(c["calls"] * jurors, c["input_tokens"] * jurors,
                                (c["calls"] + c["more_answers"]) * jurors if c["more_answers"] else None,
                                cached_input_tokens=c["cached_input_tokens"] * jurors)
                 for step, c in counts}
        refused = [step for step, c in counts if c["refused"]]
        return CostEstimate(steps=steps, prices=prices, max_tries=self.max_tries, uncounted_after=refused,
                            cache_rule=self.cache_rule)


@dataclass
class StepCost:
    calls: int
    input_tokens: int
    answers: int | None = None  # verdicts answered (a dense call answers several); None: one per call
    #: Of ``input_tokens``, what the provider's prompt cache would serve (judgegraph.providers.prefixcache: its rule).
    cached_input_tokens: int = 0

    @property
    def output_tokens(self) -> int:
        return (self.calls if self.answers is None else self.answers) * ASSUMED_OUTPUT_TOKENS

    @staticmethod
    def total_of(costs: Iterable[StepCost]) -> StepCost:
        """The sum of ``costs``, with the verdicts they answered."""
        costs = list(costs)
        return StepCost(sum(c.calls for c in costs), sum(c.input_tokens for c in costs),
                        sum(c.calls if c.answers is None else c.answers for c in costs),
                        cached_input_tokens=sum(c.cached_input_tokens for c in costs))


@dataclass
class CostEstimate:
    """Calls and tokens per prompt step (``metric/step``), with totals and cost."""

    steps: dict[str, StepCost] = field(default_factory=dict)
    prices: Prices | None = None
    max_tries: int = 3
    uncounted_after: list[str] = field(default_factory=list)  # steps whose answer-dependent followers were not counted
    #: The provider's prompt-cache rule the cached input tokens were counted by (``unknown``: none counted).
    cache_rule: CacheRule = field(default_factory=default_rule)

    def by_metric(self) -> dict[str, StepCost]:
        grouped: dict[str, list[StepCost]] = {}
        for step, c in self.steps.items():
            grouped.setdefault(step.split("/", 1)[0], []).append(c)
        return {metric: StepCost.total_of(costs) for metric, costs in grouped.items()}

    @property
    def total(self) -> StepCost:
        return StepCost.total_of(self.steps.values())

    def usage(self, cost: StepCost | None = None) -> Usage:
        c = cost or self.total
        return Usage(calls=c.calls, input_tokens=c.input_tokens, output_tokens=c.output_tokens, estimated=True,
                     cached_input_tokens=c.cached_input_tokens)

    def cost_usd(self, cost: StepCost | None = None) -> float | None:
        return None if self.prices is None else self.prices.cost(self.usage(cost))

    @property
    def basis(self) -> str:
        return (f"calls and input tokens counted on the rendered requests (exact for steps that do not depend on an "
                f"answer; steps after an extraction counted for one extracted item each); output tokens assumed "
                f"{ASSUMED_OUTPUT_TOKENS} per call (per verdict of a dense call); cached input tokens: "
                + (f"what the provider's prompt cache would serve by {self.cache_rule.describe()}, priced at the "
                   f"cached price" if self.cache_rule.kind != "unknown" else self.cache_rule.describe())
                + f"; re-asks of invalid replies not included (each resends the "
                f"prompt, at most {self.max_tries} tries)"
                + (f"; not counted: the steps that follow {', '.join(self.uncounted_after)} for each item it "
                   f"extracts (a placeholder answer cannot stand in for it)" if self.uncounted_after else ""))

    @property
    def cached_words(self) -> str:
        """The cacheable input tokens in a few words: the figure, or that no rule is known for the provider."""
        if self.cache_rule.kind == "unknown":
            return f"cacheable tokens unknown: no prompt-cache rule known for provider {self.cache_rule.provider!r}"
        return f"{self.total.cached_input_tokens} cacheable by the provider's prompt cache"

    @property
    def cache_line(self) -> str:
        """The estimate of the cacheable input tokens in one sentence (the dry run prints it), or "" with no
        input tokens: the figure and the provider's rule it was counted by, or that none is known."""
        total = self.total
        if not total.input_tokens:
            return ""
        rule = self.cache_rule
        if rule.kind == "unknown":
            return (f"prefix cache: unknown for provider {rule.provider!r} (no prompt-cache rule known; 0 counted, "
                    f"every input token priced as input; docs/cost_cache.md).")
        return (f"prefix cache: {total.cached_input_tokens} of {total.input_tokens} input tokens cacheable"
                f" ({total.cached_input_tokens / total.input_tokens:.0%}, {rule.short}; docs/cost_cache.md).")


# --------------------------------------------------------------------------- the run without LangGraph's loop


def window_steps(graph: Any) -> WindowSteps | None:
    """The steps ``graph`` was declared with when :func:`judgegraph.core.nodes.window_graph` built it (a metric whose
    one step makes every request), unless it was compiled with a checkpointer or interrupts; None for any other
    graph, which the dry run runs whole."""
    builder = getattr(graph, "builder", None)
    if not isinstance(builder, DeclaredGraph) or not isinstance(builder.declared, WindowSteps) \
            or graph.checkpointer or graph.interrupt_before_nodes or graph.interrupt_after_nodes:
        return None
    return builder.declared
