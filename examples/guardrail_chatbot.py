"""A LangGraph chatbot with a relevance guardrail: every reply is judged before
the user sees it; an off-topic reply goes back to a regenerate node together
with the judge's reason.

    START → chatbot → judge ─passed→ END
                        └─failed/error→ regenerate → judge …   (at most 2 retries, then a fallback)

    python examples/guardrail_chatbot.py                        # scripted models, no key
    python examples/guardrail_chatbot.py --model openai:gpt-4.1-mini --judge-model openai:gpt-4.1-mini

The judge is ``judge_node("turn_relevancy", scope="latest")``: one judge call
per reply, the earlier messages as its context.
"""

from __future__ import annotations

import argparse
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, SystemMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from judgegraph.apps import judge_node, route_on_verdict, verdict_reason

SYSTEM = "You are the support assistant of Acme Bank. Answer questions about Acme accounts and cards."
MAX_RETRIES = 2
FALLBACK = "Sorry, I can only help with your Acme account and cards. Could you rephrase your question?"


class ChatState(MessagesState):
    judgements: dict[str, Any]  # {metric: result as JSON}, written by the judge node
    retries: int


def scripted_models():
    """A chatbot that first wanders off topic and a judge that notices."""
    from judgegraph import ScriptedChatModel

    bot = ScriptedChatModel(rules=[
        ("was judged off-topic", ["To block your card, open the Acme app, choose Cards, then Block card."]),
        ("block my card", ["Sunny with a light breeze today, perfect for a walk!"]),
    ], default="Happy to help with your Acme account.")
    judge = ScriptedChatModel(rules=[
        ("Sunny", [{"reason": "The user asked how to block a card; the reply talks about the weather.", "verdict": "no"}]),
    ], default={"reason": "The reply answers the question.", "verdict": "yes"}, section="reply_to_judge")
    return bot, judge


def build_chatbot(bot: Any, judge_model: Any):
    def chatbot(state: ChatState) -> dict[str, Any]:
        return {"messages": [bot.invoke([SystemMessage(SYSTEM), *state["messages"]])], "retries": 0}

    def regenerate(state: ChatState) -> dict[str, Any]:
        last = state["messages"][-1]
        retries = state.get("retries", 0) + 1
        if retries > MAX_RETRIES:
            reply = AIMessage(FALLBACK)
        else:
            why = verdict_reason(state, "turn_relevancy")
            note = SystemMessage(f"{SYSTEM}\nYour previous reply was judged off-topic: {why} Answer the user's last "
                                 "question directly.")
            reply = bot.invoke([note, *state["messages"][:-1]])
        return {"messages": [RemoveMessage(id=last.id), reply], "retries": retries}

    guard = route_on_verdict("turn_relevancy", passed=END, failed="regenerate")

    def route(state: ChatState) -> str:
        return END if state.get("retries", 0) > MAX_RETRIES else guard(state)

    builder = StateGraph(ChatState)
    builder.add_node("chatbot", chatbot)
    builder.add_node("judge", judge_node("turn_relevancy", model=judge_model, scope="latest"))
    builder.add_node("regenerate", regenerate)
    builder.add_edge(START, "chatbot")
    builder.add_edge("chatbot", "judge")
    builder.add_conditional_edges("judge", route, guard.destinations)
    builder.add_edge("regenerate", "judge")
    return builder.compile(name="guarded_chatbot")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="the chatbot's model, e.g. openai:gpt-4.1-mini (default: scripted)")
    ap.add_argument("--judge-model", help="the judge's model (default: scripted)")
    ap.add_argument("question", nargs="?", default="How do I block my card? I lost it.")
    args = ap.parse_args(argv)
    bot, judge = scripted_models()
    if args.model:
        from judgegraph.judges.llm import resolve_model

        bot = resolve_model(args.model, temperature=None)
    app = build_chatbot(bot, args.judge_model or judge)
    print(app.get_graph().draw_mermaid())
    for step in app.stream({"messages": [HumanMessage(args.question)]}, stream_mode="updates"):
        for node, update in step.items():
            if node == "judge":
                res = update["judgements"]["turn_relevancy"]  # MetricResult.model_dump(mode="json")
                print(f"judge       {res['status']:8} {res['reason']}")
            elif update and update.get("messages"):
                print(f"{node:11} {update['messages'][-1].content}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
