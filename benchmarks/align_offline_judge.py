"""The offline judge before and after alignment, on ConTurE (human-rated chatbot turns).

Reads the converted ConTurE set (1,051 chatbot replies with their conversations,
rated 0/1/2 by people; CC BY 4.0; see its README) from ``--data`` (default
``../shared/data/conture`` beside the repository; the data is never copied
into the project). For each positive rule (``rating >= 1`` and ``rating >= 2``)
it fits the offline judge's rule exactly as ``judgegraph align --model offline``
does (:func:`judgegraph.trust.offline_fit.fit_rule`: dialogue-level seeded
split, 30 % of dialogues held out, model chosen by grouped cross-validation on
the rest) and prints, on the held-out dialogues only:

* ``default``: today's rule, the MiniLM cosine score at its threshold 0.29;
* ``default, refit threshold``: the same score at the threshold chosen on train;
* ``fitted``: the fitted rule;

with n, ROC AUC, Spearman with the 0-2 rating, accuracy, balanced accuracy and
Cohen's kappa at the threshold. The split is repeated over ``--seeds`` seeds
(default 5) and the mean is printed after seed 0's figures, as 36 held-out
dialogues make a single split's figures noisy.

Run:  python benchmarks/align_offline_judge.py [--data DIR] [--seeds N]
Deterministic (same data + same model -> same text); about 15 s on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from judgegraph.judges.offline import EmbeddingJudge
from judgegraph.loaders.files import load_conversations
from judgegraph.metrics.relevancy import turn_inputs
from judgegraph.trust.labels import read_labels, usable
from judgegraph.trust.offline_fit import feature_matrix, file_sha256, fit_rule, group_of, label_cases, parse_positive

REPO = Path(__file__).resolve().parents[1]
#: ../shared/data/conture beside the repository (/work/shared for /work/main; one more level up for a worktree)
DATA = next((p for p in (REPO.parent / "shared/data/conture", REPO.parents[1] / "shared/data/conture") if p.is_dir()),
            REPO.parent / "shared/data/conture")
GROUP = r"(conture-d\d+)"  # one dialogue's records share this prefix: they stay on one side of the split
ROWS = (("default_rule", "default (cos >= 0.29)"), ("default_score_fitted_threshold", "default, refit threshold"),
        ("fitted_rule", "fitted rule"))
COLUMNS = ("n", "auc", "spearman", "accuracy", "balanced_accuracy", "kappa", "threshold")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA, help="folder of conture.jsonl and conture.labels.jsonl")
    ap.add_argument("--seeds", type=int, default=5, help="dialogue splits averaged (default 5)")
    args = ap.parse_args(argv)
    conversations_path, labels_path = args.data / "conture.jsonl", args.data / "conture.labels.jsonl"
    if not conversations_path.is_file() or not labels_path.is_file():
        print(f"no ConTurE data in {args.data} (see --data)", file=sys.stderr)
        return 2
    conversations = load_conversations(conversations_path)
    read = read_labels(labels_path, field="rating", metric="turn-relevancy")
    labels = usable(read)
    print(f"ConTurE: {len(labels)} rated replies, {len({group_of(x.conversation_id, GROUP) for x in labels})} dialogues; "
          f"labels sha256 {file_sha256(labels_path)[:12]}")
    cases = label_cases(conversations, read, labels_path=str(labels_path), positive=parse_positive(">=2"), inputs_of=turn_inputs,
                        window_size=10)
    x = feature_matrix(cases, EmbeddingJudge().encoder.encode)
    rating = np.array([float(c.value) for c in cases])  # type: ignore[arg-type]
    groups = [group_of(c.conversation, GROUP) for c in cases]
    for rule_text in (">=1", ">=2"):
        truth = np.array([parse_positive(rule_text)(c.value) for c in cases])
        print(f"\npositive: rating {rule_text} ({int(truth.sum())} of {len(truth)} relevant); held-out dialogues")
        runs = [fit_rule(x, truth, groups, seed=seed, ordinal=rating) for seed in range(args.seeds)]
        first = runs[0]
        print(f"seed 0: chosen {first.fit['chosen']} (cv AUC {first.fit['cv_auc']}), rule {first.short}")
        print(f"  {'':28}" + "".join(f"{c:>10}" for c in ("n", "AUC", "Spearman", "acc", "bal.acc", "kappa", "thresh")))
        for key, label in ROWS:
            fig = first.fit["held_out"][key]
            print(f"  {label:28}" + "".join(f"{fig[c]:>10.3f}" if c != "n" else f"{fig[c]:>10d}" for c in COLUMNS))
        print(f"mean over {args.seeds} seeds (held-out n {np.mean([r.fit['n_test'] for r in runs]):.0f} on average):")
        for key, label in ROWS:
            mean = {c: float(np.mean([r.fit["held_out"][key][c] for r in runs])) for c in COLUMNS}
            print(f"  {label:28}" + "".join(f"{mean[c]:>10.3f}" if c != "n" else f"{mean[c]:>10.0f}" for c in COLUMNS))
    print("\nPublished LLM-evaluator figures on ConTurE: not given here (the ConTurE paper could not be read "
          "from this machine; its repository's README reports none).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
