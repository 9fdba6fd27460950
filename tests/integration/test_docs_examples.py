"""Every command the README's tour and the command pages show, run as written (issue 30): in a fresh folder
holding a copy of examples/ and the first command's results, with the loopback OpenAI-compatible server standing
in for the local server or the key the text names. A command that stops running as written fails here."""

import os
import re
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import PASSED_TO_SUBPROCESSES
from tests.kit import cli
from tests.kit.openai_server import FakeOpenAIServer, schema_responder

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
LOCAL_SERVER = "http://localhost:11434/v1"  # the README's local server (Ollama): the loopback server plays it


def ran(status: int, output: str) -> bool:
    """Ran as written: passed or failed a threshold, or judge errors only (the loopback server's canned answers
    do not meet every metric's checks); never a usage error, a missing file, an input error or a bug."""
    return status in (0, 1) or (status == 3 and " 0 input errors" in output and "judge error" in output)


def bash_blocks(markdown: str) -> list[str]:
    blocks, inside, lines = [], False, []
    for line in markdown.splitlines():
        if line.startswith("```"):
            if inside:
                blocks.append("\n".join(lines))
            inside, lines = line.strip() == "```bash", []
        elif inside:
            lines.append(line)
    return blocks


def judgegraph_commands(text: str) -> list[str]:
    """The judgegraph command lines of the bash blocks (an `ENV=... ` prefix kept), comments cut off."""
    out = []
    for block in bash_blocks(text):
        for line in block.replace("\\\n", " ").splitlines():
            if "# not run:" in line:  # the comment says why (your own app, a real key)
                continue
            if "judgegraph " not in line or "&&" in line:  # the install line is CI's own first command
                continue
            words, target = shlex.split(line, comments=True), ""
            for i, word in enumerate(words):  # the shell's own: `> FILE` keeps the output, `;` ends the command
                if word == ">" or ";" in word:
                    target = words[i + 1].rstrip(";") if word == ">" else ""
                    words = words[:i] + ([word.rstrip(";")] if word.rstrip(";") not in (">", "") else [])
                    break
            command = shlex.join(words) + (f" > {target}" if target else "")
            while words and "=" in words[0] and not words[0].startswith("-"):
                words = words[1:]
            if words[:1] == ["judgegraph"]:
                out.append(command)
    return out


def documented() -> list[tuple[str, str]]:
    readme = [("README", c) for c in judgegraph_commands((ROOT / "README.md").read_text(encoding="utf-8"))]
    pages = yaml.safe_load((ROOT / "docs" / "_gen" / "commands.yml").read_text(encoding="utf-8"))
    return readme + [(f"commands/{name}", c) for name, page in pages.items() for c in page["examples"]
                     if "# not run:" not in c]  # as in a page's bash block: the comment says why (a server)


def once(shown: list[tuple[str, object]]) -> list[tuple[str, object]]:
    """Each distinct command (or run of commands) once, with every place that shows it ("README+commands/eval"):
    the same words in the same folder run the same way, so a repeat would only run it again."""
    where: dict[object, list[str]] = {}
    for doc, what in shown:
        where.setdefault(what, []).append(doc)
    return [("+".join(docs), what) for what, docs in where.items()]


def python_blocks(markdown: str) -> list[str]:
    """The ```python blocks not marked `<!-- not run: why -->` on the line before."""
    return re.findall(r"(?<!-->\n)```python\n(.*?)```", markdown, re.S)


def python_examples() -> list[tuple[str, int, str]]:
    pages = [ROOT / "README.md", *(p for p in sorted((ROOT / "docs").rglob("*.md")) if "_gen" not in p.parts)]
    return [(str(p.relative_to(ROOT)), i, block) for p in pages
            for i, block in enumerate(python_blocks(p.read_text(encoding="utf-8")))]


def site_pages() -> list[Path]:
    """The site's hand-written pages that show judgegraph commands."""
    return [p for p in sorted((ROOT / "docs").rglob("*.md"))
            if "_gen" not in p.parts and judgegraph_commands(p.read_text(encoding="utf-8"))]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A new user's folder after the README's first command, with the files the tour names."""
    where = tmp_path_factory.mktemp("newuser")
    shutil.copytree(ROOT / "examples", where / "examples")
    env = {"PATH": "/usr/bin:/bin", **{k: os.environ[k] for k in PASSED_TO_SUBPROCESSES if os.environ.get(k)}}
    first = cli.run(["eval", "examples/support_chats.jsonl", "--no-progress"], cwd=where, env=env, timeout=300)
    assert first.returncode in (0, 1), first.stdout + first.stderr
    for name in ("old-results.jsonl", "new-results.jsonl", "main-results.jsonl", "pr-results.jsonl"):
        shutil.copy(where / "judgegraph-results.jsonl", where / name)
    for name in ("chats.jsonl", "chats-v1.jsonl", "chats-v2.jsonl", "chats-v3.jsonl"):
        shutil.copy(where / "examples" / "support_chats.jsonl", where / name)
    shutil.copy(where / "examples" / "support_labels.jsonl", where / "labels.jsonl")
    with FakeOpenAIServer(schema_responder) as server:  # results.jsonl: an LLM judge's run, asked three times
        made = cli.run(["eval", "chats.jsonl", "--model", "openai:gpt-4.1-mini", "--repeat", "3", "--out", "results.jsonl",
                        "--no-progress"], cwd=where, timeout=300,
                       env={**env, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test"})
    assert made.returncode in (0, 1), made.stdout + made.stderr
    return where, env


def site_page_commands() -> list[tuple[str, object]]:
    """Each site page's commands, in order; pages showing the same ones (scale.md details guide/scale.md) share a run."""
    return once([(str(p.relative_to(ROOT / "docs")), tuple(judgegraph_commands(p.read_text(encoding="utf-8"))))
                 for p in site_pages()])


@pytest.mark.slow
@pytest.mark.parametrize("pages, commands", site_page_commands(), ids=[pages for pages, _ in site_page_commands()])
def test_a_site_page_s_commands_run_in_order_as_written(folder, tmp_path, monkeypatch, capsys, pages, commands):
    run_commands(folder[0], tmp_path, monkeypatch, capsys, pages, list(commands))


@pytest.mark.slow
@pytest.mark.parametrize("doc, index, code", python_examples(), ids=[f"{d}:{i}" for d, i, _ in python_examples()])
def test_a_documented_python_example_runs_as_written(folder, tmp_path, doc, index, code):
    """As ``python -c CODE`` (forked by the test kit), in a copy of the new user's folder, the loopback server as
    the judge."""
    where, env = folder
    run = shutil.copytree(where, tmp_path / "run")
    with FakeOpenAIServer(schema_responder) as server:
        proc = cli.run([], code=code, cwd=run, timeout=300,
                       env={**env, "PYTHONPATH": f"{env.get('PYTHONPATH', '')}:{ROOT}",
                            "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test",
                            "JUDGEGRAPH_JUDGE_CACHE": str(tmp_path / "cache.sqlite")})
    assert proc.returncode == 0, f"{doc} python block {index}:\n{code[:500]}\n{proc.stderr[-2500:]}"


def test_every_subcommand_has_a_page():
    from judgegraph.cli import SUBCOMMANDS

    pages = yaml.safe_load((ROOT / "docs" / "_gen" / "commands.yml").read_text(encoding="utf-8"))
    assert sorted(pages) == sorted(SUBCOMMANDS)
    for name, page in pages.items():
        assert {"reads", "writes", "exits", "examples"} <= set(page), name
        assert all(isinstance(code, int) for code in page["exits"]), name


def test_the_readme_and_the_command_pages_show_commands():
    where = [doc for doc, _ in documented()]
    assert where.count("README") >= 8 and len(where) >= 20


@pytest.mark.slow
@pytest.mark.parametrize("doc, command", once(documented()), ids=[f"{d}:{c[:60]}" for d, c in once(documented())])
def test_a_documented_command_runs_as_written(folder, tmp_path, monkeypatch, capsys, doc, command):
    """Each in its own copy of the folder: none sees another's files."""
    run_commands(folder[0], tmp_path, monkeypatch, capsys, doc, [command])


def run_commands(where: Path, tmp_path: Path, monkeypatch, capsys, doc: str, commands: list[str]) -> None:
    """``commands`` in order in a copy of ``where`` (a later one reads what an earlier one wrote), in this process,
    with the loopback server standing in for the judge; `> FILE` keeps the output."""
    from judgegraph.cli import main

    run = shutil.copytree(where, tmp_path / "run")
    monkeypatch.chdir(run)
    for made in re.findall(r"--out ([\w./-]+)", " ".join(commands)):  # what the commands make, they make themselves
        (run / made).unlink(missing_ok=True)
    with FakeOpenAIServer(schema_responder) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        for command in commands:
            line, _, target = command.partition(" > ")
            words = shlex.split(line.replace(LOCAL_SERVER, server.base_url))
            while "=" in words[0]:  # OPENAI_API_KEY=sk-... judgegraph ...: the key is the test's
                words.pop(0)
            status = main(words[1:])
            out, err = capsys.readouterr()
            if target:
                (run / target).write_text(out, encoding="utf-8")
            assert ran(status, out + err), f"{doc}: {command}\nexit {status}\n{out[-1500:]}\n{err[-1500:]}"


def reference_hooks():
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "_gen" / "hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_lists_every_subcommand_and_flag_help_shows(capsys):
    """The reference is generated from the parser; this holds it to what `--help` prints, command by command."""
    import re

    from judgegraph.cli import SUBCOMMANDS, main

    page = reference_hooks().cli_page()
    assert "%(" not in page  # a help's %(default)s expanded, as --help shows it
    for name in SUBCOMMANDS:
        assert f"## judgegraph {name}\n" in page, name
        section = page.split(f"## judgegraph {name}\n", 1)[1].split("\n## judgegraph ", 1)[0]
        with pytest.raises(SystemExit):
            main([name, "--help"])
        options = [line.strip().split("  ")[0] for line in capsys.readouterr().out.splitlines()
                   if line.startswith("  -")]  # the option lines of --help: "  -m, --metric METRIC   help"
        shown = {word.split()[0] for line in options for word in line.split(", ")}
        assert shown - {"-h", "--help"} <= set(re.findall(r"`(--?[a-z][a-z-]*)`", section)), name


def test_the_api_reference_covers_every_public_name():
    import importlib

    hooks = reference_hooks()
    page = hooks.api_page()
    assert "judgegraph.apps" in hooks.API_PACKAGES
    for package in hooks.API_PACKAGES:
        for name in importlib.import_module(package).__all__:
            assert f"heading: {package}.{name}\n" in page, f"{package}.{name}"


def test_the_metrics_catalogue_lists_every_registered_metric():
    from judgegraph.metrics import registry

    page = reference_hooks().metrics_page()
    for name, spec in registry().items():
        assert f"## {name.replace('_', '-')}" in page and spec.summary.split()[0] in page
