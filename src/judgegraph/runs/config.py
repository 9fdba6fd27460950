"""``judgegraph.yaml``: a run's settings in a file (``judgegraph eval --config FILE``), validated
by a pydantic model; an error names the file, the line and the key. The command line overrides
the file (docs/runs.md has the reference; ``judgegraph init`` writes a commented starter file).

Relative paths in the file (inputs, outputs, the cache, the offline rule) are read from the
file's folder, as the file is read wherever the command runs.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..loaders.yaml_safe import line_at

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

__all__ = ["Config", "ConfigError", "load_config"]


class ConfigError(ValueError):
    """A config file that cannot be used, naming the file, the line and the key."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MetricOptions(_Section):
    """Options of the metrics: every metric's (``options:``), or one metric's (in ``metrics:``)."""

    threshold: float | None = Field(default=None, ge=0, le=1)
    window_size: int | None = Field(default=None, ge=1)
    min_judged: float | None = Field(default=None, ge=0, le=1)
    strict: bool | None = None
    reason: Literal["deterministic", "llm", "none"] | None = None
    rubric: str | None = None
    verify: bool | None = None
    n_questions: int | None = Field(default=None, ge=1)
    guidelines: list[str] | None = None
    role: str | None = None


class OwnOptions(MetricOptions):
    """One metric's options in ``metrics:``: those above, and any other its spec declares (a plugin's own;
    checked against ``MetricSpec.options`` by ``_check_metrics``, their values by the metric's factory)."""

    model_config = ConfigDict(extra="allow")


class JudgeSection(_Section):
    model: str | None = None
    base_url: str | None = None
    concurrency: int | None = Field(default=None, ge=1)
    max_tries: int | None = Field(default=None, ge=1)
    timeout: float | None = Field(default=None, gt=0)
    max_retries: int | None = Field(default=None, ge=0)
    rpm: float | None = Field(default=None, gt=0)
    tpm: float | None = Field(default=None, gt=0)
    max_prompt_tokens: int | None = Field(default=None, ge=1)
    max_reply_bytes: int | None = Field(default=None, ge=1)
    cache: str | None = None
    no_cache: bool | None = None
    offline_rule: str | None = None
    embeddings: str | None = None
    price_in: float | None = Field(default=None, ge=0)
    price_out: float | None = Field(default=None, ge=0)


class OutputsSection(_Section):
    out: str | None = None
    html: str | None = None
    junit: str | None = None
    transcripts: Literal["full", "errors", "none"] | None = None
    max_rows: int | None = Field(default=None, ge=0)


class RunSection(_Section):
    workers: Union[int, Literal["auto"], None] = None


class Config(_Section):
    """The whole file. ``metrics``: names, or ``{name: {option: value}}`` for a metric's own options."""

    inputs: list[str] = Field(default_factory=list)
    metrics: list[Union[str, dict[str, OwnOptions]]] = Field(default_factory=list)
    #: ``{metric: threshold}``: a shorthand for a metric's own ``threshold`` option
    thresholds: dict[str, Annotated[float, Field(ge=0, le=1)]] = Field(default_factory=dict)
    options: MetricOptions = Field(default_factory=MetricOptions)
    judge: JudgeSection = Field(default_factory=JudgeSection)
    outputs: OutputsSection = Field(default_factory=OutputsSection)
    run: RunSection = Field(default_factory=RunSection)


#: Config option -> eval's argument name, where they differ.
RENAMED = {"strict": "strict_mode", "inputs": "files"}
#: Path-valued keys, read relative to the config file's folder.
PATHS = frozenset({"out", "html", "junit", "cache", "offline_rule"})


def _message(error: ErrorDetails) -> tuple[tuple[int | str, ...], str]:
    """A pydantic error as (its key path, a sentence); union branches folded into one path."""
    loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and p in ("str", "int") or "[" in str(p)))
    if error["type"] == "extra_forbidden":
        return loc, "unknown key"
    return loc, error["msg"].replace("Input should be", "expected").replace("Value error, ", "")


def _known(loc: tuple[int | str, ...]) -> str:
    """The keys allowed where ``loc`` points (for an unknown key's message)."""
    model: type[BaseModel] = Config
    for part in loc[:-1]:
        field = model.model_fields.get(str(part)) if isinstance(part, str) else None
        annotation = field.annotation if field is not None else None
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
        else:
            model = MetricOptions  # inside metrics: a metric's options
    return ", ".join(model.model_fields)


def _dotted(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the file)"


def load_config(path: str | Path) -> tuple[Config, dict[str, Any]]:
    """The validated config and its data as written (for the run header); :class:`ConfigError`
    naming ``FILE:LINE: key: what is wrong`` for an unreadable, invalid or unknown setting."""
    from ..loaders.limits import Limits
    from ..loaders.yaml_safe import compose, construct

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--config {path}: not valid UTF-8 (byte {exc.start + 1})") from None
    except OSError as exc:
        raise ConfigError(f"--config {path}: cannot read it: {exc.strerror or exc}") from None
    try:
        root = compose(text, Limits())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(f"{where}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    data = construct(root) if root is not None else {}
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: expected a mapping of settings (inputs:, metrics:, judge: ...), "
                          f"got {type(data).__name__}")
    refused = _refused(data)
    if refused is not None:
        loc, message = refused
        raise ConfigError(f"{path}:{line_at(root, loc) or 1}: {_dotted(loc)}: {message}")
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        lines = []
        errors = exc.errors()
        branches = [e for e in errors if "str" in e["loc"][1:] or any("[" in str(p) for p in e["loc"])]
        if any(e["type"] != "string_type" for e in branches):  # a mapping item's own error, not "not a string"
            errors = [e for e in errors if not (e["type"] == "string_type" and "str" in e["loc"][1:])]
        for error in errors:
            loc, message = _message(error)
            if message == "unknown key":
                message = f"unknown key (known here: {_known(loc)})"
            lines.append(f"{path}:{line_at(root, loc) or 1}: {_dotted(loc)}: {message}")
        raise ConfigError("invalid config file:\n  " + "\n  ".join(dict.fromkeys(lines))) from None
    _check_metrics(config, root, path)
    _check_thresholds(config, root, path)
    return config, data


def _refused(data: object, loc: tuple[int | str, ...] = ()) -> tuple[tuple[int | str, ...], str] | None:
    from ..loaders.limits import Refused

    if isinstance(data, Refused):
        return loc, data.message
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for k, v in items:
        if (found := _refused(v, (*loc, k))) is not None:
            return found
    return None


def _check_metrics(config: Config, root: yaml.Node | None, path: str | Path) -> None:
    """Each metric named in ``metrics:`` exists, and takes the options given to it alone."""
    from ..metrics import get_metric

    for i, item in enumerate(config.metrics):
        named = {item: OwnOptions()} if isinstance(item, str) else item
        if len(named) != 1:
            raise ConfigError(f"{path}:{line_at(root, ('metrics', i)) or 1}: metrics[{i}]: a metric is a name, or one "
                              "name with its options ({turn-relevancy: {threshold: 0.8}}), got "
                              f"{len(named)} names in one item")
        for name, opts in named.items():
            try:
                spec = get_metric(name)
            except KeyError as exc:
                raise ConfigError(f"{path}:{line_at(root, ('metrics', i)) or 1}: metrics[{i}]: {exc}") from None
            for key in opts.model_fields_set:
                if RENAMED.get(key, key) not in spec.options:
                    close = difflib.get_close_matches(key, _names(spec.options).split(", "), n=1)
                    what = (f"unknown key ({f'did you mean {close[0]}? ' if close else ''}{name} takes:"
                            if key in (opts.model_extra or {}) else f"{name} takes no {key} (it takes:")
                    raise ConfigError(f"{path}:{line_at(root, ('metrics', i, name, key)) or 1}: metrics[{i}].{name}.{key}:"
                                      f" {what} {_names(spec.options)})")


def _names(options: frozenset[str]) -> str:
    """A metric's options as the config file spells them."""
    back = {v: k for k, v in RENAMED.items()}
    return ", ".join(sorted(back.get(o, o) for o in options)) or "none"


def _check_thresholds(config: Config, root: yaml.Node | None, path: str | Path) -> None:
    """Each metric in ``thresholds:`` exists and has a threshold."""
    from ..metrics import get_metric

    for name in config.thresholds:
        where = f"{path}:{line_at(root, ('thresholds', name)) or 1}: thresholds.{name}"
        try:
            spec = get_metric(name)
        except KeyError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if "threshold" not in spec.options:
            raise ConfigError(f"{where}: {name} takes no threshold")


def _rel(base: Path, value: str) -> str:
    return value if base == Path(".") or Path(value).is_absolute() else str(base / value)


def config_arguments(config: Config, path: str | Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``eval``'s argument values the config sets (by destination), and each metric's own options."""
    from ..metrics import canonical_name

    base = Path(path).parent
    values: dict[str, Any] = {}
    if config.inputs:
        values["files"] = [_rel(base, f) for f in config.inputs]
    names: list[str] = []
    per_metric: dict[str, dict[str, Any]] = {}
    for item in config.metrics:
        for name, opts in ({item: OwnOptions()} if isinstance(item, str) else item).items():
            names.append(name)
            if own := _options(opts):
                per_metric[name] = own
    for name, threshold in config.thresholds.items():
        key = next((n for n in per_metric if canonical_name(n) == canonical_name(name)), name)
        per_metric.setdefault(key, {}).setdefault("threshold", threshold)  # a metric's own option says it too
    if names:
        values["metrics"] = names
    values.update(_options(config.options))
    for section in (config.judge, config.outputs, config.run):
        for key in section.model_fields_set:
            value = getattr(section, key)
            if value is not None:
                values[key] = _rel(base, value) if key in PATHS and isinstance(value, str) else value
    return values, per_metric


def _options(opts: MetricOptions) -> dict[str, Any]:
    return {RENAMED.get(k, k): getattr(opts, k) for k in opts.model_fields_set if getattr(opts, k) is not None}
