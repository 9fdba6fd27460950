"""Reading judge transcripts back: what the judge was asked and answered for one verdict (``transcript_of(result,
window=3)``; from the shell: ``judgegraph show``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from ..core.nodes import turn_label
from ..data.results import MetricResult
from ..runs.record import AttemptLine, ResultLine, UsageLine, VerdictLine


def _line(result: MetricResult | ResultLine | Mapping[str, object]) -> ResultLine:
    """``result`` as a results file holds it (a MetricResult dumped as JSON, a line's dict read as one)."""
    if isinstance(result, ResultLine):
        return result
    return ResultLine.model_validate(result.model_dump(mode="json") if isinstance(result, BaseModel) else result)


def _window(verdict: VerdictLine) -> object:
    return (verdict.model_extra or {}).get("window")


def verdicts_of(result: MetricResult | ResultLine | Mapping[str, object],
                window: int | None = None) -> list[VerdictLine]:
    """The verdicts of ``result`` (a MetricResult, a results line's result or its JSON dict); with ``window``, the
    one of window N (without windows, the N-th, 0-based); a ``LookupError`` naming what exists."""
    verdicts = _line(result).verdicts
    if window is None:
        return verdicts
    if any("window" in (v.model_extra or {}) for v in verdicts):
        chosen = [v for v in verdicts if _window(v) == window]
        if not chosen:
            have = ", ".join(str(_window(v)) for v in verdicts) or "none"
            raise LookupError(f"no verdict for window {window} (windows: {have})")
        return chosen
    if not 0 <= window < len(verdicts):
        raise LookupError(f"no verdict {window}: this result has {len(verdicts)} verdicts (0 to {len(verdicts) - 1})")
    return [verdicts[window]]


def _label(verdict: VerdictLine, index: int) -> str:
    if "window" in (verdict.model_extra or {}):
        where = f"window {_window(verdict)}"
    else:
        where = f"verdict {verdict.id}" if verdict.id not in (None, "") else f"verdict {index}"
    if verdict.turns:  # 1-based, as the table, the HTML report, reasons and the review payload number turns
        where += f" ({turn_label(verdict.turns)})"
    answer = verdict.verdict
    status = f"error: {verdict.error}" if answer is None and verdict.error else f"verdict: {answer}"
    return f"{where} · {status}"


def format_attempts(attempts: Sequence[AttemptLine]) -> str:
    """The attempts as text: each message sent (role, then its exact content), then the raw reply."""
    lines: list[str] = []
    for i, a in enumerate(attempts, start=1):
        usage = a.usage or UsageLine()
        facts = [a.step, a.model, a.latency_s is not None and f"{a.latency_s:.2f}s",
                 f"{usage.input_tokens or 0} tokens in / {usage.output_tokens or 0} out",
                 usage.cached_input_tokens and f"{usage.cached_input_tokens} in from the provider's prompt cache",
                 a.cached and "from the cache (no call)",
                 a.shared and "shared: one request for several verdicts (dense mode)",
                 a.settings and ", ".join(f"{k}={v}" for k, v in sorted(a.settings.items()))]
        lines.append(f"── attempt {i}: {' · '.join(str(f) for f in facts if f)}")
        for m in a.messages:
            lines += [f"[{m.get('role', '?')}]", str(m.get("content", ""))]
        lines += ["[reply]", a.reply if a.reply is not None else "(no reply)"]
        if a.error:
            lines.append(f"[error] {a.error}")
    return "\n".join(lines)


def transcript_of(result: MetricResult | ResultLine | Mapping[str, object], window: int | None = None) -> str:
    """A result's judge transcripts as text (all verdicts, or that of ``window``): per attempt, the exact prompt
    sent, then the raw reply."""
    line = _line(result)
    parts = [f"{line.conversation_id} · {line.key} · score {line.score} · {line.status}"]
    rejudged = (line.details or {}).get("rejudged") or {}
    if isinstance(judges := rejudged.get("judges"), dict):  # judgegraph rejudge kept some verdicts of the old judge
        parts.append("verdicts by two judges: " + "; ".join(f"{name}: {', '.join(map(str, ids))}"
                                                           for name, ids in judges.items()))
    shared = line.transcript or []
    if shared and window is None:
        parts += ["", "═ requests the verdicts were judged from (extractions and the like)", format_attempts(shared)]
    index = {id(v): i for i, v in enumerate(line.verdicts)}
    printed: set[str] = set()  # the shared requests (dense mode) shown in full already
    for v in verdicts_of(line, window):
        parts += ["", f"═ {_label(v, index.get(id(v), 0))}"]
        if v.reason:
            parts.append(f"reason: {v.reason}")
        attempts = v.transcript or []
        again = [a for a in attempts if a.shared and a.request in printed]
        fresh = [a for a in attempts if not (a.shared and a.request in printed)]
        printed.update(a.request for a in attempts if a.shared and a.request)
        if again:
            parts.append(f"(judged in a dense request shared with other verdicts, shown above: "
                         f"{', '.join(str(a.request)[:12] for a in again)})")
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
