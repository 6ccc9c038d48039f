"""``dgx-console`` entry point.

Each subcommand lives in ``console/commands/<name>.py`` and exposes ``register(subparsers)``
(which calls ``subparsers.add_parser`` and sets ``func``); this module only discovers them, so
adding a subcommand never touches this file. Usage and config errors print one line and exit 2.

Plain output is terminal-safe whatever a subcommand prints: for every headless subcommand stdout
and stderr pass through ``console.sanitize.clean`` (only the few colour/erase sequences the console
itself writes are let through), so text from a server, a station or a file can never carry an
escape sequence to the operator's terminal. ``--json`` output is JSON with ASCII escapes: unchanged.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import math
import os
import pkgutil
import re
import sys
import warnings
from collections.abc import Sequence
from typing import Any, TextIO

from console import __version__
from console.commands.args import add_config_args, check_common
from console.config import ConfigError
from console.errors import UsageError
from console.sanitize import clean, is_clean, one_line

# asyncssh still names DSA when it is imported, and cryptography 48+ warns about that on every start:
# not the operator's concern, and a one-line error must stay one line (stderr is part of the contract).
warnings.filterwarnings("ignore", message=r"DSA is deprecated", module=r"asyncssh(\..*)?$")

__all__ = ["build_parser", "main"]


def did_you_mean(message: str) -> str:
    """argparse's "invalid choice: 'stauts' (choose from 'bench', ...)" with the nearest choice named
    named before the list: "invalid choice: 'stauts'; did you mean 'status'? (choose from ...)" (a
    subcommand or any flag with choices)."""
    m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if not m:
        return message
    choices = re.findall(r"'([^']*)'", m.group(2))
    near = difflib.get_close_matches(m.group(1), choices, n=1, cutoff=0.6)
    if not near:
        return message
    return f"{message[:m.start()]}invalid choice: '{m.group(1)}'; did you mean '{near[0]}'? (choose from {m.group(2)})"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage + message)
        sys.stderr.write(f"dgx-console: error: {one_line(did_you_mean(message), 500)}\n")
        raise SystemExit(2)

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        # argparse drops a lone "--" even as an option's value (``--timeout=--``) and hands the
        # command an empty list instead of a number: refuse it like a missing value
        if action.option_strings and action.nargs is None and arg_strings == ["--"]:
            self.error(f"argument {'/'.join(action.option_strings)}: expected one argument")
        return super()._get_values(action, arg_strings)


# The only control sequences the console's own plain output writes: chat's dim/reset around
# reasoning and bench's rewrite-the-progress-line.
_OWN_SEQUENCES = re.compile(r"\x1b\[[02]m|\r\x1b\[2K")


def terminal_safe(text: str) -> str:
    """``text`` cleaned for a terminal, keeping only the console's own ``_OWN_SEQUENCES``."""
    if is_clean(text):
        return text
    out, pos = [], 0
    for m in _OWN_SEQUENCES.finditer(text):
        out += [clean(text[pos:m.start()]), m.group()]
        pos = m.end()
    out.append(clean(text[pos:]))
    return "".join(out)


class SafeStream:
    """A text stream whose every write is ``terminal_safe`` (the rest is the wrapped stream's)."""

    def __init__(self, raw: TextIO):
        self._raw = raw

    def write(self, text: str) -> int:
        self._raw.write(terminal_safe(text))
        return len(text)

    def writelines(self, lines: Sequence[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


def _top_options(p: argparse.ArgumentParser, probe: bool = False) -> None:
    if probe:  # (the probe only steps over it: the full parser prints the version, once)
        p.add_argument("--version", action="store_true")
    else:
        p.add_argument("--version", action="version", version=f"dgx-console {__version__}")
    add_config_args(p, top=True)
    p.add_argument("--theme", metavar="NAME", help="theme name (dgx-dark, dgx-light, or any Textual theme)")
    p.add_argument("--read-only", action="store_true", help="disable every action that changes a station")


class _Probe(argparse.ArgumentParser):
    """The top-level options alone, to find the subcommand without a word on stderr."""

    def error(self, message: str) -> None:
        raise ValueError(message)


def _command_modules(argv: Sequence[str]) -> list[str]:
    """The modules of ``console.commands`` to register: only the named subcommand's when ``argv`` names
    one (what follows the top-level options), else all (help, a typo's "did you mean", no command).
    Each module imports what its command runs on (the SSH client, the HTTP client, the TUI): a
    ``dgx-console status`` paid ~0.9 s of imports for every command before it parsed a word."""
    import console.commands as pkg

    names = sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))
    probe = _Probe(add_help=False)
    _top_options(probe, probe=True)
    try:
        _known, rest = probe.parse_known_args(list(argv))
    except ValueError:  # (a top-level option without its value: the full parser says so)
        return names
    wanted = rest[0].replace("-", "_") if rest and not rest[0].startswith("-") else None
    return [wanted] if wanted in names else names


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line; with ``argv``, only the subcommand it names is registered (``_command_modules``)."""
    p = _Parser(prog="dgx-console", description="Console for one model served across several GPU stations.")
    _top_options(p)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in _command_modules(argv or ()):
        module = importlib.import_module(f"console.commands.{name}")
        register = getattr(module, "register", None)
        if register:
            register(sub)
    return p


def _error(exc: BaseException) -> int:
    print(f"dgx-console: {one_line(str(exc), 2000)}", file=sys.stderr)
    return 2


def _pipe_closed() -> int:
    """The reader of our output went away (``dgx-console status | head -1``): stop quietly, as Unix
    tools do. As the Python docs say (signal, "Note on SIGPIPE"): point stdout at devnull so the
    interpreter's final flush cannot raise again, and exit 141 (128 + SIGPIPE), what a shell reports
    for a tool killed by SIGPIPE; nothing on stderr (the reader closed on purpose)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    return 141


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    tui = not getattr(args, "func", None) or args.command == "demo"  # Textual owns the terminal there
    if not getattr(args, "func", None):
        from console.commands._tui import run_tui

        args.func = run_tui
    for dest, value in vars(args).items():  # no flag of any subcommand means anything with NaN or inf
        if isinstance(value, float) and not math.isfinite(value):
            return _error(UsageError(f"--{dest.replace('_', '-')} must be a finite number, got {value}"))
    saved = sys.stdout, sys.stderr
    if not tui:
        sys.stdout, sys.stderr = SafeStream(sys.stdout), SafeStream(sys.stderr)  # type: ignore[assignment]
    try:
        check_common(args)
        code = int(args.func(args) or 0)
        if not tui:
            sys.stdout.flush()  # a closed pipe says so here, not in the interpreter's last flush
        return code
    except (ConfigError, UsageError) as exc:
        return _error(exc)
    except KeyboardInterrupt:
        print("dgx-console: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _pipe_closed()
    finally:
        if not tui:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            sys.stdout, sys.stderr = saved


if __name__ == "__main__":
    raise SystemExit(main())
