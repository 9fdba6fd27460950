"""One self-contained HTML file from a results JSONL file.

The page works offline: CSS and script are inlined, nothing is fetched (a Content-Security-Policy forbids it). The
data travels as JSON inside ``<script type="application/json">`` with ``<``, ``>`` and ``&`` written as
``\\u003c``/``\\u003e``/``\\u0026``, so no conversation text can close the element; the page's script renders every
value with ``textContent``.

    write_report("judgegraph-results.jsonl", "report.html", inputs=["chats.jsonl"])
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime, timezone
from html import escape
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from typing_extensions import NotRequired, TypedDict

from ..data.results import Status
from ..runs import ConversationLine, RunFile, read_run
from .tables import MetricSummary, StatusCounts, abbreviations, templates

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

    from .compare import Comparison
    from .drawing import Drawable

__all__ = ["ReportFile", "recorded_turns", "render_report", "report_data", "report_html", "write_report"]

STATUSES: tuple[str, ...] = get_args(Status)
BINS = 10
TurnText = dict[str, str]  # {"role", "content"}


class Totals(StatusCounts):
    """A run's line of totals: results per status, and what could not be judged or read."""

    conversations: int
    results: int
    judge_errors: int
    run_errors: int
    input_errors: int
    unreadable_lines: int


class Shown(TypedDict):
    """What the page keeps of a conversation line (comparing runs: with that run's turns)."""

    source: object
    error: object
    results: dict[str, dict[str, object]]  # each metric's result as written
    turns: NotRequired[list[TurnText] | None]


class PageConversation(TypedDict, total=False):
    """A conversation of the page: one run's line (``source``, ``error``, ``results``), or ``runs`` side by side."""

    id: str
    position: int
    failing: bool
    differs: bool
    turns: list[TurnText] | None  # None comparing runs: each run has its own
    source: object
    error: object
    results: dict[str, dict[str, object]]  # each metric's result as written
    runs: list[Shown | None]  # one entry per run (None where it has no line)


class ReportData(TypedDict):
    """The JSON the page renders (:func:`report_data`); ``summary`` and ``totals`` of one run also at the top."""

    compare: bool
    source: str | list[str]
    inputs: list[str]
    generated: str
    metrics: list[str]
    runs: list[dict[str, Any]]  # each run's RunFacts (to_json), with its "summary" and "totals"
    conversations: list[PageConversation]
    input_errors: list[dict[str, Any]]  # the input error lines as written (comparing runs: with their "runs")
    problems: list[str]
    summary: NotRequired[dict[str, MetricSummary]]
    totals: NotRequired[Totals]


@dataclass
class ReportFile:
    """What :func:`write_report` wrote: the page, its size and the problems met."""

    path: Path
    bytes: int
    conversations: int
    problems: list[str]  # unreadable results lines
    input_problems: list[str] = field(default_factory=list)  # records of the input files that could not be read
    runs: int = 1  # results files shown side by side


def _turns_by_id(inputs: Sequence[str | Path]) -> tuple[dict[str, list[TurnText]], list[str]]:
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


def _recorded_inputs(results: RunFile) -> list[Path]:
    """The input files the run's header names that are still here unchanged (same SHA-256): the turns a run
    judged, with no ``--input``. A path is tried as written, then beside the results file."""
    from ..runs.header import file_sha256

    found = []
    for path, want in (results.header.input_files() if results.header is not None else {}).items():
        for candidate in (Path(path), Path(results.path).parent / path):
            if candidate.is_file() and file_sha256(candidate) == want:
                found.append(candidate)
                break
    return found


def _judged_inputs(files: Sequence[RunFile], inputs: Sequence[str | Path], problems: list[str]) -> list[bool]:
    """Per run, whether ``inputs`` may be what it judged: its header names no input, or names these files'
    contents (SHA-256). A run that judged other files gets none of their turns (another version's replies), said."""
    from ..runs.header import file_sha256

    if not inputs:
        return [False] * len(files)
    mine = {file_sha256(p) for p in inputs}
    if None in mine:  # a file that cannot be read: no judgement on it
        return [True] * len(files)
    out = []
    for f in files:
        judged = set(f.header.input_files().values()) if f.header is not None else set()
        out.append(not judged or mine <= judged)
        if not out[-1]:
            problems.append(f"--input {', '.join(map(str, inputs))} is not what {f.path} judged (its header names other "
                            "input files): their turns are not shown under that run")
    return out


def _summary(conversations: list[ConversationLine], metrics: list[str]) -> dict[str, MetricSummary]:
    out: dict[str, MetricSummary] = {}
    for m in metrics:
        got = [r for c in conversations if (r := c.results.get(m)) is not None]
        counts = Counter(r.status for r in got)  # read_run names any other status; None: a result without one
        scores = [score for r in got if (score := r.number) is not None and 0.0 <= score <= 1.0]
        hist = [0] * BINS
        for score in scores:
            hist[min(int(score * BINS), BINS - 1)] += 1
        out[m] = MetricSummary(passed=counts["passed"], failed=counts["failed"], error=counts["error"],
                               not_applicable=counts["not_applicable"], judge_errors=sum(len(r.errors) for r in got),
                               histogram=hist, mean_score=sum(scores) / len(scores) if scores else None)
    return out


def _totals(results: RunFile, conversations: list[ConversationLine], summary: dict[str, MetricSummary]) -> Totals:
    keys = (*STATUSES, "judge_errors")  # the int keys
    total = {k: sum(s[k] for s in summary.values()) for k in keys}  # type: ignore[literal-required]
    return Totals(passed=total["passed"], failed=total["failed"], error=total["error"],
                  not_applicable=total["not_applicable"], conversations=len(conversations),
                  results=sum(len(c.results) for c in conversations), judge_errors=total["judge_errors"],
                  run_errors=sum(1 for c in conversations if c.error), input_errors=len(results.input_errors),
                  unreadable_lines=len(results.problems))


def _shown(record: ConversationLine | None) -> Shown:
    """What the page keeps of a conversation line."""
    if record is None:
        return {"source": None, "error": None, "results": {}}
    return {"source": record.source, "error": record.error, "results": {k: r.data() for k, r in record.results.items()}}


def _input_errors(files: Sequence[RunFile], labels: Sequence[str]) -> list[dict[str, Any]]:
    """The runs' input errors, each once, with the labels of the runs that met it."""
    seen: dict[tuple[str, ...], tuple[dict[str, Any], list[str]]] = {}
    for f, label in zip(files, labels):
        for line in f.input_errors:
            e = line.data()
            key = tuple(str(e.get(k)) for k in ("file", "line", "record", "field", "message", "error"))
            runs = seen.setdefault(key, (e, []))[1]
            if label not in runs:
                runs.append(label)
    return [{**e, "runs": runs} for e, runs in seen.values()]


def report_data(results: RunFile | Sequence[RunFile], *,
                inputs: Sequence[str | Path] = ()) -> tuple[ReportData, list[str]]:
    """The JSON the page renders, and the problems met building it.

    One results file: ``conversations`` hold each line's ``results``, ``error`` and ``source``. Several: the runs
    side by side (``compare`` true), each conversation holding ``runs``, one entry per file (null where that run
    has no line for it); each run's ``summary`` and ``totals`` are in ``runs``. Conversations come failures first,
    then in input order (see :func:`.compare.compare_runs`)."""
    from .compare import compare_runs

    files = [results] if isinstance(results, RunFile) else list(results)
    return _report_data(files, compare_runs(files), inputs)


def _report_data(files: list[RunFile], comparison: Comparison,
                 inputs: Sequence[str | Path]) -> tuple[ReportData, list[str]]:
    turns, problems = _turns_by_id(inputs)
    problems = [p for f in files for p in f.problems] + problems
    compare = len(files) > 1
    # each run's turns from its header's inputs
    own_turns = [_turns_by_id(_recorded_inputs(f))[0] if not inputs or compare else {} for f in files]
    given = _judged_inputs(files, inputs, problems) if compare else [True]
    runs: list[dict[str, Any]] = []
    for i, (f, facts) in enumerate(zip(files, comparison.runs)):
        own = [record for row in comparison.rows if (record := row.records[i]) is not None]
        summary = _summary(own, [m for m in comparison.metrics if any(m in c.results for c in own)])
        runs.append({**facts.to_json(), "summary": summary, "totals": _totals(f, own, summary)})
    conversations: list[PageConversation] = []
    for row in comparison.rows:
        cid = row.conversation_id
        shown = PageConversation(id=cid, position=row.position, failing=row.failing, differs=row.differs,
                                 turns=turns.get(cid) or own_turns[0].get(cid))
        if compare:  # each run's own turns, else --input's when that run judged them: never one run's under another
            shown["turns"] = None
            shown["runs"] = [None if r is None else {**_shown(r), "turns": own.get(cid) or (turns.get(cid) if fits
                                                                                           else None)}
                             for r, own, fits in zip(row.records, own_turns, given)]
        else:
            shown.update(_shown(row.records[0]))
        conversations.append(shown)
    data = ReportData(
        compare=compare, source=files[0].path if not compare else [f.path for f in files],
        inputs=[str(p) for p in inputs], generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        metrics=comparison.metrics, runs=runs, conversations=conversations,
        input_errors=_input_errors(files, [r.label for r in comparison.runs]) if compare
        else [e.data() for e in files[0].input_errors],
        problems=problems,
    )
    if not compare:
        data["summary"], data["totals"] = runs[0]["summary"], runs[0]["totals"]
    return data, problems


def _json_for_script(data: object) -> str:
    """JSON that cannot end its ``<script>`` element or open another one."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)  # JSON.parse refuses NaN
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _asset(name: str) -> str:
    return resources.files("judgegraph.outputs").joinpath("assets").joinpath(name).read_text(encoding="utf-8")


def _graph_svgs(metrics: list[str], graphs: Iterable[Drawable] | None, *, llm: bool = False) -> list[str]:
    """SVG pictures of the given compiled graphs; without any, the report graph of ``metrics`` as registered
    (default options), when they can be built."""
    from .drawing import draw_svg

    chosen = list(graphs) if graphs is not None else []
    if graphs is None and metrics:
        built = _default_report_graph(metrics, llm=llm)
        if isinstance(built, str):
            return [f'<p class="muted">{escape(built)}</p>']
        chosen = [built]
    return [draw_svg(g.get_graph(xray=1) if hasattr(g, "get_graph") else g, title=getattr(g, "name", None) or "report",
                     id_prefix=f"jg{i}") for i, g in enumerate(chosen)]


def _default_report_graph(metrics: list[str], *, llm: bool) -> CompiledStateGraph | str:
    """The report graph of the results' metric names (built for an LLM judge when ``llm``, else the offline one), or
    why it cannot be drawn."""
    from ..judges import NoModel
    from ..metrics import get_metric
    from ..report import create_report_graph

    specs = {}
    for m in metrics:
        with suppress(KeyError):
            specs[m] = get_metric(m)
    if not specs:
        return "no graph: the results' metrics are not registered here"
    options = {m: {"guidelines": ["(the run's guidelines)"]} for m, spec in specs.items() if "guidelines" in spec.options}
    names = list(specs)
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


def render_report(data: ReportData, comparison: Comparison, *, svgs: Sequence[str] = (),
                  title: str = "judgegraph report") -> str:
    """The HTML page for ``data`` (see :func:`report_data`) of the runs ``comparison`` matched, ``svgs`` drawn in it.
    The tables are written here too (``assets/report.html``), so the page reads with JavaScript off."""
    metrics = comparison.metrics
    short = abbreviations(metrics, columns=len(metrics) * len(comparison.runs))
    return templates().get_template("report.html").render(
        data=data, comparison=comparison, runs=comparison.runs, metrics=metrics, compare=data["compare"], short=short,
        key={m: a for m, a in short.items() if a != m}, svgs=svgs, title=title, css=_asset("report.css"),
        js=_asset("report.js"), json=_json_for_script(data))


def report_html(runs: Sequence[RunFile], *, inputs: Sequence[str | Path] = (),
                graphs: Iterable[Drawable] | None = None, title: str | None = None,
                ) -> tuple[str, ReportData, list[str]]:
    """The report page of ``runs`` (one, or several side by side), the data it renders (:func:`report_data`) and
    the problems met building it: what :func:`write_report` writes, and what ``judgegraph view`` serves."""
    from .compare import compare_runs

    comparison = compare_runs(runs)
    data, problems = _report_data(list(runs), comparison, inputs)
    llm = any(str(r.judge or "").startswith("llm") for f in runs for c in f.conversations.values()
              for r in c.results.values())
    names = [Path(f.path).name for f in runs]
    default = f"judgegraph report: {names[0]}" if len(names) == 1 else "judgegraph report: " + " vs ".join(names)
    html = render_report(data, comparison, svgs=_graph_svgs(data["metrics"], graphs, llm=llm), title=title or default)
    return html, data, problems


def recorded_turns(run: RunFile) -> dict[str, list[dict[str, str]]]:
    """The turns of ``run``'s conversations by id (``role``, ``content``), from the input files its header names
    when they are still here unchanged; empty when none is."""
    return _turns_by_id(_recorded_inputs(run))[0]


def write_report(
    results: str | Path | Sequence[str | Path],
    out: str | Path,
    *,
    inputs: Sequence[str | Path] = (),
    graphs: Iterable[Drawable] | None = None,
    title: str | None = None,
) -> ReportFile:
    """Write the HTML report of the results file ``results`` to ``out``; given several results files, the runs side
    by side (matched by conversation id).

    ``inputs``: the input files, to show every turn (results hold only the judged replies). ``graphs``: compiled
    graphs to draw (``judgegraph eval`` passes the ones it ran); by default the results' metrics with default
    options."""
    paths = [results] if isinstance(results, (str, Path)) else list(results)
    parsed = [read_run(p) for p in paths]
    html, data, problems = report_html(parsed, inputs=inputs, graphs=graphs, title=title)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    unreadable = [line for f in parsed for line in f.problems]
    return ReportFile(path, len(html.encode("utf-8")), len(data["conversations"]), unreadable,
                      [p for p in problems if p not in unreadable], len(paths))
