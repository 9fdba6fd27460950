"""``judgegraph.yaml`` (``judgegraph eval --config FILE``; docs/runs.md): its sections validated by a pydantic model
and the metrics' options by the metrics' declarations (:func:`refusal`), an error naming the file, line and key."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Optional, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..loaders.yaml_safe import line_at

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

    from ..metrics import MetricSpec

__all__ = ["Config", "ConfigError", "load_config"]


class ConfigError(ValueError):
    """A config file that cannot be used, naming the file, the line and the key."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


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
    metrics: list[Union[str, dict[str, Optional[dict[str, object]]]]] = Field(default_factory=list)
    #: ``{metric: threshold}``: a shorthand for a metric's own ``threshold`` option
    thresholds: dict[str, object] = Field(default_factory=dict)
    #: options of every metric that takes them; these and a metric's own are checked by the metrics' declarations
    #: (:func:`_check_options`), not here
    options: dict[str, object] = Field(default_factory=dict)
    judge: JudgeSection = Field(default_factory=JudgeSection)
    outputs: OutputsSection = Field(default_factory=OutputsSection)
    run: RunSection = Field(default_factory=RunSection)


#: Config option -> eval's argument name (a metric option's declared name), where they differ; and back.
RENAMED = {"strict": "strict_mode", "inputs": "files"}
BACK = {v: k for k, v in RENAMED.items()}
#: Path-valued keys, read relative to the config file's folder.
PATHS = frozenset({"out", "html", "junit", "cache", "offline_rule"})


def _message(error: ErrorDetails) -> tuple[tuple[int | str, ...], str]:
    """A pydantic error as (its key path, a sentence); union branches folded into one path."""
    loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and p in ("str", "int") or "[" in str(p)))
    if error["type"] == "extra_forbidden":
        return loc, "unknown key"
    return loc, error["msg"].replace("Input should be", "expected").replace("Value error, ", "")


def _at(path: str | Path, root: yaml.Node | None, loc: tuple[int | str, ...], message: str) -> str:
    """``FILE:LINE: key.path: message``, the line being where ``loc`` is in the file."""
    dotted = ""
    for part in loc:
        dotted += f"[{part}]" if isinstance(part, int) else (f".{part}" if dotted else str(part))
    return f"{path}:{line_at(root, loc) or 1}: {dotted or '(the file)'}: {message}"


def load_config(path: str | Path) -> tuple[Config, dict[str, object]]:
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
    if (refused := _refused(data)) is not None:
        raise ConfigError(_at(path, root, *refused))
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
            if message == "unknown key":  # the keys of its section (or of the file)
                known = (f.annotation if (f := Config.model_fields.get(str(loc[0]))) and len(loc) > 1 else Config)
                message = f"unknown key (known here: {', '.join(known.model_fields)})"  # type: ignore[union-attr]
            lines.append(_at(path, root, loc, message))
        raise ConfigError("invalid config file:\n  " + "\n  ".join(dict.fromkeys(lines))) from None
    _check_options(config, root, path)
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


def _check_options(config: Config, root: yaml.Node | None, path: str | Path) -> None:
    """The metrics named exist, and each option given is one its metric declares with a value its settings accept
    (:func:`refusal`): else a :class:`ConfigError` naming ``FILE:LINE: key: why``."""
    from ..metrics import built_ins, get_metric, undeclared

    def error(loc: tuple[int | str, ...], message: str) -> ConfigError:
        return ConfigError(_at(path, root, loc, message))

    def check(loc: tuple[int | str, ...], specs: list[MetricSpec], given: dict[str, object], takes: str) -> None:
        for key in given:  # an option no metric of ``specs`` declares, then a value a metric taking it refuses
            if why := undeclared(key, specs, takes, RENAMED):
                raise error((*loc, key), why)
        for spec in specs:
            mine = {RENAMED.get(k, k): v for k, v in given.items() if RENAMED.get(k, k) in spec.options}
            if bad := refusal(spec, mine):
                raise error((*loc, *([BACK.get(bad[0], bad[0])] if bad[0] else [])), bad[1])

    def spec_of(loc: tuple[int | str, ...], name: str) -> MetricSpec:
        try:
            return get_metric(name)
        except KeyError as exc:
            raise error(loc, str(exc)) from None

    named = []
    for i, item in enumerate(config.metrics):
        if not isinstance(item, str) and len(item) != 1:
            raise error(("metrics", i), "a metric is a name, or one name with its options ({turn-relevancy: "
                        "{threshold: 0.8}}), got " f"{len(item)} names in one item")
        for name, opts in ({item: {}} if isinstance(item, str) else item).items():
            named.append(spec_of(("metrics", i), name))
            check(("metrics", i, name), named[-1:], opts or {}, f"{name} takes:")
    for name, value in config.thresholds.items():  # a metric's threshold, for short
        check(("thresholds", name), [spec_of(("thresholds", name), name)], {"threshold": value}, f"{name} takes:")
    check(("options",), [*built_ins().values(), *named], config.options, "known here:")


def refusal(spec: MetricSpec, given: dict[str, object]) -> tuple[str | None, str] | None:
    """What the metric's factory refuses of the options ``given`` (by their declared names): (the option, why),
    (None, why) for them together, or None; the run's judge stood for by a placeholder LLM judge."""
    from pydantic import SecretStr

    from ..judges.base import Endpoint, Judge
    from ..metrics import build_metric

    if spec.settings is None:  # a spec of the older form: its factory checks its options
        return None

    class Placeholder(Judge):  # never called; embeddings beside its server need no key
        name, kind = "placeholder", "llm"
        endpoint = Endpoint("http://127.0.0.1/v1", SecretStr("placeholder"))

        def judge(self, request: Any) -> Any:
            raise NotImplementedError

    def check(values: dict[str, object]) -> str | None:
        try:
            build_metric(spec, Placeholder(), **values)
        except (ValueError, TypeError) as exc:
            return str(exc) or type(exc).__name__
        return None

    if (why := check(given)) is None:
        return None
    named = {k: found.start() for k in given if (found := re.search(rf"\b{re.escape(k.removesuffix('s'))}", why))}
    if named:  # the option the message names first (its singular too: "guideline 2 must ...")
        return min(named, key=named.__getitem__), why
    return None if check({}) is not None else (None, why)


def _rel(base: Path, value: str) -> str:
    return value if base == Path(".") or Path(value).is_absolute() else str(base / value)


def config_arguments(config: Config, path: str | Path) -> tuple[dict[str, object], dict[str, dict[str, object]]]:
    """``eval``'s argument values the config sets (by destination; ``options:`` by the metrics' option names),
    and each metric's own options."""
    from ..metrics import canonical_name

    base = Path(path).parent
    values: dict[str, object] = {}
    if config.inputs:
        values["files"] = [_rel(base, f) for f in config.inputs]
    names: list[str] = []
    per_metric: dict[str, dict[str, object]] = {}
    for name, opts in (p for item in config.metrics for p in ({item: {}} if isinstance(item, str) else item).items()):
        names.append(name)
        per_metric.update({name: own} if (own := _given(opts or {})) else {})
    for name, threshold in config.thresholds.items():
        key = next((n for n in per_metric if canonical_name(n) == canonical_name(name)), name)
        per_metric.setdefault(key, {}).setdefault("threshold", threshold)  # a metric's own option says it too
    if names:
        values["metrics"] = names
    values.update(_given(config.options))
    for section in (config.judge, config.outputs, config.run):
        for key in section.model_fields_set:
            value = getattr(section, key)
            if value is not None:
                values[key] = _rel(base, value) if key in PATHS and isinstance(value, str) else value
    return values, per_metric


def _given(opts: dict[str, object]) -> dict[str, object]:
    return {RENAMED.get(k, k): v for k, v in opts.items() if v is not None}
