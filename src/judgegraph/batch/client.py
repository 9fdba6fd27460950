"""OpenAI's Batch API through the openai SDK: upload a JSONL of requests, create a batch (window 24 h), poll it,
download its output and error files, at the judge's endpoint (its key only ever sent as the SDK sends it)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import openai

    from ..judges.base import Endpoint

ENDPOINT = "/v1/chat/completions"
COMPLETION_WINDOW: Literal["24h"] = "24h"
#: OpenAI's limits on one batch's input file: requests and bytes (200 MB; kept under it).
MAX_REQUESTS_PER_BATCH = 50_000
MAX_BATCH_FILE_BYTES = 190_000_000
#: The largest output or error file read (decoded): a batch's replies, not one reply.
MAX_FILE_BYTES = 1 << 30
#: Each request of the Batch API itself (upload, create, poll, download) ends within this.
REQUEST_TIMEOUT_S = 600.0
TERMINAL = ("completed", "failed", "expired", "cancelled")
#: Polls wait at most this long apart (the first wait doubles up to it).
MAX_POLL_INTERVAL_S = 60.0
#: A batch is waited for at most this long (its 24 h window and an hour for the files).
MAX_WAIT_S = 25 * 3600.0


class NoBatchAPI(Exception):
    """The judge's provider offers no batch API here."""


class BatchWaitTimeout(Exception):
    """A batch did not end within the wait allowed."""


@dataclass
class BatchState:
    """What a poll says of a batch."""

    id: str
    status: str
    total: int = 0
    completed: int = 0
    failed: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[str] = field(default_factory=list)  # why a batch failed (its input file's errors)

    @classmethod
    def of(cls, batch: openai.types.Batch) -> BatchState:
        counts = batch.request_counts
        errors = batch.errors.data or [] if batch.errors else []
        return cls(id=batch.id, status=batch.status, total=counts.total if counts else 0,
                   completed=counts.completed if counts else 0, failed=counts.failed if counts else 0,
                   output_file_id=batch.output_file_id, error_file_id=batch.error_file_id,
                   errors=[f"{e.code or 'error'}{f' (line {e.line})' if e.line else ''}: {e.message or ''}"
                           for e in errors][:20])

    @property
    def done(self) -> bool:
        return self.status in TERMINAL


@dataclass
class ResultLine:
    """One line of a batch's output or error file."""

    custom_id: str
    status: int | None  # the HTTP status of the request (None: no response, e.g. expired)
    body: dict[str, Any] | None  # the chat completion (status 200) or the error body
    message: str  # what went wrong, when it did


class BatchClient:
    """The Batch API of one OpenAI-compatible endpoint (sync: it runs between passes)."""

    def __init__(self, endpoint: Endpoint, *, client: openai.OpenAI | None = None) -> None:
        self.endpoint = endpoint
        self._client = client

    @property
    def client(self) -> openai.OpenAI:
        if self._client is None:
            import openai

            from ..judges.transport import openai_http_clients

            timeout = max(self.endpoint.timeout or 0.0, REQUEST_TIMEOUT_S)
            http, _ = openai_http_clients(self.endpoint.base_url, timeout=timeout, max_reply_bytes=MAX_FILE_BYTES)
            key = self.endpoint.api_key.get_secret_value() if self.endpoint.api_key is not None else None
            self._client = openai.OpenAI(api_key=key or "not-needed", base_url=self.endpoint.base_url,
                                         http_client=http, timeout=timeout, max_retries=3)
        return self._client

    def check(self) -> None:
        """:class:`NoBatchAPI` unless the endpoint lists batches (one ``GET /v1/batches``)."""
        import openai

        where = self.endpoint.base_url or "api.openai.com"
        try:
            self.client.batches.list(limit=1)
        except openai.NotFoundError:
            raise NoBatchAPI(f"{where} has no batch API (GET /v1/batches answered 404): run without --batch") from None
        except openai.APIStatusError as exc:
            raise NoBatchAPI(f"{where} refused the batch API (GET /v1/batches answered HTTP {exc.status_code})"
                             ) from None
        except openai.APIError as exc:
            raise NoBatchAPI(f"{where}: the batch API could not be reached ({type(exc).__name__})") from None

    def submit(self, bodies: dict[str, dict[str, Any]], metadata: dict[str, str]) -> BatchState:
        """Upload ``bodies`` (custom_id → chat completions body) and create their batch."""
        data = b"".join(jsonl_line(key, body) for key, body in bodies.items())
        uploaded = self.client.files.create(file=("judgegraph-batch.jsonl", data, "application/jsonl"),
                                            purpose="batch")
        batch = self.client.batches.create(input_file_id=uploaded.id, endpoint=ENDPOINT,  # type: ignore[arg-type]
                                           completion_window=COMPLETION_WINDOW, metadata=metadata)
        return BatchState.of(batch)

    def retrieve(self, batch_id: str) -> BatchState:
        return BatchState.of(self.client.batches.retrieve(batch_id))

    def wait(self, batch_id: str, *, poll_s: float, on_poll: Callable[[BatchState], None] | None = None,
             stop: Callable[[], bool] | None = None, max_wait_s: float = MAX_WAIT_S) -> BatchState | None:
        """Poll until the batch ends (its state), ``stop()`` is true (None), or ``max_wait_s`` pass
        (:class:`BatchWaitTimeout`); the wait between polls doubles from ``poll_s`` to :data:`MAX_POLL_INTERVAL_S`."""
        deadline = time.monotonic() + max_wait_s
        interval = max(poll_s, 0.001)
        while True:
            state = self.retrieve(batch_id)
            if on_poll is not None:
                on_poll(state)
            if state.done:
                return state
            left = deadline - time.monotonic()
            if left <= 0:
                raise BatchWaitTimeout(f"batch {batch_id} still {state.status} after {max_wait_s:g} s")
            end = time.monotonic() + min(interval, left)
            while (now := time.monotonic()) < end:  # in short steps: a stop is seen within 0.2 s
                if stop is not None and stop():
                    return None
                time.sleep(min(0.2, end - now))
            if stop is not None and stop():
                return None
            interval = min(interval * 2, MAX_POLL_INTERVAL_S)

    def results(self, state: BatchState) -> Iterator[ResultLine]:
        """Every line of the batch's output file, then of its error file."""
        for file_id in filter(None, (state.output_file_id, state.error_file_id)):
            yield from parse_results(self.client.files.content(file_id).text)


def jsonl_line(custom_id: str, body: dict[str, Any]) -> bytes:
    return (json.dumps({"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body},
                       ensure_ascii=False) + "\n").encode("utf-8")


def chunks(bodies: dict[str, dict[str, Any]]) -> list[dict[str, dict[str, Any]]]:
    """``bodies`` split into batches within OpenAI's limits (requests and file size)."""
    out: list[dict[str, dict[str, Any]]] = [{}]
    size = 0
    for key, body in bodies.items():
        n = len(jsonl_line(key, body))
        if out[-1] and (len(out[-1]) >= MAX_REQUESTS_PER_BATCH or size + n > MAX_BATCH_FILE_BYTES):
            out.append({})
            size = 0
        out[-1][key] = body
        size += n
    return [c for c in out if c]


def parse_results(text: str) -> Iterator[ResultLine]:
    """The lines of an output or error file; a line that is not one is skipped (its request stays unanswered)."""
    for raw in text.splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
            continue
        response: dict[str, Any] = line["response"] if isinstance(line.get("response"), dict) else {}
        code = response.get("status_code")
        status = code if isinstance(code, int) and not isinstance(code, bool) else None
        body: dict[str, Any] | None = response["body"] if isinstance(response.get("body"), dict) else None
        error: dict[str, Any] | None = line["error"] if isinstance(line.get("error"), dict) else None
        if error is None and body is not None and isinstance(body.get("error"), dict):
            error = body["error"]
        message = ""
        if status != 200 or error is not None:
            what = (error or {}).get("code") or (f"HTTP {status}" if status else "no response")
            message = f"{what}: {(error or {}).get('message') or 'the request failed in the batch'}"
        yield ResultLine(line["custom_id"], status, body, message)
