"""Safe YAML: PyYAML's safe parser and constructor with a composer of our own that never recurses (PyYAML's does:
``RecursionError`` at 1,000 levels) and counts what aliases expand to (a "billion laughs" file): a collection nested
past ``max_depth`` or expanding past ``max_record_chars`` becomes a :class:`Refused` value, refusing its record only."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

from .limits import Limits, Refused

REFUSED_TAG = "tag:judgegraph.dev,2026:refused"


#: Flow collections (``[[[...]]]``) nested deeper than this stop the file at once:
#: PyYAML's scanner slows quadratically with flow nesting, so a file of a million
#: ``[`` must be refused before it is scanned. Deeper than ``Limits.max_depth``
#: but up to this, only the record holding it is refused.
MAX_FLOW_NESTING = 1_500


class _Constructor(yaml.SafeLoader):
    """SafeLoader whose constructor also builds :class:`Refused` markers and
    whose scanner refuses absurd flow nesting."""

    def fetch_flow_collection_start(self, TokenClass: Any) -> None:
        if self.flow_level >= MAX_FLOW_NESTING:
            raise yaml.scanner.ScannerError(
                None, None, f"collections nested more than {MAX_FLOW_NESTING:,} levels deep: the file is refused",
                self.get_mark())
        super().fetch_flow_collection_start(TokenClass)


_Constructor.add_constructor(REFUSED_TAG, lambda _loader, node: Refused(str(node.value)))


def _refused(node: yaml.Node, message: str) -> yaml.ScalarNode:
    return yaml.ScalarNode(REFUSED_TAG, message, node.start_mark, node.end_mark)


def line_at(node: yaml.Node | None, path: Iterable[int | str]) -> int | None:
    """The 1-based line of the deepest key (or item) along ``path`` below ``node``, for an error naming the
    field; None when not even the first step of ``path`` is found."""
    line = None
    for part in path:
        if isinstance(node, yaml.MappingNode):
            found = next(((k, v) for k, v in node.value if getattr(k, "value", None) == str(part)), None)
            if found is None:
                break
            line, node = found[0].start_mark.line + 1, found[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def compose(text: str, limits: Limits) -> yaml.Node | None:
    """The single document of ``text`` as a node tree (None: no document); ``yaml.YAMLError`` for bad YAML."""
    loader = _Constructor(text)
    try:
        return _compose(loader, limits)
    finally:
        loader.dispose()


def construct(node: yaml.Node) -> Any:
    """Python values from a node tree made by :func:`compose` (PyYAML's constructor does not recurse on collections)."""
    loader = _Constructor("")
    try:
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _compose(loader: yaml.SafeLoader, limits: Limits) -> yaml.Node | None:
    anchors: dict[str, yaml.Node] = {}
    size: dict[yaml.Node, int] = {}  # characters a node expands to (nodes hash by identity)
    stack: list[list[Any]] = []  # [collection node being built, its pending mapping key or None, its anchor]
    root: yaml.Node | None = None
    skip = 0  # depth inside a collection being skipped (too deep)
    skipped_at: yaml.Node | None = None
    documents = 0

    def add(node: yaml.Node) -> None:
        nonlocal root
        if not stack:
            root = node
            return
        top = stack[-1]
        parent = top[0]
        if isinstance(parent, yaml.SequenceNode):
            parent.value.append(node)
        elif top[1] is None:
            top[1] = node
        else:
            parent.value.append((top[1], node))
            top[1] = None

    def close(node: yaml.Node) -> yaml.Node:
        if isinstance(node, yaml.SequenceNode):
            chars = 1 + sum(size.get(n, 0) for n in node.value)
        else:
            chars = 1 + sum(size.get(k, 0) + size.get(v, 0) for k, v in node.value)
        if chars > limits.max_record_chars:
            node = _refused(node, (
                f"expands to more than {limits.max_record_chars:,} characters (YAML aliases repeat it): "
                "refused; raise JUDGEGRAPH_MAX_RECORD_CHARS if it is genuine"
            ))
            chars = len(node.value)
        size[node] = chars
        return node

    while loader.check_event():
        event = loader.get_event()
        if isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            if documents > 1:
                raise yaml.composer.ComposerError(
                    "expected a single document in the stream", None, "but found another document",
                    event.start_mark)
            continue
        if isinstance(event, (yaml.StreamStartEvent, yaml.StreamEndEvent, yaml.DocumentEndEvent)):
            continue
        if skip:
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                skip += 1
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                skip -= 1
                if skip == 0 and skipped_at is not None:
                    node = _refused(skipped_at, f"nested more than {limits.max_depth} levels deep: refused")
                    size[node] = len(node.value)
                    add(node)
            continue
        if isinstance(event, yaml.AliasEvent):
            if event.anchor not in anchors:
                raise yaml.composer.ComposerError(
                    None, None, f"found undefined alias {event.anchor!r}", event.start_mark)
            target = anchors[event.anchor]
            if any(entry[0] is target for entry in stack):
                raise yaml.composer.ComposerError(
                    None, None, f"alias {event.anchor!r} refers to a collection that contains it", event.start_mark)
            add(target)
            continue
        if isinstance(event, yaml.ScalarEvent):
            tag = loader.resolve(yaml.ScalarNode, event.value, event.implicit) if event.tag in (None, "!") else event.tag
            node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style)
            size[node] = len(event.value) + 1
            if event.anchor is not None:
                anchors[event.anchor] = node
            add(node)
            continue
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            if len(stack) >= limits.max_depth:
                skip, skipped_at = 1, yaml.ScalarNode("", "", event.start_mark, event.end_mark)
                continue
            is_seq = isinstance(event, yaml.SequenceStartEvent)
            kind = yaml.SequenceNode if is_seq else yaml.MappingNode
            tag = loader.resolve(kind, None, event.implicit) if event.tag in (None, "!") else event.tag
            node = kind(tag, [], event.start_mark, None, flow_style=event.flow_style)
            if event.anchor is not None:
                anchors[event.anchor] = node
            stack.append([node, None, event.anchor])
            continue
        if isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            node, _, anchor = stack.pop()
            node.end_mark = event.end_mark
            closed = close(node)
            if anchor is not None and anchors[anchor] is node:  # not redefined inside it
                anchors[anchor] = closed
            add(closed)
    return root
