"""The offline judge's relevance rule: pure functions over sentence embeddings.

Given the reply to judge, the latest user message and the earlier messages of
the window, :func:`relevance_score` returns a cosine-similarity score; the
offline judge calls the reply relevant when ``score >= DEFAULT_THRESHOLD``.

The rule (chosen and calibrated on the dev half of
``benchmarks/data/relevance_labelled.jsonl`` by
``benchmarks/calibrate_offline_judge.py``, which prints the numbers behind
every constant below):

* normally the score is ``cos(reply, latest_user)``;
* when the latest user message is a short follow-up (at most
  :data:`FOLLOWUP_MAX_WORDS` words: "yes please", "why?", "the first one") it
  means little on its own, so the score is
  ``max(cos(reply, latest_user), CONTEXT_WEIGHT * cos(reply, previous_assistant + latest_user))``:
  a reply that carries on from what the assistant just said or offered counts.

Candidates that also penalised replies closer to an earlier user message than
to the latest one, or replies repeating the previous answer, were no better on
the dev split and are not used (see the calibration program's output).

Only numpy is used; nothing is loaded at import time. ``encode`` is any
callable mapping a list of texts to an ``(n, d)`` array of L2-normalised rows;
all texts of one call to :func:`relevance_score` go through ONE ``encode`` call.
:func:`relevance_steps` is the same rule as a generator (yield texts, receive
vectors), so sync and async callers share it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence

import numpy as np

__all__ = [
    "CONTEXT_WEIGHT",
    "DEFAULT_THRESHOLD",
    "FOLLOWUP_MAX_WORDS",
    "MAX_CONTEXT_CHARS",
    "RULE",
    "followup_query",
    "is_short_followup",
    "previous_assistant",
    "previous_message",
    "relevance_score",
    "relevance_steps",
]

Encode = Callable[[list[str]], np.ndarray]

#: A latest user message of at most this many words is a short follow-up.
FOLLOWUP_MAX_WORDS = 5
#: Weight of the similarity to "previous assistant message + short follow-up".
CONTEXT_WEIGHT = 0.8
#: The previous assistant message is cut to its last this-many characters before
#: being joined with the follow-up, so the model's 256-token input limit can
#: never truncate the follow-up itself away.
MAX_CONTEXT_CHARS = 600

#: Calibrated on the dev split (benchmarks/calibrate_offline_judge.py),
#: threshold maximising balanced accuracy, rounded to 2 decimals.
DEFAULT_THRESHOLD: float = 0.29

RULE = (
    f"cos(reply, user); for follow-ups of <= {FOLLOWUP_MAX_WORDS} words "
    f"max(cos(reply, user), {CONTEXT_WEIGHT:g}*cos(reply, previous assistant + user))"
)


def previous_message(context: Sequence[str], role: str) -> str:
    """Content of the last ``"<role>: ..."`` entry of ``context`` ("" if none)."""
    for entry in reversed(context):
        who, sep, content = entry.partition(":")
        if sep and who.strip().lower() == role:
            return content.strip()
    return ""


def previous_assistant(context: Sequence[str]) -> str:
    """Content of the last ``"assistant: ..."`` entry of ``context`` ("" if none)."""
    return previous_message(context, "assistant")


def is_short_followup(latest_user: str) -> bool:
    """True when the latest user message has at most FOLLOWUP_MAX_WORDS words."""
    return len(latest_user.split()) <= FOLLOWUP_MAX_WORDS


def followup_query(previous: str, latest_user: str) -> str:
    """``previous assistant message`` (its tail, if long) + newline + ``latest_user``."""
    if len(previous) > MAX_CONTEXT_CHARS:
        tail = previous[-MAX_CONTEXT_CHARS:]
        cut = tail.find(" ")
        previous = tail[cut + 1 :] if 0 <= cut < len(tail) - 1 else tail
    return f"{previous}\n{latest_user}"


def relevance_steps(reply: str, latest_user: str, context: list[str]) -> Generator[list[str], np.ndarray, float]:
    """The rule as a generator: yields the texts to embed (at most once), receives
    their vectors, returns the score. :func:`relevance_score` drives it with a
    sync ``encode``; the offline judge drives the same generator sync or async
    through its batching encoder (:func:`judgegraph.embeddings.batching.drive`)."""
    reply = reply.strip()
    latest_user = latest_user.strip()
    if not reply:
        return 0.0
    previous = previous_assistant(context) if is_short_followup(latest_user) else ""
    texts = [reply]
    if latest_user:
        texts.append(latest_user)
    if previous:
        texts.append(followup_query(previous, latest_user) if latest_user else previous)
    if len(texts) == 1:
        return 1.0
    vectors = np.asarray((yield texts), dtype=np.float32)
    if vectors.shape[0] != len(texts):
        raise ValueError(f"encode returned {vectors.shape[0]} vectors for {len(texts)} texts")
    sims = vectors[1:] @ vectors[0]
    if latest_user:
        score = float(sims[0])
        if previous:
            score = max(score, CONTEXT_WEIGHT * float(sims[1]))
    else:  # only the previous assistant message to relate the reply to
        score = CONTEXT_WEIGHT * float(sims[0])
    return score


def relevance_score(encode: Encode, reply: str, latest_user: str, context: list[str]) -> float:
    """Relevance of ``reply`` to ``latest_user`` given the window's earlier messages.

    ``context`` holds the earlier messages of the window, oldest first, as
    ``"user: ..."`` / ``"assistant: ..."`` strings. Returns a cosine similarity
    (about -1..1; higher is more relevant). Edge cases, decided without calling
    ``encode``: an empty reply scores 0.0; a reply with no user message and no
    earlier assistant message to refer to (the assistant spoke first) scores 1.0,
    as there is nothing it could be irrelevant to.
    """
    from ..embeddings.batching import drive

    return drive(relevance_steps(reply, latest_user, context), encode)
