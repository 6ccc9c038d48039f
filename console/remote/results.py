"""What running a command on a station gives: its result and the ways it fails.

Apart from the transports so that every transport (SSH, local) and every caller import them from
one place below both (no import circle between ``transport`` and ``local``)."""

from __future__ import annotations

from dataclasses import dataclass

from console.remote.channels import ChannelWait


@dataclass(frozen=True)
class CommandResult:
    exit_status: int
    stdout: str
    stderr: str
    cut: bool = False  # the output was over the cap: the rest was not read (the text ends saying so)

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


class TransportError(Exception):
    """A station could not be reached or a command could not run; the message is one line."""


class Unreachable(TransportError):
    pass


class AuthRefused(Unreachable):
    """The station answered but refused our login (key, user): retrying fast will not help."""


class CommandTimeout(TransportError):
    pass


class ChannelRefused(TransportError):
    """The connection is fine but no channel could be opened in time (server refusals or our own
    budget): the command failed, the station did not go away."""


class ChannelShortage(ChannelRefused):
    """No stream slot within the console's own channel budget (``channels.py``) in time: the console's
    limit, never the station nor its network (a check or rung says "not measured", not "failed")."""

    def __init__(self, wait: ChannelWait) -> None:
        self.wait = wait
        super().__init__(f"{wait.text()} (the console's SSH channel budget, not the network)")
