"""Did the two runs judge alike? What differs between their judges, prompts and metric options.

From the run headers when both files have one (judges with their settings and prompt hashes, metrics with
their options, judgegraph version, inputs); without a header on either side those are "unknown: no header".
The results lines themselves always name each result's judge, threshold and strict mode: a difference
there is reported for any file, header or not. When the judge, its settings or a prompt differ, a verdict
that flipped may be the judge's doing, not the bot's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..runheader import JUDGING_SETTINGS as RUN_JUDGING_SETTINGS
from .runfile import RunFile

#: what a difference is about; those that make a flip possibly the judge's
JUDGE_KINDS = frozenset({"judge", "judge setting", "prompt"})
#: The judge settings (of a header's ``judges[].settings``) that change what a judge answers, as the run header
#: defines them (``judgegraph.runheader.JUDGING_SETTINGS``, with the offline rule's hash); the others
#: (concurrency, rate limits, timeouts, the cache) only change how fast it is asked and are not compared.
JUDGING_SETTINGS = (*RUN_JUDGING_SETTINGS, "models")


@dataclass(frozen=True)
class Difference:
    """One setting that differs: ``what`` (judge, judge setting, prompt, metric, metric option, threshold,
    strict mode, judgegraph version), ``name`` (which one), its value in OLD and NEW (None: absent)."""

    what: str
    name: str
    old: Any
    new: Any
    source: str = "header"  # "header" or "results" (read from the results lines)

    def __str__(self) -> str:
        def show(value: Any) -> str:
            return "(none)" if value is None else value if isinstance(value, str) else json.dumps(value, sort_keys=True)

        name = f" {self.name}" if self.name else ""
        return f"{self.what}{name}: {show(self.old)} → {show(self.new)}"


@dataclass
class SettingsComparison:
    """``headers``: whether OLD and NEW have a run header. ``same_judging``: True (headers on both sides, no
    judge, setting or prompt differs), False (something differs), None (unknown: a header is missing)."""

    headers: tuple[bool, bool]
    differences: list[Difference] = field(default_factory=list)
    unknown: str | None = None  # "unknown: no header in OLD" when a header is missing
    notes: list[str] = field(default_factory=list)

    @property
    def same_judging(self) -> bool | None:
        if any(d.what in JUDGE_KINDS for d in self.differences):
            return False
        return None if self.unknown else True

    def to_json(self) -> dict[str, Any]:
        return {"headers": {"old": self.headers[0], "new": self.headers[1]}, "same_judging": self.same_judging,
                "unknown": self.unknown, "notes": self.notes,
                "differences": [{**d.__dict__, "text": str(d)} for d in self.differences]}


def _by_name(items: object) -> dict[str, dict[str, Any]]:
    """A header's list of ``{"name": ...}`` objects by name (anything else left out)."""
    if not isinstance(items, list):
        return {}
    return {str(i["name"]): i for i in items if isinstance(i, dict) and "name" in i}


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _judging(settings: object) -> dict[str, Any]:
    return {k: v for k, v in _dict(settings).items() if k in JUDGING_SETTINGS}


def _keys_differ(what: str, prefix: str, old: dict[str, Any], new: dict[str, Any]) -> list[Difference]:
    return [Difference(what, f"{prefix}{key}", old.get(key), new.get(key))
            for key in sorted(set(old) | set(new), key=str) if old.get(key) != new.get(key)]


def _header_differences(old: dict[str, Any], new: dict[str, Any]) -> tuple[list[Difference], list[str]]:
    out: list[Difference] = []
    notes: list[str] = []
    if old.get("judgegraph") != new.get("judgegraph"):
        out.append(Difference("judgegraph version", "", old.get("judgegraph"), new.get("judgegraph")))
    oj, nj = _by_name(old.get("judges")), _by_name(new.get("judges"))
    if list(oj) != list(nj):
        out.append(Difference("judge", "", ", ".join(oj) or None, ", ".join(nj) or None))
    for name in (n for n in oj if n in nj):
        prefix = f"{name} " if len(oj) > 1 else ""
        out += _keys_differ("judge setting", prefix, _judging(oj[name].get("settings")), _judging(nj[name].get("settings")))
        out += _keys_differ("prompt", prefix, _dict(oj[name].get("prompts")), _dict(nj[name].get("prompts")))
    om, nm = _by_name(old.get("metrics")), _by_name(new.get("metrics"))
    for name in [*om, *(n for n in nm if n not in om)]:
        if name not in om or name not in nm:
            out.append(Difference("metric", name, "judged" if name in om else None, "judged" if name in nm else None))
        else:
            out += _keys_differ("metric option", f"{name}.", _dict(om[name].get("options")),
                                _dict(nm[name].get("options")))

    def hashes(header: dict[str, Any]) -> list[object]:
        inputs = header.get("inputs")
        return [i.get("sha256") for i in inputs if isinstance(i, dict)] if isinstance(inputs, list) else []

    if hashes(old) != hashes(new):
        notes.append("the input files differ (as expected when NEW judged the new version's conversations)")
    return out, notes


def _observed(run: RunFile, field_name: str) -> dict[str, list[Any]]:
    """Per metric, the distinct values of a result field over the file's results, in order."""
    seen: dict[str, dict[str, Any]] = {}
    for conv in run.conversations.values():
        for key, result in conv.results.items():
            value = result.get(field_name)
            seen.setdefault(key, {})[json.dumps(value, sort_keys=True)] = value
    return {k: list(v.values()) for k, v in seen.items()}


def _results_differences(old: RunFile, new: RunFile) -> list[Difference]:
    out: list[Difference] = []
    for what, field_name in (("judge", "judge"), ("threshold", "threshold"), ("strict mode", "strict_mode")):
        o, n = _observed(old, field_name), _observed(new, field_name)
        for metric in (m for m in o if m in n):
            if o[metric] != n[metric]:
                def one(values: list[Any]) -> Any:
                    return values[0] if len(values) == 1 else values

                out.append(Difference(what, metric, one(o[metric]), one(n[metric]), source="results"))
    return out


def compare_settings(old: RunFile, new: RunFile) -> SettingsComparison:
    """What differs between how ``old`` and ``new`` were judged (see the module)."""
    cmp = SettingsComparison(headers=(old.header is not None, new.header is not None))
    if old.header is not None and new.header is not None:
        cmp.differences, cmp.notes = _header_differences(old.header, new.header)
    else:
        missing = " and ".join(side for side, run in (("OLD", old), ("NEW", new)) if run.header is None)
        cmp.unknown = f"unknown: no header in {missing}"
    seen = {(d.what, d.name) for d in cmp.differences}
    for d in _results_differences(old, new):
        if d.what == "judge" and any(x.what == "judge" for x in cmp.differences):
            continue  # the header already says the judges differ
        if (d.what, d.name) not in seen:
            cmp.differences.append(d)
    return cmp
