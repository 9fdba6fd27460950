"""The HTML report in a real browser: Debian's headless Chromium, driven through
selenium and the system chromedriver. Checks what a person sees."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from judgegraph.cli import main
from tests.kit.results import (
    FAILING_REASON,
    HOSTILE_IMG,
    HOSTILE_REASON,
    HOSTILE_SCRIPT,
    QUOTED_ID,
    write_sample_run,
    write_two_runs,
)

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

pytestmark = [
    pytest.mark.integration,
    # skipped only off CI: .ci/run installs the browser, so there a missing one fails the tests
    pytest.mark.skipif(not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()) and not os.environ.get("CI"),
                       reason="needs Debian's chromium and chromium-driver (apt-get install -y chromium "
                              "chromium-driver; .ci/run installs them)"),
]

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1400,1600"]


def _chromium(name: str, prefs: dict[str, object] | None = None):
    """A headless Chromium driven by the system's chromedriver, with a profile of its own (removed after)."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the test extra")
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix=f"judgegraph-{name}-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    if prefs:
        options.add_experimental_option("prefs", prefs)
    # the system driver: selenium must not look for (or download) one of its own
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    yield from _chromium("chromium")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    chats, results = write_sample_run(d, 8)
    out = d / "report.html"
    assert main(["report", str(results), "--input", str(chats), "-o", str(out)]) == 0
    return out


def _open(browser, path: Path):
    from selenium.webdriver.common.by import By

    browser.get(path.resolve().as_uri())
    assert browser.find_element(By.TAG_NAME, "h1").text.startswith("judgegraph report")
    return By


def _visible_rows(browser, By):
    return [r for r in browser.find_elements(By.CSS_SELECTOR, "#conversations-table tr.row") if r.is_displayed()]


def _row(browser, By, cid: str):
    return browser.find_element(By.CSS_SELECTOR, f'#conversations-table tr.row[data-id="{cid}"]')


def test_rows_summary_and_graph_are_shown(browser, report):
    By = _open(browser, report)
    from selenium.webdriver.support.ui import Select

    def ids():
        return [r.find_element(By.CSS_SELECTOR, "td.conv-id").text.splitlines()[0] for r in _visible_rows(browser, By)]

    # failures first (a failed result, a judge error, a failed run), then input order
    assert ids() == ["conv-0003", "conv-0004", "conv-0005", "conv-0000", "conv-0001", "conv-0002", "conv-0006",
                     "conv-0007"]
    Select(browser.find_element(By.ID, "sort-order")).select_by_value("position")
    assert ids() == [f"conv-{i:04d}" for i in range(8)]
    summary = browser.find_element(By.ID, "summary").text
    assert "turn_relevancy" in summary and "knowledge_retention" in summary
    assert "1 failed" in browser.find_element(By.ID, "totals").text
    assert "run failed: RuntimeError" in _row(browser, By, "conv-0005").text
    # the report graph: each metric a labelled group
    groups = browser.find_elements(By.CSS_SELECTOR, "#graphs svg g.cluster")
    assert {g.get_attribute("data-name") for g in groups} == {"turn_relevancy", "knowledge_retention"}
    assert "input errors" in browser.find_element(By.ID, "totals").text
    assert "chats.jsonl 9 turns missing" in browser.find_element(By.ID, "input-errors").text


def test_a_failing_turn_shows_its_reason_and_transcript_after_clicks(browser, report):
    By = _open(browser, report)
    assert FAILING_REASON not in browser.find_element(By.TAG_NAME, "body").text  # nothing open yet
    _row(browser, By, "conv-0003").click()
    detail = browser.find_element(By.CSS_SELECTOR, "tr.detail .conversation[data-id='conv-0003']")
    turn = detail.find_element(By.CSS_SELECTOR, ".turn[data-turn='1']")
    assert "It is sunny in Lisbon today." in turn.text
    assert FAILING_REASON in turn.text and "no" in turn.find_element(By.CSS_SELECTOR, ".verdict-no").text
    transcript = turn.find_element(By.CSS_SELECTOR, "details.transcript")
    assert not transcript.find_element(By.CSS_SELECTOR, ".attempt").is_displayed()
    transcript.find_element(By.TAG_NAME, "summary").click()
    attempt = transcript.find_element(By.CSS_SELECTOR, ".attempt")
    assert attempt.is_displayed()
    assert "You judge turn_relevancy" in attempt.text and '"verdict": "no"' in attempt.text


def test_judge_error_shows_the_re_asks(browser, report):
    By = _open(browser, report)
    _row(browser, By, "conv-0004").click()
    detail = browser.find_element(By.CSS_SELECTOR, "tr.detail .conversation[data-id='conv-0004']")
    assert "judge error at window 0 (turn 2)" in detail.text
    transcript = detail.find_element(By.CSS_SELECTOR, ".turn[data-turn='1'] details.transcript")
    assert "3 calls (2 re-asks)" in transcript.text
    transcript.find_element(By.TAG_NAME, "summary").click()
    attempts = transcript.find_elements(By.CSS_SELECTOR, ".attempt")
    assert len(attempts) == 3 and all(a.is_displayed() for a in attempts)
    assert "Your last answer was not valid JSON" in attempts[1].text
    assert "error: invalid JSON: Expecting property name" in attempts[1].text


def test_markup_in_replies_is_shown_as_text_and_never_runs(browser, report):
    By = _open(browser, report)
    _row(browser, By, "conv-0001").click()
    _row(browser, By, "conv-0002").click()
    contents = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "tr.detail .turn .content")]
    assert HOSTILE_SCRIPT in contents
    assert HOSTILE_IMG in contents
    assert browser.execute_script("return window.__pwned === undefined")
    assert browser.title.startswith("judgegraph report")
    assert not browser.find_elements(By.CSS_SELECTOR, "tr.detail img, tr.detail b, main script")


def test_filters(browser, report):
    from selenium.webdriver.support.ui import Select

    By = _open(browser, report)
    shown = browser.find_element(By.ID, "shown")
    assert shown.text == "showing 8 of 8"
    browser.find_element(By.ID, "filter-failed").click()
    assert [r.get_attribute("data-id") for r in _visible_rows(browser, By)] == ["conv-0003"]
    browser.find_element(By.ID, "filter-failed").click()
    browser.find_element(By.ID, "filter-errors").click()
    assert [r.get_attribute("data-id") for r in _visible_rows(browser, By)] == ["conv-0004", "conv-0005"]
    Select(browser.find_element(By.ID, "filter-metric")).select_by_value("knowledge_retention")
    assert _visible_rows(browser, By) == []  # no errors in that metric
    browser.find_element(By.ID, "filter-errors").click()
    headers = [h.text for h in browser.find_elements(By.CSS_SELECTOR, "#conversations-table thead th") if h.is_displayed()]
    assert headers == ["conversation", "knowledge_retention"]
    assert len(_visible_rows(browser, By)) == 7  # the failed run has no knowledge_retention result
    Select(browser.find_element(By.ID, "filter-metric")).select_by_value("")
    browser.find_element(By.ID, "filter-text").send_keys("0007")
    assert [r.get_attribute("data-id") for r in _visible_rows(browser, By)] == ["conv-0007"]


def test_screenshot_of_an_open_conversation(browser, report, tmp_path):
    By = _open(browser, report)
    _row(browser, By, "conv-0003").click()
    browser.find_element(By.CSS_SELECTOR, ".turn[data-turn='1'] details.transcript summary").click()
    shot = tmp_path / "report.png"
    assert browser.save_screenshot(str(shot))
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_eval_html_opens_in_the_browser(browser, tmp_path):
    """`judgegraph eval --html` as a user runs it (offline judge), then the page."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    out = tmp_path / "report.html"
    status = main(["eval", str(examples / "support_chats.jsonl"), "-q", "--no-progress",
                   "--out", str(tmp_path / "r.jsonl"), "--html", str(out)])
    assert status in (0, 1)
    By = _open(browser, out)
    assert len(_visible_rows(browser, By)) == 6
    _row(browser, By, "refund-ok").click()
    detail = browser.find_element(By.CSS_SELECTOR, "tr.detail")
    assert "Can I return them?" in detail.text  # a user turn: the input file's turns are shown
    assert "no transcript recorded" in detail.text or detail.find_elements(By.CSS_SELECTOR, "details.transcript")
    # the offline judge makes no request: said once per metric, not under every verdict
    notes = detail.find_elements(By.CSS_SELECTOR, ".no-transcript")
    assert len(detail.find_elements(By.CSS_SELECTOR, ".verdict")) > 1
    assert [n.text for n in notes] == [n.text for n in notes[:1]] and len(notes) == len(
        detail.find_elements(By.CSS_SELECTOR, ".metric-block"))
    assert "the offline judge (offline:" in notes[0].text and "makes no LLM requests" in notes[0].text
    assert browser.find_elements(By.CSS_SELECTOR, "#graphs svg g.node[data-id='turn_relevancy:judge_turn']")


def test_unreadable_results_lines_are_listed_on_the_page(browser, tmp_path):
    _, results = write_sample_run(tmp_path, 2)
    with results.open("a") as fh:
        fh.write("{oops\n")
    out = tmp_path / "r.html"
    assert main(["report", str(results), "-o", str(out)]) == 3
    By = _open(browser, out)
    assert len(_visible_rows(browser, By)) == 2
    problems = browser.find_element(By.CSS_SELECTOR, "#summary ul.problems").text
    assert f"{results}:4: not JSON" in problems


# -- several runs side by side ------------------------------------------------------------------------------------

def _shot(browser, tmp_path: Path, name: str) -> Path:
    """A screenshot, kept where JUDGEGRAPH_SCREENSHOTS says (a path prefix, e.g. /tmp/b-report-) to look at."""
    prefix = os.environ.get("JUDGEGRAPH_SCREENSHOTS")
    shot = Path(f"{prefix}{name}.png") if prefix else tmp_path / f"{name}.png"
    assert browser.save_screenshot(str(shot))
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    return shot


@pytest.fixture(scope="module")
def comparison(tmp_path_factory):
    d = tmp_path_factory.mktemp("compare")
    chats, old, new = write_two_runs(d)
    out = d / "compare.html"
    assert main(["report", str(old), str(new), "--input", str(chats), "-o", str(out)]) == 0
    return out


def _ids(browser, By):
    return [r.get_attribute("data-id") for r in _visible_rows(browser, By)]


def test_two_runs_side_by_side(browser, comparison, tmp_path):
    By = _open(browser, comparison)
    assert "run A" in browser.find_element(By.ID, "runs").text and "2 min 05 s" in browser.find_element(By.ID, "runs").text
    everything = ["conv-0000", "conv-0003", "conv-0004", "conv-0005", "conv-0001", "conv-0002", "conv-0006",
                  "conv-0007", QUOTED_ID]
    assert _ids(browser, By) == everything  # failures (in either run) first, then input order
    _shot(browser, tmp_path, "compare")
    # only differences: fixed, regressed, a run that failed in A, missing in B, new in B
    browser.find_element(By.ID, "filter-differs").click()
    assert _ids(browser, By) == ["conv-0000", "conv-0003", "conv-0005", "conv-0006", QUOTED_ID]
    assert browser.find_element(By.ID, "shown").text == "showing 5 of 9"
    browser.find_element(By.ID, "filter-differs").click()
    assert _ids(browser, By) == everything
    # sort by run B's turn_relevancy score: ascending, then descending; no score (missing) stays last
    header = browser.find_element(By.CSS_SELECTOR, 'th[data-metric="turn_relevancy"][data-run="1"]')
    header.find_element(By.CSS_SELECTOR, "button.sort").click()
    assert header.get_attribute("aria-sort") == "ascending"
    ids = _ids(browser, By)
    assert ids[0] == "conv-0000" and ids[-1] == "conv-0006"
    header.find_element(By.CSS_SELECTOR, "button.sort").click()
    ids = _ids(browser, By)
    assert header.get_attribute("aria-sort") == "descending" and ids[-2:] == ["conv-0000", "conv-0006"]
    # open the regressed conversation: each run's verdicts next to each other, the hostile reason as text
    _row(browser, By, "conv-0000").click()
    columns = browser.find_elements(By.CSS_SELECTOR, "tr.detail .run-column")
    assert [c.get_attribute("data-run") for c in columns] == ["0", "1"]
    old_turn = columns[0].find_element(By.CSS_SELECTOR, ".turn[data-turn='1']")
    new_turn = columns[1].find_element(By.CSS_SELECTOR, ".turn[data-turn='1']")
    assert "The reply answers the user's question." in old_turn.text and old_turn.find_elements(By.CSS_SELECTOR, ".verdict-yes")
    assert HOSTILE_REASON in new_turn.text and new_turn.find_element(By.CSS_SELECTOR, ".verdict-no").text == "no"
    assert columns[0].location["y"] == columns[1].location["y"]  # side by side, not one under the other
    assert browser.execute_script("return window.__pwned === undefined")
    browser.execute_script("document.querySelector('tr.detail').scrollIntoView()")
    _shot(browser, tmp_path, "compare-open")
    # the id with quotes and markup: a row of its own, missing from run A
    (quoted,) = [r for r in browser.find_elements(By.CSS_SELECTOR, "tr.row") if r.get_attribute("data-id") == QUOTED_ID]
    assert quoted.find_element(By.CSS_SELECTOR, "td.conv-id").text.splitlines()[0] == QUOTED_ID
    quoted.click()
    opened = quoted.find_element(By.XPATH, "following-sibling::tr[1]")
    assert "missing: this run has no line" in opened.find_elements(By.CSS_SELECTOR, ".run-column")[0].text
    assert browser.execute_script("return window.__pwned === undefined")


def test_one_run_page_first_screen(browser, report, tmp_path):
    By = _open(browser, report)
    assert not browser.find_element(By.CSS_SELECTOR, "#graphs details").get_attribute("open")  # the graph folded away
    assert "judge calls / tokens" in browser.find_element(By.ID, "runs").text
    assert browser.find_element(By.CSS_SELECTOR, "#runs [data-fact=duration_s] td").text == "unknown"
    legend = browser.find_element(By.CSS_SELECTOR, "#conversations .legend").text
    assert "error the judge could not decide" in legend
    error = browser.execute_script("return getComputedStyle(document.querySelector('.legend .status.error')).backgroundColor")
    passed = browser.execute_script("return getComputedStyle(document.querySelector('.legend .status.passed')).backgroundColor")
    assert error != passed and error == "rgb(179, 89, 0)"
    _shot(browser, tmp_path, "single")


@pytest.fixture(scope="module")
def browser_without_js():
    yield from _chromium("chromium-nojs", {"profile.managed_default_content_settings.javascript": 2})


def test_the_comparison_reads_with_javascript_off(browser_without_js, comparison, tmp_path):
    browser = browser_without_js
    By = _open(browser, comparison)
    assert not browser.find_element(By.ID, "filters").is_displayed()  # filters need the script: not offered
    assert "rows open to show their turns" in " ".join(browser.find_element(By.TAG_NAME, "noscript")
                                                       .get_attribute("textContent").split())
    assert _ids(browser, By) == ["conv-0000", "conv-0003", "conv-0004", "conv-0005", "conv-0001", "conv-0002",
                                 "conv-0006", "conv-0007", QUOTED_ID]
    cell = browser.find_element(By.CSS_SELECTOR, 'tr.row[data-id="conv-0000"] td[data-metric="turn_relevancy"][data-run="1"]')
    assert cell.text == "failed 0.50"
    assert "2 min 05 s" in browser.find_element(By.ID, "runs").text
    assert "run A: 8 conversations" in browser.find_element(By.ID, "totals").text
    _shot(browser, tmp_path, "compare-nojs")
