"""The flip rate of a scripted flaky judge, and the Fleiss kappa of a scripted jury, measured through the real
``judgegraph eval`` path on the loopback OpenAI-compatible server (no key), against the figures their scripts imply.

*Flaky judge.* Each reply of N made-up conversations has a true label (seeded: "yes" 70% of the time); the
scripted judge answers each request with it, flipped with probability ``p`` (seeded, drawn per request). Each
verdict is judged ``--repeat R`` times (with ``judgegraph eval --repeat`` when the jury module is present, else by
``R`` separate runs whose verdicts are merged into votes: ``judgegraph.trust.stability.merge_runs``). A verdict
flips when its repeats do not all agree: expected rate ``1 - (1-p)^R - p^R``.

*Jury.* Three scripted jurors, each wrong (against the true label) with its own probability; their verdicts are
merged into votes (one juror per run) and ``judgegraph stability`` computes Fleiss' kappa and each juror's
agreement with the majority. Expected, for independent jurors: the kappa from the pairwise agreement and the
label shares the error rates imply, and ``1 - (1-e_j) e_k e_l - e_j (1-e_k)(1-e_l)`` agreement with the majority.

    python benchmarks/judge_stability.py [--conversations 40] [--flip 0.1] [--repeat 5] [--errors 0.05,0.15,0.3]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import itertools
import json
import random
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import _loopback  # noqa: F401 - puts the repository root on sys.path for tests.kit

from judgegraph.cli import main
from judgegraph.data.results import MetricResult, Vote
from judgegraph.loaders import load_files
from judgegraph.runs import read_run as read_results
from judgegraph.runs.resultsfile import ResultsWriter
from judgegraph.runs.runner import ConversationOutcome
from judgegraph.trust.stability import graph_rescorer, merge_runs, read_stability
from tests.kit.openai_server import ChatRequest, FakeOpenAIServer, Reply, structured

EXCHANGES = 5
METRIC = "turn_relevancy"


def truth(cid: str, k: int) -> str:
    return "yes" if random.Random(f"{cid}/{k}").random() < 0.7 else "no"


def write_conversations(path: Path, n: int) -> list[str]:
    ids = [f"c{i:03d}" for i in range(n)]
    with path.open("w", encoding="utf-8") as fh:
        for cid in ids:
            turns = []
            for k in range(1, EXCHANGES + 1):
                turns += [{"role": "user", "content": f"Question {k} of {cid}?"},
                          {"role": "assistant", "content": f"Answer <{cid}/{k}>."}]
            fh.write(json.dumps({"id": cid, "turns": turns}) + "\n")
    return ids


def flaky(p: float, seed: int) -> Callable[[ChatRequest], Reply]:
    """A responder answering each request with its reply's true label, flipped with probability ``p``: the n-th
    request for a reply draws from ``Random(seed/reply/n)``, so the figures do not depend on the order in which
    concurrent requests arrive (and the repeats of one request, within a run, draw apart)."""
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def respond(request: ChatRequest) -> Reply:
        key = request.text.rsplit("Answer <", 1)[1].split(">", 1)[0]
        cid, k = key.split("/")
        with lock:
            nth = seen[key] = seen.get(key, -1) + 1
        flip = random.Random(f"{seed}/{key}/{nth}").random() < p
        label = truth(cid, int(k))
        return structured({"reason": "scripted", "verdict": ("no" if label == "yes" else "yes") if flip else label})

    return respond


def eval_run(chats: Path, out: Path, responder: Callable[[ChatRequest], Reply], *extra: str) -> int:
    with FakeOpenAIServer(responder) as server, contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        return main(["eval", str(chats), "-m", METRIC.replace("_", "-"), "--model", "scripted", "--base-url",
                     server.base_url, "--window-size", "1", "--no-cache", "--no-progress", "-q", "--out", str(out),
                     *extra])


def read_run(path: Path) -> dict[str, MetricResult]:
    return {cid: MetricResult.model_validate(conv.results[METRIC].data())
            for cid, conv in read_results(path).conversations.items()}


def merged(runs: Sequence[dict[str, MetricResult]], out: Path, rescore: object, jurors: Sequence[str] = ()) -> Path:
    """The runs merged into one results file with votes: repeats of one judge, or (``jurors``) one juror per run."""
    writer = ResultsWriter(out)
    for cid in sorted(runs[0]):  # one order whatever order the runs finished in (the bootstrap draws by position)
        if jurors:  # each run is a juror: votes named after it, all repeat 0; the first juror's verdict kept
            first = runs[0][cid]
            answers = [{w.id: w for w in run[cid].verdicts} for run in runs]
            verdicts = [v.model_copy(update={"votes": [Vote(judge=name, verdict=a[v.id].verdict, reason=a[v.id].reason)
                                                       for name, a in zip(jurors, answers)]})
                        for v in first.verdicts]
            res = first.model_copy(update={"verdicts": verdicts})
        else:
            res = merge_runs([run[cid] for run in runs], rescore)  # type: ignore[arg-type]
        writer.outcome(ConversationOutcome(cid, "bench", {res.key: res}))
    writer.close()
    return out


def expected_kappa(errors: Sequence[float], prevalence: float) -> tuple[float, list[float]]:
    """Fleiss' kappa and each juror's agreement with the majority expected of independent jurors."""
    pairs = list(itertools.combinations(errors, 2))
    observed = sum((1 - a) * (1 - b) + a * b for a, b in pairs) / len(pairs)
    mean_error = sum(errors) / len(errors)
    yes = prevalence * (1 - mean_error) + (1 - prevalence) * mean_error
    chance = yes**2 + (1 - yes) ** 2
    with_majority = []
    for j, e in enumerate(errors):
        others = [x for i, x in enumerate(errors) if i != j]
        with_majority.append(1 - (1 - e) * others[0] * others[1] - e * (1 - others[0]) * (1 - others[1]))
    return (observed - chance) / (1 - chance), with_majority


def main_() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--conversations", type=int, default=40)
    ap.add_argument("--flip", type=float, default=0.1, help="the flaky judge's per-request flip probability")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--errors", default="0.05,0.15,0.3", help="the three jurors' error rates")
    args = ap.parse_args()
    errors = [float(x) for x in args.errors.split(",")]

    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        chats = tmp / "chats.jsonl"
        ids = write_conversations(chats, args.conversations)
        conversations = {c.conversation.id: c.conversation for c in load_files([chats]).conversations}
        prevalence = sum(truth(c, k) == "yes" for c in ids for k in range(1, EXCHANGES + 1)) / (len(ids) * EXCHANGES)

        # -- the flaky judge, repeated
        how = f"{args.repeat} separate runs merged into votes by merge_runs"
        results = tmp / "repeats.jsonl"
        if importlib.util.find_spec("judgegraph.judges.jury") is not None and eval_run(
                chats, results, flaky(args.flip, 0), "--repeat", str(args.repeat)) in (0, 1):
            how = f"judgegraph eval --repeat {args.repeat}"
        else:
            runs = []
            for seed in range(args.repeat):
                eval_run(chats, tmp / f"run{seed}.jsonl", flaky(args.flip, seed))
                runs.append(read_run(tmp / f"run{seed}.jsonl"))
            merged(runs, results, graph_rescorer(conversations))
        report = read_stability(results, conversations.values(), resamples=0)
        m = report.metrics[METRIC]
        votes = [(vote.verdict, truth(r.conversation_id, v.turns[-1] // 2 + 1))
                 for r in read_run(results).values() for v in r.verdicts for vote in v.votes]
        per_request = sum(said != true for said, true in votes) / len(votes)
        p, n = args.flip, args.repeat
        print(f"flaky judge: {len(ids)} conversations x {EXCHANGES} windows, {n} repeats ({how})")
        print(f"  per-request flip probability: configured {p:.3f}, measured {per_request:.3f} "
              f"({len(votes)} answers)")
        print(f"  verdict flip rate: expected 1-(1-p)^{n}-p^{n} = {1 - (1 - p) ** n - p**n:.3f}, "
              f"measured {m.flip_rate:.3f} ({m.flipped} of {m.verdicts} verdicts)")
        print(f"  conversations: {m.count('stable')} stable, {m.count('flaky')} flaky; score spread mean "
              f"{m.mean_spread:.3f}, max {m.max_spread:.3f}; {m.unscored} not re-scored")
        print(f"  failures: {len(m.failures)}, holding in every repeat: {len(m.holding)} "
              f"(--gate stable would count only these)")

        # -- the jury
        runs = []
        for j, e in enumerate(errors):
            eval_run(chats, tmp / f"juror{j}.jsonl", flaky(e, 100 + j))
            runs.append(read_run(tmp / f"juror{j}.jsonl"))
        names = [f"juror-{e:g}" for e in errors]
        jury_file = merged(runs, tmp / "jury.jsonl", None, jurors=names)
        jury = read_stability(jury_file).metrics[METRIC].jury
        assert jury is not None and jury.kappa is not None
        kappa, with_majority = expected_kappa(errors, prevalence)
        ci = jury.interval
        print(f"jury of 3 scripted jurors (error rates {', '.join(f'{e:g}' for e in errors)}), {jury.items} verdicts:")
        print(f"  Fleiss' kappa: expected {kappa:.3f}, measured {jury.kappa:.3f}"
              + (f" [{ci.low:.3f}, {ci.high:.3f}] (95% bootstrap, B={ci.resamples})" if ci else ""))
        for juror, expected in zip(jury.jurors, with_majority):
            print(f"  {juror.judge}: agrees with the majority {juror.agreement:.3f} (expected {expected:.3f}), "
                  f"{juror.failed} failed votes")


if __name__ == "__main__":
    main_()
