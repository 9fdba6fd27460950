"""Reading: an MLflow experiment's traces, grouped into sessions, as conversations (:func:`load_sessions`;
:func:`build_sessions` on plain :class:`TraceRecord` values, without MLflow). :mod:`.messages` reads each trace's
request and response."""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from ...data.conversation import Conversation, Turn
from ...loaders import InputError, LoadedConversation
from .common import FIRST_TRACE_KEY, PART_KEY, SESSION_ID_KEY, SESSION_KEY, TRACE_ID_KEY, import_mlflow, unreachable
from .messages import Msg, Unreadable, new_messages, pick, reply_message, request_messages

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Trace

FORMAT = "mlflow"
PAGE_SIZE = 200
EXPECTATIONS_KEY = "expectations"  # conversation metadata: the session's expectations, {name: value}
TURN_EXPECTATIONS_KEY = "mlflow_expectations"  # reply-turn metadata: its trace's own expectations, {name: value}
EXPECTATION_SOURCE = "HUMAN"  # MLflow's judges read only human expectations (resolve_expectations_from_session)


class SessionList(list[LoadedConversation]):
    """What :func:`load_sessions` returns: one :class:`~judgegraph.loaders.LoadedConversation` per session, oldest
    first, and on the side ``errors`` (an :class:`~judgegraph.loaders.InputError` per unreadable trace: ``file`` the
    tracking URI, ``record`` the trace id, ``field`` ``request`` / ``response`` / ``experiment``), ``experiment_id``
    and ``traces`` (how many were read)."""

    def __init__(self, items: Iterable[LoadedConversation] = (), *, errors: list[InputError] | None = None,
                 experiment_id: str | None = None, traces: int = 0) -> None:
        super().__init__(items)
        self.errors: list[InputError] = list(errors or [])
        self.experiment_id = experiment_id
        self.traces = traces


def find_experiment(client: MlflowClient, experiment: str) -> str | None:
    """The id of the experiment named ``experiment``, else of the one whose id it is; None when there is none."""
    found = client.get_experiment_by_name(experiment)
    if found is None and str(experiment).isdigit():
        try:
            found = client.get_experiment(str(experiment))
        except Exception:  # noqa: BLE001 - no experiment with that id
            found = None
    return None if found is None else str(found.experiment_id)


def _search(client: MlflowClient, experiment_id: str, filter_string: str | None, limit: int | None) -> list[Trace]:
    """Traces of the experiment, newest first, all pages (up to ``limit``)."""
    where = ({"locations": [experiment_id]} if "locations" in inspect.signature(client.search_traces).parameters
             else {"experiment_ids": [experiment_id]})
    out: list[Trace] = []
    token = None
    while limit is None or len(out) < limit:
        page = client.search_traces(**where, filter_string=filter_string, order_by=["timestamp_ms DESC"],
                                    max_results=PAGE_SIZE if limit is None else min(PAGE_SIZE, limit - len(out)),
                                    page_token=token, include_spans=True)
        out.extend(page)
        token = getattr(page, "token", None)
        if not token or not len(page):
            break
    return out


@dataclass(frozen=True)
class ExpectationRecord:
    """An ``Expectation`` assessment of a trace: its name and value, whether it is session-level (its metadata holds
    ``mlflow.trace.session``, as MLflow writes and reads session expectations) and its source type."""

    name: str
    value: Any  # Any: what the user stored (JSON)
    session_level: bool = False
    source: str = EXPECTATION_SOURCE


@dataclass(frozen=True)
class TraceRecord:
    """What judgegraph needs of one trace: its id, session, start time (ns),
    the root span's inputs and outputs, its state and its expectations."""

    trace_id: str
    session: str | None
    timestamp_ns: int
    inputs: Any = None  # Any: the traced function's own inputs and outputs (JSON)
    outputs: Any = None
    state: str = "OK"
    has_root: bool = True
    expectations: tuple[ExpectationRecord, ...] = ()


def _record(trace: Trace, session_key: str) -> TraceRecord:
    info = trace.info
    spans = list(getattr(trace.data, "spans", None) or [])
    root = next((s for s in spans if getattr(s, "parent_id", None) is None), None)
    meta = dict(getattr(info, "trace_metadata", None) or {})
    tags = dict(getattr(info, "tags", None) or {})
    session = meta.get(session_key) or tags.get(session_key) or None
    ms = getattr(info, "request_time", None) or getattr(info, "timestamp_ms", 0) or 0
    start = getattr(root, "start_time_ns", None) if root is not None else None
    state = getattr(info, "state", "OK")
    return TraceRecord(
        trace_id=info.trace_id,
        session=str(session) if session is not None else None,
        timestamp_ns=int(start) if start else int(ms) * 1_000_000,
        inputs=root.inputs if root is not None else None,
        outputs=root.outputs if root is not None else None,
        state=str(getattr(state, "value", state)),
        has_root=root is not None,
        expectations=_expectations(trace),
    )


def _expectations(trace: Trace) -> tuple[ExpectationRecord, ...]:
    """The trace's valid (not overridden) ``Expectation`` assessments."""
    search = getattr(trace, "search_assessments", None)
    out = []
    for exp in search(type="expectation") if search is not None else ():
        source = getattr(getattr(exp, "source", None), "source_type", None)
        out.append(ExpectationRecord(name=exp.name, value=exp.value, session_level=SESSION_KEY in (exp.metadata or {}),
                                     source=str(getattr(source, "value", source))))
    return tuple(out)


def _turn(msg: Msg, trace_id: str, part: str, **extra: Any) -> Turn:
    meta = {TRACE_ID_KEY: trace_id, PART_KEY: part, **dict(msg.meta), **extra}
    return Turn.model_validate({"role": msg.role, "content": msg.content, "metadata": meta,
                                "tool_calls": [dict(c) for c in msg.tool_calls]})


def session_expectations(sid: str | None, records: list[TraceRecord]) -> dict[str, object]:
    """A conversation's expectations, ``{name: value}``, from its traces (in time order).

    * A session: its human expectations marked session-level (metadata
      ``mlflow.trace.session``), on any of its traces; the earliest trace wins
      a name. (MLflow's own judges read them from the first trace only; a
      session expectation logged on a later trace is taken here as well.)
    * A trace of its own (no session): its human expectations, as MLflow's
      judges read a single trace's.
    Other sources (``CODE``, ``LLM_JUDGE``) are not ground truth and are skipped, as MLflow does."""
    out: dict[str, object] = {}
    for rec in records:
        for exp in rec.expectations:
            if exp.source == EXPECTATION_SOURCE and (exp.session_level or sid is None):
                out.setdefault(exp.name, exp.value)
    return out


def build_sessions(
    records: Iterable[TraceRecord],
    *,
    tracking_uri: str = "",
    experiment: str = "",
    experiment_id: str | None = None,
    request_key: str | None = None,
    response_key: str | None = None,
) -> SessionList:
    """Group trace records into sessions and build one conversation per session
    (see :func:`load_sessions`). Pure: no MLflow needed."""
    units: dict[str | tuple[str], list[TraceRecord]] = {}  # a session's traces by its id; (trace id,): one alone
    for rec in sorted(records, key=attrgetter("timestamp_ns", "trace_id")):
        units.setdefault(rec.session or (rec.trace_id,), []).append(rec)
    out = SessionList(experiment_id=experiment_id)
    for unit, recs in units.items():
        sid = unit if isinstance(unit, str) else None
        out.traces += len(recs)
        turns: list[Turn] = []
        prior: list[Msg] = []
        used: list[str] = []
        blank: list[str] = []
        unanswered: list[str] = []
        where = f"session {sid!r}: " if sid else ""
        for rec in recs:
            try:
                if not rec.has_root:
                    raise Unreadable("request", "the trace has no spans")
                request = request_messages(*pick(rec.inputs, request_key, "request"))
                # no response (an ERROR trace, one cut short): the user's message stays in the conversation
                # with no reply, as MLflow's resolve_conversation_from_session keeps it
                reply = None if rec.outputs is None else reply_message(*pick(rec.outputs, response_key, "response"))
            except Unreadable as exc:
                out.errors.append(InputError(tracking_uri, None, rec.trace_id, exc.field,  # type: ignore[arg-type]
                                             f"{where}{exc.message}"))
                continue
            new, mismatch = new_messages(prior, request)
            prior += new + ([reply] if reply is not None else [])  # the history as sent, blank messages included
            extra = {"mlflow_history_mismatch": True} if mismatch else {}
            added = [_turn(m, rec.trace_id, "request", **extra) for m in new if not m.blank]
            if reply is None:
                unanswered.append(rec.trace_id)
            elif reply.blank:  # a whitespace-only reply is dropped, as MLflow's session judges drop it
                blank.append(rec.trace_id)
            else:
                own = {e.name: e.value for e in rec.expectations  # the trace's own: kept on its reply turn
                       if e.source == EXPECTATION_SOURCE and not e.session_level}
                added.append(_turn(reply, rec.trace_id, "response",
                                   **({TURN_EXPECTATIONS_KEY: own} if own and sid is not None else {})))
            if added:
                turns += added
                used.append(rec.trace_id)
        if not turns:
            if blank:
                out.errors.append(InputError(tracking_uri, None, recs[0].trace_id, "response",  # type: ignore[arg-type]
                                             f"{where}nothing to judge: every message is blank"))
            continue
        cid = sid if sid is not None else recs[0].trace_id
        metadata: dict[str, object] = {
            "mlflow_experiment": experiment,
            "mlflow_experiment_id": experiment_id,
            SESSION_ID_KEY: sid,
            FIRST_TRACE_KEY: recs[0].trace_id,  # where session-level assessments go
            "mlflow_trace_ids": used,
        }
        optional = {"mlflow_blank_replies": blank, "mlflow_no_response": unanswered,  # no reply (e.g. ERROR)
                    EXPECTATIONS_KEY: session_expectations(sid, recs)}
        metadata.update({k: v for k, v in optional.items() if v})
        conversation = Conversation.model_validate({"id": cid, "turns": turns, "metadata": metadata})
        out.append(LoadedConversation(conversation=conversation, source=f"mlflow:{experiment}/{cid}",
                                      format=FORMAT, options={}))
    return out


def load_sessions(
    tracking_uri: str,
    experiment: str,
    *,
    session_key: str = SESSION_KEY,
    max_traces: int | None = None,
    filter_string: str | None = None,
    request_key: str | None = None,
    response_key: str | None = None,
) -> SessionList:
    """Read an experiment's traces as conversations, one per session (grouped by ``session_key``,
    ordered by start time; traces without a session are conversations of their own). An unreadable
    trace, an unknown experiment or an unreachable server is an :class:`~judgegraph.loaders.InputError`
    in ``.errors`` and the rest is read. ``max_traces`` reads the newest N traces and the rest of
    every session they touch; ``filter_string`` goes to MLflow's ``search_traces``. The shapes read,
    the metadata kept and where judgegraph differs from MLflow: docs/mlflow.md, "How sessions are built"."""
    if max_traces is not None and max_traces < 1:
        raise ValueError(f"max_traces must be >= 1, got {max_traces}")
    why = unreachable(tracking_uri)
    if why:
        return SessionList(errors=[InputError(tracking_uri, None, None, None, why)])
    client = import_mlflow().MlflowClient(tracking_uri)
    try:
        experiment_id = find_experiment(client, experiment)
    except Exception as exc:  # noqa: BLE001 - reported as an input error, like an unreadable file
        why = f"cannot read experiment {experiment!r}: {exc}"
        return SessionList(errors=[InputError(tracking_uri, None, None, "experiment", why)])
    if experiment_id is None:
        why = f"experiment {experiment!r} not found"
        return SessionList(errors=[InputError(tracking_uri, None, None, "experiment", why)])
    try:
        traces = _search(client, experiment_id, filter_string, max_traces)
        if max_traces is not None and len(traces) >= max_traces:
            traces = _complete_sessions(client, experiment_id, filter_string, session_key, traces)
    except Exception as exc:  # noqa: BLE001
        return SessionList(errors=[InputError(tracking_uri, None, None, None, f"cannot search traces: {exc}")],
                           experiment_id=experiment_id)
    errors: list[InputError] = []
    records = []
    for trace in traces:
        try:
            records.append(_record(trace, session_key))
        except Exception as exc:  # noqa: BLE001 - one odd trace does not stop the rest
            tid = getattr(getattr(trace, "info", None), "trace_id", None)
            errors.append(InputError(tracking_uri, None, tid, None, f"unreadable trace: {exc}"))
    out = build_sessions(records, tracking_uri=tracking_uri, experiment=experiment, experiment_id=experiment_id,
                         request_key=request_key, response_key=response_key)
    out.errors[:0] = errors
    return out


def _complete_sessions(client: MlflowClient, experiment_id: str, filter_string: str | None, session_key: str,
                       traces: list[Trace]) -> list[Trace]:
    """Add the traces of every session seen that the limit cut off."""
    have = {t.info.trace_id for t in traces}
    sessions = dict.fromkeys(sid for t in traces if (sid := (t.info.trace_metadata or {}).get(session_key)))
    out = list(traces)
    for sid in sessions:
        if "'" in sid or "`" in session_key:
            continue  # not expressible in a filter string; read as far as the limit went
        where = f"metadata.`{session_key}` = '{sid}'"
        if filter_string:
            where = f"({filter_string}) AND {where}"
        for t in _search(client, experiment_id, where, None):
            if t.info.trace_id not in have:
                have.add(t.info.trace_id)
                out.append(t)
    return out


