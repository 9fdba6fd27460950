"""``judgegraph view`` as a person uses it: the real command (uvicorn, in a subprocess) in Debian's headless
Chromium, driven through selenium and the system chromedriver (as the HTML report's tests drive it).

A person labels 10 turns by keyboard alone; the labels file holds 10 records with annotator and time and
``judgegraph agree`` reads them; the server killed mid-queue and started again resumes at item 11; a conversation
holding ``<script>`` and ``<img onerror>`` runs no script on the label, runs and report pages. And without the
token, a server started with ``--host 0.0.0.0`` answers 403."""

from __future__ import annotations

import hashlib
import json
import socket
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

import pytest

from judgegraph.cli import main
from tests.integration.test_html_browser import CHROMEDRIVER, CHROMIUM, _chromium
from tests.kit import cli
from tests.kit.results import HOSTILE_IMG, HOSTILE_SCRIPT, write_runs

pytestmark = pytest.mark.integration
needs_browser = pytest.mark.skipif(not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()),
                                   reason="needs Debian's chromium and chromium-driver")

SCRIPT = "<script>window.pwned=1</script>"
IMG = '<img src=x onerror="window.pwned=1">'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``judgegraph view ARGS`` in a subprocess on a free port, ready when it answers."""

    def __init__(self, args: list[str], env: dict[str, str], host: str = "127.0.0.1") -> None:
        self.port = free_port()
        self.proc = cli.start(["view", *args, "--host", host, "--port", str(self.port)], env=env)
        deadline = time.monotonic() + 60
        while "\n" not in self.proc.stdout:  # its first line: the address to open
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"judgegraph view did not start: {self.proc.stderr}")
            time.sleep(0.05)
        self.url = self.proc.stdout.splitlines()[0].strip().split(": ", 1)[1]
        self.base = f"http://127.0.0.1:{self.port}"
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"judgegraph view did not start: {self.proc.stderr}") from None
                time.sleep(0.1)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.communicate(timeout=30)


@pytest.fixture(scope="module")
def browser():
    yield from _chromium("view")


@pytest.fixture
def run(tmp_path) -> Path:
    """One run of 8 conversations whose turns hold the two hostile texts (and the kit's own)."""
    d = tmp_path / "runs"
    path = write_runs(d, 1, 8)[0]
    chats = d / "chats.jsonl"
    texts = {HOSTILE_SCRIPT: SCRIPT + HOSTILE_SCRIPT, HOSTILE_IMG: IMG + HOSTILE_IMG}
    for p in (chats, path):
        body = p.read_text(encoding="utf-8")
        for old, new in texts.items():
            body = body.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])
        p.write_text(body, encoding="utf-8")
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    header["inputs"][0]["sha256"] = hashlib.sha256(chats.read_bytes()).hexdigest()
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    contents = [t["content"] for line in chats.read_text(encoding="utf-8").splitlines() for t in json.loads(line)["turns"]]
    assert any(SCRIPT in c for c in contents) and any(IMG in c for c in contents)
    return path


def _position(browser) -> int | None:
    """The item shown (1-based), read in one script call: None until the page (and its key handler) is loaded."""
    text = browser.execute_script("const p = document.getElementById('position');"
                                  " return document.readyState === 'complete' && p && p.textContent")
    return int(text) if text else None


def _wait(browser, check, what: str) -> None:
    """Until ``check(browser)``: a page navigating meanwhile (its elements gone stale) is waited out."""
    from selenium.common.exceptions import JavascriptException, NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 30, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException,
                                                   JavascriptException)).until(lambda d: check(d), message=what)


@needs_browser
def test_a_person_labels_10_turns_by_keyboard_and_a_restart_resumes_at_item_11(browser, run, tmp_path, bare_env,
                                                                                capsys):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    labels = tmp_path / "labels.jsonl"
    server = Server([str(run.parent), "--labels", str(labels)], bare_env)
    try:
        browser.get(server.base + "/label")
        ActionChains(browser).send_keys("ann").send_keys(Keys.ENTER).perform()  # the name field has the focus
        _wait(browser, lambda d: _position(d) is not None, "the queue's first item")
        assert _position(browser) == 1
        n = int(browser.find_element(By.ID, "queue").get_attribute("data-n"))
        assert n > 11
        for k in range(10):
            ActionChains(browser).send_keys("y" if k % 3 else "n").perform()
            _wait(browser, lambda d, k=k: _position(d) == k + 2, f"item {k + 2} after labelling item {k + 1}")
        # arrows move without labelling; u goes back one
        ActionChains(browser).send_keys(Keys.ARROW_RIGHT).perform()
        _wait(browser, lambda d: _position(d) == 12, "→ to item 12")
        ActionChains(browser).send_keys("u").perform()
        _wait(browser, lambda d: _position(d) == 11, "u back to item 11")
    finally:
        server.kill()  # mid-queue
    records = [json.loads(line) for line in labels.read_text(encoding="utf-8").splitlines()]
    assert len(records) == 10
    assert [r["label"] for r in records] == ["no" if k % 3 == 0 else "yes" for k in range(10)]
    for r in records:
        assert r["annotator"] == "ann" and datetime.fromisoformat(r["time"].replace("Z", "+00:00"))
    assert main(["agree", str(run), "--labels", str(labels), "--json"]) in (0, 1)
    report = json.loads(capsys.readouterr().out)
    assert sum(m["n"] for m in report["metrics"].values()) == 10

    again = Server([str(run.parent), "--labels", str(labels)], bare_env)
    try:
        browser.get(again.base + "/label")
        ActionChains(browser).send_keys("ann").send_keys(Keys.ENTER).perform()
        _wait(browser, lambda d: _position(d) is not None, "the queue")
        assert _position(browser) == 11
        assert "10 of" in browser.find_element(By.ID, "queue").text
    finally:
        again.kill()


@needs_browser
def test_conversation_text_runs_no_script_on_any_page(browser, run, tmp_path, bare_env):
    from selenium.webdriver.common.by import By

    server = Server([str(run.parent), "--labels", str(tmp_path / "labels.jsonl")], bare_env)
    try:
        shown: set[str] = set()
        browser.get(f"{server.base}/label?run={run}&annotator=ann&strategy=random&i=0")
        n = int(browser.find_element(By.ID, "queue").get_attribute("data-n"))
        for i in range(n):
            browser.get(f"{server.base}/label?run={run}&annotator=ann&strategy=random&i={i}")
            assert browser.execute_script("return window.pwned") is None
            assert browser.execute_script("return window.__pwned") is None
            text = browser.find_element(By.CSS_SELECTOR, "ol.turns").text
            shown.update(t for t in (SCRIPT, IMG) if t in text)  # shown as text, not run
        assert shown == {SCRIPT, IMG}
        for page in ("/", f"/run?run={run}", f"/compare?run={run}&run={run}", "/trust"):
            browser.get(server.base + page)
            assert browser.find_element(By.TAG_NAME, "body").text
            assert browser.execute_script("return window.pwned") is None, page
            assert browser.execute_script("return window.__pwned") is None, page
    finally:
        server.kill()


def test_without_the_token_a_server_on_another_host_answers_403(run, tmp_path, bare_env):
    server = Server([str(run), "--labels", str(tmp_path / "labels.jsonl")], bare_env, host="0.0.0.0")
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(server.base + "/", timeout=30)
        assert refused.value.code == 403
        token = server.url.split("?token=", 1)[1]
        assert len(token) >= 24 and server.url.startswith(f"http://0.0.0.0:{server.port}/")
        with urllib.request.urlopen(f"{server.base}/?token={token}", timeout=30) as ok:
            assert ok.status == 200 and run.name in ok.read().decode()
    finally:
        server.kill()


def test_a_port_in_use_is_exit_3_and_a_port_that_is_not_one_exit_2(run, tmp_path, bare_env):
    server = Server([str(run), "--labels", str(tmp_path / "labels.jsonl")], bare_env)
    try:
        second = cli.run(["view", str(run), "--port", str(server.port)], env=bare_env, timeout=120)
        assert second.returncode == 3 and f"could not serve on 127.0.0.1:{server.port}" in second.stderr
    finally:
        server.kill()
    assert main(["view", str(run), "--port", "70000"]) == 2
