"""What a jury adds per request besides its jurors' calls: the per-request LangGraph fan-out
(one node per juror, an aggregate node) and the aggregation over the answer's schema.

Jurors that answer at once (no model, no network) isolate the jury's own cost; an LLM request
takes seconds, so a few milliseconds here are noise beside it. Prints milliseconds per request,
sync and async, for juries of 1, 3 and 5 jurors.

    python benchmarks/jury_overhead.py [--requests N]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Literal

from pydantic import BaseModel

from judgegraph import Jury
from judgegraph.data.prompts import Prompt
from judgegraph.judges import Judge, JudgeOutcome, JudgeRequest


class Answer(BaseModel):
    reason: str
    verdict: Literal["yes", "no"]


class Instant(Judge):
    """A juror that answers at once."""

    def __init__(self, n: int) -> None:
        self.name = f"instant:{n}"
        self.verdict: Literal["yes", "no"] = "yes" if n % 2 == 0 else "no"

    def judge(self, request: JudgeRequest) -> JudgeOutcome:
        return JudgeOutcome(Answer(reason=f"juror {self.name}", verdict=self.verdict))

    async def ajudge(self, request: JudgeRequest) -> JudgeOutcome:
        return self.judge(request)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    n = parser.parse_args().requests
    request = JudgeRequest(task="t", step="s", schema=Answer, values={},
                           prompt=Prompt(name="t", template="Is the reply relevant?", documented=frozenset()))
    print(f"{'jurors':>6}  {'sync ms/request':>15}  {'async ms/request':>16}")
    for size in (1, 3, 5):
        jury = Jury([Instant(i) for i in range(size)])
        start = time.perf_counter()
        for _ in range(n):
            jury.run(request)
        sync_ms = (time.perf_counter() - start) / n * 1000

        async def many(jury: Jury = jury) -> None:
            for _ in range(n):
                await jury.arun(request)

        start = time.perf_counter()
        asyncio.run(many())
        async_ms = (time.perf_counter() - start) / n * 1000
        print(f"{size:>6}  {sync_ms:>15.2f}  {async_ms:>16.2f}")


if __name__ == "__main__":
    main()
