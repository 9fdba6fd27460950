"""A value that conforms to a JSON schema, for answers nobody wrote (the dry run's,
the loopback test server's default).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["example_from_schema"]

_FORMAT_EXAMPLES = {
    "date-time": "1970-01-01T00:00:00Z", "date": "1970-01-01", "time": "00:00:00", "duration": "PT0S",
    "uuid": "00000000-0000-0000-0000-000000000000", "email": "ok@example.com", "uri": "https://example.com/",
    "url": "https://example.com/", "ipv4": "127.0.0.1", "ipv6": "::1", "hostname": "example.com",
}


class _Recursion(Exception):
    pass


def example_from_schema(schema: Mapping[str, Any] | None, *, root: Mapping[str, Any] | None = None) -> Any:
    """A value conforming to a JSON schema as Pydantic and OpenAI emit them (local ``$ref``,
    the first usable option or value, bounds, lengths, formats, ``minItems``)."""
    if schema is None:
        return {}
    return _example(schema, root if root is not None else schema, ())


def _resolve_ref(ref: str, root: Mapping[str, Any]) -> Mapping[str, Any]:
    if not ref.startswith("#"):
        raise ValueError(f"only local $ref supported, got {ref!r}")
    node: Any = root
    for part in ref[1:].split("/"):
        if not part:
            continue
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def _example(schema: Any, root: Mapping[str, Any], stack: tuple[str, ...]) -> Any:
    if schema is True or not isinstance(schema, Mapping):
        return "ok"
    if "$ref" in schema:
        ref = schema["$ref"]
        if stack.count(ref) >= 2:
            raise _Recursion(ref)
        target = {**_resolve_ref(ref, root), **{k: v for k, v in schema.items() if k != "$ref"}}
        return _example(target, root, stack + (ref,))
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if options:
            non_null = [o for o in options if not (isinstance(o, Mapping) and o.get("type") == "null")]
            for option in non_null:
                try:
                    return _example(option, root, stack)
                except _Recursion:
                    continue
            if len(non_null) < len(options):
                return None
            raise _Recursion(key)
    if schema.get("allOf"):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            value = _example(part, root, stack)
            if isinstance(value, dict):
                merged.update(value)
            else:
                return value
        return merged

    typ = schema.get("type")
    if isinstance(typ, list):
        typ = next((t for t in typ if t != "null"), "null")
    if typ is None:
        typ = "object" if "properties" in schema else "array" if "items" in schema or "prefixItems" in schema else None

    if typ == "object":
        props = schema.get("properties") or {}
        return {name: _example(sub, root, stack) for name, sub in props.items()}
    if typ == "array":
        prefix = schema.get("prefixItems") or []
        out = [_example(s, root, stack) for s in prefix]
        items = schema.get("items")
        min_items = int(schema.get("minItems") or 0)
        if isinstance(items, Mapping):
            while len(out) < min_items:
                out.append(_example(items, root, stack))
        return out
    if typ == "string":
        value = _FORMAT_EXAMPLES.get(schema.get("format", ""), "ok").ljust(int(schema.get("minLength") or 0), "k")
        if schema.get("maxLength") is not None:
            value = value[: int(schema["maxLength"])]
        return value
    if typ in ("integer", "number"):
        return _number_example(schema, integer=typ == "integer")
    if typ == "boolean":
        return False
    return None if typ == "null" else "ok"


def _number_example(schema: Mapping[str, Any], *, integer: bool) -> int | float:
    lo, hi = schema.get("minimum"), schema.get("maximum")
    xlo, xhi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    step = 1 if integer else 0.5
    value: float = 0
    if lo is not None and value < lo:
        value = lo
    if xlo is not None and value <= xlo:
        value = xlo + step
    if hi is not None and value > hi:
        value = hi
    if xhi is not None and value >= xhi:
        value = xhi - step
    if integer:
        value = math.ceil(value) if (lo is not None or xlo is not None) else math.floor(value)
        return int(value)
    return int(value) if float(value).is_integer() else value
