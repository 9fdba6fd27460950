"""Why judgements failed, said once after the results table: each distinct cause,
how many judgements it stopped and what to do, not a hunt through the JSONL."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..data.results import MetricResult

#: What the LLM judge adds around the first fatal error when it stops sending.
_STOPPED = re.compile(r"^judge stopped: (?P<cause>.*) \(no further requests are sent\)$", re.S)
_REQUESTS = re.compile(r" \(\d+ requests\)$")

#: (test on the lower-cased cause, what to do), first match wins.
_FIXES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("connection refused", "connecterror", "connection error", "name or service not known", "nodename nor servname"),
     "nothing answers at that address: start the server, or point --base-url (or OPENAI_BASE_URL) at one that runs"),
    (("(http 401)",), "the server refused the API key: set OPENAI_API_KEY to a valid key (or the key the server expects)"),
    (("(http 403)",), "the key has no access to this model: check --model and the key's permissions"),
    (("(http 404)",), "wrong URL or model name: --base-url (or OPENAI_BASE_URL) must be the API root the server "
                      "serves /chat/completions under (often ending in /v1), and --model a model it serves"),
    (("(http 429)",), "rate limited: lower --concurrency, or set --rpm / --tpm"),
    (("(http 5",), "the server failed: try again later, or raise --max-retries"),
    (("timeout", "timed out"), "the server answered too slowly: raise --timeout, or lower --concurrency"),
    (("prompt too long",), "shorten what is judged (--window-size) or raise --max-prompt-tokens"),
    (("invalid output",), "the model's replies did not fit the judge's answer format: try a stronger --model, "
                          "or raise --max-tries"),
)


def cause_of(message: str) -> str:
    """A judge error reduced to its cause (the same for the first failure and every one the breaker stopped), with
    what to do about it when that is known and the cause does not say it itself (the offline model's message
    names its own fixes)."""
    cause = message.strip()
    if (m := _STOPPED.match(cause)) is not None:
        cause = m.group("cause")
    cause = _REQUESTS.sub("", cause)
    low = cause.lower()
    fix = next((fix for needles, fix in _FIXES if any(n in low for n in needles)), None)
    if fix is None or "fix it" in low or "fix:" in low:
        return cause
    return f"{cause.rstrip('.')}. Fix: {fix}."


@dataclass
class FailureCauses:
    """Counts the distinct causes of the judge errors of a run (fed with every finished conversation's results)."""

    causes: Counter[str] = field(default_factory=Counter)
    results: int = 0
    results_failed: int = 0  # results that got no score at all because of judge errors

    def add(self, results: Iterable[MetricResult], then: Callable[[], None] | None = None) -> None:
        """Count the judge errors of one conversation's ``results``; then call ``then``."""
        for r in results:
            self.results += 1
            self.results_failed += r.status == "error" and bool(r.errors)
            self.causes.update(cause_of(e.message) for e in r.errors)
        if then is not None:
            then()

    def report(self) -> str | None:
        """The causes as plain text (None when no judgement failed)."""
        if not (total := sum(self.causes.values())):
            return None
        head = f"All {total} judgements failed" if self.results_failed == self.results else f"{total} judgements failed"
        if len(self.causes) == 1:
            return f"{head}: {next(iter(self.causes))}"
        return "\n".join([f"{head}, for {len(self.causes)} causes:",
                          *(f"  {n} × {cause}" for cause, n in self.causes.most_common())])
