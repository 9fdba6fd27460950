"""A review loop end to end, with scripted models (no key, no network):

1. judge a conversation with a checkpointer and ``review=True``: the run pauses
   in ``review_verdicts`` with the judge's verdicts;
2. a person overrides one verdict and the run resumes: the score is recomputed
   and the verdict records what the judge had said;
3. one window is judged again with a stricter rubric (``judgegraph.steering.rejudge``):
   one call, the other verdicts kept, the score recomputed by ``reduce_score``.

    python examples/review_loop.py
"""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from judgegraph import ScriptedChatModel
from judgegraph.metrics.relevancy import create_turn_relevancy_metric
from judgegraph.steering import rejudge

CONVERSATION = {"id": "refund-42", "turns": [
    {"role": "user", "content": "I want a refund for order 42."},
    {"role": "assistant", "content": "Sure, I have started the refund for order 42."},
    {"role": "user", "content": "How long will it take?"},
    {"role": "assistant", "content": "Our store opens at 9am."},
    {"role": "user", "content": "And will I get an email?"},
    {"role": "assistant", "content": "Usually, yes."},
]}
YES = {"reason": "It answers the user's question.", "verdict": "yes"}


def show(title, result):
    print(f"== {title}: score {result.score:.2f} ({result.status})")
    for v in result.verdicts:
        who = f"  [person; judge said {v.review.judge_verdict!r}]" if v.review else ""
        print(f"   window {v.window}: {v.verdict:3} {v.reason}{who}")


def main():
    # The judge wrongly finds the opening-hours reply relevant (keyed on the reply it judges).
    judge_model = ScriptedChatModel(rules=[("store opens", [YES])], default=YES, section="reply_to_judge")
    graph = create_turn_relevancy_metric(model=judge_model, review=True, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "review-1"}}

    out = graph.invoke({"conversation": CONVERSATION}, config)
    (pause,) = out["__interrupt__"]
    print(f"== paused for review: {len(pause.value['verdicts'])} verdicts, {judge_model.call_count} judge calls")
    for v in pause.value["verdicts"]:
        print(f"   window {v['id']}: {v['verdict']} {v['reason']}")

    # A person overrides window 1 and resumes: the score is recomputed from the reviewed verdicts.
    out = graph.invoke(Command(resume={"1": {"verdict": "no", "reason": "Opening hours do not answer how long."}}),
                       config)
    show("after review", out["results"]["turn_relevancy"])

    # Window 2 again with a stricter rubric: one call, the person's verdict on window 1 is kept.
    strict_model = ScriptedChatModel(
        rules=[("STRICT", [{"reason": "'Usually' is not a clear yes or no.", "verdict": "no"}])], default=YES)
    strict = ("STRICT: a reply is relevant only if it answers the question directly and definitely; "
              "hedged answers are not relevant.")
    result = rejudge(graph, config, model=strict_model, verdict_ids=["2"], rubric=strict)
    show(f"after re-judging window 2 with a stricter rubric ({strict_model.call_count} call)", result)


if __name__ == "__main__":
    main()
