"""Made-up results files for tests and benchmarks of the HTML report.

``sample_run(n)`` returns ``(conversations, records)``: input conversations (the
judgegraph JSONL shape) and the results JSONL records ``judgegraph eval`` would
write for them, built from the real result models, with judge transcripts in the
shared ``JudgeAttempt`` shape. Among them, when ``n`` allows: a failing reply,
a judge error with re-asks, a failed run, and replies that carry markup
(``<script>``, ``<img onerror>``) which a page must show as text.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from judgegraph.data.results import JudgeErrorInfo, MetricResult, Status, Usage, Verdict, WindowVerdict

__all__ = ["HOSTILE_IMG", "HOSTILE_REASON", "HOSTILE_SCRIPT", "QUOTED_ID", "sample_run", "two_runs", "write_sample_run",
           "write_runs", "write_two_runs"]

HOSTILE_SCRIPT = "<script>window.__pwned = 1; document.title = 'pwned'</script>Sure, here is the refund policy."
HOSTILE_IMG = '<img src=x onerror="window.__pwned = 2">Your order ships tomorrow. </script><b>bold?</b>'
FAILING_REASON = "The reply talks about the weather in Lisbon, not the refund the user asked about."


def _attempt(step: str, prompt: str, reply: str | None, error: str | None = None) -> dict[str, Any]:
    return {
        "step": step,
        "messages": [{"role": "system", "content": f"You judge {step.split('/')[0]}. Answer in JSON."},
                     {"role": "user", "content": prompt}],
        "reply": reply, "error": error, "latency_s": 0.42,
        "usage": Usage(calls=1, input_tokens=180, output_tokens=24).model_dump(),
        "model": "gpt-4.1-mini", "settings": {"temperature": 0.0}, "cached": False,
    }


def _conversation(i: int, turns_per_conversation: int) -> dict[str, Any]:
    turns = []
    for t in range(turns_per_conversation // 2):
        turns.append({"role": "user", "content": f"Question {t + 1} of conversation {i}: how do I return shoes "
                                                 f"that do not fit, and when is my money back?"})
        turns.append({"role": "assistant", "content": f"Answer {t + 1}: go to Orders, pick the order and click "
                                                      f"'Return items'; refunds take 5 business days."})
    if i == 1:
        turns[1]["content"] = HOSTILE_SCRIPT
    if i == 2 and len(turns) > 3:
        turns[3]["content"] = HOSTILE_IMG
    if i == 3:
        turns[1]["content"] = "It is sunny in Lisbon today."
    return {"id": f"conv-{i:04d}", "turns": turns}


def _results(conv: dict[str, Any], i: int, transcripts: bool) -> dict[str, Any]:
    cid = conv["id"]
    verdicts: list[Verdict] = []
    errors = []
    for w, k in enumerate(range(1, len(conv["turns"]), 2)):
        reply = conv["turns"][k]["content"]
        prompt = json.dumps({"window": conv["turns"][max(0, k - 3): k + 1]}, ensure_ascii=False)
        step = "turn_relevancy/judge_turn"
        if i == 3 and w == 0:
            fields: dict[str, Any] = {"verdict": "no", "reason": FAILING_REASON, "attempts": 1}
            tr = [_attempt(step, prompt, json.dumps({"reason": FAILING_REASON, "verdict": "no"}))]
        elif i == 4 and w == 0:
            msg = "the judge's reply was not valid JSON after 3 tries"
            fields = {"verdict": None, "error": msg, "attempts": 3}
            tr = [_attempt(step, prompt, "Sure! The reply is relevant.", "invalid JSON: Expecting value at 1:1"),
                  _attempt(step, prompt + "\nYour last answer was not valid JSON. Answer with JSON only.",
                           "{'verdict': yes}", "invalid JSON: Expecting property name at 1:2"),
                  _attempt(step, prompt + "\nAnswer with JSON only.", "verdict=yes", "invalid JSON: Expecting value")]
            errors.append(JudgeErrorInfo(where=f"window {w} (turn {k + 1})", step=step, message=msg, attempts=3))
        else:
            fields = {"verdict": "yes", "reason": "The reply answers the user's question.", "attempts": 1}
            tr = [_attempt(step, prompt, json.dumps({"reason": "The reply answers the user's question.",
                                                     "verdict": "yes"}))]
        if transcripts:
            fields["transcript"] = tr  # the shared JudgeAttempt shape (an extra field until results.py has it)
        verdicts.append(WindowVerdict(window=w, turns=[k], reply=reply, **fields))
    judged = [v for v in verdicts if v.verdict is not None]
    score = sum(v.verdict == "yes" for v in judged) / len(judged) if judged else None
    threshold = 0.8
    passed = None if score is None else score >= threshold
    status: Status = "error" if score is None else ("passed" if passed else "failed")
    relevancy = MetricResult(
        key="turn_relevancy", conversation_id=cid, score=score, threshold=threshold, passed=passed, status=status,
        reason=f"{sum(v.verdict == 'yes' for v in judged)} of {len(judged)} replies judged relevant.",
        judge="llm:gpt-4.1-mini", verdicts=verdicts, errors=errors,
        usage=Usage(calls=len(verdicts), input_tokens=180 * len(verdicts), output_tokens=24 * len(verdicts)),
    )
    retention = MetricResult(
        key="knowledge_retention", conversation_id=cid, score=1.0, threshold=0.5, passed=True, status="passed",
        reason="No reply forgets what the user said.", judge="llm:gpt-4.1-mini",
        verdicts=[Verdict(turns=[len(conv["turns"]) - 1], verdict="yes", reason="Keeps the order number.")],
    )
    return {"type": "conversation", "conversation_id": cid, "source": f"chats.jsonl:{i + 1}",
            "results": {r.key: r.model_dump(mode="json") for r in (relevancy, retention)}, "error": None}


def sample_run(n: int = 6, *, turns_per_conversation: int = 4,
               transcripts: bool = True) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    conversations = [_conversation(i, turns_per_conversation) for i in range(n)]
    records = []
    for i, conv in enumerate(conversations):
        if i == 5:
            records.append({"type": "conversation", "conversation_id": conv["id"], "source": f"chats.jsonl:{i + 1}",
                            "results": {}, "error": "RuntimeError: the judge's server went away"})
        else:
            records.append(_results(conv, i, transcripts))
    records.append({"type": "input_error", "file": "chats.jsonl", "line": n + 1, "record": None, "field": "turns",
                    "message": "missing", "error": f"chats.jsonl:{n + 1}: field 'turns': missing"})
    return conversations, records


def write_sample_run(directory: str | Path, n: int = 6, **kwargs: Any) -> tuple[Path, Path]:
    """Write ``chats.jsonl`` and ``results.jsonl`` into ``directory``; returns their paths."""
    conversations, records = sample_run(n, **kwargs)
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    chats, results = d / "chats.jsonl", d / "results.jsonl"
    chats.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in conversations), encoding="utf-8")
    results.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return chats, results


HOSTILE_REASON = "Off topic.</script><script>window.__pwned = 3</script><!-- and the rest"
QUOTED_ID = "conv \"quoted\" 'it' <b>"


def _header(metrics: list[str]) -> dict[str, Any]:
    """A run header record as ``judgegraph eval`` writes it as a results file's first line."""
    return {"type": "header", "format": 1, "judgegraph": "9.9.9", "started_at": "2026-11-26T05:00:00Z",
            "argv": ["judgegraph", "eval", "chats.jsonl"], "config": None,
            "metrics": [{"name": m, "options": {}} for m in metrics],
            "judges": [{"name": "llm:gpt-4.1-mini", "settings": {"temperature": 0.0}, "prompts": {"judge": "0123456789ab"}}],
            "inputs": [{"path": "chats.jsonl", "sha256": "0" * 64}]}


def two_runs(n: int = 8) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """``(conversations, old, new)``: the sample run (no header: an older file) and a second run of the same
    conversations with a header and a summary, where conv-0003 is fixed, conv-0000 regressed (its reason holds
    ``</script>``), conv-0005's run succeeded, conv-0006 is missing, and a conversation whose id holds quotes
    and markup is new. Conversation lines of the new run carry their input ``position`` and are written in
    another order (completion order)."""
    conversations, old = sample_run(n)
    _, new = sample_run(n)
    by_id = {r.get("conversation_id"): r for r in new}
    fixed = by_id["conv-0003"]["results"]["turn_relevancy"]
    for v in fixed["verdicts"]:
        v.update(verdict="yes", reason="The reply now answers the refund question.")
    fixed.update(score=1.0, passed=True, status="passed", reason="2 of 2 replies judged relevant.")
    regressed = by_id["conv-0000"]["results"]["turn_relevancy"]
    regressed["verdicts"][0].update(verdict="no", reason=HOSTILE_REASON)
    regressed.update(score=0.5, passed=False, status="failed", reason="1 of 2 replies judged relevant.")
    by_id["conv-0005"].update(error=None, results={k: json.loads(json.dumps(v))
                                                   for k, v in by_id["conv-0001"]["results"].items()})
    for r in by_id["conv-0005"]["results"].values():
        r["conversation_id"] = "conv-0005"
    quoted = json.loads(json.dumps(by_id["conv-0002"]))
    quoted["conversation_id"] = QUOTED_ID
    lines = [r for r in new if r.get("conversation_id") != "conv-0006" and r["type"] == "conversation"]
    for r in lines:
        r["position"] = int(r["conversation_id"][-4:]) if r["conversation_id"] != QUOTED_ID else n
        r["cost_usd"] = 0.001
    quoted["position"], quoted["cost_usd"] = n, 0.001
    lines = [*reversed(lines), quoted]
    metrics = ["turn_relevancy", "knowledge_retention"]
    summary = {"type": "summary", "ended_at": "2026-11-26T05:02:05Z", "duration_s": 125.0,
               "usage": {"calls": 40, "input_tokens": 7200, "output_tokens": 960}, "cost_usd": 0.0123,
               "pass_rate": {"turn_relevancy": 0.875, "knowledge_retention": 1.0}}
    return conversations, old, [_header(metrics), *lines, summary]


def write_two_runs(directory: str | Path, n: int = 8) -> tuple[Path, Path, Path]:
    """Write ``chats.jsonl``, ``old.jsonl`` and ``new.jsonl`` (see :func:`two_runs`) into ``directory``."""
    conversations, old, new = two_runs(n)
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    paths = d / "chats.jsonl", d / "old.jsonl", d / "new.jsonl"
    for path, records in zip(paths, (conversations, old, new)):
        if path is paths[2]:  # the new run judged chats.jsonl as written here (its header names its SHA-256)
            records[0]["inputs"][0]["sha256"] = hashlib.sha256(paths[0].read_bytes()).hexdigest()
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return paths


def write_runs(directory: str | Path, runs: int, n: int = 8, *, turns_per_conversation: int = 4) -> list[Path]:
    """Write ``chats.jsonl`` and ``runs`` results files of its ``n`` conversations (``run-000.jsonl``, ... : a header
    naming ``chats.jsonl`` by its SHA-256, one started an hour after the other, then the sample run's lines with
    each run failing a different share of the conversations) into ``directory``, as a gate's folder of runs."""
    conversations, records = sample_run(n, turns_per_conversation=turns_per_conversation, transcripts=False)
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    chats = d / "chats.jsonl"
    chats.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in conversations), encoding="utf-8")
    header = _header(["turn_relevancy", "knowledge_retention"])
    header["inputs"] = [{"path": "chats.jsonl", "sha256": hashlib.sha256(chats.read_bytes()).hexdigest()}]
    paths = []
    for r in range(runs):
        lines = []
        for i, record in enumerate(records):
            results = record.get("results") or {}
            if "turn_relevancy" in results and i % (r % 4 + 2) == 0:  # a different pass rate per run
                failed = {**results["turn_relevancy"], "score": 0.5, "passed": False, "status": "failed"}
                record = {**record, "results": {**results, "turn_relevancy": failed}}
            lines.append(record)
        path = d / f"run-{r:03d}.jsonl"
        started = {**header, "started_at": f"2026-11-{1 + r // 24:02d}T{r % 24:02d}:00:00Z"}
        path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in [started, *lines]),
                        encoding="utf-8")
        paths.append(path)
    return paths
