"""``bench --out`` writes with the same safe writer as ``bundle``: the path is checked
before the sweep (the directory must exist, nothing is created silently, a symlink, FIFO or directory at
PATH.json/PATH.csv is refused, an existing file needs --force), and the write itself never follows a
symlink. Before: a symlink at PATH.json had its target overwritten, PATH.csv was overwritten without
--force, a FIFO hung the command after the sweep, missing parents were created, and an unwritable path
failed only after the whole sweep."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from console.cli import main
from console.safe_files import FileProblem
from console.serving.bench_model import BenchReport, BenchSettings, save_report
from tests.ports import refused_port


def closed_url() -> str:
    return f"http://127.0.0.1:{refused_port()}"


def bench(out: Path, *extra: str, capsys) -> tuple[int, str]:
    """``bench --out`` against a closed port: a refused path is exit 2 before any request; an accepted one
    goes on to the sweep, which fails to connect (exit 1)."""
    try:
        rc = main(["bench", "--url", closed_url(), "--model", "m", "--concurrency", "1", "--requests-per-level", "1",
                   "--warmup", "0", "--timeout", "2", "--out", str(out), *extra])
    except SystemExit as exc:
        rc = exc.code
    return rc, capsys.readouterr().err


def test_a_symlink_at_path_json_is_refused_and_its_target_untouched(tmp_path, capsys):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "run.json").symlink_to(victim)
    rc, err = bench(tmp_path / "run", capsys=capsys)
    assert rc == 2 and "is a symlink" in err and err.count("\n") == 1, err
    assert victim.read_text() == "precious"


def test_an_existing_csv_needs_force(tmp_path, capsys):
    (tmp_path / "run.csv").write_text("old")
    rc, err = bench(tmp_path / "run", capsys=capsys)
    assert rc == 2 and "run.csv: exists (use --force" in err, err
    assert (tmp_path / "run.csv").read_text() == "old"
    rc, err = bench(tmp_path / "run", "--force", capsys=capsys)
    assert rc != 2, err  # accepted: the sweep itself then fails to connect


def test_a_fifo_is_refused_before_the_sweep_not_hung_on_after(tmp_path, capsys):
    os.mkfifo(tmp_path / "run.json")
    rc, err = bench(tmp_path / "run", capsys=capsys)
    assert rc == 2 and "is a FIFO" in err, err


def test_a_missing_directory_is_said_not_created(tmp_path, capsys):
    rc, err = bench(tmp_path / "no" / "such" / "run", capsys=capsys)
    assert rc == 2 and "does not exist" in err and not (tmp_path / "no").exists(), err


def test_an_unwritable_directory_is_refused_before_the_sweep(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK) and os.geteuid() == 0:  # root writes anyway: a file in the way instead
            (tmp_path / "file").write_text("")
            target = tmp_path / "file" / "run"
        else:
            target = ro / "run"
        rc, err = bench(target, capsys=capsys)
        assert rc == 2 and "--out" in err, err
    finally:
        ro.chmod(0o700)


def test_save_report_never_writes_through_a_symlink_made_during_the_sweep(tmp_path):
    report = BenchReport("http://127.0.0.1:8000", "m", BenchSettings((1,)))
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "run.csv").symlink_to(victim)  # appeared after the check
    with pytest.raises(FileProblem, match="symlink"):
        save_report(report, tmp_path / "run", force=True, make_dirs=False)
    assert victim.read_text() == "precious"
    (tmp_path / "run.csv").unlink()
    jpath, cpath = save_report(report, tmp_path / "run", force=True, make_dirs=False)
    assert json.loads(jpath.read_text())["model"] == "m" and cpath.read_text().startswith("concurrency")
    with pytest.raises(FileProblem, match="exists"):
        save_report(report, tmp_path / "run", force=False, make_dirs=False)
