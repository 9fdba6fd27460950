"""How long `judgegraph agree` takes, and how much memory its bootstrap holds, as the labels grow.

Made-up labels (a judge that agrees with a person 80% of the time on yes/no, and on a 1..5 rating) for one
metric; for each size, the wall time of ``agreement(...)`` with the default B = 1000 resamples and the peak of
the memory numpy allocated (tracemalloc). The bootstrap draws its resamples a chunk at a time, so the peak stays
bounded as n grows instead of holding B x n indices at once.

    python benchmarks/agreement_bootstrap.py [--sizes 100,1000,10000]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from judgegraph.trust import Label, agreement


def made_up(n: int, kind: str) -> tuple[list[dict[str, object]], list[Label]]:
    rng = np.random.default_rng(0)
    records: list[dict[str, object]] = []
    labels = []
    for i in range(n):
        if kind == "yes/no":
            human = "yes" if rng.random() < 0.7 else "no"
            judge = human if rng.random() < 0.8 else ("no" if human == "yes" else "yes")
            result: dict[str, object] = {"key": "m", "verdicts": [{"id": "1", "turns": [1], "verdict": judge,
                                                                    "reason": "r"}]}
            labels.append(Label(f"c{i}", "m", human, turn=2))
        else:
            rating = int(rng.integers(1, 6))
            judged = int(np.clip(rating + rng.choice([-1, 0, 0, 0, 1]), 1, 5))
            result = {"key": "m", "score": float(judged), "reason": "r", "verdicts": []}
            labels.append(Label(f"c{i}", "m", float(rating)))
        records.append({"type": "conversation", "conversation_id": f"c{i}", "results": {"m": result}})
    return records, labels


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="100,1000,10000", help="label counts (default %(default)s)")
    args = p.parse_args()
    print(f"{'kind':<8} {'labels':>7} {'seconds':>8} {'peak MiB':>9}  figures")
    for kind in ("yes/no", "rating"):
        for n in (int(s) for s in args.sizes.split(",")):
            records, labels = made_up(n, kind)
            tracemalloc.start()
            start = time.perf_counter()
            m = agreement(records, labels).metrics["m"]
            elapsed = time.perf_counter() - start
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            shown = f"agreement {m.agreement:.3f}, kappa {m.kappa:.3f}" if m.kappa is not None else ""
            if m.weighted_kappa is not None and m.spearman is not None:
                shown += f", weighted {m.weighted_kappa:.3f}, spearman {m.spearman:.3f}"
            print(f"{kind:<8} {n:>7} {elapsed:>8.2f} {peak:>9.1f}  {shown}")


if __name__ == "__main__":
    main()
