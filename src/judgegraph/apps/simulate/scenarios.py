"""Scenarios for the conversation simulator: who the simulated user is, what
they want, and the situation they are in; read from Python or from a file
(JSONL, JSON list, YAML list) with errors naming the file, line and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError


class Scenario(BaseModel):
    """One simulated conversation to have."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    id: str = Field(default="", validation_alias=AliasChoices("id", "name"))
    goal: str = Field(min_length=1, description="what the user wants done; the stop check and judges read it")
    persona: str = "A regular customer: polite, brief, not technical."
    scenario: str = Field(default="", validation_alias=AliasChoices("scenario", "situation", "context"))
    opening: str | None = None  # the first user message, sent as is (no simulator call)
    max_turns: int | None = Field(default=None, ge=1)  # user messages at most; overrides simulate(max_turns=)
    expected_outcome: str | None = None  # for judges that read it (default: the goal)
    chatbot_role: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class ScenarioError(ValueError):
    """A scenario record that cannot be read: where it is and what is wrong."""

    def __init__(self, file: str, line: int | None, field: str | None, message: str) -> None:
        self.file, self.line, self.field, self.message = file, line, field, message
        where = f"{file}:{line}" if line else file
        super().__init__(f"{where}: {field + ': ' if field else ''}{message}")


def as_scenarios(items: Any) -> list[Scenario]:
    """Scenarios from Scenario objects, dicts, or a single one of either; ids
    default to ``scenario-N``."""
    if isinstance(items, (Scenario, dict)):
        items = [items]
    out = []
    for i, item in enumerate(items):
        s = Scenario.model_validate(item)  # a Scenario is returned as it is
        out.append(s if s.id else s.model_copy(update={"id": f"scenario-{i + 1}"}))
    ids = [s.id for s in out]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValueError(f"scenario ids must be unique; repeated: {', '.join(dup)}")
    return out


def load_scenarios(path: str | Path) -> list[Scenario]:
    """Scenarios from a ``.jsonl``, ``.json`` or ``.yaml``/``.yml`` file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(str(p), None, None, f"cannot read the file: {exc.strerror or exc}") from exc
    records: list[tuple[int | None, Any]] = []
    if p.suffix == ".jsonl":
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    records.append((n, json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise ScenarioError(str(p), n, None, f"not JSON: {exc.msg}") from exc
    else:
        try:
            if p.suffix in (".yaml", ".yml"):
                import yaml

                data = yaml.safe_load(text)
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
    out = []
    for i, (lineno, record) in enumerate(records):
        try:
            scenario = Scenario.model_validate(record)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(x) for x in err["loc"])
            raise ScenarioError(str(p), lineno, field if lineno is not None else f"[{i}].{field}", err["msg"]) from exc
        out.append(scenario if scenario.id else scenario.model_copy(update={"id": f"{p.stem}-{i + 1}"}))
    if not out:
        raise ScenarioError(str(p), None, None, "no scenarios in the file")
    return as_scenarios(out)
