"""The test kit: what the tests and benchmarks share, not shipped in the wheel.

``openai_server``: a real HTTP server on 127.0.0.1 speaking the OpenAI API (chat
completions, embeddings, errors, latency), so the real client path runs with no
key. ``results``: made-up results files for the HTML report. Import them as
``tests.kit.openai_server`` with the repository root on ``sys.path`` (pytest
puts it there; benchmarks/_loopback.py does for the benchmarks).

The scripted chat model users test their own judges with is not here: it is
:class:`judgegraph.judges.scripted.ScriptedChatModel`, in the package.
"""
