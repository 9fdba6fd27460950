"""What a results file says about its run: judge, thresholds, pass rate, cost, duration, judge calls and
tokens, judgegraph version, start — :func:`facts_of`, the one derivation behind the HTML comparison report
(:func:`judgegraph.reporting.compare.run_facts`) and ``judgegraph diff`` (:meth:`judgegraph.compare.runfile.RunFile.facts`).

Facts come from the run's header and last summary records when the results file has them, else from its
conversation lines, else are unknown (None); each says where it came from (``source``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RunFacts", "facts_of"]


@dataclass
class RunFacts:
    """What one results file says about its run; None where it is unknown."""

    label: str  # "A", "B", ... : the run's column in the matrix
    path: str
    conversations: int
    version: str | None = None
    started_at: str | None = None
    judges: list[str] = field(default_factory=list)
    thresholds: dict[str, float | None] = field(default_factory=dict)  # per metric; None: not one value
    pass_rate: dict[str, float | None] = field(default_factory=dict)
    cost_usd: float | None = None
    duration_s: float | None = None
    calls: int | None = None
    tokens: int | None = None
    source: dict[str, str] = field(default_factory=dict)  # fact -> "header" | "summary" | "lines"
    header: bool = False  # the file has a run header
    judge_names: list[str] = field(default_factory=list)  # the judges by name only (``judges`` says more)

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _results(record: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return record.get("results") or {}


def facts_of(path: str, header: Mapping[str, Any] | None, summary: Mapping[str, Any] | None,
             conversations: Sequence[Mapping[str, Any]], label: str = "") -> RunFacts:
    """The facts of the run in the results file ``path`` from its ``header`` and last ``summary`` (None: the file
    has none) first, then from its ``conversations`` (the conversation records, each with its ``results`` and
    ``cost_usd``); ``label``: the run's column in a comparison."""
    facts = RunFacts(label=label, path=path, conversations=len(conversations), header=header is not None)
    header, summary = header or {}, summary or {}
    metrics = list(dict.fromkeys(m for c in conversations for m in _results(c)))

    def known(name: str, value: object, where: str) -> None:
        setattr(facts, name, value)
        facts.source[name] = where

    if isinstance(header.get("judgegraph"), str):
        known("version", header["judgegraph"], "header")
    if isinstance(header.get("started_at"), str):
        known("started_at", header["started_at"], "header")
    entries = [j for j in header.get("judges") or [] if isinstance(j, dict) and isinstance(j.get("name"), str)]
    if entries:
        known("judges", [_judge(j) for j in entries], "header")
        facts.judge_names = [j["name"] for j in entries]
    else:
        seen = [r.get("judge") for c in conversations for r in _results(c).values()]
        if any(isinstance(j, str) for j in seen):
            known("judges", list(dict.fromkeys(j for j in seen if isinstance(j, str))), "lines")
            facts.judge_names = list(facts.judges)

    configured = {str(m.get("name")).replace("-", "_"): _number((m.get("options") or {}).get("threshold"))
                  for m in header.get("metrics") or [] if isinstance(m, dict) and isinstance(m.get("options") or {}, dict)}
    thresholds: dict[str, float | None] = {}
    for m in metrics:
        values = {_number(_results(c)[m].get("threshold")) for c in conversations if m in _results(c)}
        values.discard(None)
        thresholds[m] = values.pop() if len(values) == 1 else None
    if metrics and all(configured.get(m) is not None for m in metrics):
        known("thresholds", {m: configured[m] for m in metrics}, "header")
    elif thresholds:
        known("thresholds", thresholds, "lines")

    rates = summary.get("pass_rate")
    if isinstance(rates, dict) and rates:
        known("pass_rate", {str(m): _number(v) for m, v in rates.items()}, "summary")
    elif metrics:
        computed: dict[str, float | None] = {}
        for m in metrics:
            statuses = [_results(c)[m].get("status") for c in conversations if m in _results(c)]
            judged = [s for s in statuses if s in ("passed", "failed", "error")]  # as the summary record counts
            computed[m] = sum(s == "passed" for s in judged) / len(judged) if judged else None
        known("pass_rate", computed, "lines")

    if "cost_usd" in summary:
        known("cost_usd", _number(summary.get("cost_usd")), "summary")
    else:
        costs = [_number(c.get("cost_usd")) for c in conversations]
        if any(v is not None for v in costs):
            known("cost_usd", sum(v for v in costs if v is not None), "lines")
    if _number(summary.get("duration_s")) is not None:
        known("duration_s", _number(summary["duration_s"]), "summary")

    usage = summary.get("usage")
    if isinstance(usage, dict) and _number(usage.get("calls")) is not None:
        known("calls", int(usage["calls"]), "summary")
        known("tokens", int((_number(usage.get("input_tokens")) or 0) + (_number(usage.get("output_tokens")) or 0)),
              "summary")
    else:
        usages: list[dict[str, Any]] = [r["usage"] for c in conversations for r in _results(c).values()
                                        if isinstance(r.get("usage"), dict)]
        if usages:
            known("calls", int(sum(_number(u.get("calls")) or 0.0 for u in usages)), "lines")
            known("tokens", int(sum((_number(u.get("input_tokens")) or 0.0) + (_number(u.get("output_tokens")) or 0.0)
                                    for u in usages)), "lines")
    return facts


#: A judge setting in words (a setting not listed: ``name value``); the cache on, the default, is not said.
_SETTING_WORDS = {"base_url": "at {}", "max_concurrency": "{} calls at once", "max_tries": "{} tries",
                  "max_retries": "{} retries", "temperature": "temperature {}", "timeout": "timeout {} s",
                  "quorum": "quorum {}", "seed": "seed {}"}


def _model(name: str) -> str:
    """A judge's name as a person says it: ``llm:gpt-4.1-mini`` is ``gpt-4.1-mini``, ``offline:M`` ``offline M``."""
    kind, _, model = name.partition(":")
    return model if kind == "llm" and model else f"offline {model}" if kind == "offline" and model else name


def _setting(name: str, value: object) -> str | None:
    if isinstance(value, (dict, list)) or value is None or (name == "cache" and value is True):
        return None  # the jurors and models are said in the judge's own words; the cache on is the default
    if name == "cache":
        return "no cache"
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    return _SETTING_WORDS.get(name, name.replace("_", " ") + " {}").format(shown)


def _judge(entry: dict[str, Any]) -> str:
    """A header's judge in words, on one line: who judges (a jury: its jurors and how their answers make one),
    its settings, prompt hashes (a changed prompt changes the verdicts). Never a Python repr."""
    settings = entry.get("settings")
    prompts = entry.get("prompts")
    settings = settings if isinstance(settings, dict) else {}
    prompts = prompts if isinstance(prompts, dict) else {}
    jurors = [j for j in settings.get("jurors") or [] if isinstance(j, dict) and isinstance(j.get("name"), str)]
    who = _model(str(entry["name"]))
    skip = {"repeat", "aggregate", "quorum", "jurors"}
    if jurors:
        names = list(dict.fromkeys(_model(j["name"]) for j in jurors))
        how = f"{settings.get('aggregate') or 'majority'}" + (f", quorum {settings['quorum']}"
                                                              if settings.get("quorum") is not None else "")
        if len(names) == 1:
            who = f"{names[0]}, asked {len(jurors)} times ({how})"
        else:
            who = f"jury of {len(jurors)}: {', '.join(names)} ({how})"
        shared = [j.get("settings") for j in jurors]
        if all(isinstance(x, dict) and x == shared[0] for x in shared):  # the jurors' own settings, said once
            settings = {**settings, **shared[0]}  # type: ignore[dict-item]
    bits = [who] + [b for k, v in settings.items() if k not in skip and (b := _setting(k, v))]
    if prompts:
        bits.append("prompts " + ", ".join(f"{k} {v}" for k, v in prompts.items()))
    return " · ".join(bits)


