"""MLflow sessions in, assessments out.

* :func:`load_sessions` reads the traces of an MLflow experiment, groups them
  into sessions by the trace metadata key ``mlflow.trace.session``, orders each
  session by time and builds one :class:`~judgegraph.conversation.Conversation`
  per session from each trace's request (the user's input) and response (the
  assistant's output). A trace whose request carries the whole message history
  adds only what is new. Every turn keeps the id of its trace in
  ``turn.metadata["mlflow_trace_id"]``.
* :func:`log_assessments` writes judgegraph's results back as MLflow feedback
  assessments: one per metric on the session's first trace, and one per
  verdict (``<metric>/turn``) on the trace the verdict is about. A judge error
  is written as feedback carrying an error, never as a value.

MLflow is imported only when these functions run (``pip install
"judgegraph[mlflow]"``); before importing it, ``MLFLOW_DISABLE_TELEMETRY`` is
set to ``true`` unless you set it yourself, so reading and writing traces sends
nothing beyond the tracking server you name.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..conversation import Conversation
from ..loaders import InputError, LoadedConversation

__all__ = [
    "SESSION_KEY",
    "TRACE_ID_KEY",
    "AssessmentLog",
    "SessionList",
    "TraceRecord",
    "build_sessions",
    "load_sessions",
    "log_assessments",
]

SESSION_KEY = "mlflow.trace.session"
TRACE_ID_KEY = "mlflow_trace_id"  # turn metadata: the trace the turn was read from
PART_KEY = "mlflow_part"  # turn metadata: "request" (the trace's input) or "response" (its output)
FORMAT = "mlflow"
PAGE_SIZE = 200

# Where the user's message is looked for in a trace's inputs (a dict of the traced
# function's arguments), and the reply in its outputs, when the shape is not a chat one.
REQUEST_KEYS = ("messages", "input", "question", "query", "prompt", "message", "user_input",
                "user_message", "text", "content", "request", "inputs")
RESPONSE_KEYS = ("output", "answer", "response", "content", "text", "result", "reply", "completion",
                 "generation", "message", "outputs")
ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant", "model": "assistant",
         "system": "system", "developer": "system", "tool": "tool", "function": "tool"}
_DEPTH = 3  # how deep a wrapped value (``{"request": {"messages": [...]}}``) is unwrapped


# --------------------------------------------------------------------------- results


class SessionList(list):
    """What :func:`load_sessions` returns: a ``list`` of
    :class:`~judgegraph.loaders.LoadedConversation` (one per session, oldest
    first) with the problems found on the side, like
    :class:`~judgegraph.loaders.LoadResult`:

    * ``errors``: one :class:`~judgegraph.loaders.InputError` per unreadable
      trace (``file`` = tracking URI, ``record`` = trace id, ``field`` =
      ``request`` / ``response`` / ``experiment``);
    * ``experiment_id``, ``traces`` (how many traces were read).
    """

    def __init__(self, items: Iterable[LoadedConversation] = (), *, errors: list[InputError] | None = None,
                 experiment_id: str | None = None, traces: int = 0) -> None:
        super().__init__(items)
        self.errors: list[InputError] = list(errors or [])
        self.experiment_id = experiment_id
        self.traces = traces


@dataclass
class AssessmentLog:
    """What :func:`log_assessments` wrote."""

    session: int = 0  # session-level feedback (one per metric result), on each session's first trace
    turn: int = 0  # per-verdict feedback ("<metric>/turn") on the verdict's trace
    errors: int = 0  # of those, feedback carrying a judge error instead of a value
    skipped: list[str] = field(default_factory=list)  # not written, and why
    failures: list[str] = field(default_factory=list)  # writes MLflow refused or that failed
    assessment_ids: list[str] = field(default_factory=list)

    @property
    def written(self) -> int:
        return self.session + self.turn

    def __str__(self) -> str:
        parts = [f"{self.written} assessments written to MLflow ({self.session} session-level, {self.turn} per-turn"
                 + (f", {self.errors} judge errors" if self.errors else "") + ")"]
        if self.skipped:
            parts.append(f"{len(self.skipped)} skipped")
        if self.failures:
            parts.append(f"{len(self.failures)} failed")
        return "; ".join(parts)


# --------------------------------------------------------------------------- MLflow access


def _import_mlflow() -> Any:
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # read by mlflow when it is first imported
    try:
        import mlflow
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError('the MLflow integration needs MLflow: pip install "judgegraph[mlflow]"') from exc
    return mlflow


def _unreachable(uri: str, timeout: float = 5.0) -> str | None:
    """Why an http(s) tracking server cannot be reached, or None. MLflow's own
    client retries a refused connection for minutes; this answers at once."""
    if not uri.startswith(("http://", "https://")):
        return None
    try:
        urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout).close()
    except urllib.error.HTTPError:
        return None  # it answered
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return f"cannot reach the MLflow tracking server: {getattr(exc, 'reason', exc)}"
    return None


def _experiment_id(client: Any, experiment: str) -> str | None:
    exp = client.get_experiment_by_name(experiment)
    if exp is None and str(experiment).isdigit():
        try:
            exp = client.get_experiment(str(experiment))
        except Exception:  # noqa: BLE001 - not found
            exp = None
    return None if exp is None else exp.experiment_id


def _search(client: Any, experiment_id: str, filter_string: str | None, limit: int | None) -> list[Any]:
    """Traces of the experiment, newest first, all pages (up to ``limit``)."""
    import inspect

    where = ({"locations": [experiment_id]} if "locations" in inspect.signature(client.search_traces).parameters
             else {"experiment_ids": [experiment_id]})
    out: list[Any] = []
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


# --------------------------------------------------------------------------- traces -> records


@dataclass(frozen=True)
class TraceRecord:
    """What judgegraph needs of one trace: its id, session, start time (ns),
    the root span's inputs and outputs, and its state."""

    trace_id: str
    session: str | None
    timestamp_ns: int
    inputs: Any = None
    outputs: Any = None
    state: str = "OK"
    has_root: bool = True


def _record(trace: Any, session_key: str) -> TraceRecord:
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
    )


# --------------------------------------------------------------------------- request / response shapes


class _Unreadable(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class _Msg:
    role: str
    content: str
    tool_calls: tuple[dict[str, Any], ...] = ()
    meta: tuple[tuple[str, Any], ...] = ()

    @property
    def key(self) -> tuple[str, str, tuple[str, ...]]:
        """What two messages must share to be the same message of a history."""
        return (self.role, " ".join(self.content.split()), tuple(str(c.get("name")) for c in self.tool_calls))


def _text(value: Any, path: str) -> str:
    """Message content: a string, or a list of parts whose text parts are joined."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return value["text"]
    if isinstance(value, list):
        texts = []
        for part in value:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and part.get("type", "text") in ("text", "input_text", "output_text") \
                    and isinstance(part.get("text"), str):
                texts.append(part["text"])
            # image, audio, file, refusal ... parts are skipped
        return "\n".join(texts)
    raise _Unreadable(path, f"content must be a string or a list of parts (got {type(value).__name__})")


def _tool_call(raw: Any) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        return None
    fn = raw.get("function") if isinstance(raw.get("function"), dict) else raw
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        return None
    args = fn.get("arguments", fn.get("args"))
    if isinstance(args, str):
        try:
            parsed = json.loads(args)
            args = parsed if isinstance(parsed, dict) else args
        except ValueError:
            pass
    out: dict[str, Any] = {"name": name, "arguments": args if isinstance(args, (dict, str)) or args is None
                           else json.dumps(args)}
    if raw.get("id") is not None:
        out["id"] = str(raw["id"])
    return out


def _role_of(item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    role = item.get("role", item.get("type"))
    return ROLES.get(role) if isinstance(role, str) else None


def _is_message(item: Any) -> bool:
    return _role_of(item) is not None and ("content" in item or "tool_calls" in item)


def _message(item: dict[str, Any], path: str) -> _Msg:
    role = _role_of(item)
    assert role is not None
    calls = tuple(c for c in (_tool_call(c) for c in (item.get("tool_calls") or [])) if c)
    meta = tuple((k, item[k]) for k in ("name", "tool_call_id") if isinstance(item.get(k), str))
    return _Msg(role, _text(item.get("content"), f"{path}.content"), calls, meta)


def _messages(items: list[Any], path: str) -> list[_Msg]:
    """Chat messages (OpenAI / LangChain dicts, Responses API items); items that
    are not messages (function calls, reasoning) are skipped."""
    out = []
    for i, item in enumerate(items):
        if _is_message(item):
            out.append(_message(item, f"{path}.{i}"))
    return out


def _request_messages(value: Any, path: str = "request", depth: int = 0) -> list[_Msg]:
    """The messages a trace's inputs hold: the user's message, or a whole history."""
    if isinstance(value, str):
        return [_Msg("user", value)]
    if isinstance(value, list):
        msgs = _messages(value, path)
        if msgs:
            return msgs
        raise _Unreadable(path, "a list of inputs that holds no chat message")
    if isinstance(value, dict) and depth < _DEPTH:
        if _is_message(value):
            return [_message(value, path)]
        for key in REQUEST_KEYS:
            if key in value and isinstance(value[key], (str, list, dict)):
                try:
                    return _request_messages(value[key], f"{path}.{key}", depth + 1)
                except _Unreadable:
                    continue
        found = _only_value(value)
        if found is not None:
            return _request_messages(found[1], f"{path}.{found[0]}", depth + 1)
        keys = ", ".join(map(str, value)) or "(none)"
        raise _Unreadable(path, f"cannot tell which input is the user's message (keys: {keys}); "
                                "pass request_key= (--request-key) to name it")
    if value is None:
        raise _Unreadable(path, "the trace has no inputs")
    raise _Unreadable(path, f"cannot read a user message from a {type(value).__name__}")


def _only_value(value: dict[str, Any]) -> tuple[str, Any] | None:
    """The one entry that can hold a message: the only entry, or the only
    string/list/dict entry that is not an id (``session_id``, ``user_id``)."""
    if len(value) == 1:
        return next(iter(value.items()))
    useful = [(k, v) for k, v in value.items() if isinstance(v, (str, list, dict))
              and not (isinstance(k, str) and (k.lower() == "id" or k.endswith(("_id", "Id", "_ID"))))]
    return useful[0] if len(useful) == 1 else None


def _reply(value: Any, path: str = "response", depth: int = 0) -> _Msg:
    """The assistant's reply in a trace's outputs."""
    if isinstance(value, str):
        return _Msg("assistant", value)
    if isinstance(value, list):
        msgs = _messages(value, path)
        if msgs:
            return _last_assistant(msgs, path)
        if value and depth < _DEPTH:
            return _reply(value[0], f"{path}.0", depth + 1)  # e.g. a pyfunc's [prediction]
        raise _Unreadable(path, "an empty list of outputs")
    if isinstance(value, dict) and depth < _DEPTH:
        choices = value.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            first = choices[0]
            if isinstance(first.get("message"), dict):
                return _as_assistant(_message({"role": "assistant", **first["message"]}, f"{path}.choices.0.message"))
            if isinstance(first.get("text"), str):
                return _Msg("assistant", first["text"])
        if _is_message(value):
            return _as_assistant(_message(value, path))
        if isinstance(value.get("messages"), list):
            return _last_assistant(_messages(value["messages"], f"{path}.messages"), f"{path}.messages")
        if isinstance(value.get("output"), list):  # OpenAI Responses API
            return _last_assistant(_messages(value["output"], f"{path}.output"), f"{path}.output")
        for key in RESPONSE_KEYS:
            if key in value and isinstance(value[key], (str, list, dict)):
                try:
                    return _reply(value[key], f"{path}.{key}", depth + 1)
                except _Unreadable:
                    continue
        found = _only_value(value)
        if found is not None:
            return _reply(found[1], f"{path}.{found[0]}", depth + 1)
        keys = ", ".join(map(str, value)) or "(none)"
        raise _Unreadable(path, f"cannot tell which output is the assistant's reply (keys: {keys}); "
                                "pass response_key= (--response-key) to name it")
    if value is None:
        raise _Unreadable(path, "the trace has no outputs")
    raise _Unreadable(path, f"cannot read a reply from a {type(value).__name__}")


def _as_assistant(msg: _Msg) -> _Msg:
    return msg if msg.role == "assistant" else _Msg("assistant", msg.content, msg.tool_calls, msg.meta)


def _last_assistant(msgs: list[_Msg], path: str) -> _Msg:
    for msg in reversed(msgs):
        if msg.role == "assistant":
            return msg
    raise _Unreadable(path, "no assistant message in the outputs")


def _pick(value: Any, key: str | None, path: str) -> Any:
    if key is None:
        return value
    if not isinstance(value, dict) or key not in value:
        keys = ", ".join(map(str, value)) if isinstance(value, dict) else type(value).__name__
        raise _Unreadable(path, f"no {key!r} in the trace's {'inputs' if path == 'request' else 'outputs'} "
                                f"(has: {keys})")
    return value[key]


# --------------------------------------------------------------------------- history de-duplication


def new_messages(prior: list[_Msg], request: list[_Msg]) -> tuple[list[_Msg], bool]:
    """What a trace's request adds to the conversation so far.

    The request's non-system messages are matched against the end of the
    conversation: the longest prefix of the request that equals a suffix of
    the conversation is history already there (a history trimmed at the
    front still matches), and only what follows it is new. System messages
    already in the conversation are not repeated. When the request holds an
    assistant message but does not line up with the conversation at all (a
    rewritten or summarised history), only the messages after its last
    assistant message are taken, and the second value is True.
    """
    if not prior:
        return list(request), False
    seen_system = {m.key for m in prior if m.role == "system"}
    extra_system = [m for m in request if m.role == "system" and m.key not in seen_system]
    body = [m for m in request if m.role != "system"]
    keys = [m.key for m in body]
    tail = [m.key for m in prior if m.role != "system"]
    for k in range(min(len(keys), len(tail)), 0, -1):
        if keys[:k] == tail[-k:]:
            return extra_system + body[k:], False
    if any(m.role == "assistant" for m in body):
        last = max(i for i, m in enumerate(body) if m.role == "assistant")
        return extra_system + body[last + 1:], True
    return extra_system + body, False


def _turn(msg: _Msg, trace_id: str, part: str, **extra: Any) -> dict[str, Any]:
    meta = {TRACE_ID_KEY: trace_id, PART_KEY: part, **dict(msg.meta), **extra}
    return {"role": msg.role, "content": msg.content, "tool_calls": [dict(c) for c in msg.tool_calls],
            "metadata": meta}


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
    groups: dict[str, list[TraceRecord]] = {}
    sessionless: list[TraceRecord] = []
    for rec in records:
        if rec.session:
            groups.setdefault(rec.session, []).append(rec)
        else:
            sessionless.append(rec)
    units = [(sid, sorted(recs, key=_order)) for sid, recs in groups.items()]
    units += [(None, [rec]) for rec in sessionless]
    units.sort(key=lambda u: _order(u[1][0]))

    out = SessionList(experiment_id=experiment_id)
    for sid, recs in units:
        out.traces += len(recs)
        turns: list[dict[str, Any]] = []
        prior: list[_Msg] = []
        used: list[str] = []
        for rec in recs:
            try:
                if not rec.has_root:
                    raise _Unreadable("request", "the trace has no spans")
                request = _request_messages(_pick(rec.inputs, request_key, "request"),
                                            "request" if request_key is None else f"request.{request_key}")
                if rec.outputs is None and rec.state != "OK":
                    raise _Unreadable("response", f"the trace ended in state {rec.state} with no response")
                reply = _reply(_pick(rec.outputs, response_key, "response"),
                               "response" if response_key is None else f"response.{response_key}")
            except _Unreadable as exc:
                where = f"session {sid!r}: " if sid else ""
                out.errors.append(InputError(tracking_uri, None, rec.trace_id, exc.field,  # type: ignore[arg-type]
                                             f"{where}{exc.message}"))
                continue
            new, mismatch = new_messages(prior, request)
            extra = {"mlflow_history_mismatch": True} if mismatch else {}
            turns += [_turn(m, rec.trace_id, "request", **extra) for m in new]
            turns.append(_turn(reply, rec.trace_id, "response"))
            prior += new + [reply]
            used.append(rec.trace_id)
        if not turns:
            continue
        cid = sid if sid is not None else recs[0].trace_id
        conversation = Conversation.model_validate({
            "id": cid,
            "turns": turns,
            "metadata": {
                "mlflow_experiment": experiment,
                "mlflow_experiment_id": experiment_id,
                "mlflow_session": sid,
                "mlflow_first_trace_id": recs[0].trace_id,  # where session-level assessments go
                "mlflow_trace_ids": used,
            },
        })
        out.append(LoadedConversation(conversation=conversation, source=f"mlflow:{experiment}/{cid}",
                                      format=FORMAT, options={}))
    return out


def _order(rec: TraceRecord) -> tuple[int, str]:
    return (rec.timestamp_ns, rec.trace_id)


# --------------------------------------------------------------------------- load_sessions


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
    """Read an experiment's traces as conversations, one per session.

    * Traces are grouped by the trace metadata key ``session_key`` (default
      ``mlflow.trace.session``, which ``mlflow.update_current_trace(session_id=...)``
      sets; a trace tag of that name also counts), and ordered by their root
      span's start time (nanoseconds; the trace id breaks ties).
    * Each trace adds its request's new messages (the user's message; see
      :func:`new_messages` for requests that carry the whole history) and its
      response as one assistant turn. Requests and responses may be a string,
      ``{"messages": [...]}`` (OpenAI or LangChain messages), OpenAI Responses
      ``input``/``output`` items, a chat completion (``choices[0].message``), a
      message dict, or a dict of the traced function's arguments in which the
      message is found by name (``question``, ``query``, ``prompt``, ...) or as
      the only text; ``request_key`` / ``response_key`` name the argument when
      that is ambiguous.
    * A trace with no session becomes a conversation of its own (id = trace id).
    * The conversation id is the session id; ``source`` is
      ``mlflow:<experiment>/<session id>``; each turn has
      ``metadata["mlflow_trace_id"]`` (and ``mlflow_part``: ``request`` or
      ``response``).
    * An unreadable trace becomes an :class:`~judgegraph.loaders.InputError`
      in ``.errors`` (file = tracking URI, record = trace id, field) and the
      rest of its session is still read. So do an unknown experiment and an
      unreachable server (with no conversations).
    * ``max_traces``: read the newest N traces, then the rest of every session
      they touch, so no session is judged in part. ``filter_string`` is passed
      to MLflow's ``search_traces`` (e.g. ``"timestamp_ms > 1700000000000"``).
    """
    if max_traces is not None and max_traces < 1:
        raise ValueError(f"max_traces must be >= 1, got {max_traces}")
    why = _unreachable(tracking_uri)
    if why:
        return SessionList(errors=[InputError(tracking_uri, None, None, None, why)])
    _import_mlflow()
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri)
    try:
        experiment_id = _experiment_id(client, experiment)
    except Exception as exc:  # noqa: BLE001 - reported as an input error, like an unreadable file
        return SessionList(errors=[InputError(tracking_uri, None, None, "experiment", f"cannot read experiment {experiment!r}: {exc}")])
    if experiment_id is None:
        return SessionList(errors=[InputError(tracking_uri, None, None, "experiment", f"experiment {experiment!r} not found")])
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


def _complete_sessions(client: Any, experiment_id: str, filter_string: str | None, session_key: str,
                       traces: list[Any]) -> list[Any]:
    """Add the traces of every session seen that the limit cut off."""
    have = {t.info.trace_id for t in traces}
    sessions = []
    for t in traces:
        sid = (t.info.trace_metadata or {}).get(session_key)
        if sid and sid not in sessions:
            sessions.append(sid)
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


# --------------------------------------------------------------------------- log_assessments


def _meta(**values: Any) -> dict[str, str]:
    """MLflow keeps assessment metadata as strings: JSON-encode everything else."""
    return {k: v if isinstance(v, str) else json.dumps(v, default=str) for k, v in values.items()}


def _iter_results(outcomes: Any) -> Iterable[tuple[str, dict[str, Any], str | None]]:
    """(conversation id, {metric: MetricResult}, run error) from a RunSummary, a
    list of ConversationOutcome or MetricResult, or {conversation id: {metric: result}}."""
    outcomes = getattr(outcomes, "outcomes", outcomes)
    if isinstance(outcomes, Mapping):
        for cid, results in outcomes.items():
            yield str(cid), dict(results), None
        return
    flat: dict[str, dict[str, Any]] = {}
    for item in outcomes:
        if hasattr(item, "results") and hasattr(item, "conversation_id"):
            yield item.conversation_id, dict(item.results), getattr(item, "error", None)
        elif hasattr(item, "key") and hasattr(item, "conversation_id"):
            flat.setdefault(item.conversation_id, {})[item.key] = item
        else:
            raise TypeError(f"log_assessments: cannot read results from {type(item).__name__}")
    for cid, results in flat.items():
        yield cid, results, None


def _conversations(sessions: Any) -> dict[str, Conversation]:
    out: dict[str, Conversation] = {}
    for item in sessions:
        conv = getattr(item, "conversation", item)
        if isinstance(conv, Conversation):
            out[conv.id] = conv
        else:
            conv = Conversation.model_validate(conv)
            out[conv.id] = conv
    return out


def _source(judge: str, source_id: str | None) -> Any:
    from mlflow.entities import AssessmentSource, AssessmentSourceType

    kind = AssessmentSourceType.LLM_JUDGE if judge.startswith("llm") else AssessmentSourceType.CODE
    return AssessmentSource(source_type=kind, source_id=source_id or judge or "judgegraph")


def log_assessments(
    tracking_uri: str,
    outcomes: Any,
    sessions: Iterable[LoadedConversation | Conversation],
    *,
    source_id: str | None = None,
    per_turn: bool = True,
    max_workers: int = 4,
) -> AssessmentLog:
    """Write judgegraph's results back to MLflow as feedback assessments.

    ``outcomes``: a :class:`~judgegraph.runner.RunSummary`, a list of
    ``ConversationOutcome`` or ``MetricResult``, or ``{conversation id: {metric:
    MetricResult}}``. ``sessions``: the conversations :func:`load_sessions`
    returned (they say which trace each turn came from); results of other
    conversations are skipped.

    * One feedback per metric result on the session's **first trace** (as MLflow
      does for its own session-level judges): name = metric key, value =
      ``result.value`` if the metric has one (e.g. ``"resolved"``), else the
      score (else ``passed``), rationale = the reason, metadata = score,
      threshold, passed, status, judge, judge_errors, conversation_id,
      judgegraph_version (JSON-encoded strings).
    * With ``per_turn``, one feedback per verdict, named ``<metric>/turn``, on
      the trace holding the verdict's last turn: value = the verdict (``"yes"``
      / ``"no"`` ...), rationale = its reason, metadata = turns, window, score,
      attempts.
    * A judge error is never a value: a result with status ``error`` and a
      verdict the judge could not make are logged as feedback carrying an
      ``AssessmentError`` (code ``JUDGE_ERROR``) and no value. A result that
      could be scored despite some judge errors keeps its value; its metadata
      counts them and the failed verdicts carry the errors.
    * ``not_applicable`` results (nothing to judge) are not written.
    * The source is ``LLM_JUDGE`` for an LLM judge and ``CODE`` for the offline
      embedding judge, with ``source_id`` (default: the judge's name, e.g.
      ``llm:gpt-4.1-mini``).

    MLflow keeps every assessment: running this twice writes them twice.
    """
    from .. import __version__

    _import_mlflow()
    from mlflow.entities import AssessmentError, Feedback
    from mlflow.tracing.client import TracingClient

    log = AssessmentLog()
    why = _unreachable(tracking_uri)
    if why:
        log.failures.append(why)
        return log
    convs = _conversations(sessions)
    jobs: list[tuple[str, str, Any]] = []  # (kind, trace id, Feedback)

    for cid, results, run_error in _iter_results(outcomes):
        conv = convs.get(cid)
        first = conv.metadata.get("mlflow_first_trace_id") if conv is not None else None
        if conv is None or not first:
            log.skipped.extend(f"{cid}/{key}: not an MLflow session" for key in results or ["(run)"])
            continue
        if run_error:
            jobs.append(("session", first, Feedback(
                name="judgegraph", source=_source("", source_id),
                error=AssessmentError(error_code="JUDGEGRAPH_RUN_ERROR", error_message=run_error),
                metadata=_meta(conversation_id=cid, judgegraph_version=__version__))))
        for key, result in results.items():
            if result.status == "not_applicable":
                log.skipped.append(f"{cid}/{key}: not applicable ({result.reason or 'nothing to judge'})")
                continue
            source = _source(result.judge, source_id)
            meta = _meta(score=result.score, threshold=result.threshold, passed=result.passed, status=result.status,
                         judge=result.judge, judge_errors=len(result.errors), conversation_id=cid,
                         judgegraph_version=__version__)
            value = result.value if result.value is not None else result.score if result.score is not None \
                else result.passed
            if result.status == "error" or value is None:
                detail = "; ".join(f"{e.where}: {e.message}" for e in result.errors[:5]) or result.reason
                feedback = Feedback(name=key, source=source, rationale=result.reason or None, metadata=meta,
                                    error=AssessmentError(error_code="JUDGE_ERROR",
                                                          error_message=detail or "the judge could not decide"))
            else:
                feedback = Feedback(name=key, source=source, value=value, rationale=result.reason or None,
                                    metadata=meta)
            jobs.append(("session", first, feedback))
            if per_turn:
                for verdict in result.verdicts:
                    trace_id = _trace_of(conv, verdict.turns)
                    if trace_id is None:
                        continue
                    vmeta = _meta(turns=list(verdict.turns), conversation_id=cid, attempts=verdict.attempts,
                                  **({"window": verdict.window} if hasattr(verdict, "window") else {}),
                                  **({"score": verdict.score} if verdict.score is not None else {}),
                                  judgegraph_version=__version__)
                    if verdict.verdict is None:
                        jobs.append(("turn", trace_id, Feedback(
                            name=f"{key}/turn", source=source, metadata=vmeta, rationale=verdict.reason or None,
                            error=AssessmentError(error_code="JUDGE_ERROR",
                                                  error_message=verdict.error or "no verdict"))))
                    else:
                        jobs.append(("turn", trace_id, Feedback(
                            name=f"{key}/turn", source=source, value=verdict.verdict,
                            rationale=verdict.reason or None, metadata=vmeta)))

    client = TracingClient(tracking_uri)

    def write(job: tuple[str, str, Any]) -> tuple[str, Any, str | None]:
        kind, trace_id, feedback = job
        try:
            return kind, client.log_assessment(trace_id, feedback), None
        except Exception as exc:  # noqa: BLE001 - reported, the other writes go on
            return kind, feedback, f"{trace_id} {feedback.name}: {exc}"

    with ThreadPoolExecutor(max_workers=max(1, max_workers)) as pool:
        for kind, written, failure in pool.map(write, jobs):
            if failure:
                log.failures.append(failure)
                continue
            if kind == "session":
                log.session += 1
            else:
                log.turn += 1
            if getattr(written, "error", None) is not None:
                log.errors += 1
            if getattr(written, "assessment_id", None):
                log.assessment_ids.append(written.assessment_id)
    return log


def _trace_of(conv: Conversation, turns: Iterable[int]) -> str | None:
    """The trace of the last of these turns that came from a trace."""
    for index in sorted(turns, reverse=True):
        if 0 <= index < len(conv.turns):
            trace_id = conv.turns[index].metadata.get(TRACE_ID_KEY)
            if trace_id:
                return str(trace_id)
    return None
