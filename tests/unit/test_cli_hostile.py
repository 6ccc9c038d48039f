"""Random flags for every subcommand, in process (``console.cli.main``): each run ends with an exit
code (0, 1, 2 or 130), never an exception; exit 2 is exactly one line on stderr; nothing printed
carries a control byte or escape sequence. Stations sit on a closed port of 127.0.0.1 and the API on
another, so commands that connect fail at once; ``demo``, ``sim`` and the TUI (they run until
stopped) are left out, as is any flag that sets how long a command runs for."""

from __future__ import annotations

import argparse
import io
import math
import os
import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.cli import build_parser, main
from tests.ports import refused_port
from tests.two_stations import two_station_toml

LONG_RUNNING = {"demo", "sim"}
DURATION_FLAGS = {"--seconds"}  # watch --seconds N runs N seconds by design


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("cli")
    port, api = refused_port(), refused_port()
    cfg = d / "dgx-console.toml"
    cfg.write_text(two_station_toml(
        above=f'connect_timeout_s = 1\ncommand_timeout_s = 2\n[api]\nurl = "http://127.0.0.1:{api}"',
        host_a="127.0.0.1", host_b="127.0.0.1", each=f'port = {port}\nknown_hosts = "{d}/known_hosts"'))
    fifo = d / "fifo"
    os.mkfifo(fifo)
    (d / "binary").write_bytes(b"\x7fELF\x00\xff\xfe")
    (d / "env").write_text('RANK="0"\nNETDEV="$(id)"\nLOCAL_IP="-oProxyCommand=x"\nHF_TOKEN="hf_x"\n')
    (d / "victim").write_text("victim\n")
    (d / "link").symlink_to(d / "victim")
    (d / "cfg2.toml").write_text(cfg.read_text())  # a config the random flags may pass (or overwrite)
    (d / "log.txt").write_text("\x1b]52;c;QQ==\x07 NCCL INFO Using network Socket\n" + "A" * 100_000 + "\n")
    return {"dir": str(d), "config": str(cfg), "fifo": str(fifo), "binary": str(d / "binary"),
            "env": str(d / "env"), "link": str(d / "link"), "victim": str(d / "victim"), "log": str(d / "log.txt"),
            "cfg2": str(d / "cfg2.toml")}


def values(world: dict[str, str]) -> st.SearchStrategy[str]:
    hostile = ["nan", "inf", "-inf", "-1", "0", "1", "2", "1e308", "99999999999999999999", "", " ", "[/]",
               "\x1b]52;c;QQ==\x07", "\x9b31m", "\u202e", "-x", "--", "a,b", "1,8,,", "0,1", "ä" * 50, "x" * 5000,
               "http://[::1", "http://127.0.0.1:99999", "ftp://x", "/dev/zero", "/dev/null", world["dir"],
               world["fifo"], world["binary"], world["env"], world["link"], world["log"], world["cfg2"],
               "-", "A", "B", "C", "A@B", "mtu-mismatch", "glm53-flash-nvfp4-2x-gb10-sglang"]
    safe_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                        max_size=20)
    return st.one_of(st.sampled_from(hostile), safe_text)


def value_for(action: argparse.Action, world: dict[str, str]) -> st.SearchStrategy[str]:
    """Plausible values first (so runs get past argument checks and into the command), hostile
    ones as often."""
    if action.choices:
        plausible = st.sampled_from([str(c) for c in action.choices])
    elif action.type is int:
        plausible = st.sampled_from(["1", "2", "3", "16"])
    elif action.type is float:
        plausible = st.sampled_from(["0.5", "1", "2"])
    else:
        plausible = st.sampled_from(["A", "B", "hi", world["log"], world["env"], world["dir"] + "/out.tgz",
                                     "1,2", world["cfg2"]])
    return st.one_of(plausible, values(world))


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: p for name, p in sub.choices.items() if name not in LONG_RUNNING}


def argv_for(name: str, parser: argparse.ArgumentParser, data, world) -> list[str]:
    argv = [name]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        required = action.required or (not action.option_strings and action.nargs not in ("*", "?"))
        if not required and not data.draw(st.integers(0, 2), label=str(action.dest)) == 0:
            continue  # each optional flag in about a third of the runs
        flag = action.option_strings[0] if action.option_strings else None
        if flag in DURATION_FLAGS:
            argv += [flag, data.draw(st.sampled_from(["0", "-1", "nan", "0.2"]))]
            continue
        if flag == "--trust-host-key":
            continue  # would write the test's known_hosts: covered by the transport's own tests
        n = 0 if action.nargs == 0 else (data.draw(st.integers(0, 2)) if action.nargs in ("*", "+") else 1)
        vals = [data.draw(value_for(action, world)) for _ in range(n)]
        if flag is None:
            argv += ["--"] + vals if vals and any(v.startswith("-") for v in vals) else vals
        elif n == 0:
            argv.append(flag)
        else:
            argv += [f"{flag}={v}" for v in vals] if vals else [flag]
    if name == "watch" and "--seconds" not in argv:
        argv += ["--seconds", "0.2"]  # without it watch runs until Ctrl+C, by design
    return argv


CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def run_main(argv: list[str], capsys, monkeypatch) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO("\x1b]0;t\x07 NCCL INFO Using network Socket\n"))
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_random_flags_never_raise(name, world, capsys, monkeypatch):
    monkeypatch.chdir(world["dir"])  # ./dgx-console.toml is the closed-port config; writes land here
    monkeypatch.setenv("XDG_CONFIG_HOME", world["dir"])
    monkeypatch.setenv("XDG_DATA_HOME", world["dir"])
    parser = subcommands()[name]

    @settings(max_examples=int(os.environ.get("CLI_FUZZ_EXAMPLES", "25")), deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(st.data())
    def prop(data):
        argv = argv_for(name, parser, data, world)
        rc, out, err = run_main(argv, capsys, monkeypatch)
        if os.environ.get("CLI_DEBUG"):
            print(name, rc, argv[:6], err.strip()[:150], file=sys.__stderr__)
        assert rc in (0, 1, 2, 130), (argv, rc, err)
        assert "Traceback" not in err, (argv, err)
        if rc == 2:
            assert len(err.strip().splitlines()) == 1, (argv, err)
        assert not CONTROL.search(out) and not CONTROL.search(err), (argv, out[-300:], err[-300:])
        assert Path(world["victim"]).read_text() == "victim\n", argv  # nothing wrote through the symlink
        assert Path(world["link"]).is_symlink()

    prop()


@pytest.mark.parametrize("value", ["", "nonsense", "SHA256:", "SHA256:" + "A" * 42, "SHA256:" + "A" * 44,
                                   "MD5:aa:bb", "SHA256:" + "!" * 43, "sha256:" + "A" * 43, "SHA256:" + "A" * 42 + "\x1b"])
@pytest.mark.parametrize("command", ["status", "check", "watch"])
def test_replace_host_key_rejects_what_is_no_fingerprint(command, value, capsys, monkeypatch, tmp_path):
    """``--replace-host-key`` must look like what ``ssh-keygen -lf`` prints; else exit 2
    with one line, before any config is read or any station is contacted."""
    rc, _out, err = run_main([command, "--config", str(tmp_path / "none.toml"), "--replace-host-key", value],
                             capsys, monkeypatch)
    assert rc == 2 and "--replace-host-key must be a fingerprint" in err and err.count("\n") == 1, err
    assert "\x1b" not in err


BOUNDED_FLAGS = [
    (["check", "--only", ""], "--only needs at least one check id"),
    (["check", "--only", " , "], "--only needs at least one check id"),
    (["stop", "--dry-run", "--verify-timeout", "0"], "--verify-timeout must be"),
    (["stop", "--dry-run", "--verify-timeout", "1e20"], "--verify-timeout must be"),
    (["restart", "--dry-run", "--verify-timeout", "-1"], "--verify-timeout must be"),
    (["launch", "--dry-run", "--timeout", "1e20"], "--timeout must be"),
    (["launch", "--dry-run", "--timeout", "-1"], "--timeout must be"),
    (["restart", "--dry-run", "--timeout", "0"], "--timeout must be"),
    (["bench", "--url", "http://127.0.0.1:9", "--requests-per-level", "100000000000000000000"],
     "--requests-per-level must be an integer 1..100,000"),
    (["bench", "--url", "http://127.0.0.1:9", "--requests-per-level", "1e20"], "invalid int value"),
    (["bench", "--url", "http://127.0.0.1:9", "--warmup", "100000000000000000000"], "--warmup must be an integer 0..100,000"),
    (["bench", "--url", "http://127.0.0.1:9", "--max-tokens", "100000000000"], "--max-tokens must be an integer"),
    (["bench", "--url", "http://127.0.0.1:9", "--timeout", "1e20"], "--timeout must be"),
    (["chat", "--url", "http://127.0.0.1:9", "-m", "hi", "--max-tokens", "0"], "--max-tokens must be an integer"),
    (["doctor", "--timeout", "1e20"], "--timeout must be"),
    (["doctor", "--nccl-timeout", "-1"], "--nccl-timeout must be"),
    (["bundle", "x.tgz", "--tail", "0"], "--tail must be an integer"),
    (["diagnose", "-", "--tail", "100000000000"], "--tail must be an integer"),
]


@pytest.mark.parametrize("argv,words", BOUNDED_FLAGS, ids=[" ".join(a) for a, _w in BOUNDED_FLAGS])
def test_bounded_flags_are_refused_with_their_range(argv, words, capsys, monkeypatch, tmp_path):
    """Before, each of these ran (check --only '' ran nothing and exited 0) or waited
    forever; now one line naming the flag (and its range), exit 2."""
    monkeypatch.chdir(tmp_path)
    rc, _out, err = run_main([*argv, "--config", str(tmp_path / "none.toml")], capsys, monkeypatch)
    assert rc == 2 and words in err and "Traceback" not in err, err
    assert err.count("\n") == 1 or "usage:" in err, err  # argparse's own type errors keep their usage line


@pytest.mark.parametrize("command", [["replay", "--json"], ["diagnose"]])
@pytest.mark.parametrize("name", ["a" * 300, "a/" * 3000, "no-such-bundle.tar.gz"])
def test_a_file_name_the_os_refuses_is_one_line_and_exit_2(command, name, capsys, monkeypatch, tmp_path):
    """A name too long for the file system (the random-flags fuzz found it) is refused like a missing file."""
    monkeypatch.chdir(tmp_path)
    rc, _out, err = run_main([*command, name], capsys, monkeypatch)
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "no such file" in err or "File name too long" in err, err


@pytest.mark.parametrize("content,kind", [
    (None, "gzip-compressed"), (b"PK\x03\x04rest", "a zip archive"), (b"BZh91AY", "bzip2-compressed"),
    (b"(\xb5/\xfd", "zstd-compressed"), (b"\x7fELF\x02\x01\x01" + b"\x00" * 64, "binary (not text)"),
])
def test_diagnose_refuses_a_binary_file(content, kind, capsys, monkeypatch, tmp_path):
    """Before: ``diagnose bundle.tgz`` said "no findings" and exited 0."""
    import gzip

    path = tmp_path / "logs.tgz"
    path.write_bytes(content if content is not None else gzip.compress(b"NCCL WARN Call to ibv_reg_mr failed\n"))
    rc, out, err = run_main(["diagnose", str(path)], capsys, monkeypatch)
    assert rc == 2 and kind in err and "no findings" not in out and err.count("\n") == 1, err


NUMERIC = [("launch", "--timeout", 0, 86400), ("stop", "--verify-timeout", 0, 3600),
           ("bench", "--timeout", 0, 86400), ("watch", "--interval", 0, 3600)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(NUMERIC),
       value=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**30), 10**30)))
def test_any_number_out_of_range_is_refused_in_one_line(which, value, capsys, monkeypatch, tmp_path):
    command, flag, lo, hi = which
    extra = ["--dry-run"] if command in ("launch", "stop") else (["--url", "http://127.0.0.1:9"] if command == "bench"
                                                                  else [])
    rc, _out, err = run_main([command, *extra, flag, repr(value) if isinstance(value, float) else str(value),
                              "--config", str(tmp_path / "none.toml")], capsys, monkeypatch)
    assert "Traceback" not in err and err.count("\n") <= 3
    in_range = isinstance(value, (int, float)) and math.isfinite(value) and lo < value <= hi
    if not in_range:
        assert rc == 2 and (flag in err or "usage:" in err), err
    else:
        assert f"{flag} must be" not in err, err
