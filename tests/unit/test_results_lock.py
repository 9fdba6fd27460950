"""The results file's run lock: one holder at a time, the holder's pid named,
released (and its sidecar removed) at the end; and a torn last line cut before a watch appends."""

import os

import pytest

from judgegraph.runs.resultsfile import ResultsFileLocked, lock_results


def test_a_second_lock_on_the_same_results_file_is_refused_with_the_holders_pid(tmp_path):
    out = tmp_path / "r.jsonl"
    held = lock_results(out)
    try:
        assert (tmp_path / "r.jsonl.lock").read_text().strip() == str(os.getpid())
        with pytest.raises(ResultsFileLocked, match=f"{out} is in use by process {os.getpid()}"):
            lock_results(out)  # flock: another open file, refused even in the same process
        other = lock_results(tmp_path / "other.jsonl")  # another file: its own lock
        other.release()
    finally:
        held.release()
    assert not (tmp_path / "r.jsonl.lock").exists()
    with lock_results(out):  # free again
        pass
    assert not (tmp_path / "r.jsonl.lock").exists()


def test_a_stale_sidecar_left_by_a_killed_run_does_not_block(tmp_path):
    (tmp_path / "r.jsonl.lock").write_text("999999\n")  # no process holds it
    held = lock_results(tmp_path / "r.jsonl")
    held.release()


@pytest.mark.parametrize(("content", "kept"), [
    (b"", b""),
    (b'{"a": 1}\n', b'{"a": 1}\n'),
    (b'{"a": 1}\n{"b": 2}\n\n', b'{"a": 1}\n{"b": 2}\n\n'),
    (b'{"a": 1}\n{"b": ', b'{"a": 1}\n'),
    (b'{"torn": ', b""),
    (b'{"a": 1}\n' + b"x" * 50, b'{"a": 1}\n'),  # the torn line spans several of the chunks read
    (b"y" * 30 + b"\n" + b"x" * 50, b"y" * 30 + b"\n"),
])
def test_a_torn_tail_is_cut_reading_only_the_end(tmp_path, content, kept):
    from judgegraph.runs.resultsfile import cut_torn_tail

    path = tmp_path / "r.jsonl"
    path.write_bytes(content)
    assert cut_torn_tail(path, chunk=8) is (kept != content)
    assert path.read_bytes() == kept
    assert cut_torn_tail(tmp_path / "absent.jsonl") is False and not (tmp_path / "absent.jsonl").exists()
