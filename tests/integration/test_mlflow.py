"""MLflow sessions in, assessments out, against a real ``mlflow server`` on
127.0.0.1 with a SQLite backend (one server per test session). Traces are
logged with MLflow's own tracing API and assessments read back with MLflow's
own client. Nothing is skipped: without MLflow these tests fail. What needs
no server (request shapes, history de-duplication, blank messages, the
expectations rule) is in tests/unit/test_mlflow_sessions.py."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from judgegraph.cli import main
from judgegraph.integrations.mlflow import load_sessions, log_assessments
from judgegraph.judges import resolve_judge
from judgegraph.judges.scripted import ScriptedChatModel
from judgegraph.runs.runner import MetricPlan, evaluate_async
from tests.kit import cli

pytestmark = pytest.mark.integration

# MLflow reads these when it is first imported (client and server): no telemetry.
QUIET = {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}
os.environ.update(QUIET)
SESSION = "mlflow.trace.session"


# --------------------------------------------------------------------------- the server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.fixture(scope="session")
def mlflow_uri(tmp_path_factory):
    """`mlflow server` with SQLite in a temporary folder; stopped (whole process
    group) at the end of the session."""
    import mlflow  # noqa: F401 - fails (not skips) when MLflow is missing

    root = tmp_path_factory.mktemp("mlflow")
    port = _free_port()
    uri = f"http://127.0.0.1:{port}"
    env = {**os.environ, **QUIET, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}  # no job-runner processes
    log = (root / "server.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
         "--default-artifact-root", str(root / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not _healthy(uri):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("mlflow server did not start:\n" + (root / "server.log").read_text()[-3000:])
            time.sleep(0.1)
        yield uri
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


# --------------------------------------------------------------------------- traces logged with MLflow's API

SHOES = [
    ("Can I return my running shoes?", "Yes: unworn shoes can be returned within 30 days for a full refund."),
    ("Do you ship to Canada?", "The capital of France is Paris."),
    ("How long does delivery to Toronto take?", "Delivery to Toronto takes 5 to 7 business days."),
]
SYSTEM = "You are a maths tutor."
MATH = [
    ("What is 2+2?", "2+2 equals 4."),
    ("And 3+3?", "Seven-ish?? QQQ"),  # the scripted judge answers this one with garbage: a judge error
    ("Can you solve 5+5?", "5+5 equals 10."),
]


def _log_traces(uri: str, experiment: str) -> dict:
    """Three sessions and one trace without a session, with MLflow's tracing API."""
    import mlflow

    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        exp_id = mlflow.set_experiment(experiment).experiment_id

        # 1. A chatbot function traced with @mlflow.trace: inputs are its arguments.
        @mlflow.trace
        def shop_bot(question: str, session_id: str) -> str:
            mlflow.update_current_trace(metadata={SESSION: session_id})
            return dict(SHOES)[question]

        shoes = []
        for question, _ in SHOES:
            shop_bot(question, "shoes")
            shoes.append(mlflow.get_last_active_trace_id())

        # 2. OpenAI-style requests carrying the whole history, logged out of order
        #    with explicit start times (turn 3, then 1, then 2).
        base = time.time_ns() - 3_600 * 10**9
        history = [{"role": "system", "content": SYSTEM}]
        requests = []
        for question, answer in MATH:
            history = history + [{"role": "user", "content": question}]
            requests.append((list(history), answer))
            history = history + [{"role": "assistant", "content": answer}]
        math = {}
        for k in (2, 0, 1):
            messages, answer = requests[k]
            start = base + k * 10**9
            span = mlflow.start_span_no_context("chat", inputs={"messages": messages, "temperature": 0},
                                                metadata={SESSION: "math-history"}, experiment_id=exp_id,
                                                start_time_ns=start)
            span.end(outputs={"choices": [{"index": 0, "message": {"role": "assistant", "content": answer}}]},
                     end_time_ns=start + 10**8)
            math[k] = span.trace_id

        # 3. A trace with no session: a conversation of its own.
        @mlflow.trace
        def lonely(prompt: str) -> dict:
            return {"role": "assistant", "content": "ZZZ unjudgeable"}

        lonely("Tell me a joke")
        lonely_id = mlflow.get_last_active_trace_id()

        # 4. A session whose only trace cannot be read (which argument is the message?).
        @mlflow.trace
        def odd(a: str, b: str) -> str:
            mlflow.update_current_trace(metadata={SESSION: "broken"})
            return "?"

        odd("x", "y")
        broken = mlflow.get_last_active_trace_id()
        mlflow.flush_trace_async_logging()
    finally:
        mlflow.set_tracking_uri(previous)
    return {"experiment": experiment, "shoes": shoes, "math": [math[0], math[1], math[2]], "lonely": lonely_id,
            "broken": broken}


@pytest.fixture(scope="session")
def logged(mlflow_uri):
    return _log_traces(mlflow_uri, "judgegraph-tests")


# --------------------------------------------------------------------------- load_sessions


def turns(item):
    return [(t.role, t.content) for t in item.conversation.turns]


def test_sessions_are_grouped_ordered_and_not_duplicated(mlflow_uri, logged):
    sessions = load_sessions(mlflow_uri, logged["experiment"])
    by_id = {item.conversation.id: item for item in sessions}
    assert set(by_id) == {"shoes", "math-history", logged["lonely"]}
    assert [item.format for item in sessions] == ["mlflow"] * 3

    shoes = by_id["shoes"]
    assert shoes.source == "mlflow:judgegraph-tests/shoes"
    assert turns(shoes) == [(r, t) for q, a in SHOES for r, t in (("user", q), ("assistant", a))]
    assert [t.metadata["mlflow_trace_id"] for t in shoes.conversation.turns] == [i for i in logged["shoes"] for _ in (0, 1)]
    assert shoes.conversation.metadata["mlflow_first_trace_id"] == logged["shoes"][0]

    # full history in every request, logged out of order: each message once, in time order
    math = by_id["math-history"]
    assert turns(math) == [("system", SYSTEM)] + [(r, t) for q, a in MATH for r, t in (("user", q), ("assistant", a))]
    assert [t.metadata["mlflow_trace_id"] for t in math.conversation.turns] == [
        logged["math"][0]] * 3 + [logged["math"][1]] * 2 + [logged["math"][2]] * 2
    assert [t.metadata["mlflow_part"] for t in math.conversation.turns[1:3]] == ["request", "response"]
    assert math.conversation.metadata["mlflow_trace_ids"] == logged["math"]

    lonely = by_id[logged["lonely"]]
    assert turns(lonely) == [("user", "Tell me a joke"), ("assistant", "ZZZ unjudgeable")]
    assert lonely.conversation.metadata["mlflow_session"] is None

    # the unreadable trace is an input error naming the server, the trace and the field; the rest went on
    (error,) = sessions.errors
    assert (error.file, error.record, error.field) == (mlflow_uri, logged["broken"], "request")
    assert "keys: a, b" in error.message and "broken" in error.message
    assert sessions.traces == 8


def test_max_traces_reads_whole_sessions(mlflow_uri, logged):
    sessions = load_sessions(mlflow_uri, logged["experiment"], max_traces=2)
    # the two newest traces are the broken one and the lonely one: no session is cut
    assert [s.conversation.id for s in sessions] == [logged["lonely"]] and sessions.traces == 2
    sessions = load_sessions(mlflow_uri, logged["experiment"], max_traces=4)  # reaches into "shoes": all 3 read
    assert len(next(s for s in sessions if s.conversation.id == "shoes").conversation.turns) == 6


def test_unknown_experiment_and_unreachable_server_are_input_errors(mlflow_uri):
    (e,) = load_sessions(mlflow_uri, "no-such-experiment").errors
    assert e.field == "experiment" and "not found" in e.message
    started = time.monotonic()
    (e,) = load_sessions(f"http://127.0.0.1:{_free_port()}", "x").errors
    assert "cannot reach" in e.message and time.monotonic() - started < 10  # not MLflow's minutes of retries


# --------------------------------------------------------------------------- log_assessments


def _scripted_judge():
    model = ScriptedChatModel(
        rules=[("Paris", [{"reason": "It names a capital instead of answering about shipping.", "verdict": "no"}]),
               ("QQQ", ["not a verdict"]), ("ZZZ", ["still not a verdict"])],
        default={"reason": "It answers the question.", "verdict": "yes"},
        section="reply_to_judge",
    )
    return resolve_judge(model=model, max_tries=1)


def _feedback(client, trace_id, name):
    found = [a for a in client.get_trace(trace_id).info.assessments if a.name == name]
    assert len(found) == 1, (trace_id, name, found)
    return found[0]


def test_results_are_written_back_as_assessments(mlflow_uri, logged):
    from mlflow import MlflowClient

    sessions = load_sessions(mlflow_uri, logged["experiment"])
    plan = MetricPlan(["turn-relevancy"], _scripted_judge())
    summary = asyncio.run(evaluate_async(sessions, plan))
    results = {o.conversation_id: o.results["turn_relevancy"] for o in summary.outcomes}
    assert results["shoes"].score == pytest.approx(2 / 3) and results[logged["lonely"]].status == "error"

    log = log_assessments(mlflow_uri, summary, sessions)
    assert (log.session, log.turn, log.errors, log.failures) == (3, 7, 3, [])

    client = MlflowClient(mlflow_uri)
    # session level: on the session's first trace
    shoes = _feedback(client, logged["shoes"][0], "turn_relevancy")
    assert shoes.value == pytest.approx(2 / 3) and shoes.rationale == results["shoes"].reason
    assert "Paris" in shoes.rationale
    assert (shoes.source.source_type, shoes.source.source_id) == ("LLM_JUDGE", "llm:scripted")
    assert {k: shoes.metadata[k] for k in ("threshold", "passed", "status", "judge_errors")} == {
        "threshold": "0.5", "passed": "true", "status": "passed", "judge_errors": "0"}
    assert shoes.error is None
    # per turn: on each reply's own trace
    second = _feedback(client, logged["shoes"][1], "turn_relevancy/turn")
    assert second.value == "no" and "capital" in second.rationale and json.loads(second.metadata["turns"]) == [3]
    assert _feedback(client, logged["shoes"][0], "turn_relevancy/turn").value == "yes"

    # a judge error on one window: the session keeps its score, that turn carries the error, not a value
    math = _feedback(client, logged["math"][0], "turn_relevancy")
    assert math.value == pytest.approx(1.0) and math.metadata["judge_errors"] == "1"
    failed = _feedback(client, logged["math"][1], "turn_relevancy/turn")
    assert failed.value is None and failed.error.error_code == "JUDGE_ERROR" and failed.error.error_message
    # nothing could be judged: the session-level feedback is an error, never a pass or a fail
    lonely = _feedback(client, logged["lonely"], "turn_relevancy")
    assert lonely.value is None and lonely.error.error_code == "JUDGE_ERROR"
    assert lonely.metadata["status"] == "error"

    # MLflow's search sees them too
    exp_id = client.get_experiment_by_name(logged["experiment"]).experiment_id
    found = client.search_traces(locations=[exp_id], filter_string="metadata.`mlflow.trace.session` = 'shoes'")
    names = {a.name for t in found for a in t.info.assessments}
    assert {"turn_relevancy", "turn_relevancy/turn"} <= names

    # session-level feedback carries MLflow's session mark, as its own session judges' do; per-turn and
    # sessionless feedback do not
    assert shoes.metadata[SESSION] == "shoes" and math.metadata[SESSION] == "math-history"
    assert SESSION not in second.metadata and SESSION not in lonely.metadata
    # ... so MLflow treats it as a session assessment: a search on it matches every trace of the session,
    # not only the first one it is logged on
    hit = client.search_traces(locations=[exp_id], filter_string="feedback.`turn_relevancy` IS NOT NULL")
    assert set(logged["shoes"]) <= {t.info.trace_id for t in hit}


def test_feedback_comes_from_to_feedback(mlflow_uri, logged):
    """name = key, rationale = comment, value = the declared value (else score, else passed), metadata = extra."""
    from mlflow import MlflowClient

    from judgegraph.data.results import MetricResult

    sessions = load_sessions(mlflow_uri, logged["experiment"])
    declared = MetricResult(key="outcome", score=1.0, passed=True, threshold=0.5, value="resolved", reason="Done.",
                            status="passed", judge="llm:scripted", conversation_id="shoes")
    gated = MetricResult(key="gate", score=None, threshold=0.5, passed=False, reason="No score.", status="failed",
                         judge="llm:scripted", conversation_id="shoes")
    log = log_assessments(mlflow_uri, {"shoes": {"outcome": declared, "gate": gated}}, sessions)
    assert (log.session, log.turn, log.failures) == (2, 0, [])
    client = MlflowClient(mlflow_uri)
    outcome = _feedback(client, logged["shoes"][0], "outcome")
    assert (outcome.value, outcome.rationale) == ("resolved", "Done.")
    extra = declared.to_feedback()["extra"]
    assert {k: outcome.metadata[k] for k in extra} == {k: v if isinstance(v, str) else json.dumps(v)
                                                       for k, v in extra.items()}  # strings kept, others JSON
    assert json.loads(outcome.metadata["score"]) == 1.0 and outcome.metadata[SESSION] == "shoes"
    gate = _feedback(client, logged["shoes"][0], "gate")
    assert gate.value is False and gate.error is None


# --------------------------------------------------------------------------- expectations and blank replies

BOOKING = [
    ("Book a table for two at 7pm.", "Booked: a table for two at 7pm."),
    ("Thanks!", "  \n "),  # a whitespace-only reply: dropped, as MLflow drops it
    ("Can I bring my dog?", "Dogs are welcome on the terrace."),
]
GOAL = "The user gets a table for two at 7pm and learns the dog policy."


def _log_booking(uri: str) -> tuple[str, list[str]]:
    """One session of chat-message traces, with expectations: human and session-level on the first and
    the last trace, human and trace-level on the last, and a session-level one from code (not ground truth)."""
    import mlflow
    from mlflow.entities import AssessmentSource, AssessmentSourceType

    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        exp_id = mlflow.set_experiment("judgegraph-expectations").experiment_id

        @mlflow.trace
        def bot(messages: list) -> dict:
            mlflow.update_current_trace(metadata={SESSION: "booking"})
            return {"choices": [{"message": {"role": "assistant", "content": dict(BOOKING)[messages[-1]["content"]]}}]}

        ids = []
        for question, _ in BOOKING:
            bot([{"role": "user", "content": question}])
            ids.append(mlflow.get_last_active_trace_id())
            time.sleep(0.01)  # distinct trace timestamps (MLflow orders a session by them)
        mlflow.flush_trace_async_logging()
        mark = {SESSION: "booking"}
        mlflow.log_expectation(trace_id=ids[0], name="goal", value=GOAL, metadata=mark)
        mlflow.log_expectation(trace_id=ids[2], name="must_mention", value=["terrace"], metadata=mark)
        mlflow.log_expectation(trace_id=ids[2], name="expected_response", value="Dogs are welcome on the terrace.")
        mlflow.log_expectation(trace_id=ids[0], name="synthetic", value="x", metadata=mark,
                               source=AssessmentSource(source_type=AssessmentSourceType.CODE, source_id="gen"))
    finally:
        mlflow.set_tracking_uri(previous)
    return exp_id, ids


@pytest.fixture(scope="session")
def booking(mlflow_uri):
    return _log_booking(mlflow_uri)


def test_expectations_and_blank_replies_as_mlflow_reads_them(mlflow_uri, booking):
    from mlflow import MlflowClient
    from mlflow.genai.utils.trace_utils import resolve_conversation_from_session, resolve_expectations_from_session

    exp_id, ids = booking
    (item,) = load_sessions(mlflow_uri, "judgegraph-expectations")
    conv = item.conversation
    # MLflow's own session reading of the same traces, as its session judges see them
    traces = MlflowClient(mlflow_uri).search_traces(locations=[exp_id], include_spans=True)
    assert [(t.role, t.content) for t in conv.turns] == [
        (m["role"], m["content"]) for m in resolve_conversation_from_session(traces)]
    assert [(t.role, t.content) for t in conv.turns] == [
        ("user", BOOKING[0][0]), ("assistant", BOOKING[0][1]), ("user", BOOKING[1][0]),
        ("user", BOOKING[2][0]), ("assistant", BOOKING[2][1])]
    assert conv.metadata["mlflow_blank_replies"] == [ids[1]]

    # session expectations: human, marked session-level; MLflow reads the first trace's, judgegraph every
    # trace's (the earliest wins a name); code-sourced ones are not ground truth; trace-level ones stay on the turn
    assert resolve_expectations_from_session(None, traces) == {"goal": GOAL}
    assert conv.metadata["expectations"] == {"goal": GOAL, "must_mention": ["terrace"]}
    assert conv.turns[-1].metadata["mlflow_expectations"] == {"expected_response": BOOKING[2][1]}
    assert "mlflow_expectations" not in conv.turns[1].metadata


def test_make_metric_with_expectations_on_an_mlflow_session(mlflow_uri, booking):
    from mlflow import MlflowClient

    from judgegraph import make_metric

    _, ids = booking
    sessions = load_sessions(mlflow_uri, "judgegraph-expectations")
    (conv,) = [s.conversation for s in sessions]
    model = ScriptedChatModel(rules=[(lambda text: True, [{"reason": "Table booked, dog policy given.", "value": True}])])
    graph = make_metric(name="goal_met", instructions="Was this reached: {{ expectations }}?\n{{ conversation }}",
                       model=model)
    (result,) = graph.invoke({"conversation": conv})["results"].values()
    assert result.status == "passed" and result.value is True
    (prompt,) = model.prompts
    shown = json.loads(prompt.split("<expectations>\n")[1].split("\n</expectations>")[0])
    assert shown == {"goal": GOAL, "must_mention": ["terrace"]}

    log = log_assessments(mlflow_uri, {conv.id: {"goal_met": result}}, sessions)
    assert (log.session, log.failures) == (1, [])
    fb = _feedback(MlflowClient(mlflow_uri), ids[0], "goal_met")
    assert fb.value is True and fb.metadata[SESSION] == "booking"


# --------------------------------------------------------------------------- the command line


def test_cli_round_trip(mlflow_uri, tmp_path):
    import mlflow
    from mlflow import MlflowClient

    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(mlflow_uri)
    try:
        mlflow.set_experiment("judgegraph-cli")

        @mlflow.trace
        def bot(question: str) -> str:
            mlflow.update_current_trace(metadata={SESSION: "cli-session"})
            return {"How do I reset my password?": "Click 'Forgot password' on the login page and follow the email link.",
                    "Which email do you send it to?": "We send the password reset link to your account's email address."}[question]

        bot("How do I reset my password?")
        first = mlflow.get_last_active_trace_id()
        bot("Which email do you send it to?")
        mlflow.flush_trace_async_logging()
    finally:
        mlflow.set_tracking_uri(previous)
    out = tmp_path / "r.jsonl"
    proc = cli.run(["eval", "--mlflow-uri", mlflow_uri, "--experiment", "judgegraph-cli", "--log-assessments",
                    "--out", str(out), "--no-progress"], env={**os.environ, **QUIET}, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cli-session" in proc.stdout and "3 assessments written to MLflow (1 session-level, 2 per-turn)" in proc.stdout
    (row,) = [r for line in out.read_text().splitlines() if (r := json.loads(line))["type"] == "conversation"]
    assert row["conversation_id"] == "cli-session" and row["source"] == "mlflow:judgegraph-cli/cli-session"
    fb = _feedback(MlflowClient(mlflow_uri), first, "turn_relevancy")
    assert fb.value == 1.0 and (fb.source.source_type, fb.source.source_id) == ("CODE", "offline:all-MiniLM-L6-v2")


@pytest.mark.parametrize("argv,msg", [
    ([], "nothing to judge"),
    (["--mlflow-uri", "http://127.0.0.1:1"], "needs --experiment"),
    (["--experiment", "x"], "need --mlflow-uri"),
    (["--log-assessments", "x.jsonl"], "need --mlflow-uri"),
])
def test_cli_usage_errors_exit_2(argv, msg, capsys, tmp_path):
    assert main(["eval", *argv, "--out", str(tmp_path / "r.jsonl")]) == 2
    assert msg in capsys.readouterr().err


def test_cli_unreachable_server_is_an_input_error_exit_3(capsys, tmp_path):
    argv = ["eval", "--mlflow-uri", f"http://127.0.0.1:{_free_port()}", "--experiment", "x", "--no-progress",
            "--out", str(tmp_path / "r.jsonl")]
    assert main(argv) == 3
    assert "cannot reach the MLflow tracking server" in capsys.readouterr().err


def test_importing_judgegraph_does_not_import_mlflow():
    code = ("import sys, judgegraph, judgegraph.cli, judgegraph.integrations.mlflow; "
            "assert 'mlflow' not in sys.modules, 'mlflow imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_people_correcting_judgegraph_s_feedback_in_mlflow_are_labels_for_agree(mlflow_uri, tmp_path):
    """A person overrides judgegraph's per-turn feedback (mlflow.override_feedback, as the UI does) and adds a
    session-level feedback of their own; the traces exported with MLflow's own search are labels for agree."""
    import mlflow
    from mlflow import MlflowClient
    from mlflow.entities import AssessmentSource

    from judgegraph.trust import agreement

    logged = _log_traces(mlflow_uri, "judgegraph-agree")
    sessions = load_sessions(mlflow_uri, logged["experiment"])
    summary = asyncio.run(evaluate_async(sessions, MetricPlan(["turn-relevancy"], _scripted_judge())))
    log_assessments(mlflow_uri, summary, sessions)
    client = MlflowClient(mlflow_uri)
    judged = _feedback(client, logged["shoes"][1], "turn_relevancy/turn")  # the judge said "no" (Paris)
    person = AssessmentSource(source_type="HUMAN", source_id="ann@example.com")
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(mlflow_uri)
    try:
        mlflow.override_feedback(trace_id=logged["shoes"][1], assessment_id=judged.assessment_id, value="yes",
                                 rationale="Shipping is implied.", source=person)
        mlflow.log_feedback(trace_id=logged["shoes"][0], name="turn_relevancy", value=True, source=person)
        exp_id = client.get_experiment_by_name(logged["experiment"]).experiment_id
        traces = mlflow.search_traces(locations=[exp_id], return_type="list")
    finally:
        mlflow.set_tracking_uri(previous)
    export = tmp_path / "traces.json"
    export.write_text(json.dumps([t.to_dict() for t in traces]), encoding="utf-8")

    report = agreement(summary, [export], resamples=0)
    assert report.label_errors == [] and report.unmatched == []
    m = report.metrics["turn_relevancy"]
    assert m.n == 2 and m.agreement == 0.5  # the session passed, as the person said; turn 4 is disputed
    (dis,) = m.disagreements
    assert (dis.conversation_id, dis.turns, dis.human, dis.judge, dis.by) == ("shoes", [4], "yes", "no",
                                                                              "ann@example.com")
    assert "capital" in dis.reason and dis.note == "Shipping is implied."


def test_watch_logs_each_judged_thread_as_a_trace_with_its_verdicts(mlflow_uri, tmp_path):
    """`judgegraph watch --log-assessments`: LangGraph threads carry no MLflow trace, so each judged thread is
    logged to the experiment as one trace (its turns in, its results out, its session the thread id) carrying its
    feedback, read back with MLflow's own client; a restart logs nothing again; the flags' mistakes are exit 2."""
    import sqlite3

    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.sqlite import SqliteSaver
    from mlflow import MlflowClient

    from tests.kit.agent import build_agent
    from tests.kit.openai_server import FakeOpenAIServer, schema_responder

    db = tmp_path / "agent.sqlite"
    conn = sqlite3.connect(db, check_same_thread=False)
    app = build_agent(SqliteSaver(conn))
    for tid, questions in {"t1": ["Weather in Paris?", "And tomorrow?"], "t2": ["Weather?"]}.items():
        for q in questions:
            app.invoke({"messages": [HumanMessage(q)]}, {"configurable": {"thread_id": tid}})
    conn.close()
    out = tmp_path / "w.jsonl"
    env = {**os.environ, **QUIET, "HOME": str(tmp_path)}
    with FakeOpenAIServer(schema_responder) as server:
        argv = ["watch", "--checkpointer", f"sqlite:{db}", "--idle", "0",
                "--once", "-m", "turn-relevancy", "--model", "openai:judge", "--base-url", server.base_url,
                "--out", str(out), "--log-assessments", "--mlflow-uri", mlflow_uri, "--experiment", "judgegraph-watch"]
        done = cli.run(argv, env=env, timeout=180)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "5 assessments written to MLflow (2 session-level, 3 per-turn)" in done.stderr, done.stderr
        again = cli.run(argv, env=env, timeout=180)
        assert again.returncode == 0 and "MLflow" not in again.stderr, again.stdout + again.stderr

    client = MlflowClient(mlflow_uri)
    exp_id = client.get_experiment_by_name("judgegraph-watch").experiment_id
    traces = {t.info.trace_metadata[SESSION]: t for t in client.search_traces(locations=[exp_id])}
    assert set(traces) == {"t1", "t2"}  # one trace per thread, the restart added none
    t1 = traces["t1"].info.trace_id
    assert traces["t1"].info.trace_metadata["judgegraph.source"] == f"langgraph:sqlite:{db}#t1"
    session = _feedback(client, t1, "turn_relevancy")
    assert session.value == 1.0 and session.metadata["status"] == "passed" and session.metadata[SESSION] == "t1"
    turns = [a for a in client.get_trace(t1).info.assessments if a.name == "turn_relevancy/turn"]
    assert sorted(a.value for a in turns) == ["yes", "yes"]  # one per reply judged, on the thread's trace
    request = json.loads(client.get_trace(t1).data.request)
    assert [m["content"] for m in request["messages"] if m["role"] == "user"] == ["Weather in Paris?", "And tomorrow?"]


@pytest.mark.parametrize("argv,msg", [
    (["--log-assessments"], "--log-assessments needs --mlflow-uri URI and --experiment NAME"),
    (["--log-assessments", "--mlflow-uri", "http://127.0.0.1:1"], "needs --mlflow-uri URI and --experiment"),
    (["--mlflow-uri", "http://127.0.0.1:1"], "go with --log-assessments"),
])
def test_watch_mlflow_usage_errors_exit_2(argv, msg, capsys, tmp_path):
    assert main(["watch", "--checkpointer", f"sqlite:{tmp_path / 'a.sqlite'}", *argv, "--out",
                 str(tmp_path / "w.jsonl")]) == 2
    assert msg in capsys.readouterr().err


def test_watch_with_an_unreachable_mlflow_server_stops_at_once_exit_3(capsys, tmp_path):
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(tmp_path / "a.sqlite")
    SqliteSaver(conn).setup()  # a checkpointer with no thread yet
    conn.close()
    argv = ["watch", "--checkpointer", f"sqlite:{tmp_path / 'a.sqlite'}", "--once", "--log-assessments",
            "--mlflow-uri", f"http://127.0.0.1:{_free_port()}", "--experiment", "x", "--out", str(tmp_path / "w.jsonl")]
    assert main(argv) == 3
    assert "cannot reach the MLflow tracking server" in capsys.readouterr().err
    assert not (tmp_path / "w.jsonl").exists()  # nothing watched
