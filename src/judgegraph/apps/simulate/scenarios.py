"""Scenarios for the conversation simulator: who the simulated user is, what they want, and the situation they are
in; read from Python or from a file (JSONL, JSON list, YAML list) with errors naming the file, line and field."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Union

from pydantic import AliasChoices, BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError

from .personas import Persona

#: The tags of the persona union (a description, or an escalating :class:`Persona`), left out of error paths.
_TAGS = ("text", "spec")
PersonaField = Annotated[Union[Annotated[str, Tag("text")], Annotated[Persona, Tag("spec")]],
                         Discriminator(lambda v: "text" if isinstance(v, str) else "spec")]


class Scenario(BaseModel):
    """One simulated conversation to have."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    id: str = Field(default="", validation_alias=AliasChoices("id", "name"))
    goal: str = Field(min_length=1, description="what the user wants done; the stop check and judges read it")
    #: who the user is: a description, or an escalating persona (``{kind: jailbreak, ...}``, personas.py)
    persona: PersonaField = "A regular customer: polite, brief, not technical."
    scenario: str = Field(default="", validation_alias=AliasChoices("scenario", "situation", "context"))
    opening: str | None = None  # the first user message, sent as is (no simulator call)
    max_turns: int | None = Field(default=None, ge=1)  # user messages at most; overrides simulate(max_turns=)
    expected_outcome: str | None = None  # for judges that read it (default: the goal)
    chatbot_role: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def adversary(self) -> Persona | None:
        """The escalating persona, or None for a described one."""
        return self.persona if isinstance(self.persona, Persona) else None


#: Where a problem is: the file (None for scenarios given in Python), its line, the field.
Where = tuple[Union[str, None], Union[int, None], Union[str, None]]


def _problem(where: Where, message: str) -> str:
    file, line, field = where
    place = f"{file}:{line}" if file and line else file
    return ": ".join(p for p in (place, field, message) if p)


class ScenarioError(ValueError):
    """Scenario records that cannot be read: where each problem is (file and line, or ``scenario[N]`` for
    scenarios given in Python; the field) and what is wrong, one line each in ``problems``. ``file``, ``line``,
    ``field`` and ``message`` are the first one's."""

    def __init__(self, file: str | None, line: int | None, field: str | None, message: str,
                 *, problems: Sequence[str] = ()) -> None:
        self.file, self.line, self.field, self.message = file, line, field, message
        self.problems = list(problems) or [_problem((file, line, field), message)]
        super().__init__("\n".join(self.problems))


@dataclass
class Unreadable:
    """A record that could not even be parsed (its problem is reported with the others)."""

    message: str


def validate(records: Sequence[tuple[Any, Callable[[tuple[int | str, ...]], Where]]]) -> list[Scenario]:
    """Each ``(record, where)`` as a Scenario (a Scenario is kept as it is), ``where(loc)`` placing a pydantic
    error; every problem of every record in one :class:`ScenarioError`."""
    out: list[Scenario] = []
    problems: list[tuple[Where, str]] = []
    for record, where in records:
        if isinstance(record, Unreadable):
            problems.append((where(()), record.message))
            continue
        try:
            out.append(Scenario.model_validate(record))
        except ValidationError as exc:
            problems += [(where(err["loc"]), err["msg"]) for err in exc.errors()]
    if problems:
        (first, message), lines = problems[0], [_problem(w, m) for w, m in problems]
        raise ScenarioError(*first, message, problems=lines)
    return out


def as_scenarios(items: Any) -> list[Scenario]:
    """Scenarios from Scenario objects, dicts, or a single one of either; ids default to ``scenario-N``. A bad
    record is a :class:`ScenarioError` naming ``scenario[INDEX].FIELD``, every bad record at once."""
    if isinstance(items, (Scenario, dict)):
        items = [items]

    def place(i: int) -> Callable[[tuple[int | str, ...]], Where]:
        return lambda loc: (None, None, ".".join(part for part in (f"scenario[{i}]", field_path(loc)) if part))

    scenarios = validate([(item, place(i)) for i, item in enumerate(items)])
    out = [s if s.id else s.model_copy(update={"id": f"scenario-{i + 1}"}) for i, s in enumerate(scenarios)]
    dup = sorted(i for i, n in Counter(s.id for s in out).items() if n > 1)
    if dup:
        raise ValueError(f"scenario ids must be unique; repeated: {', '.join(dup)}")
    return out


def field_path(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as ``persona.escalation.0`` (the persona union's tags left out)."""
    parts = [str(x) for i, x in enumerate(loc) if not (i > 0 and loc[i - 1] == "persona" and x in _TAGS)]
    return ".".join(parts)


def _yaml_items(text: str) -> list[Any] | None:
    """The YAML nodes of the scenario records (for line numbers), or None if the shape is not a list of them."""
    import yaml

    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if isinstance(root, yaml.MappingNode):
        inner = next((v for k, v in root.value if getattr(k, "value", None) == "scenarios"), None)
        root = inner if inner is not None else yaml.SequenceNode("tag:yaml.org,2002:seq", [root])
    return list(root.value) if isinstance(root, yaml.SequenceNode) else None


def _line_of(node: Any, loc: tuple[int | str, ...]) -> int:
    """The 1-based line of the deepest YAML node along ``loc`` (the record's first line at least); a persona's
    kind, which pydantic puts in ``loc`` after ``persona``, is no key of the file."""
    from ...loaders.yaml_safe import line_at

    path = [key for i, key in enumerate(loc) if not (i > 0 and loc[i - 1] == "persona" and key in _TAGS)]
    line: int = line_at(node, path) or node.start_mark.line + 1
    return line


def load_scenarios(path: str | Path) -> list[Scenario]:
    """Scenarios from a ``.jsonl``, ``.json`` or ``.yaml``/``.yml`` file; a bad record is a
    :class:`ScenarioError` with the line of the bad field (JSONL: of the record; JSON: its index)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(str(p), None, None, f"cannot read the file: {exc.strerror or exc}") from exc
    records: list[tuple[int | None, Any]] = []
    nodes: list[Any] | None = None
    if p.suffix == ".jsonl":
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    records.append((n, json.loads(line)))
                except json.JSONDecodeError as exc:
                    records.append((n, Unreadable(f"not JSON: {exc.msg}")))
    else:
        try:
            if p.suffix in (".yaml", ".yml"):
                import yaml

                data = yaml.safe_load(text)
                nodes = _yaml_items(text)
            else:
                data = json.loads(text)
        except Exception as exc:  # any parse error is reported with the file
            mark = getattr(getattr(exc, "problem_mark", None), "line", None)
            at = mark + 1 if isinstance(mark, int) else getattr(exc, "lineno", None)
            raise ScenarioError(str(p), at, None, f"cannot parse: {exc}") from exc
        if isinstance(data, dict):
            data = data.get("scenarios", [data])
        if not isinstance(data, list):
            raise ScenarioError(str(p), None, None, "expected a list of scenarios (or {scenarios: [...]})")
        records = [(None, item) for item in data]
    file = str(p)

    def place(i: int, lineno: int | None) -> Callable[[tuple[int | str, ...]], Where]:
        if nodes is not None and len(nodes) == len(records):
            return lambda loc: (file, _line_of(nodes[i], loc), field_path(loc))
        if lineno is None:  # JSON: the record's index
            return lambda loc: (file, None, ".".join(part for part in (f"[{i}]", field_path(loc)) if part))
        return lambda loc: (file, lineno, field_path(loc))

    scenarios = validate([(record, place(i, n)) for i, (n, record) in enumerate(records)])
    out = [s if s.id else s.model_copy(update={"id": f"{p.stem}-{i + 1}"}) for i, s in enumerate(scenarios)]
    if not out:
        raise ScenarioError(file, None, None, "no scenarios in the file")
    return as_scenarios(out)
