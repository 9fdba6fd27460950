"""The run header (what made the run) and summary (what it came to) records of a results file, and the one
comparison of two headers, which ``--resume`` refuses on (:func:`differences`) and ``judgegraph diff`` shows
(:func:`compare_headers`); docs/runs.md."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from pydantic import JsonValue

from ..judges.redact import Redactor
from .record import HeaderLine, SummaryLine, pass_rate
from .resultsfile import ResultsFileError, ResultsWriter, is_nonempty

if TYPE_CHECKING:
    from ..cost.pricing import Prices
    from ..judges.base import Judge
    from .runner import MetricPlan, RunSummary

__all__ = ["FORMAT", "Difference", "RunSettingsChanged", "compare_headers", "differences", "file_sha256",
           "metric_prompts", "prompt_hashes", "run_header", "run_summary", "short_hash"]

#: The version of the header's layout.
FORMAT = 1

#: Judge settings that change what a judge answers; the others (concurrency, rates, timeouts,
#: the cache) only change how fast it is asked, and may change between a run and its resume.
JUDGING_SETTINGS = ("model", "models", "base_url", "rule", "rule_sha256", "aligned", "aligned_sha256", "temperature",
                    "top_p", "top_k", "max_tokens", "max_completion_tokens", "seed", "reasoning_effort", "method",
                    "aggregate", "quorum", "repeat", "jurors")
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
    from .. import __version__

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
    """``{step: sha256[:12]}`` of each prompt file the metrics ``names`` use (their spec's ``prompt_values``, else
    their module's ``PROMPT_VALUES``: a custom metric's)."""
    from ..metrics import get_metric

    steps: set[str] = set()
    for name in names:
        try:
            spec = get_metric(name)
        except KeyError:
            continue
        module, declared = spec.factory.__module__, dict(spec.prompt_values)
        while module and not declared:  # a custom metric: its factory's module, else its package's
            declared = getattr(sys.modules.get(module), "PROMPT_VALUES", None) or {}
            module = module.rpartition(".")[0]
        own = [step for step in declared if step.startswith(f"{name}/")]
        steps.update(own or declared)  # a preset (conversation_relevance) uses its graph's prompts
    return prompt_hashes(steps)


def prompt_hashes(steps: Iterable[str]) -> dict[str, str]:
    """``{step: sha256[:12]}`` of each prompt file among ``steps`` (a step with no file is left out)."""
    from ..data.prompts import PromptError, load_prompt

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
    """``value`` as JSON data (a path as its text, another object as its ``str``)."""
    return json.loads(json.dumps(value, default=str))


#: An option string longer than this (a rubric) is recorded as its hash.
LONG_OPTION = 200


def _option(value: Any) -> Any:
    if isinstance(value, str) and len(value) > LONG_OPTION:
        return {"sha256": short_hash(value.encode("utf-8", "surrogatepass")), "chars": len(value)}
    return value


#: A header line's JSON object (its keys: :class:`~judgegraph.runs.record.HeaderLine`) and one of its judges
#: (:class:`~judgegraph.runs.record.JudgeEntry`).
HeaderRecord: TypeAlias = dict[str, Any]
JudgeRecord: TypeAlias = dict[str, Any]


def _judge_record(judge: Judge, settings: Mapping[str, Any] | None, redact: Redactor,
                  metrics: Sequence[str]) -> JudgeRecord:
    """A header's judge: its name, the settings it was built with and uses (redacted), the prompts of ``metrics``."""
    own = getattr(judge, "settings", None)  # what the judge uses: an LLM's temperature, a jury's jurors
    kept = {k: v for k, v in {**(settings or {}), **(own if isinstance(own, Mapping) else {})}.items()
            if v is not None}
    for key in FILE_SETTINGS:
        path = kept.get(key)
        if isinstance(path, (str, Path)) and (digest := file_sha256(path)) is not None:
            kept[f"{key}_sha256"] = digest[:12]
    return {"name": judge.name, "settings": _redacted(_jsonable(kept), redact),
            "prompts": metric_prompts(metrics) if judge.kind == "llm" else {}}


def run_header(plan: MetricPlan, *, inputs: Sequence[str | Path] = (), argv: Sequence[str] | None = None,
               config: Mapping[str, Any] | None = None, judge_settings: Mapping[str, Any] | None = None,
               sources: Sequence[Mapping[str, Any]] = (), started_at: datetime | None = None) -> HeaderRecord:
    """The header record of a run of ``plan`` over the files ``inputs`` (each with its sha256) and other ``sources``
    (an MLflow experiment: ``{"path": uri, ...}``); ``argv``, ``config`` and ``judge_settings`` are redacted."""
    from ..metrics import DEFAULT_METRICS

    redact = Redactor.for_model(getattr(plan.judge, "model", None))

    def options(given: Mapping[str, object]) -> dict[str, JsonValue]:
        return {k: _redacted(_option(v), redact) for k, v in sorted(_jsonable(given).items())}

    return HeaderLine(
        type="header", format=FORMAT, judgegraph=version(), started_at=iso(started_at or now()),
        argv=None if argv is None else [redact(str(a)) for a in argv],
        config=None if config is None else _redacted(_jsonable(config), redact),
        metrics=[{"name": name, "options": options(opts)} for name, opts in plan.options_by_metric(defaults=True).items()],
        metrics_from_inputs=plan.metrics is None,
        options=options(plan.overrides),
        judges=[_judge_record(plan.judge, judge_settings, redact, plan.metrics or list(DEFAULT_METRICS))],
        inputs=[{"path": str(p), "sha256": file_sha256(p)} for p in inputs]
               + [_redacted(_jsonable(s), redact) for s in sources],
    ).data()


def rejudge_header(old: Mapping[str, Any] | None, *, source: str | Path, metric: str, judge: Judge,
                   judge_settings: Mapping[str, Any] | None = None, rubric: str | None = None,
                   prompt: str | Path | None = None, conversations: Sequence[str] = (),
                   verdicts: Sequence[str] = (), argv: Sequence[str] | None = None) -> HeaderRecord:
    """The header of a ``judgegraph rejudge`` output: the input's header (``old``, or a bare one) with the judge
    added, a changed rubric as the metric's option, and ``rejudged``: what was judged again, from which file, with
    which judge, rubric or prompt (hashed), which ``judgegraph diff`` names. Redacted as a run header."""
    redact = Redactor.for_model(getattr(judge, "model", None))
    header = {**(old or {"type": "header", "format": FORMAT, "metrics": [], "judges": []})}
    header.update({"type": "header", "judgegraph": version(), "started_at": iso(now()),
                   "argv": None if argv is None else [redact(str(a)) for a in argv]})
    entry = _judge_record(judge, judge_settings, redact, [metric])
    judges = [j for j in header.get("judges") or [] if isinstance(j, Mapping) and j.get("name") != judge.name]
    header["judges"] = [*judges, entry]
    if rubric is not None:
        header["metrics"] = [{**m, "options": {**_mapping(m.get("options")), "rubric": redact(rubric)}}
                             if isinstance(m, Mapping) and str(m.get("name")).replace("-", "_") == metric.replace("-", "_")
                             else m for m in header.get("metrics") or []]
    header["rejudged"] = {
        "from": {"path": str(source), "sha256": file_sha256(source)}, "metric": metric, "judge": judge.name,
        "rubric": None if rubric is None else redact(rubric),
        "prompt": None if prompt is None else {"path": str(prompt), "sha256": (file_sha256(prompt) or "")[:12] or None},
        "conversations": sorted(conversations) or "all", "verdicts": list(verdicts) or "all"}
    return header


def _rejudged_text(value: object) -> str | None:
    """A header's ``rejudged`` record in words (None: the run was not a re-judge)."""
    if not isinstance(value, Mapping):
        return None
    source = _mapping(value.get("from"))
    how = [f"{value.get('metric')} from {source.get('path')}", f"by {value.get('judge')}"]
    if value.get("rubric") is not None:
        how.append(f"rubric {json.dumps(value['rubric'], ensure_ascii=False)}")
    if isinstance(prompt := value.get("prompt"), Mapping):
        how.append(f"prompt {prompt.get('path')} ({prompt.get('sha256')})")
    for what in ("conversations", "verdicts"):
        chosen = value.get(what)
        how.append(f"{what} {'all' if chosen == 'all' else ', '.join(map(str, chosen or []))}")
    return "; ".join(how)


def pass_rates(summary: RunSummary) -> dict[str, float | None]:
    """Per metric: :func:`~judgegraph.runs.record.pass_rate` of its results (rounded); None when none was judged."""
    return {m: None if (rate := pass_rate(counts)) is None else round(rate, 6) for m, counts in summary.by_metric.items()}


def run_summary(summary: RunSummary, started_at: datetime, prices: Prices | None = None,
                ended_at: datetime | None = None) -> dict[str, Any]:
    """The summary record of a finished run, the whole file's (read back as
    :class:`~judgegraph.runs.record.SummaryLine`)."""
    end = ended_at or now()
    return SummaryLine(
        type="summary", ended_at=iso(end), duration_s=round((end - started_at).total_seconds(), 3),
        conversations=summary.conversations, usage=summary.usage.model_dump(mode="json"),
        cost_usd=None if prices is None else prices.cost(summary.usage), pass_rate=pass_rates(summary),
        statuses={m: dict(c) for m, c in summary.by_metric.items()},
    ).data()


def _judging(settings: object) -> dict[str, object]:
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


@dataclass(frozen=True)
class Difference:
    """One way two runs differ in how they were judged: ``what`` (``metric option``, ``judge setting``, ``input``...;
    ``source="results"`` when read from the results lines), ``name`` (which one), ``owner`` (the metric of an option,
    the judge of a setting when there are several), ``old``/``new`` (None: absent). ``speed``: a judge setting that
    only changes how fast the judge is asked, which a ``--resume`` may change."""

    what: str
    name: str
    old: Any
    new: Any
    source: str = "header"
    speed: bool = False
    owner: str = ""

    @property
    def refuses_resume(self) -> bool:
        """Whether ``--resume`` refuses it: not the judgegraph version, not a speed setting."""
        return self.source == "header" and not self.speed and self.what != "judgegraph version"

    def __str__(self) -> str:
        """As ``judgegraph diff`` shows it: ``what name: old → new``."""
        def show(value: Any) -> str:
            return "(none)" if value is None else value if isinstance(value, str) else json.dumps(value, sort_keys=True)

        name = f"{self.owner}.{self.name}" if self.owner and self.what == "metric option" else \
            f"{self.owner} {self.name}" if self.owner else self.name
        return (f"{self.what}{f' {name}' if name else ''}: {show(self.old)} → {show(self.new)}"
                + (" (a speed setting: how fast the judge is asked, not what it answers)" if self.speed else ""))


def _by_name(items: object, key: str = "name") -> dict[str, Mapping[str, Any]]:
    """A header's list of objects by their ``key`` (anything else left out)."""
    if not isinstance(items, list):
        return {}
    return {str(i.get(key)): i for i in items if isinstance(i, Mapping) and key in i}


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _keys_differ(what: str, old: Mapping[str, Any], new: Mapping[str, Any], *, owner: str = "",
                 speed: bool = False) -> list[Difference]:
    return [Difference(what, str(key), old.get(key), new.get(key), speed=speed, owner=owner)
            for key in sorted(set(old) | set(new), key=str) if old.get(key) != new.get(key)]


def _judge_differences(old: object, new: object) -> list[Difference]:
    oj, nj = _by_name(old), _by_name(new)
    if list(oj) != list(nj):
        return [Difference("judge", "", ", ".join(oj) or None, ", ".join(nj) or None)]
    out: list[Difference] = []
    for name in oj:
        owner = name if len(oj) > 1 else ""
        settings = _mapping(oj[name].get("settings")), _mapping(nj[name].get("settings"))
        judging = _judging(settings[0]), _judging(settings[1])
        out += _keys_differ("judge setting", *judging, owner=owner)
        speed = [{k: v for k, v in s.items() if k not in JUDGING_SETTINGS} for s in settings]
        if judging[0].get("jurors") == judging[1].get("jurors"):  # the same jurors, asked at another speed
            speed = [{**s, "jurors": j.get("jurors")} for s, j in zip(speed, settings)]
        out += _keys_differ("judge setting", *speed, owner=owner, speed=True)
        out += _keys_differ("prompt", _mapping(oj[name].get("prompts")), _mapping(nj[name].get("prompts")),
                            owner=owner)
    return out


def _input_differences(old: object, new: object) -> list[Difference]:
    """Inputs added, removed or changed (by path and sha256); the same bytes under another path
    (./chats.jsonl, /abs/chats.jsonl) are the same input."""
    oi, ni = _by_name(old, "path"), _by_name(new, "path")

    def sha(entry: Mapping[str, Any]) -> str:
        return str(entry.get("sha256"))  # "None": not a file (an MLflow experiment): never the same bytes

    moved = {sha(oi[p]) for p in oi if p not in ni} & {sha(ni[p]) for p in ni if p not in oi}
    moved.discard("None")
    out = [Difference("input", p, sha(oi[p]), sha(ni[p])) for p in ni if p in oi and sha(oi[p]) != sha(ni[p])]
    out += [Difference("input", p, None, sha(ni[p])) for p in ni if p not in oi and sha(ni[p]) not in moved]
    out += [Difference("input", p, sha(oi[p]), None) for p in oi if p not in ni and sha(oi[p]) not in moved]
    return out


def compare_headers(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Difference]:
    """Every way the run headers ``old`` and ``new`` differ (the time and the command line may): the one comparison
    ``--resume`` (:func:`differences`) and ``judgegraph diff`` use."""
    out: list[Difference] = []
    if old.get("judgegraph") != new.get("judgegraph"):
        out.append(Difference("judgegraph version", "", old.get("judgegraph"), new.get("judgegraph")))
    out += _judge_differences(old.get("judges"), new.get("judges"))
    om, nm = _by_name(old.get("metrics")), _by_name(new.get("metrics"))
    for name in [*om, *(n for n in nm if n not in om)]:
        if name not in om or name not in nm:
            out.append(Difference("metric", name, "judged" if name in om else None, "judged" if name in nm else None))
        else:
            out += _keys_differ("metric option", _mapping(om[name].get("options")), _mapping(nm[name].get("options")),
                                owner=name)
    said = {d.name for d in out if d.what == "metric option"}  # a run option is each metric's: said once
    out += [d for d in _keys_differ("option", _mapping(old.get("options")), _mapping(new.get("options")))
            if d.name not in said]
    if (was := _rejudged_text(old.get("rejudged"))) != (now_ := _rejudged_text(new.get("rejudged"))):
        out.append(Difference("re-judged", "", was, now_))  # judgegraph rejudge made one side
    return out + _input_differences(old.get("inputs"), new.get("inputs"))


def _refusal(d: Difference, judges: tuple[list[str], list[str]]) -> str:
    """A difference as ``--resume`` names it (``judges``: the names of the judges of each header)."""
    def setting(value: object) -> str:
        return "not set" if value is None else _describe(value)

    if d.what == "metric":
        return f"metric {d.name} {'added' if d.old is None else 'removed'}"
    if d.what in ("metric option", "option"):
        owner = f"metric {d.owner} " if d.what == "metric option" else ""
        return f"{owner}option {d.name} changed: {setting(d.old)} → {setting(d.new)}"
    judge = d.owner or (judges[0][0] if judges[0] else "")
    if d.what == "judge":
        if len(judges[0]) == len(judges[1]) == 1:
            return f"judge {d.old} changed: {d.old} → {d.new}"
        return f"judges changed: {', '.join(judges[0]) or 'none'} → {', '.join(judges[1]) or 'none'}"
    if d.what == "judge setting":
        return f"judge {judge} setting {d.name} changed: {_describe(d.old)} → {_describe(d.new)}"
    if d.what == "prompt":
        return f"judge {judge} prompt {d.name} changed: {d.old} → {d.new}"
    if d.what == "input":
        if d.old is None or d.new is None:
            return f"input {d.name} {'added' if d.old is None else 'removed'}"
        return f"input {d.name} changed (sha256 {d.old[:12]} → {d.new[:12]})"
    return str(d)


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What refuses a ``--resume`` of a file whose header is ``old`` by a run whose header is ``new``, each named
    (empty: it may continue)."""
    judges = list(_by_name(old.get("judges"))), list(_by_name(new.get("judges")))
    return [_refusal(d, judges) for d in compare_headers(old, new) if d.refuses_resume]


@dataclass(frozen=True)
class RunStart:
    """How a run begins its results file: its ``header``, the file's (``old``, when resumed), whether the file
    starts afresh (``fresh``: the header is its first line) and when it started."""

    header: Mapping[str, object]
    old: HeaderLine | None
    fresh: bool
    started: datetime

    def write_header(self, writer: ResultsWriter) -> None:
        """The header as the first line of a fresh file; the writer is closed if that fails."""
        try:
            if self.fresh:
                writer.write(self.header)
        except BaseException:
            writer.close()
            raise


def start_run(out: str | Path, plan: MetricPlan, inputs: Sequence[str | Path], header: Mapping[str, Any] | None,
              *, resume: bool) -> RunStart:
    """``header`` (default: one built from ``plan`` and ``inputs``), checked against the header of ``out`` when
    resumed: :class:`RunSettingsChanged` names each difference in what decides a verdict."""
    from . import read_header

    started = now()
    head = dict(header if header is not None else run_header(plan, inputs=inputs, started_at=started))
    old = read_header(out) if resume else None
    if old is not None and (changed := differences(old.data(), head)):
        raise RunSettingsChanged(out, changed)
    return RunStart(head, old, not (resume and is_nonempty(out)), started)
