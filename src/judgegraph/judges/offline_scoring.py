"""The offline judge's relevance rule over sentence embeddings (docs/offline_judge.md): ``cos(reply, latest_user)``,
or for a short follow-up ``max(cos(reply, latest_user), CONTEXT_WEIGHT * cos(reply, previous_assistant + latest_user))``;
relevant from :data:`DEFAULT_THRESHOLD`. Constants calibrated by ``benchmarks/calibrate_offline_judge.py``.
``encode`` maps a list of texts to an ``(n, d)`` array of L2-normalised rows, called once per score.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence

import numpy as np

__all__ = ["CONTEXT_WEIGHT", "DEFAULT_THRESHOLD", "FOLLOWUP_MAX_WORDS", "MAX_CONTEXT_CHARS", "RULE", "followup_query",
           "is_short_followup", "previous_assistant", "previous_message", "relevance_score", "relevance_steps"]

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
    reply, latest_user = reply.strip(), latest_user.strip()
    if not reply:
        return 0.0
    previous = previous_assistant(context) if is_short_followup(latest_user) else ""
    texts = [reply, *([latest_user] if latest_user else [])]
    if previous:
        texts.append(followup_query(previous, latest_user) if latest_user else previous)
    if len(texts) == 1:
        return 1.0
    vectors = np.asarray((yield texts), dtype=np.float32)
    if vectors.shape[0] != len(texts):
        raise ValueError(f"encode returned {vectors.shape[0]} vectors for {len(texts)} texts")
    sims = [float(s) for s in vectors[1:] @ vectors[0]]
    if not latest_user:  # only the previous assistant message to relate the reply to
        return CONTEXT_WEIGHT * sims[0]
    return max(sims[0], CONTEXT_WEIGHT * sims[1]) if previous else sims[0]


def relevance_score(encode: Encode, reply: str, latest_user: str, context: list[str]) -> float:
    """Relevance of ``reply`` to ``latest_user`` (a cosine, about -1..1) given the window's earlier messages
    (``context``: ``"user: ..."`` / ``"assistant: ..."`` strings, oldest first). Without calling ``encode``: an
    empty reply scores 0.0, a reply with no user message and no earlier assistant message 1.0."""
    from ..embeddings.batching import drive

    return drive(relevance_steps(reply, latest_user, context), encode)
