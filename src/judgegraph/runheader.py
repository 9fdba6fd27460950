"""The run header and summary records of a results file (docs/runs.md).

The first line of a results file is a ``header``: what made the run (judgegraph
version, command line, config, metrics with their options, judges with their
settings and prompt hashes, inputs with their hashes, start time); the last
line of a finished run is a ``summary`` (end, duration, usage, cost, pass rate
per metric). A resumed run appends another summary; readers take the last one.
``--resume`` compares the header with the run's own (:func:`differences`) and
refuses a run whose settings differ, so a results file never mixes two
settings. Older files have no header: every reader accepts that.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .judges.redact import Redactor
from .resultsfile import ResultsFileError, ResultsWriter, is_nonempty

if TYPE_CHECKING:
    from .pricing import Prices
    from .runner import MetricPlan, RunSummary

__all__ = [
    "FORMAT",
    "RunSettingsChanged",
    "differences",
    "file_sha256",
    "metric_prompts",
    "read_header",
    "run_header",
    "run_summary",
]

#: The version of the header's layout.
FORMAT = 1

#: Judge settings that change what a judge answers; the others (concurrency, rates, timeouts,
#: the cache) only change how fast it is asked, and may change between a run and its resume.
JUDGING_SETTINGS = ("model", "base_url", "rule", "rule_sha256", "aligned", "aligned_sha256", "temperature", "top_p",
                    "top_k", "max_tokens", "max_completion_tokens", "seed", "reasoning_effort", "method", "aggregate",
                    "quorum", "repeat", "jurors")
#: Settings naming a file whose bytes decide verdicts: recorded with ``<key>_sha256`` too.
FILE_SETTINGS = ("rule", "aligned")


class RunSettingsChanged(ResultsFileError):
    """``--resume`` of a results file made with other settings; ``differences`` names each one."""

    def __init__(self, path: str | Path, differences: list[str]) -> None:
        self.differences = differences
        super().__init__(f"{path} was made with other settings; --resume would mix two runs in one file: "
                         + "; ".join(differences)
                         + ". Run with the file's settings, or write a new --out (or --overwrite)")


def now() -> datetime:
    return datetime.now(timezone.utc)


def iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def version() -> str:
    from . import __version__

    return __version__


def file_sha256(path: str | Path) -> str | None:
    """The file's sha256 (hex), read in blocks; None when it cannot be read (not a file: e.g. MLflow)."""
    digest = hashlib.sha256()
    try:
        with Path(path).open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def short_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


def metric_prompts(names: Iterable[str]) -> dict[str, str]:
    """``{step: sha256[:12]}`` of each prompt file the metrics ``names`` use: the steps their
    module declares in ``PROMPT_VALUES`` (a custom metric's module may declare its own)."""
    from .metrics import get_metric
    from .prompts import PromptError, load_prompt

    steps: set[str] = set()
    for name in names:
        try:
            module = get_metric(name).factory.__module__
        except KeyError:
            continue
        declared: dict[str, object] = {}
        while module and not declared:  # the factory's module, else its package's (session judges share one)
            declared = getattr(sys.modules.get(module), "PROMPT_VALUES", None) or {}
            module = module.rpartition(".")[0]
        own = [step for step in declared if step.startswith(f"{name}/")]
        steps.update(own or declared)  # a preset (conversation_relevance) uses its graph's prompts
    out: dict[str, str] = {}
    for step in sorted(steps):
        try:
            prompt = load_prompt(step)
        except PromptError:
            continue
        if prompt.path is not None:
            out[step] = short_hash(prompt.path.read_bytes())
    return out


def _redacted(value: Any, redact: Redactor) -> Any:
    """``value`` (JSON data) with every string redacted (:mod:`judgegraph.judges.redact`)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {str(k): _redacted(v, redact) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(v, redact) for v in value]
    return value


def _jsonable(value: Any) -> Any:
    """Option values as JSON data (a path as its text, a rule or other object as its repr)."""
    return json.loads(json.dumps(value, default=str))


#: An option string longer than this (a rubric) is recorded as its hash.
LONG_OPTION = 200


def _option(value: Any) -> Any:
    if isinstance(value, str) and len(value) > LONG_OPTION:
        return {"sha256": short_hash(value.encode("utf-8", "surrogatepass")), "chars": len(value)}
    return value


def _judge_record(plan: MetricPlan, settings: Mapping[str, Any] | None, redact: Redactor) -> dict[str, Any]:
    from .metrics import DEFAULT_METRICS

    judge = plan.judge
    own = getattr(judge, "settings", None)  # what the judge uses: an LLM's temperature, a jury's jurors
    kept = {k: v for k, v in {**(settings or {}), **(own if isinstance(own, Mapping) else {})}.items()
            if v is not None}
    for key in FILE_SETTINGS:
        path = kept.get(key)
        if isinstance(path, (str, Path)) and (digest := file_sha256(path)) is not None:
            kept[f"{key}_sha256"] = digest[:12]
    names = plan.metrics or list(DEFAULT_METRICS)
    return {"name": judge.name, "settings": _redacted(_jsonable(kept), redact),
            "prompts": metric_prompts(names) if judge.kind == "llm" else {}}


def run_header(plan: MetricPlan, *, inputs: Sequence[str | Path] = (), argv: Sequence[str] | None = None,
               config: Mapping[str, Any] | None = None, judge_settings: Mapping[str, Any] | None = None,
               sources: Sequence[Mapping[str, Any]] = (), started_at: datetime | None = None) -> dict[str, Any]:
    """The header record of a run of ``plan`` over the files ``inputs`` (each with its sha256)
    and other ``sources`` (e.g. an MLflow experiment, ``{"path": uri, "experiment": ...}``).
    ``argv``, ``config`` and ``judge_settings`` are redacted: no key or header reaches the file."""
    redact = Redactor.for_model(getattr(plan.judge, "model", None))
    def options(given: Mapping[str, Any]) -> dict[str, Any]:
        return {k: _redacted(_option(v), redact) for k, v in sorted(_jsonable(given).items())}

    metrics = [{"name": name, "options": options(opts)} for name, opts in plan.options_by_metric(defaults=True).items()]
    return {
        "type": "header", "format": FORMAT, "judgegraph": version(),
        "started_at": iso(started_at or now()),
        "argv": None if argv is None else [redact(str(a)) for a in argv],
        "config": None if config is None else _redacted(_jsonable(config), redact),
        "metrics": metrics,
        "metrics_from_inputs": plan.metrics is None,  # the input files' assertions may choose others
        "options": options(plan.overrides),
        "judges": [_judge_record(plan, judge_settings, redact)],
        "inputs": [{"path": str(p), "sha256": file_sha256(p)} for p in inputs]
                  + [_redacted(_jsonable(s), redact) for s in sources],
    }


def pass_rates(summary: RunSummary) -> dict[str, float | None]:
    """Per metric: passed / (passed + failed + error); None when none was judged (all n/a)."""
    out: dict[str, float | None] = {}
    for metric, counts in summary.by_metric.items():
        judged = counts["passed"] + counts["failed"] + counts["error"]
        out[metric] = round(counts["passed"] / judged, 6) if judged else None
    return out


def run_summary(summary: RunSummary, started_at: datetime, prices: Prices | None = None,
                ended_at: datetime | None = None) -> dict[str, Any]:
    """The summary record of a finished run (the whole file: resumed conversations included)."""
    end = ended_at or now()
    return {
        "type": "summary", "ended_at": iso(end), "duration_s": round((end - started_at).total_seconds(), 3),
        "conversations": summary.conversations, "usage": summary.usage.model_dump(mode="json"),
        "cost_usd": None if prices is None else prices.cost(summary.usage),
        "pass_rate": pass_rates(summary),
        "statuses": {m: dict(c) for m, c in summary.by_metric.items()},
    }


def read_header(path: str | Path) -> dict[str, Any] | None:
    """The header of a results file (its first readable line, when that is a header), or None."""
    from .resultsfile import iter_records

    try:
        for _, record in iter_records(path):
            return record if record.get("type") == "header" else None
    except OSError:
        return None
    return None


def _judging(settings: object) -> dict[str, Any]:
    """The settings that decide verdicts (a jury's jurors by name, repeat and their own such settings)."""
    if not isinstance(settings, Mapping):
        return {}
    out = {k: settings[k] for k in JUDGING_SETTINGS if k in settings}
    if isinstance(out.get("jurors"), list):
        out["jurors"] = [{"name": j.get("name"), "repeat": j.get("repeat"), "settings": _judging(j.get("settings"))}
                         if isinstance(j, Mapping) else j for j in out["jurors"]]
    return out


def _describe(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between two headers in what decides a verdict: metrics added or removed, their
    options, the judges (name, judging settings, prompt hashes), the inputs (paths and hashes).
    Empty: a resume may continue the file. (The version, the time and the command line may differ.)"""
    out: list[str] = []

    def by_name(items: object, key: str = "name") -> dict[str, Mapping[str, Any]]:
        return {str(i.get(key)): i for i in items if isinstance(i, Mapping)} if isinstance(items, list) else {}

    om, nm = by_name(old.get("metrics")), by_name(new.get("metrics"))
    out += [f"metric {m} added" for m in nm if m not in om]
    out += [f"metric {m} removed" for m in om if m not in nm]
    for m in (m for m in nm if m in om):
        oo, no = om[m].get("options") or {}, nm[m].get("options") or {}
        for k in sorted(set(oo) | set(no)):
            if oo.get(k) != no.get(k):
                was = _describe(oo[k]) if k in oo else "not set"
                now_ = _describe(no[k]) if k in no else "not set"
                out.append(f"metric {m} option {k} changed: {was} → {now_}")
    said = {d.split(" option ", 1)[1].split(" ", 1)[0] for d in out if " option " in d}
    og, ng = old.get("options") or {}, new.get("options") or {}
    if isinstance(og, Mapping) and isinstance(ng, Mapping):
        for k in sorted((set(og) | set(ng)) - said):
            if og.get(k) != ng.get(k):
                was = _describe(og[k]) if k in og else "not set"
                now_ = _describe(ng[k]) if k in ng else "not set"
                out.append(f"option {k} changed: {was} → {now_}")
    oj, nj = old.get("judges") or [], new.get("judges") or []
    if len(oj) != len(nj):
        out.append(f"judges changed: {len(oj)} → {len(nj)}")
    for i, (a, b) in enumerate(zip(oj, nj)):
        if not (isinstance(a, Mapping) and isinstance(b, Mapping)):
            continue
        who = f"judge {a.get('name')}" if len(oj) == 1 else f"judge {i + 1} ({a.get('name')})"
        if a.get("name") != b.get("name"):
            out.append(f"{who} changed: {a.get('name')} → {b.get('name')}")
            continue  # another judge: its settings and prompts differ with it
        sa, sb = _judging(a.get("settings")), _judging(b.get("settings"))
        for k in sorted(set(sa) | set(sb)):
            if sa.get(k) != sb.get(k) and k != "model":
                out.append(f"{who} setting {k} changed: {_describe(sa.get(k))} → {_describe(sb.get(k))}")
        pa, pb = a.get("prompts") or {}, b.get("prompts") or {}
        for step in sorted(set(pa) | set(pb)):
            if pa.get(step) != pb.get(step):
                out.append(f"{who} prompt {step} changed: {pa.get(step)} → {pb.get(step)}")
    oi, ni = by_name(old.get("inputs"), "path"), by_name(new.get("inputs"), "path")
    moved = {str(oi[p].get("sha256")) for p in oi if p not in ni} & {str(ni[p].get("sha256")) for p in ni if p not in oi}
    moved.discard("None")  # the same bytes under another path (./chats.jsonl, /abs/chats.jsonl): the same input
    out += [f"input {p} added" for p in ni if p not in oi and str(ni[p].get("sha256")) not in moved]
    out += [f"input {p} removed" for p in oi if p not in ni and str(oi[p].get("sha256")) not in moved]
    out += [f"input {p} changed (sha256 {str(oi[p].get('sha256'))[:12]} → {str(ni[p].get('sha256'))[:12]})"
            for p in ni if p in oi and oi[p].get("sha256") != ni[p].get("sha256")]
    return out


@dataclass(frozen=True)
class RunStart:
    """How a run begins its results file: its ``header``, the one the file already holds (``old``, when
    resumed), whether the file starts afresh (``fresh``: the header is its first line) and when it started."""

    header: dict[str, Any]
    old: dict[str, Any] | None
    fresh: bool
    started: datetime

    def write_header(self, writer: ResultsWriter) -> None:
        """The header as the first line of a fresh file; the writer is closed if that fails."""
        if self.fresh:
            try:
                writer.write(self.header)
            except BaseException:
                writer.close()
                raise


def start_run(out: str | Path, plan: MetricPlan, inputs: Sequence[str | Path], header: Mapping[str, Any] | None,
              *, resume: bool) -> RunStart:
    """``header`` (default: one built from ``plan`` and ``inputs``), checked against the header of ``out`` when
    resumed: :class:`RunSettingsChanged` names each difference in what decides a verdict."""
    started = now()
    head = dict(header) if header is not None else run_header(plan, inputs=inputs, started_at=started)
    old = read_header(out) if resume else None
    if old is not None and (changed := differences(old, head)):
        raise RunSettingsChanged(out, changed)
    return RunStart(head, old, not (resume and is_nonempty(out)), started)
