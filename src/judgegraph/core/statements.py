"""Generic statement steps: split retrieved texts, judge the statements against the user's message, take a second look
at the "no" verdicts. Their prompts name no metric, so every graph built from them shares one cache entry per request.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any, ClassVar, Literal, TypeVar

from langchain_core.runnables import Runnable, RunnableBranch, RunnableLambda
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema
from typing_extensions import TypedDict

from ..data.answers import YesNo
from ..data.conversation import RetrievalNode
from ..data.results import JudgeAttempt, Usage, Verdict
from ..judges.base import Judge, JudgeOutcome, JudgeRequest
from .nodes import judge_step
from .verdicts import exchange_values

NV = TypeVar("NV", bound="NumberedVerdicts")
PROMPTS = "statements"
EXTRACT_STEP = f"{PROMPTS}/extract_statements"
JUDGE_STEP = f"{PROMPTS}/judge_statements"
VERIFY_STEP = f"{PROMPTS}/verify_verdict"

#: The values each step passes to its prompt file (checked by tests/unit/test_prompts.py).
PROMPT_VALUES = {
    EXTRACT_STEP: {"nodes"},
    JUDGE_STEP: {"context", "user_message", "statements"},
    VERIFY_STEP: {"context", "user_message", "statements"},
}


# -- sentence splitting (the offline judge's "extraction") ---------------------

_ABBREVIATIONS = frozenset(
    "e.g i.e etc vs approx mr mrs ms dr prof st no nos fig inc ltd co corp jr sr dept est min max "
    "a.m p.m u.s u.k jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
_BLOCKS = re.compile(r"\n\s*\n|\n(?=[ \t]*(?:[-*•]|\d{1,3}[.)])\s)")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d{1,3}[.)])\s+")
_BOUNDARY = re.compile(r"""[.!?]+["')\]]*\s+(?=["'(\[]?[A-Z0-9])""")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``, dependency-free: paragraphs and list items first, then ``.``, ``!``
    or ``?`` before a space and a capital or digit, except after common abbreviations and
    initials (decimals never split); fragments without a letter or digit are dropped."""
    out: list[str] = []
    for block in _BLOCKS.split(text):
        block = " ".join(_BULLET.sub("", block).split())
        start = 0
        for m in _BOUNDARY.finditer(block):
            before = block[start : m.start() + 1].rstrip(".!?\"')]").split()
            last = before[-1].lower().rstrip(".") if before else ""
            if block[m.start()] == "." and (last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha())):
                continue
            out.append(block[start : m.end()].strip())
            start = m.end()
        out.append(block[start:].strip())
    return [s for s in out if any(ch.isalnum() for ch in s)]


class NodeStatements(BaseModel):
    node: int = Field(description="The node's number, as given.")
    statements: list[str] = Field(description="The node's statements, in the node's order.")

    @field_validator("statements")
    @classmethod
    def _clean(cls, value: list[str]) -> list[str]:
        return [" ".join(s.split()) for s in value if s and s.strip()]


class ExtractedStatements(BaseModel):
    """The answer of ``extract_statements``: one entry per node, numbered from 1
    (:func:`extraction_schema` checks each is answered exactly once)."""

    nodes: list[NodeStatements] = Field(description="One entry per retrieved node, in order.")
    expected_nodes: ClassVar[int | None] = None

    @classmethod
    def placeholder(cls) -> dict[str, Any]:
        """A valid answer with one statement per node (what a dry run counts the next steps on)."""
        return {"nodes": [{"node": i, "statements": [f"statement {i}"]} for i in range(1, (cls.expected_nodes or 1) + 1)]}

    @model_validator(mode="after")
    def _complete(self) -> ExtractedStatements:
        _check_numbers([e.node for e in self.nodes], self.expected_nodes, "node")
        empty = [e.node for e in self.nodes if not e.statements]
        if empty:
            raise ValueError(
                f"node(s) {_join(empty)} have no statement: give every node at least one"
                " (its text as one statement if it holds nothing else)"
            )
        self.nodes = sorted(self.nodes, key=lambda e: e.node)
        return self


class StatementJudgement(BaseModel):
    statement: int = Field(description="The statement's number, as given.")
    reason: str = Field(description="One short sentence explaining the verdict.")
    verdict: YesNo = Field(
        description="'yes' if the statement is relevant to the latest user message, otherwise 'no'."
    )
    # Set by the offline judge only; absent from the JSON schema an LLM is given.
    similarity: SkipJsonSchema[float | None] = None


class NumberedVerdicts(BaseModel):
    """An answer judging numbered items in one request: ``verdicts``, one entry per item naming its number (1 to
    ``expected``) in the field ``numbered_by``, sorted by it; :func:`numbered` makes the subclass that checks the
    count (a missing, unknown or repeated number is a validation error the judge is re-asked with)."""

    numbered_by: ClassVar[str]
    expected: ClassVar[int | None] = None

    @classmethod
    def placeholder(cls) -> dict[str, Any]:
        """A valid answer: one "yes" per item (what a dry run answers)."""
        return {"verdicts": [{cls.numbered_by: i, "reason": "placeholder", "verdict": "yes"}
                             for i in range(1, (cls.expected or 1) + 1)]}

    @model_validator(mode="after")
    def _complete(self) -> NumberedVerdicts:
        verdicts = sorted(getattr(self, "verdicts"), key=lambda v: getattr(v, self.numbered_by))  # noqa: B009
        _check_numbers([getattr(v, self.numbered_by) for v in verdicts], self.expected, self.numbered_by)
        setattr(self, "verdicts", verdicts)  # noqa: B010 - each subclass declares its own entry type
        return self


@cache
def numbered(schema: type[NV], count: int) -> type[NV]:
    """``schema`` (a :class:`NumberedVerdicts`) requiring exactly ``count`` entries."""
    return type(schema.__name__, (schema,), {"expected": count, "__module__": schema.__module__})


class StatementVerdicts(NumberedVerdicts):
    """The answer of ``judge_statements`` and ``verify_verdict``: one entry per
    statement, numbered from 1 (:func:`verdicts_schema` checks the count)."""

    numbered_by: ClassVar[str] = "statement"
    verdicts: list[StatementJudgement] = Field(description="One entry per statement, in order.")


def _join(numbers: Sequence[int]) -> str:
    return ", ".join(str(n) for n in numbers)


def _check_numbers(seen: list[int], expected: int | None, what: str) -> None:
    if expected is None:
        return
    missing = [n for n in range(1, expected + 1) if n not in seen]
    unknown = sorted({n for n in seen if not 1 <= n <= expected})
    repeated = sorted({n for n in seen if seen.count(n) > 1 and 1 <= n <= expected})
    problems = [text for found, text in (
        (missing, f"{what}(s) {_join(missing)} missing"),
        (unknown, f"there is no {what} {_join(unknown)}"),
        (repeated, f"{what}(s) {_join(repeated)} answered more than once"),
    ) if found]
    if problems:
        raise ValueError(f"give exactly one entry for each {what} 1 to {expected}: " + "; ".join(problems))


@cache
def extraction_schema(nodes: int) -> type[ExtractedStatements]:
    """:class:`ExtractedStatements` that requires exactly ``nodes`` entries."""
    return type("ExtractedStatements", (ExtractedStatements,), {"expected_nodes": nodes, "__module__": __name__})


def verdicts_schema(statements: int) -> type[StatementVerdicts]:
    """:class:`StatementVerdicts` that requires exactly ``statements`` entries."""
    return numbered(StatementVerdicts, statements)


class Statement(BaseModel):
    """One statement of a retrieved node, before it is judged."""

    model_config = ConfigDict(frozen=True)

    text: str
    node: int  # 0-based index of its node in the retrieval_context (of ``turn``, inside the metric)
    index: int  # 0-based position among its node's statements
    source: str | None = None
    turn: int | None = None  # 0-based conversation turn whose retrieval_context holds the node
    exchange: int | None = None


class StatementVerdict(Verdict):
    """One statement's verdict. ``verdict`` is None when the judge failed."""

    id_fields: ClassVar[tuple[str, ...]] = ("exchange", "turns", "node", "index")

    verdict: Literal["yes", "no"] | None = None
    statement: str
    node: int  # 0-based index of its node in the turn's retrieval_context
    index: int  # 0-based position among the node's statements
    source: str | None = None
    exchange: int | None = None
    verified: bool = False  # verify_verdict took a second look
    flipped: bool = False  # ... and changed the first "no" to "yes"
    first_reason: str | None = None  # the first judgement's reason, when verified

    @property
    def key(self) -> tuple[int | None, tuple[int, ...], int, int]:
        return (self.exchange, tuple(self.turns), self.node, self.index)


class JudgeCall(BaseModel):
    """One judge request made by a step (a cache hit has ``cached`` and no usage)."""

    step: str  # prompt step, e.g. "statements/extract_statements"
    where: str  # e.g. "turn 4" or "turn 4 node 2"
    usage: Usage = Field(default_factory=Usage)
    attempts: int = 0
    error: str | None = None
    cached: bool = False


# -- requests (public: build your own nodes from them) -----------------------------


def extraction_request(nodes: Sequence[str]) -> JudgeRequest:
    """Extract the statements of ``nodes`` (texts only: identical lists share one cached judgement)."""
    rendered = "\n\n".join(f"[node {i}]\n{text}" for i, text in enumerate(nodes, 1))
    return JudgeRequest(
        task="extract_statements",
        step=EXTRACT_STEP,
        schema=extraction_schema(len(nodes)),
        values={"nodes": rendered},
        inputs={"nodes": list(nodes)},
    )


def _statements_request(task: str, step: str, numbered: Sequence[str], statements: Sequence[str],
                        user_message: str, context: Sequence[tuple[str, str]]) -> JudgeRequest:
    pairs = list(context)
    return JudgeRequest(
        task=task,
        step=step,
        schema=verdicts_schema(len(numbered)),
        values={
            **exchange_values(user_message, pairs),
            "statements": "\n".join(f"{i}. {text}" for i, text in enumerate(numbered, 1)),
        },
        inputs={"statements": list(statements), "user_message": user_message,
                "context": [f"{r}: {c}" for r, c in pairs]},
    )


def judgement_request(
    statements: Sequence[str], user_message: str, context: Sequence[tuple[str, str]] = ()
) -> JudgeRequest:
    """Judge ``statements`` against ``user_message``, with the earlier messages as ``(role, content)``."""
    return _statements_request("statement_relevance", JUDGE_STEP, [" ".join(s.split()) for s in statements],
                               statements, user_message, context)


def verification_request(
    statements: Sequence[tuple[str, str]], user_message: str, context: Sequence[tuple[str, str]] = ()
) -> JudgeRequest:
    """A second look at statements judged irrelevant: ``(statement, first reason)`` pairs."""
    numbered = [f"{' '.join(s.split())}\n   First reviewer: {' '.join(r.split())}" for s, r in statements]
    return _statements_request("statement_relevance_check", VERIFY_STEP, numbered, [s for s, _ in statements],
                               user_message, context)


# -- steps (public nodes) ----------------------------------------------------------


class StepInput(TypedDict, total=False):
    """What the statement steps read from the state of the metric they are in."""

    where: str  # where the judgement is, named in its call record
    retrieval_context: Sequence[RetrievalNode | str | dict[str, object]]
    node_indices: Sequence[int] | None  # the nodes to extract (None: all)
    statements: Sequence[Statement | str]
    user_message: str
    context: Sequence[tuple[str, str]]  # the earlier messages, (role, content)
    verdicts: Sequence[StatementVerdict]


class StepUpdate(TypedDict, total=False):
    """What the statement steps write (``judge_calls``: added by :func:`~judgegraph.core.nodes.judge_step`)."""

    statements: list[Statement]
    verdicts: list[StatementVerdict]
    verified: list[StatementVerdict]
    calls: list[JudgeCall]
    judge_calls: list[JudgeAttempt]


def _call(step: str, state: StepInput, outcome: JudgeOutcome) -> JudgeCall:
    return JudgeCall(
        step=step, where=state.get("where", ""), usage=outcome.usage, attempts=outcome.attempts,
        error=None if outcome.ok else (outcome.error or "no answer"), cached=outcome.cached,
    )


def _unless_empty(step: Runnable, is_empty: Callable[[StepInput], bool], writes: str, name: str) -> Runnable:
    """``step``, except that an input with nothing to do writes an empty ``writes`` and ``calls``, with no judge
    call."""
    return RunnableBranch((is_empty, lambda _: {writes: [], "calls": []}), step).with_config(run_name=name)


def _selected(state: StepInput) -> tuple[list[RetrievalNode], list[int]]:
    nodes = [RetrievalNode(context=v) if isinstance(v, str) else RetrievalNode.model_validate(v)
             for v in state.get("retrieval_context") or []]
    indices = state.get("node_indices")
    return nodes, list(range(len(nodes))) if indices is None else list(indices)


def extract_statements_step(judge: Judge, *, name: str = "extract_statements") -> Runnable:
    """A node splitting ``retrieval_context`` (optionally ``node_indices``) into ``statements`` in one request
    (offline: sentences), writing ``calls`` too: give both an ``operator.add`` reducer in a fan-out."""
    if judge.kind == "offline":

        def split(state: StepInput) -> StepUpdate:
            nodes, indices = _selected(state)
            statements = [
                Statement(text=text, node=i, index=k, source=nodes[i].source)
                for i in indices
                for k, text in enumerate(split_sentences(nodes[i].context) or [" ".join(nodes[i].context.split())])
            ]
            return {"statements": statements, "calls": []}

        return RunnableLambda(split, name=name)

    def build(state: StepInput) -> JudgeRequest:
        nodes, indices = _selected(state)
        return extraction_request([nodes[i].context for i in indices])

    def finish(state: StepInput, outcome: JudgeOutcome) -> StepUpdate:
        call = _call(EXTRACT_STEP, state, outcome)
        if not outcome.ok:
            return {"statements": [], "calls": [call]}
        nodes, indices = _selected(state)
        statements = [
            Statement(text=text, node=indices[entry.node - 1], index=k, source=nodes[indices[entry.node - 1]].source)
            for entry in outcome.value.nodes  # type: ignore[union-attr]
            for k, text in enumerate(entry.statements)
        ]
        return {"statements": statements, "calls": [call]}

    return _unless_empty(judge_step(name, judge, build, finish), lambda s: not _selected(s)[1], "statements", name)


def _statements(state: StepInput) -> list[Statement]:
    return [s if isinstance(s, Statement) else Statement(text=str(s), node=0, index=i)
            for i, s in enumerate(state.get("statements") or [])]


def judge_statements_step(judge: Judge, *, name: str = "judge_statements") -> Runnable:
    """A node judging ``statements`` against ``user_message`` (with optional ``context``) in one
    request; writes ``verdicts`` (``verdict`` None on a judge error) and ``calls``."""

    def build(state: StepInput) -> JudgeRequest:
        return judgement_request([s.text for s in _statements(state)], state.get("user_message", ""),
                                 state.get("context") or ())

    def finish(state: StepInput, outcome: JudgeOutcome) -> StepUpdate:
        call = _call(JUDGE_STEP, state, outcome)
        statements = _statements(state)
        answers = outcome.value.verdicts if outcome.ok else [None] * len(statements)  # type: ignore[union-attr]
        verdicts = [StatementVerdict(
            turns=[] if s.turn is None else [s.turn], exchange=s.exchange, node=s.node, index=s.index,
            statement=s.text, source=s.source, verdict=a.verdict if a else None, reason=a.reason if a else "",
            score=a.similarity if a else None, error=None if a else call.error, attempts=outcome.attempts,
        ) for s, a in zip(statements, answers)]
        return {"verdicts": verdicts, "calls": [call]}

    return _unless_empty(judge_step(name, judge, build, finish), lambda s: not s.get("statements"), "verdicts", name)


def verify_step(judge: Judge, *, name: str = "verify_verdict") -> Runnable:
    """A node taking a second look at the "no" ``verdicts`` in one request; writes ``verified``
    (``flipped`` when "no" became "yes"; empty when the look failed) and ``calls``."""

    def looked_at(state: StepInput) -> list[StatementVerdict]:
        return [v for v in state.get("verdicts") or [] if v.verdict == "no"]

    def build(state: StepInput) -> JudgeRequest:
        return verification_request([(v.statement, v.reason) for v in looked_at(state)],
                                    state.get("user_message", ""), state.get("context") or ())

    def finish(state: StepInput, outcome: JudgeOutcome) -> StepUpdate:
        call = _call(VERIFY_STEP, state, outcome)
        if not outcome.ok:
            return {"verified": [], "calls": [call]}
        verified = [
            v.model_copy(update={
                "verified": True, "first_reason": v.reason, "reason": a.reason, "verdict": a.verdict,
                "flipped": a.verdict != v.verdict,
            })
            for v, a in zip(looked_at(state), outcome.value.verdicts)  # type: ignore[union-attr]
        ]
        return {"verified": verified, "calls": [call]}

    return _unless_empty(judge_step(name, judge, build, finish), lambda s: not looked_at(s), "verified", name)

