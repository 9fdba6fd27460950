"""Batch mode's side of the judge: each request an LLM judge would send, read at its own HTTP transport
(``judges/transport.py``) and identified by its exact body, is answered from the run's batches; one not answered
yet is recorded as pending (for the next batch) and its judgement fails for this pass only (docs/batch.md). An
answer goes through the judge's usual parsing, validation and re-ask path, as a live reply.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableBinding

from ..judges.transport import answered_by, has_judge_transport

#: Transient per-request statuses: sent again in the next batch (while ``max_retries`` allows).
TRANSIENT_STATUSES = frozenset({408, 409, 429})

#: The pending request keys of the conversation being judged (a set per conversation; see ``PendingWatch``).
_pending_here: ContextVar[set[str] | None] = ContextVar("judgegraph_batch_pending", default=None)


class BatchPending(Exception):
    """The request's answer is not in any batch yet: it goes into the next one."""


class BatchRequestError(Exception):
    """A request the batch answered with an error (its error file, or a non-200 status in its output)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        if status is not None and status not in TRANSIENT_STATUSES and status < 500:
            self.status_code = status  # 401/403/404 stop the judge as a live reply would; others are judge errors


def request_body(payload: dict[str, Any]) -> dict[str, Any]:
    """The JSON body of a request as a batch line holds it: ``payload`` (the body the SDK sent) with
    any ``extra_body`` merged in, as the SDK does, and ``stream`` (never on in a batch) left out."""
    body = {k: v for k, v in payload.items() if k not in ("extra_body", "stream")}
    body.update(payload.get("extra_body") or {})
    return body


def request_key(body: dict[str, Any]) -> str:
    """What identifies a request in a batch (its ``custom_id``): the body, hashed."""
    return "jg-" + hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:40]


@dataclass
class Failure:
    status: int | None
    message: str

    @property
    def transient(self) -> bool:
        return self.status is None or self.status in TRANSIENT_STATUSES or self.status >= 500


@dataclass
class BatchAnswers:
    """The answers of a run's batches by request key, the failures, and the requests asked for and not answered in
    the current pass (``pending``: key → body). Thread safe."""

    max_retries: int = 3  # a request failed transiently is sent again in this many more batches
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> chat completion body
    failures: dict[str, list[Failure]] = field(default_factory=dict)
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)
    final: bool = False  # the last pass: a request still without answer is a judge error, not pending
    given_up: int = 0  # requests left without an answer in the last pass
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add_answer(self, key: str, completion: dict[str, Any]) -> None:
        with self._lock:
            self.answers[key] = completion

    def add_failure(self, key: str, status: int | None, message: str) -> None:
        with self._lock:
            if key not in self.answers:
                self.failures.setdefault(key, []).append(Failure(status, message))

    def take_pending(self) -> dict[str, dict[str, Any]]:
        """The requests this pass asked for without an answer, emptied for the next pass."""
        with self._lock:
            out, self.pending = self.pending, {}
        return out

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The chat completion that answers ``body``; else :class:`BatchRequestError` (it failed for good) or
        :class:`BatchPending` (recorded for the next batch)."""
        key = request_key(body)
        with self._lock:
            if (found := self.answers.get(key)) is not None:
                return found
            failed = self.failures.get(key, [])
            if failed and (not failed[-1].transient or len(failed) > self.max_retries or self.final):
                last = failed[-1]
                tries = f" ({len(failed)} batches)" if len(failed) > 1 else ""
                raise BatchRequestError(f"batch request failed: {last.message}{tries}", last.status)
            if self.final:
                self.given_up += 1
                raise BatchRequestError("no answer from the batches of this run (the run stopped before one came)")
            self.pending[key] = body
        mine = _pending_here.get()
        if mine is not None:
            mine.add(key)
        raise BatchPending("waiting for this request's batch answer")

    def via(self, runnable: Any) -> BatchCall:
        """The judge's hook (``LLMJudge.via``): ``runnable`` (the bound chat model) answered from here."""
        return BatchCall(self, runnable)


class BatchCall:
    """A bound chat model's stand-in: ``invoke``/``ainvoke`` call it as usual, its HTTP transport answering from
    :class:`BatchAnswers`; a request pending or failed for good reaches the judge as :class:`BatchPending` or
    :class:`BatchRequestError`."""

    def __init__(self, answers: BatchAnswers, runnable: Any) -> None:
        model = runnable
        while isinstance(model, RunnableBinding):
            model = model.bound
        clients = (getattr(model, "http_client", None), getattr(model, "http_async_client", None))
        if not all(has_judge_transport(c) for c in clients):  # another client would send the requests live
            raise TypeError("batch mode needs an OpenAI chat model built by judgegraph from a model string "
                            f"(got {type(model).__name__})")
        self.answers, self.runnable = answers, runnable

    @contextmanager
    def _answered(self) -> Iterator[None]:
        call = _Call(self.answers)
        with answered_by(call):
            try:
                yield
            except Exception as exc:
                if call.error is not None:  # the SDK's error for the stand-in's refusal: the refusal itself
                    raise call.error from exc
                raise

    def invoke(self, messages: list[BaseMessage]) -> BaseMessage:
        with self._answered():
            return cast("BaseMessage", self.runnable.invoke(messages))

    async def ainvoke(self, messages: list[BaseMessage]) -> BaseMessage:
        with self._answered():
            return cast("BaseMessage", await self.runnable.ainvoke(messages))


class _Call:
    """One call's stand-in (:data:`~judgegraph.judges.transport.StandIn`): a chat completions request answered from
    the batches; ``error``: why it was not (the SDK sees an HTTP 400)."""

    def __init__(self, answers: BatchAnswers) -> None:
        self.answers = answers
        self.error: BatchPending | BatchRequestError | None = None

    def __call__(self, method: str, path: str, content: bytes) -> tuple[int, dict[str, Any]]:
        try:
            if method != "POST" or not path.endswith("/chat/completions"):
                raise BatchRequestError("batch mode sends /v1/chat/completions requests; this model sends "
                                        f"{method} {path}")
            return 200, self.answers.answer(request_body(json.loads(content)))
        except (BatchPending, BatchRequestError) as exc:
            self.error = exc
            return 400, {"error": {"message": str(exc), "type": "judgegraph_batch", "code": None, "param": None}}


class PendingWatch:
    """Within it, the keys of requests found pending are collected in ``keys`` (one conversation's)."""

    def __init__(self) -> None:
        self.keys: set[str] = set()

    def __enter__(self) -> PendingWatch:
        self._token = _pending_here.set(self.keys)
        return self

    def __exit__(self, *exc: object) -> None:
        _pending_here.reset(self._token)
