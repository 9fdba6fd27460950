"""Aligning the offline judge: fitting its rule from labels, the rule file, the flag, the command.

The labelled set is synthetic and written here: the user asks about three topic
words; a relevant reply talks about them; an irrelevant one either talks about
other words (the default cosine rule gets it right) or parrots the question
back as a question (the default rule calls it relevant: its cosine is high).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

from judgegraph.cli import main
from judgegraph.judges import resolve_judge
from judgegraph.judges.offline import EmbeddingJudge
from judgegraph.judges.offline_rule import OfflineRule, load_rule
from judgegraph.loaders.files import load_conversations
from judgegraph.metrics.relevancy import turn_inputs
from judgegraph.trust.labels import read_labels
from judgegraph.trust.offline_fit import LabelsError, auc, feature_matrix, fit_rule, label_cases, parse_positive

WORDS = ("apple banana cherry delta engine forest garden harbor island jungle kettle lemon mango needle ocean "
         "pepper quartz river saddle tiger umbrella violin walnut yellow zebra anchor bridge candle dragon eagle").split()


class BagOfWords:
    """A deterministic stand-in for the embedding model: hashed word counts."""

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), 256), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z]{3,}", t.lower()):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 256] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def synthetic(n_dialogues: int = 40, seed: int = 1) -> tuple[list[dict], list[dict]]:
    """Conversations (judgegraph format) and labels ({"id", "turn", "label"}) of three exchanges each."""
    rng = np.random.default_rng(seed)
    convs, labels = [], []
    for d in range(n_dialogues):
        turns: list[dict] = []
        for k in range(3):
            w = [str(x) for x in rng.choice(WORDS, 6, replace=False)]
            kind = ("relevant", "off", "echo")[(d + k) % 3]
            user = f"please tell me all about the {w[0]} and the {w[1]} near the {w[2]}"
            reply = {"relevant": f"the {w[0]} and {w[1]} are lovely, the {w[2]} too",
                     "off": f"i like {w[3]} {w[4]} and {w[5]} a lot",
                     "echo": f"the {w[0]} and the {w[1]} near the {w[2]}?"}[kind]
            turns += [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]
            labels.append({"id": f"d{d}", "turn": len(turns), "label": "yes" if kind == "relevant" else "no"})
        convs.append({"id": f"d{d}", "turns": turns})
    return convs, labels


def write(tmp_path: Path, convs: list[dict], labels: list[dict]) -> tuple[Path, Path]:
    cpath, lpath = tmp_path / "convs.jsonl", tmp_path / "labels.jsonl"
    cpath.write_text("".join(json.dumps(c) + "\n" for c in convs), encoding="utf-8")
    lpath.write_text("".join(json.dumps(x) + "\n" for x in labels), encoding="utf-8")
    return cpath, lpath


def fitted(tmp_path: Path) -> OfflineRule:
    cpath, lpath = write(tmp_path, *synthetic())
    cases = label_cases(load_conversations(cpath), read_labels(lpath, metric="turn-relevancy"), labels_path=str(lpath),
                        positive=parse_positive(None), inputs_of=turn_inputs)
    x = feature_matrix(cases, BagOfWords().encode)
    return fit_rule(x, np.array([c.relevant for c in cases]), [c.conversation for c in cases], seed=0)


def test_the_fitted_rule_beats_the_default_on_held_out_dialogues(tmp_path: Path) -> None:
    rule = fitted(tmp_path)
    held = rule.fit["held_out"]
    assert rule.kind == "logistic" and rule.fit["chosen"].startswith("logistic")
    assert rule.fit["n_test"] == 36 and rule.fit["n_train"] == 84  # 12 of 40 dialogues held out, 3 turns each
    # the default calls every parroted question relevant: a third of the cases wrong at least
    assert held["default_rule"]["accuracy"] <= 0.7
    assert held["fitted_rule"]["accuracy"] >= 0.95 > held["default_rule"]["accuracy"]
    assert held["fitted_rule"]["auc"] > held["default_rule"]["auc"]


def test_the_split_keeps_each_dialogue_on_one_side(tmp_path: Path) -> None:
    from judgegraph.trust.offline_fit import split_groups

    groups = [f"d{i // 3}" for i in range(120)]
    test = split_groups(groups, seed=4)
    for g in set(groups):
        assert len({bool(h) for t, h in zip(groups, test) if t == g}) == 1
    assert (split_groups(groups, seed=4) == test).all() and not (split_groups(groups, seed=5) == test).all()


def test_the_rule_file_round_trips_and_its_hash_follows_its_numbers(tmp_path: Path) -> None:
    rule = fitted(tmp_path)
    path = rule.save(tmp_path / "out")
    assert path.name == f"offline-rule-{rule.hash[:12]}.json"
    again = load_rule(path)
    assert again == rule and again.hash == rule.hash and again.fit == rule.fit
    changed = OfflineRule(rule.kind, rule.features, rule.threshold, (rule.weights[0] + 0.01, *rule.weights[1:]),
                          rule.bias, rule.mean, rule.scale, rule.fit)
    assert changed.hash != rule.hash
    same_decision = OfflineRule(rule.kind, rule.features, rule.threshold, rule.weights, rule.bias, rule.mean,
                                rule.scale, {"other": "provenance"})
    assert same_decision.hash == rule.hash  # the hash covers what decides verdicts only
    data = json.loads(path.read_text())
    data["threshold"] = 0.9  # a hand edit that keeps the old hash
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"field 'sha256' does not match"):
        load_rule(path)
    del data["sha256"]
    path.write_text(json.dumps(data))
    assert load_rule(path).threshold == 0.9
    path.write_text(json.dumps({**data, "features": ["nope"]}))
    with pytest.raises(ValueError, match="unknown feature"):
        load_rule(path)


def test_a_rule_goes_to_the_offline_judge_only(tmp_path: Path) -> None:
    rule = OfflineRule("threshold", ("log_reply_words",), 2.0)
    judge = resolve_judge(None, rule=rule)
    assert judge.name == f"offline:all-MiniLM-L6-v2+rule-{rule.hash[:12]}" and rule.short in judge.rule
    assert resolve_judge(None, rule=str(rule.save(tmp_path))).name == judge.name  # a file's path does as well
    assert resolve_judge(None).name == "offline:all-MiniLM-L6-v2"
    with pytest.raises(TypeError, match="rule"):
        resolve_judge(EmbeddingJudge(), rule=rule)
    with pytest.raises(ValueError, match="for the offline judge"):
        resolve_judge("openai:gpt-4.1-mini", rule=rule)
    with pytest.raises(ValueError, match="not both"):
        EmbeddingJudge(threshold=0.3, rule=rule)


def test_the_judge_decides_with_the_rule(tmp_path: Path) -> None:
    """Python: same conversation, verdicts by the fitted rule differ from the default's (the parroted questions)."""
    from judgegraph.metrics.relevancy import create_turn_relevancy_metric

    rule = fitted(tmp_path)
    convs, _ = synthetic(3)
    verdicts = {}
    for name, judge in (("default", EmbeddingJudge(BagOfWords())), ("rule", EmbeddingJudge(BagOfWords(), rule=rule))):
        graph = create_turn_relevancy_metric(model=judge)
        (res,) = graph.invoke({"conversation": convs[0]})["results"].values()
        verdicts[name] = [v.verdict for v in res.verdicts]
        assert res.errors == []
    kinds = [("relevant", "off", "echo")[k % 3] for k in range(3)]
    assert verdicts["rule"] == ["yes" if k == "relevant" else "no" for k in kinds]
    assert verdicts["default"][kinds.index("echo")] == "yes" != verdicts["rule"][kinds.index("echo")]


def test_the_eval_flag_changes_verdicts_and_names_the_rule(tmp_path: Path) -> None:
    """CLI, real MiniLM: a short on-topic reply; a rule 'at least 7 words' turns it irrelevant."""
    rule = OfflineRule("threshold", ("log_reply_words",), 2.0)  # log(1 + words) >= 2: 7+ words
    path = rule.save(tmp_path)
    conv = tmp_path / "c.jsonl"
    conv.write_text(json.dumps({"id": "c", "turns": [
        {"role": "user", "content": "What is the capital city of France?"},
        {"role": "assistant", "content": "Paris is the capital."}]}) + "\n")
    outs = {}
    for name, extra in (("default", []), ("rule", ["--offline-rule", str(path)])):
        out = tmp_path / f"{name}.jsonl"
        code = main(["eval", str(conv), "--out", str(out), "-q", "--no-progress", *extra])
        outs[name] = (code, out.read_text())
    assert outs["default"][0] == 0 and outs["rule"][0] == 1
    assert f"offline:all-MiniLM-L6-v2+rule-{rule.short}" in outs["rule"][1]
    assert "+rule-" not in outs["default"][1]
    assert main(["eval", str(conv), "--out", str(tmp_path / "x.jsonl"), "--offline-rule", str(tmp_path / "none.json")]) == 2
    assert main(["eval", str(conv), "--out", str(tmp_path / "y.jsonl"), "--model", "openai:gpt-4.1-mini",
                 "--offline-rule", str(path)]) == 2


@pytest.mark.parametrize(("line", "message"), [
    ("not json", "labels.jsonl:2: not JSON"),
    ('{"id": 3, "turn": 2, "label": "yes"}', "labels.jsonl:2: id: must be the conversation id (a string), got 3"),
    ('{"turn": 2, "label": "yes"}', "labels.jsonl:2: a labels record in a file of ids records"),
    ('{"id": "d0", "turn": 0, "label": "yes"}', "labels.jsonl:2: turn: must be a turn number (1-based), got 0"),
    ('{"id": "d0", "turn": "4", "label": "yes"}', 'labels.jsonl:2: turn: must be a turn number (1-based), got "4"'),
    ('{"id": "d0", "turn": 4, "label": null}', "labels.jsonl:2: label: must be a non-empty string"),
    ('{"id": "d0", "turn": 4, "label": ""}', "labels.jsonl:2: label: must be a non-empty string"),
    ('{"id": "d0", "turn": 4, "verdict_id": "1/1", "label": "no"}', "labels.jsonl:2: turn: give a turn or a verdict_id"),
    ('{"id": "d0", "verdict_id": "1/1", "label": "no"}', "labels.jsonl:2: verdict_id: the offline fit labels replies by 'turn'"),
    ('{"id": "d0", "turn": 2, "label": "no"}', "labels.jsonl:2: id, turn: 'd0' turn 2 was labelled at "),
])
def test_a_bad_labels_file_names_line_and_field(tmp_path: Path, line: str, message: str) -> None:
    convs, _ = synthetic(1)
    cpath, path = write(tmp_path, convs, [])
    path.write_text('{"id": "d0", "turn": 2, "label": "yes"}\n' + line + "\n")
    with pytest.raises(LabelsError, match=re.escape(message)):
        label_cases(load_conversations(cpath), read_labels(path, metric="turn-relevancy"), labels_path=str(path),
                    positive=parse_positive(None), inputs_of=turn_inputs)


@pytest.mark.parametrize(("label", "message"), [
    ({"id": "zz", "turn": 2, "label": "yes"}, "labels.jsonl:1: id: no conversation 'zz'"),
    ({"id": "d0", "turn": 1, "label": "yes"}, "labels.jsonl:1: turn: turn 1 of 'd0' is not an assistant reply"),
    ({"id": "d0", "turn": 2, "label": "maybe"}, 'labels.jsonl:1: label: "maybe" is not a yes/no word'),
])
def test_labels_that_match_no_reply_name_line_and_field(tmp_path: Path, label: dict, message: str) -> None:
    convs, _ = synthetic(1)
    cpath, lpath = write(tmp_path, convs, [label])
    with pytest.raises(LabelsError, match=re.escape(message)):
        label_cases(load_conversations(cpath), read_labels(lpath, metric="turn-relevancy"), labels_path=str(lpath), positive=parse_positive(None), inputs_of=turn_inputs)


def test_positive_rules() -> None:
    assert [parse_positive(">=2")(v) for v in (0, 1, 2)] == [False, False, True]
    assert [parse_positive(">=1")(v) for v in (0, 1, 2.0)] == [False, True, True]
    assert [parse_positive("==good")(v) for v in ("good", "bad")] == [True, False]
    assert [parse_positive(None)(v) for v in (True, "no", "Relevant", 0)] == [True, False, True, False]
    with pytest.raises(ValueError, match="expected an operator"):
        parse_positive("2")
    with pytest.raises(TypeError, match="not a number"):
        parse_positive(">=2")("good")


def test_auc_counts_ties_half() -> None:
    assert auc(np.array([0.1, 0.9, 0.5, 0.5]), np.array([False, True, True, False])) == 0.875


def test_align_command_writes_the_rule_and_its_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    convs, labels = synthetic(12)
    cpath, lpath = write(tmp_path, convs, labels)
    out = tmp_path / "rules"
    assert main(["align", str(cpath), "-m", "turn-relevancy", "--labels", str(lpath), "--model", "offline",
                 "--out", str(out)]) == 0
    (written,) = out.glob("offline-rule-*.json")
    rule = load_rule(written)
    assert written.name == f"offline-rule-{rule.short}.json" and rule.short in capsys.readouterr().out
    assert rule.fit["labels"] == str(lpath) and rule.fit["n_labels"] == 36 and rule.fit["window_size"] == 10
    # usage: an LLM judge with no key nor server (aligning one: tests/integration/test_align_llm_cli.py); a
    # metric the offline fit does not align; a bad --positive
    assert main(["align", str(cpath), "--labels", str(lpath), "--model", "openai:gpt-4.1-mini", "--out", str(out)],
                ) == 2
    assert "OPENAI_API_KEY" in capsys.readouterr().err
    assert main(["align", str(cpath), "-m", "role-adherence", "--labels", str(lpath), "--out", str(out)]) == 2
    assert "the offline judge aligns" in capsys.readouterr().err
    assert main(["align", str(cpath), "--labels", str(lpath), "--positive", "2", "--out", str(out)]) == 2
    # bad input: a labels line naming no conversation; labels of one class only
    lpath.write_text(json.dumps({"id": "nope", "label": "yes"}) + "\n")
    assert main(["align", str(cpath), "--labels", str(lpath), "--out", str(out)]) == 3
    assert "labels.jsonl:1: id: no conversation 'nope'" in capsys.readouterr().err
    lpath.write_text("".join(json.dumps({**x, "label": "yes"}) + "\n" for x in labels))
    assert main(["align", str(cpath), "--labels", str(lpath), "--out", str(out)]) == 3
    assert "all of one class" in capsys.readouterr().err
