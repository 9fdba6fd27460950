"""JUnit XML from judgegraph results, for CI systems that read it (docs/apps.md, "pytest and CI"): one ``<testcase>``
per conversation × metric; a failed threshold is a ``<failure>``, a judge error an ``<error>`` (never a pass or a
failure), ``not_applicable`` a ``<skipped>``; a failed run and a bad input record are ``<error>`` cases of their own.
A character XML 1.0 cannot hold is written as a visible escape (``\\x1b``), so the file always parses.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..runs import ConversationLine, InputErrorLine, ResultLine, RunFile, read_run

SUITE = "judgegraph"

#: what XML 1.0 cannot hold: https://www.w3.org/TR/xml/#charsets
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """``text`` with every character XML 1.0 cannot hold shown as a visible escape."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                        else f"\\u{ord(m.group()):04x}", text)


def _clean(root: ET.Element) -> None:
    """Every text, tail and attribute of the tree made fit for XML 1.0."""
    for el in root.iter():
        el.attrib.update({name: xml_text(value) for name, value in el.attrib.items()})
        el.text, el.tail = el.text and xml_text(el.text), el.tail and xml_text(el.tail)


def _case(suite: ET.Element, classname: str, name: str, body: str = "") -> ET.Element:
    case = ET.SubElement(suite, "testcase", classname=classname, name=name, time="0")
    if body:
        ET.SubElement(case, "system-out").text = body
    return case


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _result_case(suite: ET.Element, cid: str, key: str, r: ResultLine) -> str:
    score, threshold, reason = _number(r.score), _number(r.threshold), r.reason or ""
    case = _case(suite, cid, key, f"score {score} threshold {threshold} judge {r.judge or ''}\n{reason}")
    if r.status == "failed":
        ET.SubElement(case, "failure", type="threshold", message=f"score {score} < threshold {threshold}").text = reason
        return "failure"
    if r.status == "error" or r.errors:
        n = len(r.errors)
        el = ET.SubElement(case, "error", type="judge_error",
                           message=f"{n} judgement(s) could not be made" if n else (reason or "not judged"))
        el.text = "\n".join(f"{e.where} ({e.step}): {e.message}" for e in r.errors) or reason
        return "error"
    if r.status == "not_applicable":
        ET.SubElement(case, "skipped", message=reason or "nothing to judge")
        return "skipped"
    return "passed"


def _lines(records: RunFile | Iterable[dict[str, Any]]) -> list[InputErrorLine | ConversationLine]:
    """A run's input errors and conversation lines; records given as dicts read as the same typed lines."""
    if isinstance(records, RunFile):
        return [*records.input_errors, *records.conversations.values()]
    out: list[InputErrorLine | ConversationLine] = []
    for rec in records:
        kind = rec.get("type", "conversation")
        if kind == "input_error":
            out.append(InputErrorLine.model_validate(rec))
        elif kind == "conversation":
            out.append(ConversationLine.model_validate({**rec, "conversation_id": str(rec.get("conversation_id") or ""),
                                                        "results": rec.get("results") or {}}))
    return out


def junit_from_results(records: RunFile | Iterable[dict[str, Any]], *, name: str = SUITE) -> ET.ElementTree:
    """A JUnit ``<testsuites>`` tree from a run read, or its records as dicts (every text fit for XML 1.0)."""
    root = ET.Element("testsuites", name=name)
    suite = ET.SubElement(root, "testsuite", name=name)
    counts: Counter[str] = Counter()  # per outcome: passed, failure, error, skipped
    for line in _lines(records):
        if isinstance(line, InputErrorLine):
            rec = line.data()
            where = f"{rec.get('file')}:{rec.get('line')}" if rec.get("line") else str(rec.get("file"))
            where += f" {rec['field']}" if rec.get("field") else ""
            case = _case(suite, "input", where)
            ET.SubElement(case, "error", type="input_error", message=str(rec.get("error") or rec.get("message"))).text = \
                str(rec.get("error") or "")
            counts["error"] += 1
            continue
        cid = str(line.conversation_id or line.source or "conversation")
        for key, r in line.results.items():
            counts[_result_case(suite, cid, key, r)] += 1
        if error := line.run_error:
            case = _case(suite, cid, "run")
            ET.SubElement(case, "error", type="run_error", message=error).text = error
            counts["error"] += 1
    for el in (root, suite):
        el.attrib.update(tests=str(counts.total()), failures=str(counts["failure"]), errors=str(counts["error"]),
                         skipped=str(counts["skipped"]))
    _clean(root)
    return ET.ElementTree(root)


def write_junit(results: str | Path | RunFile | Iterable[dict[str, Any]], path: str | Path, *,
                name: str = SUITE) -> Path:
    """Write JUnit XML for ``results`` (a results JSONL path read by :func:`judgegraph.runs.read_run`, a
    :class:`~judgegraph.runs.RunFile`, or records) to ``path``."""
    if isinstance(results, (str, Path)):
        results = read_run(results)
    tree = junit_from_results(results if isinstance(results, RunFile) else list(results), name=name)
    ET.indent(tree)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tree.write(out, encoding="utf-8", xml_declaration=True)
    return out
