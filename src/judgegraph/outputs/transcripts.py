"""Reading judge transcripts back: what the judge was asked and answered for one
verdict (``transcript_of(result, window=3)``; from the shell: ``judgegraph show``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..core.nodes import turn_label

if TYPE_CHECKING:
    from ..data.results import JudgeAttempt, MetricResult


def _as_dict(obj: object) -> dict[str, Any]:
    if isinstance(obj, dict):
        return obj
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return dict(vars(obj))


def verdicts_of(result: MetricResult | dict[str, Any], window: int | None = None) -> list[dict[str, Any]]:
    """The verdicts of ``result`` (a MetricResult or its JSON dict); with ``window``, the one of window N
    (without windows, the N-th, 0-based); a ``LookupError`` naming what exists."""
    verdicts = [_as_dict(v) for v in (_as_dict(result).get("verdicts") or [])]
    if window is None:
        return verdicts
    if any("window" in v for v in verdicts):
        chosen = [v for v in verdicts if v.get("window") == window]
        if not chosen:
            have = ", ".join(str(v.get("window")) for v in verdicts) or "none"
            raise LookupError(f"no verdict for window {window} (windows: {have})")
        return chosen
    if not 0 <= window < len(verdicts):
        raise LookupError(f"no verdict {window}: this result has {len(verdicts)} verdicts (0 to {len(verdicts) - 1})")
    return [verdicts[window]]


def _label(verdict: dict[str, Any], index: int) -> str:
    if "window" in verdict:
        where = f"window {verdict['window']}"
    else:
        where = f"verdict {verdict['id']}" if verdict.get("id") not in (None, "") else f"verdict {index}"
    turns = verdict.get("turns") or []
    if turns:  # 1-based, as the table, the HTML report, reasons and the review payload number turns
        where += f" ({turn_label(turns)})"
    answer = verdict.get("verdict")
    status = f"error: {verdict.get('error')}" if answer is None and verdict.get("error") else f"verdict: {answer}"
    return f"{where} · {status}"


def format_attempts(attempts: Sequence[JudgeAttempt | dict[str, Any]]) -> str:
    """The attempts as text: each message sent (role, then its exact content), then the raw reply."""
    lines: list[str] = []
    for i, raw in enumerate(attempts, start=1):
        a = _as_dict(raw)
        usage = a.get("usage") or {}
        facts = [a.get("step") or "", a.get("model") or ""]
        if a.get("latency_s") is not None:
            facts.append(f"{a['latency_s']:.2f}s")
        facts.append(f"{usage.get('input_tokens', 0)} tokens in / {usage.get('output_tokens', 0)} out")
        if usage.get("cached_input_tokens"):
            facts.append(f"{usage['cached_input_tokens']} in from the provider's prompt cache")
        if a.get("cached"):
            facts.append("from the cache (no call)")
        if a.get("shared"):
            facts.append("shared: one request for several verdicts (dense mode)")
        settings = a.get("settings") or {}
        if settings:
            facts.append(", ".join(f"{k}={v}" for k, v in sorted(settings.items())))
        lines.append(f"── attempt {i}: {' · '.join(f for f in facts if f)}")
        for m in a.get("messages") or []:
            lines.append(f"[{m.get('role', '?')}]")
            lines.append(str(m.get("content", "")))
        lines.append("[reply]")
        lines.append(a["reply"] if a.get("reply") is not None else "(no reply)")
        if a.get("error"):
            lines.append(f"[error] {a['error']}")
    return "\n".join(lines)


def transcript_of(result: MetricResult | dict[str, Any], window: int | None = None) -> str:
    """A result's judge transcripts as text (all verdicts, or that of ``window``): per attempt,
    the exact prompt sent, then the raw reply."""
    data = _as_dict(result)
    parts = [f"{data.get('conversation_id')} · {data.get('key')} · score {data.get('score')} · {data.get('status')}"]
    rejudged = (data.get("details") or {}).get("rejudged") or {}
    if isinstance(judges := rejudged.get("judges"), dict):  # judgegraph rejudge kept some verdicts of the old judge
        parts.append("verdicts by two judges: " + "; ".join(f"{name}: {', '.join(map(str, ids))}"
                                                           for name, ids in judges.items()))
    shared = data.get("transcript") or []
    if shared and window is None:
        parts.append("")
        parts.append("═ requests the verdicts were judged from (extractions and the like)")
        parts.append(format_attempts(shared))
    all_verdicts = [_as_dict(v) for v in (data.get("verdicts") or [])]
    printed: set[str] = set()  # the shared requests (dense mode) shown in full already
    for v in verdicts_of(data, window):
        index = all_verdicts.index(v) if v in all_verdicts else 0
        parts.append("")
        parts.append(f"═ {_label(v, index)}")
        if v.get("reason"):
            parts.append(f"reason: {v['reason']}")
        attempts = [_as_dict(a) for a in v.get("transcript") or []]
        again = [a for a in attempts if a.get("shared") and a.get("request") in printed]
        printed.update(a["request"] for a in attempts if a.get("shared") and a.get("request"))
        if again:
            parts.append(f"(judged in a dense request shared with other verdicts, shown above: "
                         f"{', '.join(str(a['request'])[:12] for a in again)})")
        fresh = [a for a in attempts if a not in again]
        if fresh:
            parts.append(format_attempts(fresh))
        elif again:
            continue
        elif shared:
            parts.append("(judged in a request shared with other verdicts: its transcript is above)")
        else:
            parts.append("(no transcript kept: the run used --transcripts errors/none, or the judge recorded none)")
    if len(parts) == 1:
        parts.append("(no verdicts, and no judge request was made)")
    return "\n".join(parts)
