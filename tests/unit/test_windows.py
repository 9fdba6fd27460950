import pytest

from judgegraph.data.conversation import Conversation
from judgegraph.data.windows import exchanges, sliding_windows


def conv(*turns):
    return Conversation(id="c", turns=[{"role": r, "content": c} for r, c in turns])


def shape(c, w):
    return [[(ex.user_text, ex.reply_text) for ex in win.exchanges] for win in sliding_windows(c, w)]


def test_one_window_per_exchange_holding_the_last_min_i_plus_1_w():
    c = conv(*[(r, f"{r}{i}") for i in range(4) for r in ("user", "assistant")])
    wins = sliding_windows(c, 2)
    assert [len(w.exchanges) for w in wins] == [1, 2, 2, 2]
    assert [w.target.user_text for w in wins] == ["user0", "user1", "user2", "user3"]
    assert [ex.user_text for ex in wins[3].exchanges] == ["user2", "user3"]


def test_window_larger_than_conversation_grows_from_one():
    c = conv(("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d"))
    assert [len(w.exchanges) for w in sliding_windows(c, 10)] == [1, 2]


def test_consecutive_assistant_turns_are_one_reply():
    c = conv(("user", "q"), ("assistant", "part 1"), ("assistant", "part 2"), ("user", "q2"), ("assistant", "a2"))
    exs = exchanges(c)
    assert len(exs) == 2
    assert exs[0].reply_text == "part 1\n\npart 2"
    assert exs[0].reply_turn_indices == (1, 2)


def test_consecutive_user_turns_open_one_exchange():
    c = conv(("user", "hi"), ("user", "are you there?"), ("assistant", "yes"))
    (ex,) = exchanges(c)
    assert ex.user_text == "hi\n\nare you there?"


def test_greeting_before_the_user_joins_the_first_exchange_as_deepeval():
    # deepeval's get_unit_interactions: [A greet, U q, A reply] is ONE unit, judged on its last reply
    c = conv(("assistant", "Welcome!"), ("user", "hi"), ("assistant", "hello"))
    (ex,) = exchanges(c)
    assert ex.user_text == "hi" and ex.reply_text == "hello"
    assert ex.reply_turn_indices == (2,)
    assert [t.turn.content for t in ex.opening] == ["Welcome!"]
    assert ex.turn_indices == (0, 1, 2)
    (w,) = sliding_windows(c, 3)
    assert w.transcript(include_target_reply=False) == [("assistant", "Welcome!"), ("user", "hi")]
    assert w.transcript() == [("assistant", "Welcome!"), ("user", "hi"), ("assistant", "hello")]


def test_greeting_then_two_exchanges_gives_two_windows():
    c = conv(("assistant", "g"), ("user", "u1"), ("assistant", "a1"), ("user", "u2"), ("assistant", "a2"))
    assert shape(c, 1) == [[("u1", "a1")], [("u2", "a2")]]


@pytest.mark.parametrize("turns", [
    [("assistant", "a"), ("assistant", "b"), ("user", "u")],  # deepeval: no unit without a user before a reply
    [("assistant", "only the bot spoke")],
])
def test_assistant_turns_with_no_user_turn_give_no_window(turns):
    assert exchanges(conv(*turns)) == []
    assert sliding_windows(conv(*turns), 3) == []


def test_trailing_user_turn_without_reply_is_dropped():
    c = conv(("user", "q"), ("assistant", "a"), ("user", "unanswered"))
    assert [ex.user_text for ex in exchanges(c)] == ["q"]


def test_system_turns_are_kept_aside_not_judged():
    c = conv(("system", "You are a bank bot."), ("user", "q"), ("assistant", "a"))
    (w,) = sliding_windows(c, 3)
    assert w.system == ("You are a bank bot.",)
    assert w.target.user_text == "q"


def test_tool_turns_belong_to_their_exchange_as_context():
    c = conv(("user", "weather?"), ("assistant", "checking"), ("tool", "sunny 20C"), ("assistant", "It is sunny."))
    (ex,) = exchanges(c)
    assert ex.reply_text == "checking\n\nIt is sunny."
    assert [t.turn.content for t in ex.tool] == ["sunny 20C"]
    assert ex.turn_indices == (0, 1, 2, 3)


def test_no_assistant_turn_means_no_window():
    assert sliding_windows(conv(("user", "hello?")), 5) == []


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_window_size_below_one_or_not_an_int_is_an_error(bad):
    with pytest.raises(ValueError, match="window_size must be a whole number >= 1"):
        sliding_windows(conv(("user", "q"), ("assistant", "a")), bad)


def test_window_size_one_judges_each_reply_alone():
    c = conv(("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d"))
    assert shape(c, 1) == [[("a", "b")], [("c", "d")]]
