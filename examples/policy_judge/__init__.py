"""Example: a custom multi-step judge composed from judgegraph's nodes.

    from policy_judge import create_policy_metric
    graph = create_policy_metric(model="openai:gpt-4.1-mini")

``python examples/policy_judge/run.py`` runs it on ``chats.jsonl`` (with canned
answers from a scripted chat model unless ``--model`` is given); with
``PYTHONPATH=examples`` the CLI runs it too:
``judgegraph eval examples/policy_judge/chats.jsonl -m policy_judge:create_policy_metric --model ...``.
"""

from .graph import (
    PROMPT_VALUES,
    Claim,
    ClaimCheck,
    Claims,
    ClaimVerdict,
    PolicySettings,
    build_policy_graph,
    create_policy_metric,
)

__all__ = [
    "PROMPT_VALUES",
    "Claim",
    "ClaimCheck",
    "ClaimVerdict",
    "Claims",
    "PolicySettings",
    "build_policy_graph",
    "create_policy_metric",
]
