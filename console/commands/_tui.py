"""The default command: the dashboard against the configured stations."""

from __future__ import annotations

import argparse

from console.commands.args import UsageError
from console.config import Config, library_checks, load_config


def check_theme(name: str | None) -> None:
    if name is None:
        return
    from textual.app import App

    from console.ui.themes import load_themes

    known = {t.name for t in load_themes()} | set(App().available_themes)
    if name not in known:
        raise UsageError(f"--theme: unknown theme {name!r} (try dgx-dark, dgx-light, or one of: "
                         f"{', '.join(sorted(known - {'dgx-dark', 'dgx-light'})[:8])}, ...)")


def run_app(config: Config, args: argparse.Namespace) -> int:
    from console.ui.app import ConsoleApp
    from console.ui.keymap import check_keymap

    check_theme(getattr(args, "theme", None))
    check_keymap(config)  # [keys]: unknown ids or key names are one line and exit 2, before the screen
    from console.remote.local import install_reaper

    install_reaper()  # killed by SIGHUP/SIGTERM: no local station command (journalctl -k -f) left behind
    from console.ui.ending_signals import handlers_kept

    # the config's library checks (httpx on the URL, asyncssh on the keys) run after the first frame: a
    # failure ends the app and is the same one line and exit 2 as any other config error
    app = ConsoleApp(config, read_only=getattr(args, "read_only", False), theme=getattr(args, "theme", None),
                     late_checks=lambda: library_checks(config))
    with handlers_kept():
        app.run()
    if app.late_error is not None:
        raise app.late_error
    return app.return_code or 0


def load_for_tui(path: str | None) -> Config:
    """The config as the TUI loads it: the checks that import the SSH and HTTP libraries wait for
    ``run_app``'s first frame."""
    return load_config(path, library_checks_later=True)


def run_tui(args: argparse.Namespace) -> int:
    return run_app(load_for_tui(args.config), args)
