"""``dgx-console import-env ENVFILE [ENVFILE ...] [--out PATH]``: a config from ~/glm53.env files.

Env files are read only when they are regular UTF-8 text files of at most 1 MB (``import-env
/bin/ls`` is one line, exit 2); ``--out`` is written like ``bundle``: never through a symlink, never
over anything but a regular file, an existing one only with ``--force``.
"""

from __future__ import annotations

import argparse
import sys

import tomli_w

from console.commands.args import UsageError
from console.config import DEFAULT_PROFILE, MAX_CONFIG_BYTES, ConfigError, builtin_profiles
from console.config.envfile_import import ImportEnvError, config_from_envs
from console.safe_files import FileProblem, expand, read_text, write_replacing
from console.sanitize import one_line


def _hosts(pairs: list[str]) -> dict[str, str]:
    out = {}
    for p in pairs:
        name, sep, host = p.partition("=")
        if not sep or not name or not host:
            raise UsageError(f"--host wants NAME=HOST, got {p!r}")
        out[name] = host
    return out


def run(args: argparse.Namespace) -> int:
    files = []
    for path in args.envfiles:
        try:
            files.append((path, read_text(expand(path), MAX_CONFIG_BYTES)))
        except FileProblem as exc:
            raise UsageError(f"{path}: {exc}") from None
    try:
        imported = config_from_envs(files, args.profile, _hosts(args.host), args.user)
    except ImportEnvError as exc:
        raise UsageError(str(exc)) from None
    except ConfigError as exc:
        raise UsageError(f"--profile: {exc.message}") from None
    text = "# imported by dgx-console import-env from " + one_line(", ".join(args.envfiles), 500) + "\n"
    text += tomli_w.dumps(imported.config)
    for note in imported.notes:
        print(f"note: {one_line(note, 500)}", file=sys.stderr)
    if not args.out:
        sys.stdout.write(text)
        return 0
    out = expand(args.out)
    try:
        write_replacing(out, lambda fh: fh.write(text.encode()), force=args.force, mode=0o644)
    except FileProblem as exc:
        raise UsageError(f"{out}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"{out}: cannot write: {exc.strerror or exc}") from None
    print(f"wrote {out} ({len(imported.config['stations'])} stations, profile {imported.config['profile']})",
          file=sys.stderr)
    return 0


def register(sub) -> None:
    p = sub.add_parser("import-env", help="write a config from the tutorial's ~/glm53.env file(s)")
    p.add_argument("envfiles", nargs="+", metavar="ENVFILE", help="one env file per station (or one for both)")
    p.add_argument("--out", metavar="PATH", help="write the config here (default: print it)")
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    p.add_argument("--profile", default=DEFAULT_PROFILE, help="built-in profile: " + ", ".join(builtin_profiles()))
    p.add_argument("--host", action="append", default=[], metavar="NAME=HOST",
                   help="SSH host of a station (default: its rail IP), repeatable")
    p.add_argument("--user", metavar="USER", help="SSH user for every station")
    p.set_defaults(func=run)
