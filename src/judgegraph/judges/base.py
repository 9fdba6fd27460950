"""The judge interface: one request in, one outcome out, sync or async.

A node builds a :class:`JudgeRequest` (which prompt step, the values for its
placeholders, the structured-output schema, and the raw inputs an offline
judge needs) and hands it to a :class:`Judge`. The judge never raises for a
judgement it could not make: it returns an outcome with ``error`` set, and the
metric reports and counts it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ..prompts import Prompt, load_prompt
from ..results import Usage


@dataclass(frozen=True)
class JudgeRequest:
    task: str  # what is being judged, e.g. "turn_relevance"
    step: str  # prompt name, e.g. "turn_relevancy/judge_turn"
    schema: type[BaseModel]
    values: dict[str, str]  # placeholder values for the prompt
    inputs: dict[str, Any] = field(default_factory=dict)  # raw inputs for non-LLM judges
    prompt: Prompt | None = None  # an override of the step's prompt file

    def render(self) -> str:
        return (self.prompt or load_prompt(self.step)).render(self.values)

    def cache_key(self) -> str:
        payload = [self.task, self.step, self.schema.__name__, self.values, self.inputs,
                   self.prompt.template if self.prompt else None]
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class JudgeOutcome:
    value: BaseModel | None
    error: str | None = None
    attempts: int = 0
    usage: Usage = field(default_factory=Usage)
    score: float | None = None  # a similarity or probability behind the value, if any
    cached: bool = False  # answered from the judge's cache: no call was made

    @property
    def ok(self) -> bool:
        return self.value is not None and self.error is None


class JudgeCache:
    """Identical judge requests are made once per cache (e.g. one run): a
    statement extraction shared by two metrics, or by every window holding the
    same turn, costs one call. Concurrent identical requests wait for the first.
    Only successful outcomes are kept; a failed judgement is asked again."""

    def __init__(self) -> None:
        self._values: dict[str, JudgeOutcome] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._pending: dict[tuple[int, str], asyncio.Future] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _hit(self, key: str) -> JudgeOutcome | None:
        with self._lock:
            out = self._values.get(key)
            if out is not None:
                self.hits += 1
                return dataclasses.replace(out, usage=Usage(), cached=True)
        return None

    def _store(self, key: str, out: JudgeOutcome) -> None:
        with self._lock:
            self.misses += 1
            if out.ok:
                self._values[key] = out

    def get_or_compute(self, key: str, compute: Callable[[], JudgeOutcome]) -> JudgeOutcome:
        if (hit := self._hit(key)) is not None:
            return hit
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if (hit := self._hit(key)) is not None:
                return hit
            out = compute()
            self._store(key, out)
            return out

    async def aget_or_compute(self, key: str, compute: Callable[[], Awaitable[JudgeOutcome]]) -> JudgeOutcome:
        if (hit := self._hit(key)) is not None:
            return hit
        loop = asyncio.get_running_loop()
        pkey = (id(loop), key)
        with self._lock:
            fut = self._pending.get(pkey)
            owner = fut is None
            if owner:
                fut = self._pending[pkey] = loop.create_future()
        if not owner:
            await asyncio.shield(fut)
            return self._hit(key) or await self.aget_or_compute(key, compute)
        try:
            out = await compute()
            self._store(key, out)
            return out
        finally:
            with self._lock:
                self._pending.pop(pkey, None)
            if not fut.done():
                fut.set_result(None)


class Judge(ABC):
    """Makes one judgement. Subclasses implement :meth:`judge`; :meth:`ajudge`
    runs it in a worker thread unless overridden with a native async path."""

    name: str = "judge"
    kind: str = "judge"  # "llm" or "offline"
    rule: str | None = None  # how a non-LLM judge decides, shown in results
    cache: JudgeCache | None = None  # set to share identical requests (see JudgeCache)

    def supports(self, task: str) -> bool:
        return True

    @abstractmethod
    def judge(self, request: JudgeRequest) -> JudgeOutcome: ...

    async def ajudge(self, request: JudgeRequest) -> JudgeOutcome:
        return await asyncio.to_thread(self.judge, request)

    def run(self, request: JudgeRequest) -> JudgeOutcome:
        """:meth:`judge`, through the cache when there is one. Nodes call this."""
        if self.cache is None:
            return self.judge(request)
        return self.cache.get_or_compute(request.cache_key(), lambda: self.judge(request))

    async def arun(self, request: JudgeRequest) -> JudgeOutcome:
        if self.cache is None:
            return await self.ajudge(request)
        return await self.cache.aget_or_compute(request.cache_key(), lambda: self.ajudge(request))
