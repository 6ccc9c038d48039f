"""What a colour means on every screen, in every theme: expected (calm), attention, broken.

Widgets render Rich ``Text``; their colours come from the current theme through this palette, so
a theme file decides the shades and the widgets only decide the meaning:

- ``ok``    healthy / expected: a GPU filled to the profile's expected level, RDMA without GDR on
            a pair that has no GPUDirect (``success``)
- ``calm``  expected and in progress: an engine loading, an API that is not up yet (``secondary``)
- ``warn``  needs attention: more memory than the profile expects, stale values (``warning``)
- ``error`` broken: a failed engine, a socket fallback, an API that should answer and does not
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from console.vocabulary import NcclTransport


@dataclass(frozen=True)
class Palette:
    ok: str = "green"
    calm: str = "cyan"
    warn: str = "yellow"
    error: str = "red"


DEFAULT = Palette()

#: How each NCCL transport is drawn where a fixed style is used (the pane's status, the launch verdict).
TRANSPORT_STYLE: dict[NcclTransport, str] = {NcclTransport.GDRDMA: "green", NcclTransport.RDMA: "yellow",
                                             NcclTransport.SOCKET: "bold red", NcclTransport.UNKNOWN: "dim"}


def transport_style(transport: NcclTransport | str, palette: Palette = DEFAULT) -> str:
    """The transport in the theme's colours (expected, slower than it could be, broken, not seen)."""
    return {NcclTransport.GDRDMA: palette.ok, NcclTransport.RDMA: palette.calm,
            NcclTransport.SOCKET: f"bold {palette.error}"}.get(transport, "dim")  # type: ignore[call-overload]


def palette_of(app: Any) -> Palette:
    """The current theme's colours (Rich colour strings); the defaults without an app/theme."""
    theme = getattr(app, "current_theme", None)
    if theme is None:
        return DEFAULT
    return Palette(ok=theme.success or DEFAULT.ok, calm=theme.secondary or DEFAULT.calm,
                   warn=theme.warning or DEFAULT.warn, error=theme.error or DEFAULT.error)


def fill_level(frac: float, expected: float | None = None) -> str:
    """``ok`` / ``warn`` / ``error`` for a memory fill. vLLM claims its
    ``--gpu-memory-utilization`` (0.93 on the GB300 profile: 231 of 251 GiB) on purpose, so the
    expected fill is ``ok``; attention only above it, broken at the very top."""
    if frac > 0.98:
        return "error"
    limit = 0.9 if expected is None else max(0.9, expected + 0.02)
    return "warn" if frac > limit else "ok"
