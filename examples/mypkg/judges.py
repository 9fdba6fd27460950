"""Custom judges the CLI imports by path (``-m mypkg.judges:politeness``).

An attribute the CLI can use is either

* a **factory** — a callable returning a compiled graph. When it takes
  ``model=``, the CLI passes the judge built from ``--model`` (so every metric
  of the run shares one concurrency limit and cache); it also gets the
  command-line options it names (``threshold``, ``window_size``, ...);
* a **compiled graph**, used as it is, with the model it was built with.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

from judgegraph import make_metric

POLITENESS = """\
Read the {{ conversation }} and rate the assistant's tone across all of its replies:
- "consistently_polite": every reply is courteous and professional;
- "mostly_polite": one or two replies are curt, dismissive or impatient;
- "impolite": the assistant is rude, sarcastic, or blames the user.
Judge the tone only, not whether the answers are correct."""


def politeness(*, model: Any = None, threshold: float = 0.5):
    """A factory: ``model`` (the run's judge) and ``threshold`` come from the command line."""
    return make_metric(
        name="politeness",
        instructions=POLITENESS,
        feedback_type=Literal["consistently_polite", "mostly_polite", "impolite"],
        scores={"consistently_polite": 1.0, "mostly_polite": 0.5, "impolite": 0.0},
        threshold=threshold,
        model=model,
    )


#: A partial of make_metric is a factory too (it takes ``model=``).
goal_met = partial(
    make_metric,
    name="goal_met",
    feedback_type=bool,
    instructions=(
        "Here is a support conversation:\n{{ conversation }}\n\n"
        "And what it was expected to achieve:\n{{ expectations }}\n\n"
        "Is the expected outcome reached by the end of the conversation? Answer true only if the user got"
        " what the expectation describes, false otherwise."
    ),
)
