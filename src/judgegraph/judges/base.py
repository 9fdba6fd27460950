"""The judge interface: one :class:`JudgeRequest` in, one :class:`JudgeOutcome` out, sync or async. A judgement
that could not be made is an outcome with ``error`` set (reported and counted by the metric), never an exception.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, SecretStr

from ..data.prompts import Prompt, load_prompt
from ..data.results import JudgeAttempt, Usage
from .cache import CachedAnswer, DiskCache, JudgeCache

__all__ = ["DiskCache", "Judge", "JudgeCache", "JudgeOutcome", "JudgeRequest", "JurorAnswer"]


@dataclass(frozen=True)
class JudgeRequest:
    task: str  # what is being judged, e.g. "turn_relevance"
    step: str  # prompt name, e.g. "turn_relevancy/judge_turn"
    schema: type[BaseModel]
    values: dict[str, str]  # placeholder values for the prompt
    inputs: dict[str, Any] = field(default_factory=dict)  # raw inputs for non-LLM judges
    prompt: Prompt | None = None  # an override of the step's prompt file

    @cached_property
    def template(self) -> Prompt:
        """The prompt (the override, else the step's file), looked up once per request."""
        return self.prompt or load_prompt(self.step)

    @cached_property
    def rendered(self) -> str:
        """The prompt text sent (rendered once per request)."""
        return self.template.render(self.values)

    def render(self) -> str:
        return self.rendered

    def cache_key(self) -> str:
        """What identifies this request (task, step, schema, values, inputs, prompt override): computed once."""
        return self._key

    @cached_property
    def _key(self) -> str:
        return key_of([self.task, self.step, self.schema.__name__, self.values, self.inputs,
                       self.prompt.template if self.prompt else None])


#: ``json.dumps(payload, sort_keys=True, default=str)``'s encoder, made once (thread-safe: it keeps no state).
_KEY_JSON = json.JSONEncoder(sort_keys=True, default=str).encode


def key_of(payload: list[Any]) -> str:
    """The sha256 of ``payload`` as sorted JSON: a request's key (``JudgeRequest``'s and ``LLMJudge``'s)."""
    return hashlib.sha256(_KEY_JSON(payload).encode()).hexdigest()


@dataclass
class JudgeOutcome:
    value: BaseModel | None
    error: str | None = None
    attempts: int = 0
    usage: Usage = field(default_factory=Usage)
    score: float | None = None  # a similarity or probability behind the value, if any
    cached: bool = False  # answered from the judge's cache: no call was made
    transcript: list[JudgeAttempt] = field(default_factory=list)  # every request behind it, in order
    jurors: list[JurorAnswer] = field(default_factory=list)  # a jury's: each juror's own outcome (judges/jury.py)

    @property
    def ok(self) -> bool:
        return self.value is not None and self.error is None

    def as_cached(self) -> JudgeOutcome:
        """This outcome given again from a cache: no call, 0 tokens, its last
        attempt (the answer) marked ``cached``."""
        last = [a.model_copy(update={"cached": True, "usage": Usage(), "latency_s": None, "error": None})
                for a in self.transcript[-1:]]
        return dataclasses.replace(self, attempts=0, usage=Usage(), cached=True, transcript=last)


@dataclass(frozen=True)
class JurorAnswer:
    """One juror's outcome behind a jury's (:class:`~judgegraph.judges.jury.Jury`): which judge, which
    repeat of it (``--repeat``), and what it answered; ``judge_step`` turns them into ``Verdict.votes``."""

    judge: str  # the juror's name, e.g. "llm:gpt-4.1-mini"
    repeat: int
    outcome: JudgeOutcome


@dataclass(frozen=True)
class Endpoint:
    """Where an OpenAI-compatible judge's model is served (URL, ``SecretStr`` key, deadline,
    reply limit), so embeddings beside it need no second setting."""

    base_url: str | None
    api_key: SecretStr | None = None
    timeout: float | None = None  # the deadline of each whole request (None: the default)
    max_reply_bytes: int | None = None  # the largest reply read, decoded (None: the default)


class Judge(ABC):
    """Makes one judgement. Subclasses implement :meth:`judge`; :meth:`ajudge`
    runs it in a worker thread unless overridden with a native async path."""

    name: str = "judge"
    kind: str = "judge"  # "llm" or "offline"
    rule: str | None = None  # how a non-LLM judge decides, shown in results
    cache: JudgeCache | None = None  # set to share identical requests (see JudgeCache)

    def supports(self, task: str) -> bool:
        return True

    @property
    def embeddings(self) -> Any:
        """The embeddings this judge judges with (the offline judge's), or None."""
        return None

    @property
    def endpoint(self) -> Endpoint | None:
        """The OpenAI-compatible server this judge calls, or None."""
        return None

    @abstractmethod
    def judge(self, request: JudgeRequest) -> JudgeOutcome: ...

    async def ajudge(self, request: JudgeRequest) -> JudgeOutcome:
        return await asyncio.to_thread(self.judge, request)

    def cache_key(self, request: JudgeRequest) -> str:
        """What identifies a request's answer for this judge (the disk cache's
        key too: an LLM judge adds its model and settings, see ``LLMJudge``)."""
        return request.cache_key()

    def from_cache(self, request: JudgeRequest, hit: CachedAnswer) -> JudgeOutcome:
        """An outcome from a stored answer: 0 calls, 0 tokens, marked cached."""
        value = request.schema.model_validate_json(hit.value_json)
        attempt = JudgeAttempt(step=request.step, messages=[{"role": "user", "content": request.rendered}],
                               reply=hit.reply, model=hit.model, cached=True)
        return JudgeOutcome(value, None, 0, Usage(), cached=True, transcript=[attempt])

    def _persistent(self, request: JudgeRequest, key: str) -> JudgeOutcome | None:
        hit = self.cache.disk.get(key) if self.cache is not None and self.cache.disk is not None else None
        if hit is None:
            return None
        try:
            return self.from_cache(request, hit)
        except ValueError:  # a stored answer the schema no longer accepts: ask again
            return None

    def _keep(self, request: JudgeRequest, key: str, out: JudgeOutcome) -> JudgeOutcome:
        disk = self.cache.disk if self.cache is not None else None
        if disk is not None and out.ok and not out.cached and out.value is not None:
            last = out.transcript[-1] if out.transcript else None
            disk.put(key, out.value.model_dump_json(), reply=last.reply if last else None,
                     model=last.model if last else self.name, step=request.step)
        return out

    def forget(self, request: JudgeRequest) -> None:
        """Drop ``request``'s cached answer: it made a judge error, so it is asked again next time."""
        if self.cache is not None:
            self.cache.forget(self.cache_key(request))

    def run(self, request: JudgeRequest) -> JudgeOutcome:
        """:meth:`judge`, through the caches when there are any. Nodes call this."""
        if self.cache is None:
            return self.judge(request)
        key = self.cache_key(request)
        return self.cache.get_or_compute(
            key, lambda: self._persistent(request, key) or self._keep(request, key, self.judge(request)))

    def prepare(self, request: JudgeRequest) -> None:  # noqa: B027 - a hook: most judges load nothing
        """Load what ``request``'s step reads from disk; :meth:`arun` calls it in a worker
        thread, so no file is read on the event loop (``langgraph dev`` raises there)."""

    async def arun(self, request: JudgeRequest) -> JudgeOutcome:
        prepared = self.__dict__.setdefault("_prepared", set())
        if request.step not in prepared:
            await asyncio.to_thread(self.prepare, request)
            prepared.add(request.step)
        if self.cache is None:
            return await self.ajudge(request)
        key = self.cache_key(request)

        async def compute() -> JudgeOutcome:
            if self.cache is None or self.cache.disk is None:
                return await self.ajudge(request)
            # the SQLite file is read and written off the event loop, like every file
            stored = await asyncio.to_thread(self._persistent, request, key)
            if stored is not None:
                return stored
            return await asyncio.to_thread(self._keep, request, key, await self.ajudge(request))

        return await self.cache.aget_or_compute(key, compute)


class FittedFile:
    """What a fitted judge keeps in a JSON file (an alignment, an offline rule): ``format``, ``version``, ``sha256``
    (of :meth:`decision` only: the fields that decide verdicts), the decision fields and ``fit`` (provenance)."""

    FORMAT: ClassVar[str]
    WHAT: ClassVar[str]  # what the file is, as an error names it
    VERSION: ClassVar[int] = 1
    fit: dict[str, Any]

    def decision(self) -> dict[str, Any]:  # Any: JSON values
        raise NotImplementedError

    @property
    def filename(self) -> str:
        raise NotImplementedError

    @property
    def hash(self) -> str:
        text = json.dumps(self.decision(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    @property
    def short(self) -> str:
        return self.hash[:12]

    def to_json(self) -> dict[str, Any]:  # Any: JSON values
        return {"format": self.FORMAT, "version": self.VERSION, "sha256": self.hash, **self.decision(), "fit": self.fit}

    def save(self, folder: str | os.PathLike[str]) -> Path:
        """Write :attr:`filename` in ``folder`` (made if missing); returns its path."""
        path = Path(folder) / self.filename
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return path

    @classmethod
    def read_json(cls, path: str | os.PathLike[str]) -> dict[str, Any]:
        """The file's JSON object, its format and version checked; ValueError naming the file (and field)."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: not a JSON file ({exc})") from None
        except OSError as exc:
            raise ValueError(f"{path}: cannot read it: {exc.strerror or exc}") from None
        if not isinstance(data, dict) or data.get("format") != cls.FORMAT:
            raise ValueError(f"{path}: field 'format': not a judgegraph {cls.WHAT} (expected {cls.FORMAT!r})")
        if data.get("version") != cls.VERSION:
            raise ValueError(f"{path}: field 'version': {data.get('version')!r} is not supported (expected {cls.VERSION})")
        return data
