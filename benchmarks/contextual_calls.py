"""Judge calls and tokens of turn contextual relevancy, by step, for every
batching choice, beside deepeval's call count.

A conversation of 20 exchanges, each assistant turn with 5 retrieved nodes
(3 on topic, 2 off topic, 2-3 sentences each), window 10, judged by a fake chat
model that answers from the prompt's content (extraction = the node's
sentences; a statement is relevant when it shares a topic word with the user
message; one-sentence reasons). Tokens are tiktoken cl100k counts of the real
prompts and replies, as a provider would report them. No network, no key.

    python benchmarks/contextual_calls.py [--exchanges 20 --nodes 5 --window 10]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from judgegraph.core.statements import split_sentences
from judgegraph.data.results import Usage
from judgegraph.judges import resolve_judge
from judgegraph.judges.scripted import ScriptedChatModel
from judgegraph.metrics.contextual import ContextualSettings, build_turn_contextual_relevancy_graph

TOPICS = [
    ("returns", "Can I still return the {thing} I bought {when}? It does not fit well."),
    ("refunds", "When will I get my refund for the {thing}? I sent it back {when}."),
    ("shipping", "How much does shipping cost for the {thing} to Canada, and how long does it take?"),
    ("warranty", "The {thing} I bought {when} stopped working. Is it covered by the warranty?"),
    ("passwords", "I cannot log in to order the {thing}; how do I reset my password?"),
    ("discounts", "Is there a discount code for the {thing}? I saw a sale {when}."),
    ("sizes", "Which size of the {thing} should I pick if I usually wear a medium?"),
    ("tracking", "Where can I track the parcel with the {thing}? It was sent {when}."),
]
THINGS = ["running shoes", "rain jacket", "coffee machine", "backpack", "hiking boots"]
WHEN = ["last week", "two days ago", "in March", "yesterday", "a month ago"]
KEYWORDS = {
    "returns": ("return",), "refunds": ("refund",), "shipping": ("shipping", "delivery"),
    "warranty": ("warranty",), "passwords": ("password",), "discounts": ("discount",),
    "sizes": ("size",), "tracking": ("tracking", "parcel"),
}
ON_TOPIC = {
    "returns": ["Unworn items can be returned within 30 days of delivery. A return needs the original box.",
                "To start a return, open Orders, choose the order and click Return items. A prepaid return label is emailed.",
                "Final-sale items cannot be returned. A return of worn items is refused at the warehouse."],
    "refunds": ["A refund is paid to the original payment method. A refund takes up to 5 business days after the parcel arrives.",
                "A refund by bank transfer can take 2 extra days. An email confirms the refund amount.",
                "A partial refund applies when accessories are missing. The refund excludes the original delivery fee."],
    "shipping": ["Shipping to Canada costs 15 dollars per order. Delivery takes 5 to 8 business days.",
                 "Express shipping arrives in 2 days and costs 30 dollars. Shipping is free over 200 dollars.",
                 "Customs fees for shipping outside the EU are paid by the customer on delivery."],
    "warranty": ["All electrical products carry a two-year warranty. The warranty covers manufacturing defects.",
                 "The warranty does not cover damage from misuse or limescale. A warranty claim needs the receipt.",
                 "To claim the warranty, fill in the form under Support. A warranty repair takes 10 days."],
    "passwords": ["Click Forgot password on the sign-in page. A password reset link is emailed to you.",
                  "A password reset link expires after one hour. Request a new password link if it expired.",
                  "A password must have 12 characters. Check the spam folder if the password email is missing."],
    "discounts": ["Discount codes are sent to newsletter subscribers. One discount code applies per order.",
                  "A discount code cannot be combined with sale prices. Discount codes expire after 30 days.",
                  "Students get a 10 percent discount after verifying their status."],
    "sizes": ["Our sizes run small: pick one size up from your usual size. The size chart is on each product page.",
              "A medium size fits chest widths of 96 to 101 cm. Jacket sizes leave room for layers.",
              "An exchange for another size is free within 30 days."],
    "tracking": ["Every shipping confirmation email contains a tracking link. Tracking updates every 6 hours.",
                 "Tracking shows the parcel at the local depot the day before it arrives.",
                 "If tracking shows no movement for 3 business days, contact us and we open a carrier investigation."],
}
OFF_TOPIC = [
    "Our Berlin flagship store opens at 9 am from Monday to Saturday. Parking is behind the building.",
    "We are hiring warehouse staff in Leipzig. Employees enjoy a staff price on new collections.",
    "Clean leather with a damp cloth and let it dry away from direct heat.",
    "Gift cards are valid for three years and cannot be exchanged for cash.",
    "Our soles use recycled rubber. The midsole foam is made from sugarcane.",
    "Subscribe to the newsletter for stories about our designers and new colours.",
]


def conversation(exchanges: int, nodes: int) -> dict:
    turns = []
    for i in range(exchanges):
        topic, question = TOPICS[i % len(TOPICS)]
        thing, when = THINGS[i % len(THINGS)], WHEN[(i // 2) % len(WHEN)]
        on = [ON_TOPIC[topic][(i + k) % 3] for k in range(3)]
        off = [OFF_TOPIC[(i + k) % len(OFF_TOPIC)] for k in range(2)]
        retrieved = (on + off)[:nodes] + [OFF_TOPIC[(i + k) % len(OFF_TOPIC)] for k in range(max(0, nodes - 5))]
        # every node of every turn distinct (as the issue assumes), so the cache cannot merge extractions
        retrieved = [f"Article {i + 1}.{k + 1}: {c}" for k, c in enumerate(retrieved)]
        turns.append({"role": "user", "content": question.format(thing=thing, when=when)})
        turns.append({"role": "assistant",
                      "content": f"Here is what our help centre says about {topic} for your {thing}: "
                                 f"{ON_TOPIC[topic][0]} Let me know if you need anything else.",
                      "retrieval_context": [{"context": c, "source": f"kb/{i + 1}-{k + 1}.md"}
                                            for k, c in enumerate(retrieved)]})
    return {"id": "benchmark", "turns": turns}


def _section(text: str, tag: str) -> str:
    m = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, re.S)
    return m.group(1) if m else ""


class ContentModel(ScriptedChatModel):
    """Answers from the prompt: realistic reply sizes, deterministic verdicts."""

    def _pick(self, text: str):
        with self._state["lock"]:
            self._state["prompts"].append(text)
        if "<retrieved_nodes>" in text:
            body = _section(text, "retrieved_nodes")
            parts = re.split(r"^\[node (\d+)\]\n", body, flags=re.M)[1:]
            return {"nodes": [{"node": int(n), "statements": split_sentences(t)} for n, t in zip(parts[::2], parts[1::2])]}
        tag = "statements_marked_irrelevant" if "<statements_marked_irrelevant>" in text else "statements"
        user = _section(text, "latest_user_message").lower()
        topic = next((t for t, words in KEYWORDS.items() if any(w in user for w in words)), "")
        items = re.findall(r"^(\d+)\. (.*)$", _section(text, tag), re.M)
        out = []
        for n, statement in items:
            relevant = bool(topic) and any(w in statement.lower() for w in KEYWORDS[topic])
            reason = (f"The statement is about {topic}, which is what the user asks about here." if relevant
                      else "The statement is about another subject than the user's question.")
            out.append({"statement": int(n), "reason": reason, "verdict": "yes" if relevant else "no"})
        return {"verdicts": out}


def run(conv: dict, window: int, extract_per: str, judge_per: str, verify: bool = False):
    model = ContentModel()
    settings = ContextualSettings(name="ctx", judge=resolve_judge(model=model), window_size=window,
                                  extract_per=extract_per, judge_per=judge_per, verify=verify)
    graph = build_turn_contextual_relevancy_graph(settings).compile(name="ctx")
    res = graph.invoke({"conversation": conv})["results"]["ctx"]
    assert model.call_count == res.usage.calls, (model.call_count, res.usage.calls)
    return res


def deepeval_calls(exchanges: int, window: int, nodes: int) -> int:
    """deepeval TurnContextualRelevancy: every node of every turn in each window,
    one call per node per window, + one reason call per window, + one final reason."""
    return nodes * sum(min(i, window) for i in range(1, exchanges + 1)) + exchanges + 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exchanges", type=int, default=20)
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--window", type=int, default=10)
    args = ap.parse_args(argv)
    U, C, W = args.exchanges, args.nodes, args.window
    conv = conversation(U, C)
    target = 105 if (U, C) == (20, 5) else None  # the bound at 20 exchanges x 5 nodes

    print(f"turn contextual relevancy: {U} exchanges, {C} nodes per turn, window {W}")
    de = deepeval_calls(U, W, C)
    print(f"deepeval formula C*sum(min(i,W), i=1..U) + U + 1 = {C}*{sum(min(i, W) for i in range(1, U + 1))} + {U} + 1"
          f" = {de} calls")
    if target:
        print(f"target: <= {target} calls")
    print()
    header = f"{'extract per':<12}{'judge per':<11}{'verify':<8}{'extract':>9}{'judge':>7}{'verify':>8}{'calls':>7}" \
             f"{'in tok':>9}{'out tok':>9}{'score':>7}"
    print(header)
    print("-" * len(header))
    rows = {}
    for extract_per, judge_per, verify in [("turn", "turn", False), ("turn", "node", False), ("turn", "statement", False),
                                           ("node", "node", False), ("node", "statement", False), ("turn", "turn", True)]:
        res = run(conv, W, extract_per, judge_per, verify)
        by = res.details["usage_by_step"]
        rows[(extract_per, judge_per, verify)] = (res, by)
        get = lambda step, by=by: by.get(step, {}).get("calls", 0)  # noqa: E731
        print(f"{extract_per:<12}{judge_per:<11}{'yes' if verify else 'no':<8}{get('extract_statements'):>9}"
              f"{get('judge_statements'):>7}{get('verify_verdict'):>8}{res.usage.calls:>7}{res.usage.input_tokens:>9}"
              f"{res.usage.output_tokens:>9}{res.score:>7.3f}")
    # extract per node + judge per turn cannot be one pipeline (a judgement would wait on 5 extractions):
    # its cost is the per-node extraction plus the per-turn judgement measured above.
    ext = Usage.model_validate(rows[("node", "node", False)][1]["extract_statements"])
    jud = Usage.model_validate(rows[("turn", "turn", False)][1]["judge_statements"])
    both = ext + jud
    print(f"{'node':<12}{'turn':<11}{'no':<8}{ext.calls:>9}{jud.calls:>7}{0:>8}{both.calls:>7}{both.input_tokens:>9}"
          f"{both.output_tokens:>9}{'':>7}  (computed: node/node extraction + turn/turn judgement; not offered)")
    default, default_by = rows[("turn", "turn", False)]
    per_statement, _ = rows[("turn", "statement", False)]
    print()
    print(f"default (extract per turn, judge per turn): {default.usage.calls} calls, "
          f"{default.usage.total_tokens} tokens; {de / default.usage.calls:.1f}x fewer calls than deepeval"
          + (f"; target <= {target}: {'met' if default.usage.calls <= target else 'MISSED'}" if target else ""))
    for step, u in default_by.items():
        print(f"  {step}: {u['calls']} calls, {u['input_tokens']} input + {u['output_tokens']} output tokens")
    print(f"per-statement judging instead: {per_statement.usage.calls} calls "
          f"({per_statement.usage.calls / default.usage.calls:.1f}x), {per_statement.usage.total_tokens} tokens "
          f"({per_statement.usage.total_tokens / default.usage.total_tokens:.1f}x): every call repeats the "
          f"instructions and the window's earlier messages")
    # the cache: a second metric on the same judge extracts nothing again
    model = ContentModel()
    judge = resolve_judge(model=model)
    for name, window in (("w10", W), ("w3", 3)):
        g = build_turn_contextual_relevancy_graph(ContextualSettings(name=name, judge=judge, window_size=window)).compile(name=name)
        r = g.invoke({"conversation": conv})["results"][name]
        print(f"shared judge, metric {name}: calls by step {r.details['calls_by_step']}, cache hits {r.details['cached']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
