"""Did the two runs judge alike? What differs between their judges, prompts and metric options: from the run
headers by the comparison ``--resume`` uses (:func:`judgegraph.runs.header.compare_headers`; "unknown: no header"
without one), and from each results line's judge, threshold and strict mode, for any file (``docs/diff.md``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..runs import RunFile
from ..runs.header import Difference, compare_headers

__all__ = ["JUDGE_KINDS", "Difference", "SettingsComparison", "compare_settings"]

#: what a difference is about; those that make a flip possibly the judge's (a speed setting does not)
JUDGE_KINDS = frozenset({"judge", "judge setting", "prompt"})


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
        if any(d.what in JUDGE_KINDS and not d.speed for d in self.differences):
            return False
        return None if self.unknown else True

    @property
    def judging(self) -> list[Difference]:
        """The differences that may change verdicts (all but the speed settings)."""
        return [d for d in self.differences if not d.speed]

    @property
    def speed(self) -> list[Difference]:
        """The judge settings that only change how fast the judge is asked (concurrency, timeouts, ...)."""
        return [d for d in self.differences if d.speed]

    def to_json(self) -> dict[str, object]:
        return {"headers": {"old": self.headers[0], "new": self.headers[1]}, "same_judging": self.same_judging,
                "unknown": self.unknown, "notes": self.notes,
                "differences": [{**d.__dict__, "text": str(d)} for d in self.differences]}


def _observed(run: RunFile, field_name: str) -> dict[str, list[object]]:
    """Per metric, the distinct values of a result field over the file's results, in order."""
    seen: dict[str, dict[str, object]] = {}
    for conv in run.conversations.values():
        for key, result in conv.results.items():
            value = getattr(result, field_name)
            seen.setdefault(key, {})[json.dumps(value, sort_keys=True)] = value
    return {k: list(v.values()) for k, v in seen.items()}


def _one(values: list[object]) -> object:
    return values[0] if len(values) == 1 else values


def _results_differences(old: RunFile, new: RunFile) -> list[Difference]:
    out: list[Difference] = []
    for what, field_name in (("judge", "judge"), ("threshold", "threshold"), ("strict mode", "strict_mode")):
        o, n = _observed(old, field_name), _observed(new, field_name)
        out += [Difference(what, metric, _one(o[metric]), _one(n[metric]), source="results")
                for metric in o if metric in n and o[metric] != n[metric]]
    return out


def compare_settings(old: RunFile, new: RunFile) -> SettingsComparison:
    """What differs between how ``old`` and ``new`` were judged (see the module)."""
    cmp = SettingsComparison(headers=(old.header is not None, new.header is not None))
    if old.header is not None and new.header is not None:
        found = compare_headers(old.header.data(), new.header.data())  # the comparison --resume uses
        cmp.differences = [d for d in found if d.what != "input"]  # NEW judged the new version's conversations
        if len(cmp.differences) < len(found):
            cmp.notes.append("the input files differ (as expected when NEW judged the new version's conversations)")
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
