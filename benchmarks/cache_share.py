"""The share of judge input tokens a provider's prefix cache would serve, before and after the cache-friendly
prompt layout (docs/cost_cache.md), by OpenAI's rule (judgegraph.providers.prefixcache: prefixes of at least 1,024
tokens already sent, in steps of 128), the rule of issue 20's table.

The set: 40 support conversations of 30 exchanges, replies of ~800 characters, generated deterministically.
Measured: turn relevancy with window 10 (one request per window), and conversational guidelines with 5
guidelines (one request per guideline), each request as the LLM judge sends it to an OpenAI model (the
response_format schema, then the rendered prompt), sent in conversation order. "Before" renders the prompt
files of ``--before`` (default: the last commit before the layout, read with ``git archive``); "after" the
files of this tree;
"ceiling" (turn relevancy) the most any layout of the same windows could share (:func:`ceiling_requests`).

    python benchmarks/cache_share.py [--before COMMIT] [--conversations 40] [--exchanges 30]
"""

from __future__ import annotations

import argparse
import io
import json
import random
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from judgegraph.core.nodes import conversation_json, render_messages
from judgegraph.cost.pricing import prices_for
from judgegraph.data.conversation import Conversation
from judgegraph.data.prompts import Prompt, load_prompt, parse_prompt
from judgegraph.data.results import Usage
from judgegraph.data.windows import sliding_windows
from judgegraph.metrics.relevancy import DEFAULT_RUBRIC_STEP, JUDGE_STEP, TurnVerdict, turn_request
from judgegraph.metrics.session.guidelines import JUDGE_STEP as GUIDELINE_STEP
from judgegraph.metrics.session.guidelines import GuidelineJudgement
from judgegraph.providers.openai import strict_json_schema
from judgegraph.providers.prefixcache import PrefixCache, chat_parts, request_tokens

ROOT = Path(__file__).resolve().parents[1]
#: The last commit before the cache-friendly layout (the prompts as they were): the default "before".
BEFORE_LAYOUT = "21d0a75"
TOPICS = ("a late parcel", "a refund", "a damaged screen", "a password reset", "an invoice", "a subscription",
          "a warranty claim", "a delivery address", "a discount code", "a missing item")
GUIDELINES = ("Never promise a delivery date.", "Answer in the user's language.", "Offer a human agent when asked.",
              "Never ask for a full card number.", "Keep every reply under 200 words.")
SYSTEM = "You are the support assistant of an online shop. Be precise and polite."


def support_conversations(n: int, exchanges: int, seed: int = 20) -> list[Conversation]:
    """``n`` conversations of ``exchanges`` exchanges, replies of about 800 characters (deterministic)."""
    rng = random.Random(seed)
    words = ("order", "parcel", "refund", "carrier", "warehouse", "tracking", "account", "invoice", "address",
             "replacement", "policy", "days", "label", "receipt", "support", "payment", "update", "status")
    out = []
    for c in range(n):
        topic = TOPICS[c % len(TOPICS)]
        turns = [{"role": "system", "content": SYSTEM}]
        for i in range(exchanges):
            turns.append({"role": "user", "content": f"About {topic} (case {c}-{i}): what happens next with my "
                                                     f"{rng.choice(words)} and the {rng.choice(words)}?"})
            reply = f"Thank you for asking about {topic}. "
            while len(reply) < 800:
                reply += " ".join(rng.choice(words) for _ in range(8)).capitalize() + ". "
            turns.append({"role": "assistant", "content": reply.strip()})
        out.append(Conversation.model_validate({"id": f"support-{c:02d}", "turns": turns}))
    return out


def _schema(cls: type) -> str:
    """The response_format the LLM judge sends to an OpenAI model for ``cls``."""
    shape = {"type": "json_schema", "json_schema": {"name": cls.__name__, "schema": strict_json_schema(cls),
                                                    "strict": True}}
    return json.dumps(shape, sort_keys=True)


def prompts_at(ref: str) -> Callable[[str], Prompt]:
    """The prompt files of git ``ref`` (``git archive``), as a loader of prompt steps."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "prompts"], capture_output=True, check=True).stdout
    tmp = Path(tempfile.mkdtemp(prefix="judgegraph-prompts-"))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(tmp, filter="data")
    return lambda step: parse_prompt(step, (tmp / "prompts" / f"{step}.md").read_text(encoding="utf-8"))


def relevancy_requests(conversations: list[Conversation], load: Callable[[str], Prompt]) -> Iterator[list[str]]:
    prompt, rubric, schema = load(JUDGE_STEP), load(DEFAULT_RUBRIC_STEP).template.strip(), _schema(TurnVerdict)
    for conversation in conversations:
        for window in sliding_windows(conversation, 10):
            yield chat_parts(schema, [("user", prompt.render(turn_request(window, rubric=rubric).values))])


def ceiling_requests(conversations: list[Conversation], load: Callable[[str], Prompt]) -> Iterator[list[str]]:
    """Not a prompt judgegraph sends: the most any layout sending each window's messages once, in order, could
    share. The instructions and rubric, the system instructions, then the window's messages as one transcript
    (the judged exchange flowing on from the earlier ones), and last only the number of the reply to judge."""
    prompt, rubric, schema = load(JUDGE_STEP), load(DEFAULT_RUBRIC_STEP).template.strip(), _schema(TurnVerdict)
    head = prompt.template.split("<system_instructions>")[0].replace("{{ rubric }}", rubric)
    for conversation in conversations:
        for window in sliding_windows(conversation, 10):
            body = render_messages(window.transcript())
            text = f"{head}<system_instructions>\n{SYSTEM}\n</system_instructions>\n\n<window>\n{body}\n</window>\n\n"
            yield chat_parts(schema, [("user", text + f"Judge the last assistant message (exchange {window.index}).")])


def guideline_requests(conversations: list[Conversation], load: Callable[[str], Prompt]) -> Iterator[list[str]]:
    prompt, schema = load(GUIDELINE_STEP), _schema(GuidelineJudgement)
    for conversation in conversations:
        transcript = conversation_json(conversation)
        for guideline in GUIDELINES:
            yield chat_parts(schema, [("user", prompt.render({"conversation": transcript, "guideline": guideline}))])


def measure(requests: Iterator[list[str]]) -> tuple[int, int, int, int]:
    """(calls, prompt characters, input tokens, tokens a prefix cache would serve)."""
    cache = PrefixCache()
    calls = chars = tokens = served = 0
    for parts in requests:
        ids = request_tokens(parts)
        calls, chars, tokens = calls + 1, chars + len(parts[-1]), tokens + len(ids)
        served += cache.serve(ids)
    return calls, chars, tokens, served


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default=BEFORE_LAYOUT,
                        help=f"the git commit whose prompt files are 'before' (default {BEFORE_LAYOUT}, the last"
                             " before the layout)")
    parser.add_argument("--conversations", type=int, default=40)
    parser.add_argument("--exchanges", type=int, default=30)
    args = parser.parse_args()
    conversations = support_conversations(args.conversations, args.exchanges)
    loaders = {f"before ({args.before})": prompts_at(args.before), "after (this tree)": load_prompt}
    print(f"{args.conversations} conversations x {args.exchanges} exchanges, replies ~800 characters; "
          "cacheable = OpenAI's rule (prefixes >= 1,024 tokens already sent, 128-token steps)")
    prices = prices_for("gpt-4.1-mini")
    assert prices is not None
    print(f"dollars: gpt-4.1-mini at list price, {prices.describe()}; 100 output tokens a call assumed")
    print(f"{'metric':<40} {'prompts':<18} {'calls':>6} {'characters':>11} {'input tokens':>13} "
          f"{'cacheable':>10} {'share':>6} {'$ no cache':>10} {'$ cached':>9}")
    rows = [(metric, label, build, load)
            for metric, build in (("turn relevancy, window 10", relevancy_requests),
                                  ("conversational guidelines, 5 guidelines", guideline_requests))
            for label, load in loaders.items()]
    rows.insert(2, ("turn relevancy, window 10", "ceiling (see doc)", ceiling_requests, load_prompt))
    for metric, label, build, load in rows:
        calls, chars, tokens, served = measure(build(conversations, load))
        plain = prices.cost(Usage(calls=calls, input_tokens=tokens, output_tokens=100 * calls)) or 0.0
        cached = prices.cost(Usage(calls=calls, input_tokens=tokens, output_tokens=100 * calls,
                                   cached_input_tokens=served)) or 0.0
        print(f"{metric:<40} {label:<18} {calls:>6} {chars:>11,} {tokens:>13,} {served:>10,} {served / tokens:>6.1%}"
              f" {plain:>10.3f} {cached:>9.3f}")


if __name__ == "__main__":
    main()
