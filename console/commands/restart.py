"""``dgx-console restart``: see console.service.actions (the order and the waits) and _service_action (the CLI)."""

from __future__ import annotations

import argparse

from console.commands._service_action import add_action_parser, run_action_command


def run(args: argparse.Namespace) -> int:
    return run_action_command(args, "restart")


def register(sub) -> None:
    add_action_parser(sub, "restart", run)
