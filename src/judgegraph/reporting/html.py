"""One self-contained HTML file from a results JSONL file.

The page works offline: CSS and script are inlined, nothing is fetched (a
Content-Security-Policy forbids it). The data travels as JSON inside
``<script type="application/json">`` with ``<``, ``>`` and ``&`` written as
``\\u003c``/``\\u003e``/``\\u0026``, so no conversation text can close the
element; the page's script renders every value with ``textContent``.

    write_report("judgegraph-results.jsonl", "report.html", inputs=["chats.jsonl"])
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from html import escape
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..resultsfile import input_order, non_finite_field, restore_elided

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

    from .drawing import Drawable

__all__ = ["ReportFile", "ResultsFile", "read_results", "render_report", "report_data", "write_report"]

STATUSES = ("passed", "failed", "error", "not_applicable")
BINS = 10


@dataclass
class ResultsFile:
    """What a results JSONL file holds; lines that are not records are kept as problems, not raised."""

    path: str
    conversations: list[dict[str, Any]] = field(default_factory=list)
    input_errors: list[dict[str, Any]] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # "FILE:LINE: what is wrong"
    header: dict[str, Any] | None = None  # the run header (docs/runs.md); None in an older file
    summary: dict[str, Any] | None = None  # the last run summary


@dataclass
class ReportFile:
    path: Path
    bytes: int
    conversations: int
    problems: list[str]  # unreadable results lines
    input_problems: list[str] = field(default_factory=list)  # records of the input files that could not be read


def read_results(path: str | Path) -> ResultsFile:
    """Read every line of a results file (``judgegraph eval --out``). A line that
    cannot be shown (not UTF-8, not JSON, nested too deeply, a number that is not
    finite, a wrong shape) is kept in ``unreadable`` naming its line and field;
    the other lines are read."""
    out = ResultsFile(str(path))
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                out.unreadable.append(f"{path}:{n}: not valid UTF-8 (byte {exc.start + 1} of the line)")
                continue
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                out.unreadable.append(f"{path}:{n}: not JSON ({exc.msg} at column {exc.colno})")
                continue
            except RecursionError:
                out.unreadable.append(f"{path}:{n}: nested too deeply to read")
                continue
            bad_number = non_finite_field(record)
            if bad_number is not None:
                out.unreadable.append(f"{path}:{n}: field {bad_number!r}: not a finite number (such as 1e999, "
                                      "which reads as infinity): the line is left out")
                continue
            kind = record.get("type") if isinstance(record, dict) else None
            if kind == "conversation":
                wrong = _wrong_shape(record)
                if wrong:
                    out.unreadable.append(f"{path}:{n}: {wrong}")
                    continue
                out.conversations.append(restore_elided(record))
            elif kind == "input_error":
                out.input_errors.append(record)
            elif kind == "header" and out.header is None:
                out.header = record
            elif kind == "summary":
                out.summary = record
            else:
                out.unreadable.append(f"{path}:{n}: field 'type': expected a 'conversation' or 'input_error' record, "
                                      f"got {kind!r}")
    out.conversations = input_order(out.conversations)
    return out


def _wrong_shape(record: dict[str, Any]) -> str | None:
    """What keeps a conversation record from being shown, naming the field; None when it can be."""
    if not isinstance(record.get("conversation_id"), str):
        return "field 'conversation_id': expected a string"
    results = record.setdefault("results", {})
    if not isinstance(results, dict):
        return "field 'results': expected an object of metric results"
    for metric, result in results.items():
        if not isinstance(result, dict):
            return f"field 'results.{metric}': expected an object"
        for key in ("verdicts", "errors"):
            items = result.setdefault(key, [])
            if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
                return f"field 'results.{metric}.{key}': expected a list of objects"
        for i, verdict in enumerate(result["verdicts"]):
            transcript = verdict.get("transcript")
            if transcript is not None and (not isinstance(transcript, list)
                                           or not all(isinstance(a, dict) for a in transcript)):
                return f"field 'results.{metric}.verdicts[{i}].transcript': expected a list of objects"
    return None


def _turns_by_id(inputs: Sequence[str | Path]) -> tuple[dict[str, list[dict[str, str]]], list[str]]:
    """The conversations' turns from the input files, by conversation id."""
    if not inputs:
        return {}, []
    from ..loaders import load_files

    loaded = load_files([str(p) for p in inputs])
    turns = {
        item.conversation.id: [{"role": t.role, "content": t.content} for t in item.conversation.turns]
        for item in loaded.conversations
    }
    return turns, [f"input: {e}" for e in loaded.errors]


def _summary(conversations: list[dict[str, Any]], metrics: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for m in metrics:
        counts = {s: 0 for s in STATUSES}
        hist = [0] * BINS
        scores: list[float] = []
        judge_errors = 0
        for c in conversations:
            r = c["results"].get(m)
            if not r:
                continue
            counts[r.get("status")] = counts.get(r.get("status"), 0) + 1
            judge_errors += len(r.get("errors") or [])
            score = r.get("score")
            if isinstance(score, (int, float)) and 0.0 <= score <= 1.0:
                scores.append(float(score))
                hist[min(int(score * BINS), BINS - 1)] += 1
        out[m] = {**counts, "judge_errors": judge_errors, "histogram": hist,
                  "mean_score": sum(scores) / len(scores) if scores else None}
    return out


def report_data(results: ResultsFile, *, inputs: Sequence[str | Path] = ()) -> tuple[dict[str, Any], list[str]]:
    """The JSON the page renders, and the problems met building it."""
    turns, problems = _turns_by_id(inputs)
    problems = list(results.unreadable) + problems
    metrics: list[str] = []
    conversations: list[dict[str, Any]] = []
    for record in results.conversations:
        res = record.get("results") or {}
        for m in res:
            if m not in metrics:
                metrics.append(m)
        cid = str(record.get("conversation_id", ""))
        conversations.append({"id": cid, "position": record.get("position"), "source": record.get("source"),
                              "error": record.get("error"),
                              "results": res, "turns": turns.get(cid)})
    summary = _summary(conversations, metrics)
    totals: dict[str, Any] = {s: sum(summary[m][s] for m in metrics) for s in STATUSES}
    totals.update(
        conversations=len(conversations), results=sum(len(c["results"]) for c in conversations),
        judge_errors=sum(summary[m]["judge_errors"] for m in metrics),
        run_errors=sum(1 for c in conversations if c["error"]), input_errors=len(results.input_errors),
        unreadable_lines=len(results.unreadable),
    )
    data = {
        "source": results.path,
        "inputs": [str(p) for p in inputs],
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "metrics": metrics,
        "summary": summary,
        "totals": totals,
        "conversations": conversations,
        "input_errors": results.input_errors,
        "problems": problems,
    }
    return data, problems


def _json_for_script(data: object) -> str:
    """JSON that cannot end its ``<script>`` element or open another one."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)  # JSON.parse refuses NaN
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _asset(name: str) -> str:
    return resources.files("judgegraph.reporting").joinpath("assets").joinpath(name).read_text(encoding="utf-8")


def _graph_svgs(metrics: list[str], graphs: Iterable[Drawable] | None, *, llm: bool = False) -> list[str]:
    """SVG pictures of the given compiled graphs; without any, the report graph of
    ``metrics`` as registered (default options), when they can be built."""
    from .drawing import draw_svg

    chosen = list(graphs) if graphs is not None else []
    if graphs is None and metrics:
        built = _default_report_graph(metrics, llm=llm)
        if isinstance(built, str):
            return [f'<p class="muted">{escape(built)}</p>']
        chosen = [built]
    svgs = []
    for i, g in enumerate(chosen):
        drawable = g.get_graph(xray=1) if hasattr(g, "get_graph") else g
        svgs.append(draw_svg(drawable, title=getattr(g, "name", None) or "report", id_prefix=f"jg{i}"))
    return svgs


def _default_report_graph(metrics: list[str], *, llm: bool) -> CompiledStateGraph | str:
    """The report graph of the results' metric names (built for an LLM judge when
    ``llm``, else the offline one), or why it cannot be drawn."""
    from ..judges import NoModel
    from ..metrics import get_metric
    from ..report import create_report_graph

    known = []
    for m in metrics:
        try:
            spec = get_metric(m)
        except KeyError:
            continue
        known.append((m, spec))
    if not known:
        return "no graph: the results' metrics are not registered here"
    options = {m: {"guidelines": ["(the run's guidelines)"]} for m, spec in known if "guidelines" in spec.options}
    names = [m for m, _ in known]
    if not llm:
        try:
            return create_report_graph(names, options=options)
        except (ValueError, TypeError, KeyError):
            pass  # a metric that needs an LLM judge: drawn as built for one
    try:
        # drawn, never run: NoModel stands for the run's LLM judge
        return create_report_graph(names, model=NoModel(), options=options)
    except (ValueError, TypeError, KeyError) as exc:
        return f"no graph: {exc}"


_PLACEHOLDER = re.compile(r"\{\{(TITLE|CSS|JS|DATA|GRAPHS)\}\}")


def render_report(data: dict[str, Any], *, svgs: Sequence[str] = (), title: str = "judgegraph report") -> str:
    """The HTML page for ``data`` (see :func:`report_data`) with ``svgs`` drawn in it."""
    parts = {
        "TITLE": escape(title),
        "CSS": _asset("report.css"),
        "JS": _asset("report.js"),
        "DATA": _json_for_script(data),
        "GRAPHS": "\n".join(svgs) if svgs else '<p class="muted">no graph</p>',
    }
    return _PLACEHOLDER.sub(lambda m: parts[m.group(1)], _asset("report.html"))  # one pass: no value is re-read


def write_report(
    results: str | Path,
    out: str | Path,
    *,
    inputs: Sequence[str | Path] = (),
    graphs: Iterable[Drawable] | None = None,
    title: str | None = None,
) -> ReportFile:
    """Write the HTML report of the results file ``results`` to ``out``.

    ``inputs``: the input files, to show every turn (results hold only the
    judged replies). ``graphs``: compiled graphs to draw (``judgegraph eval``
    passes the ones it ran); by default the results' metrics with default options."""
    parsed = read_results(results)
    data, problems = report_data(parsed, inputs=inputs)
    llm = any(str(r.get("judge", "")).startswith("llm") for c in data["conversations"] for r in c["results"].values())
    html = render_report(data, svgs=_graph_svgs(data["metrics"], graphs, llm=llm),
                         title=title or f"judgegraph report: {Path(results).name}")
    path = Path(out)
    if path.parent != Path(""):
        path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    return ReportFile(path, len(html.encode("utf-8")), len(data["conversations"]), list(parsed.unreadable),
                      [p for p in problems if p not in parsed.unreadable])
