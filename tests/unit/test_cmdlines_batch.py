"""Several command lines as one (``cmdlines.in_one``), run by a real ``sh``: each part's output and
exit status come back as its own, a missing tool is that part's 127, and a part the output never
reached (the command cut short) is not read rather than an empty success."""

from __future__ import annotations

import subprocess

from console.remote import cmdlines as rc


def _run(cmds: list[str]) -> str:
    return subprocess.run(["sh", "-c", rc.in_one(cmds)], capture_output=True, text=True, timeout=10).stdout


def test_each_part_keeps_its_output_and_its_exit_status():
    cmds = ["printf 'a\\nb\\n'", "printf 'no newline'", "echo to-stderr >&2; exit 3", "no-such-tool-here -x", "true"]
    parts = rc.split_parts(_run(cmds), len(cmds))
    assert [(p.exit_status, p.stdout) for p in parts if p is not None] == [
        (0, "a\nb\n"), (0, "no newline"), (3, ""), (127, ""), (0, "")]


def test_a_part_that_did_not_finish_is_not_read():
    cmds = ["echo first", "echo second", "echo third"]
    out = _run(cmds)
    cut = out[:out.index("second") + 3]  # the output ends inside the second part
    parts = rc.split_parts(cut, 3)
    assert parts[0] is not None and parts[0].stdout == "first\n"
    assert parts[1] is None and parts[2] is None
    assert rc.split_parts("", 2) == [None, None]


def test_a_part_printing_a_marker_like_line_does_not_end_another_part():
    cmds = ["echo '@@dgx-part-end 1 0'", "echo real"]
    parts = rc.split_parts(_run(cmds), 2)
    assert parts[1] is not None and parts[1].stdout == "real\n" and parts[1].exit_status == 0


def _run_at_once(cmds: list[str], tmp) -> str:
    env = {"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp)}
    return subprocess.run(["sh", "-c", rc.at_once(cmds)], capture_output=True, text=True, timeout=20, env=env).stdout


def test_at_once_parts_keep_their_own_output_and_status_and_leave_no_files(tmp_path):
    cmds = ["printf 'a\\nb\\n'", "echo to-stderr >&2; exit 3", "no-such-tool-here -x", "printf 'no newline'"]
    parts = rc.split_parts(_run_at_once(cmds, tmp_path), len(cmds))
    assert [(p.exit_status, p.stdout) for p in parts if p is not None] == [
        (0, "a\nb\n"), (3, ""), (127, ""), (0, "no newline")]
    assert list(tmp_path.iterdir()) == []  # the parts' files are gone with the line


def test_at_once_runs_its_parts_together(tmp_path):
    """The first part waits (bounded) for a file only the second part makes: one after the other (as
    ``in_one``) it would give up and say so; started together it sees it."""
    flag = tmp_path / "flag"
    wait = (f'i=0; while [ ! -e {flag} ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; '
            f'[ -e {flag} ] && echo saw || echo gave-up')
    (tmp_path / "t").mkdir()
    parts = rc.split_parts(_run_at_once([wait, f"touch {flag}"], tmp_path / "t"), 2)
    assert parts[0] is not None and parts[0].stdout == "saw\n"
    flag.unlink()
    seq = rc.split_parts(_run([wait.replace("100", "3"), f"touch {flag}"]), 2)
    assert seq[0] is not None and seq[0].stdout == "gave-up\n"  # the same parts, one after the other
