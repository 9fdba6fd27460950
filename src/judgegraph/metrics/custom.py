"""Custom judges from instructions: :func:`make_metric` (MLflow's ``make_judge``,
as a LangGraph graph with judgegraph's error handling).

    START → judge_conversation → reduce_score → END

One LLM call; the conversation and expectations are inserted as data, never
rendered (docs/custom_judges.md).
"""

from __future__ import annotations

__all__ = [
    "CustomJudgeSettings",
    "CustomJudgeState",
    "FeedbackSpec",
    "FeedbackVerdict",
    "build_custom_graph",
    "build_prompt",
    "check_instructions",
    "expectations_of",
    "feedback_schema",
    "feedback_spec",
    "make_metric",
]

import json
import re
from dataclasses import MISSING, dataclass, field
from typing import Annotated, Any, ClassVar, Literal, get_args, get_origin

from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel, Field, TypeAdapter, create_model, field_validator

from ..core.nodes import Node, conversation_json, judge_step, score_node, scoring_edges
from ..core.scoring import JudgeOptions, Tally, option
from ..core.state import MetricInput, MetricOutput, MetricState, conversation_of
from ..core.verdicts import answer, answer_fields
from ..data.conversation import Conversation
from ..data.prompts import Prompt, load_prompt, parse_prompt
from ..data.results import MetricResult, Verdict, merge_verdicts
from ..judges import JudgeOutcome, JudgeRequest, ModelLike
from . import MetricSpec
from ._renamed import renamed

STEP = "custom_judge/judge_conversation"
TASK = "custom_judge"
VARIABLES = ("conversation", "expectations")
_MLFLOW_SINGLE_TURN = {"inputs", "outputs", "trace"}
_ANY_VARIABLE = re.compile(r"\{\{(.*?)\}\}", re.S)

Kind = Literal["bool", "int", "float", "str", "literal"]


@dataclass(frozen=True)
class FeedbackSpec:
    """What ``feedback_type`` means: the value's kind, allowed values, description and scoring."""

    kind: Kind
    type: Any
    choices: tuple[Any, ...] = ()
    scores: dict[Any, float] | None = None
    threshold: float | None = None
    description: str = ""

    def score(self, value: Any) -> float | None:
        if self.scores is not None:
            return self.scores[value]
        if self.kind in ("int", "float"):
            return float(value)
        return None

    def label(self, value: Any) -> str:
        if self.kind == "bool":
            return "yes" if value else "no"
        return str(value)

    def value_of(self, label: str) -> Any:
        """The value a label stands for (a person's review gives a label): the inverse of :meth:`label`."""
        if self.kind == "bool":
            return label.strip().lower() in ("yes", "true")
        if self.kind in ("int", "float"):
            return self.type(float(label)) if self.kind == "float" else int(float(label))
        if self.kind == "literal":
            return next((c for c in self.choices if str(c) == label), label)
        return label


def _base_type(tp: Any) -> Any:
    while get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    return tp


def _kind(tp: Any) -> tuple[Kind, tuple[Any, ...]]:
    base = _base_type(tp)
    if base in (bool, int, float, str):
        return base.__name__, (True, False) if base is bool else ()
    if get_origin(base) is Literal:
        values = get_args(base)
        if not values or not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in values):
            raise ValueError(f"feedback_type {tp!r}: Literal values must be strings or whole numbers")
        if len(set(values)) != len(values):
            raise ValueError(f"feedback_type {tp!r}: Literal values must be distinct")
        return "literal", tuple(values)
    raise ValueError(
        f"feedback_type must be bool, int, float, str or Literal[...] (optionally Annotated with pydantic"
        f" Field constraints such as Field(ge=1, le=5)), got {tp!r}"
    )


def _bounds(tp: Any) -> str:
    schema = TypeAdapter(tp).json_schema()
    if schema.get("minimum") is not None and schema.get("maximum") is not None:
        return f" from {schema['minimum']} to {schema['maximum']}"
    words = {"minimum": "at least", "exclusiveMinimum": "greater than", "maximum": "at most",
             "exclusiveMaximum": "less than"}
    parts = [f"{word} {schema[key]}" for key, word in words.items() if schema.get(key) is not None]
    return (" " + " and ".join(parts)) if parts else ""


def _describe(kind: Kind, tp: Any, choices: tuple[Any, ...]) -> str:
    if kind in ("int", "float"):
        return ("a whole number" if kind == "int" else "a number") + _bounds(tp)
    if kind in ("bool", "str"):
        return "true or false" if kind == "bool" else "a short text"
    return "exactly one of " + ", ".join(json.dumps(c) for c in choices)


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise ValueError(f"{what} must be a number, got {value!r}")
    return float(value)


def feedback_spec(
    feedback_type: Any, *, threshold: float | None = None, scores: dict[Any, float] | None = None
) -> FeedbackSpec:
    """``feedback_type``, ``threshold`` and ``scores`` checked together (a ``ValueError`` naming a mistake)."""
    kind, choices = _kind(feedback_type)
    if scores is not None:
        if kind not in ("bool", "literal"):
            raise ValueError(f"scores= maps each possible value to a score: it needs a bool or Literal feedback_type, not {kind}")
        if not isinstance(scores, dict):
            raise ValueError(f"scores must be a dict of value -> number, got {type(scores).__name__}")
        missing = [c for c in choices if c not in scores]
        extra = [k for k in scores if k not in choices]
        if missing or extra:
            raise ValueError(f"scores must give a score to every value {list(choices)}: missing {missing}, unexpected {extra}")
        scores = {k: _number(v, f"scores[{k!r}]") for k, v in scores.items()}
    if threshold is not None:
        threshold = _number(threshold, "threshold")
        if kind == "str":
            raise ValueError("a str feedback has no score, so threshold= cannot apply; use bool, int, float or Literal with scores=")
        if kind == "literal" and scores is None:
            raise ValueError("threshold= with a Literal feedback_type needs scores= (a score for each value)")
    if kind == "bool":
        scores = scores if scores is not None else {True: 1.0, False: 0.0}
        threshold = 0.5 if threshold is None else threshold
    return FeedbackSpec(kind, feedback_type, choices, scores, threshold, _describe(kind, feedback_type, choices))


def _schema_name(name: str) -> str:
    words = re.findall(r"[A-Za-z0-9]+", name) or ["custom"]
    return ("".join(w[:1].upper() + w[1:] for w in words) + "Feedback")[:64]


def feedback_schema(name: str, spec: FeedbackSpec) -> type[BaseModel]:
    """The structured-output schema ``{reason, value}`` (the reason first, so the model reasons
    before it commits); string Literal values match case- and space-insensitively."""
    value_type = spec.type
    if spec.kind == "float":
        value_type = Annotated[spec.type, Field(allow_inf_nan=False)]
    validators: dict[str, Any] = {}
    if spec.kind == "literal":
        def _normalise(cls: Any, value: Any) -> Any:
            if isinstance(value, str) and value not in spec.choices:
                key = value.strip().lower()
                hits = [c for c in spec.choices if isinstance(c, str) and c.strip().lower() == key]
                return hits[0] if len(hits) == 1 else value
            return value

        validators["_normalise"] = field_validator("value", mode="before")(classmethod(_normalise))
    return create_model(
        _schema_name(name), __validators__=validators or None,
        reason=(str, Field(description="Your reasoning, before the value: what in the conversation supports it.")),
        value=(value_type, Field(description=f"The judgement: {spec.description}.")))


def check_instructions(instructions: str) -> frozenset[str]:
    """The template variables ``instructions`` use: ``{{ conversation }}`` (required) and
    ``{{ expectations }}``; anything else between double braces is a ``ValueError`` naming it."""
    if not isinstance(instructions, str) or not instructions.strip():
        raise ValueError("instructions must be a non-empty string containing {{ conversation }}")
    found = [m.group(1).strip() for m in _ANY_VARIABLE.finditer(instructions)]
    unknown = list(dict.fromkeys(f for f in found if f not in VARIABLES))
    if unknown:
        names = ", ".join("{{ " + u + " }}" for u in unknown)
        hint = ""
        if set(unknown) & _MLFLOW_SINGLE_TURN:
            hint = " ({{ inputs }}, {{ outputs }} and {{ trace }} are MLflow's single-turn variables: the conversation holds every turn)"
        raise ValueError(
            f"instructions use unknown template variable(s) {names}; a conversation judge knows"
            f" {{{{ conversation }}}} and {{{{ expectations }}}}{hint}"
        )
    if "conversation" not in found:
        hint = " (found {conversation}: use double braces)" if re.search(r"\{\s*conversation\s*\}", instructions) else ""
        raise ValueError(f"instructions must contain {{{{ conversation }}}}: where the conversation goes{hint}")
    return frozenset(found)


def build_prompt(name: str, instructions: str, value_format: str) -> Prompt:
    """The judge's template: the shipped wrapper (``prompts/custom_judge/judge_conversation.md``)
    around the author's instructions, whose placeholders are its only ones."""
    own = parse_prompt(f"custom_judge/{name}", instructions)  # a leading <!-- comment --> documents, like prompt files
    used = check_instructions(own.template)
    wrapper = load_prompt(STEP)
    text = wrapper.render({"instructions": own.template.strip(), "value_format": value_format})
    prompt = parse_prompt(f"custom_judge/{name}", text)
    if prompt.placeholders != used:
        raise ValueError(
            f"judge {name!r}: the feedback values must not contain template variables"
            f" (found {sorted(prompt.placeholders - used)})"
        )
    return Prompt(prompt.name, prompt.template, used, None)


def expectations_of(conversation: Conversation) -> dict[str, Any] | None:
    """What ``{{ expectations }}`` holds: ``expected_outcome`` and ``metadata["expectations"]``
    (a dict merged in, another value under ``"expectations"``); None when there is neither."""
    out: dict[str, Any] = {}
    if conversation.expected_outcome:
        out["expected_outcome"] = conversation.expected_outcome
    extra = conversation.metadata.get("expectations")
    if isinstance(extra, dict):
        out.update(extra)
    elif extra not in (None, "", [], {}):
        out["expectations"] = extra
    return out or None


def render_values(conversation: Conversation, used: frozenset[str]) -> dict[str, str]:
    """Placeholder values: tagged data, inserted in one pass, never rendered."""
    values = {"conversation": f"<conversation>\n{conversation_json(conversation)}\n</conversation>"}
    if "expectations" in used:
        exp = expectations_of(conversation)
        body = json.dumps(exp, ensure_ascii=False, indent=1) if exp is not None else "(none)"
        values["expectations"] = f"<expectations>\n{body}\n</expectations>"
    return {k: v for k, v in values.items() if k in used}


class FeedbackVerdict(Verdict):
    """The judge's answer for the whole conversation: ``value`` and ``verdict``, its label
    (bool: "yes"/"no", else ``str(value)``; None when the judge failed)."""

    id_fields: ClassVar[tuple[str, ...]] = ()

    value: Any = None


class CustomJudgeState(MetricState, total=False):
    verdicts: Annotated[list[FeedbackVerdict], merge_verdicts]


@dataclass(frozen=True, kw_only=True)
class CustomJudgeSettings(JudgeOptions):
    """Everything a :func:`make_metric` graph is built from; :meth:`check` derives the ``feedback`` rule, the
    ``prompt`` and the answer's ``schema``. The pass/fail rule is ``threshold`` (on the value's scale, or None)."""

    instructions: str = option(help="the judge's instructions, holding {{ conversation }} (maybe {{ expectations }})",
                               cli=False)
    feedback_type: Any = option(None, help="the answer's type: bool (default), int, float, str, Literal[...], maybe"
                                " Annotated", cli=False)
    threshold: float | None = option(None, help="the value a conversation passes with, on the value's scale")
    scores: dict[Any, float] | None = option(None, help="a score per value of the feedback type", cli=False)
    feedback_value_type: Any = option(None, help="MLflow's name for feedback_type", cli=False)
    feedback: FeedbackSpec = field(init=False)
    prompt: Prompt = field(init=False)
    schema: type[BaseModel] = field(init=False)

    def check(self) -> None:
        super().check()
        kind = self.feedback_type
        if self.feedback_value_type is not None:
            if kind is not None:
                raise ValueError("pass feedback_type or feedback_value_type (MLflow's name), not both")
            kind = self.feedback_value_type
        name = self.name.strip()
        feedback = feedback_spec(bool if kind is None else kind, threshold=self.threshold, scores=self.scores)
        self.normalise(name=name, feedback=feedback, prompt=build_prompt(name, self.instructions, feedback.description),
                       schema=feedback_schema(name, feedback))


def _judge_conversation(settings: CustomJudgeSettings) -> RunnableLambda:
    def build(state: CustomJudgeState) -> JudgeRequest:
        values = render_values(conversation_of(state), settings.prompt.documented)
        return JudgeRequest(task=TASK, step=STEP, schema=settings.schema, prompt=settings.prompt, values=values)

    def finish(state: CustomJudgeState, outcome: JudgeOutcome) -> CustomJudgeState:
        value, fields = answer(outcome), answer_fields(outcome)
        fields["verdict"] = None if value is None else settings.feedback.label(value.value)  # the value's label
        return {"verdicts": [FeedbackVerdict(value=None if value is None else value.value, **fields)]}

    return judge_step("judge_conversation", settings.judge, build, finish)


def _reduce_score(settings: CustomJudgeSettings) -> Node:
    spec = settings.feedback

    def _reviewed(v: Any) -> Any:
        """A person's label (``review``) is the value: the value follows it when they disagree."""
        if v.review is None or v.verdict is None or spec.label(v.value) == v.verdict:
            return v
        return v.model_copy(update={"value": spec.value_of(v.verdict)})
    details = {"feedback_type": spec.description, "pass_rule": (
        "none: the value is recorded, not gated" if spec.threshold is None else f"score >= {spec.threshold:g}")}

    def reason(t: Tally) -> str:
        (v,) = t.verdicts
        return f"Not judged: {v.error}" if v.verdict is None else f"{v.verdict}: {v.reason}"

    policy = settings.policy(threshold=spec.threshold, score=lambda judged: spec.score(getattr(judged[0], "value", None)),
                             step=STEP, where=lambda v: "conversation", reason=reason,
                             value=lambda t: t.judged[0].value if t.judged else None)

    def score(state: CustomJudgeState, conversation: Conversation, verdicts: list[Any]) -> MetricResult:
        return policy.result(conversation, [_reviewed(v) for v in verdicts], details=details)

    return score_node(settings.name, score)


def build_custom_graph(settings: CustomJudgeSettings) -> StateGraph:
    """The uncompiled graph of a :func:`make_metric` judge."""
    builder = StateGraph(CustomJudgeState, input_schema=MetricInput, output_schema=MetricOutput)
    builder.add_node("judge_conversation", _judge_conversation(settings))
    builder.add_node("reduce_score", _reduce_score(settings))
    builder.add_edge(START, "judge_conversation")
    scoring_edges(builder, ["judge_conversation"], review=settings.review, metric=settings.name)
    builder.add_edge("reduce_score", END)
    return builder


def _model_string(model: Any) -> Any:
    """MLflow spells models ``openai:/gpt-4o``; judgegraph ``openai:gpt-4o``."""
    if isinstance(model, str):
        return re.sub(r"^([A-Za-z0-9_-]+):/+", r"\1:", model.strip())
    return model


_CUSTOM_JUDGE = MetricSpec(  # not in the registry (a private name): make_metric builds it
    "custom_judge", settings=CustomJudgeSettings, build=build_custom_graph, tasks=(TASK,), needs=frozenset({"llm"}),
    scope="conversation", summary="A judge of whole conversations from instructions (MLflow's make_judge).",
    doc="``feedback_type`` gives the answer's type and its score; ``model`` must be an LLM judge"
        " (docs/custom_judges.md).", factory_name="make_metric", defaults={"name": MISSING},
    prompt_values={STEP: {"instructions", "value_format"}})


_create = _CUSTOM_JUDGE.factory


def make_metric(*, model: ModelLike = None, **options: Any) -> CompiledStateGraph:
    if "instructions" in options:
        check_instructions(options["instructions"])  # template errors before any model is built
    return _create(model=_model_string(model), **options)


make_metric.__doc__, make_metric.__signature__ = _create.__doc__, _create.__signature__  # type: ignore[attr-defined]
__getattr__ = renamed(__name__)  # make_judge: deprecated, renamed in 0.2
