"""``[alerts]``: who is told when an incident opens and clears, away from the desk (opt-in).

A table of its own (the schema's ``Config.alerts``); read and checked here so the loader needs one
call. A sink URL is a credential (a webhook's path is its token, an ntfy topic its password): no
message of this module echoes one; it is shown as ``mask_sink_url`` gives it and masked by value in
every outside text (``console.config.export.secret_values``).
"""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from console.config.errors import NUMBER, check_type, key_path, type_name
from console.config.fields import checks, kinds, setting
from console.sanitize import is_clean

#: Every alert kind, in the order docs/configuration.md lists them: the incidents (console/incidents/detector.py
#: and conditions.py), and the outcome of a recovery (sent through ``Alerter.alert``).
ALERT_KINDS: tuple[str, ...] = ("wedge", "stuck", "out-of-step", "rank-death", "gpu-fault", "rail", "unreachable",
                                "recovered", "recovery-failed", "memory-low")


def sink_url(value: Any) -> str | None:
    """Why ``value`` is no usable sink URL (the value itself is never echoed: it is a credential)."""
    if not isinstance(value, str) or not value or not is_clean(value) or any(c.isspace() for c in value):
        return "must be an http:// or https:// URL without spaces or control characters"
    try:
        parts = urllib.parse.urlsplit(value)
        parts.port  # noqa: B018 (raises ValueError when out of range or not a number)
    except ValueError:
        return "is not a valid URL (its port or address cannot be read)"
    if parts.scheme not in ("http", "https"):
        return "must start with http:// or https://"
    return None if parts.hostname else "has no host"


def alert_kinds(value: Any) -> str | None:
    bad = [k for k in value if k not in ALERT_KINDS] if isinstance(value, (list, tuple)) else None
    if bad is None or not all(isinstance(k, str) for k in value):
        return f"must be a list of alert kinds ({', '.join(ALERT_KINDS)})"
    return f"unknown kind {bad[0]!r} (known: {', '.join(ALERT_KINDS)})" if bad else None


def _seconds(lo: float, hi: float) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if not check_type(value, NUMBER) or not math.isfinite(value) or not lo <= value <= hi:
            return f"must be a number of seconds from {lo:g} to {hi:g}"
        return None
    return check


def _count(lo: int, hi: int) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if lo <= value <= hi else f"must be from {lo} to {hi}"
    return check


@dataclass(frozen=True)
class AlertSettings:
    """``webhook``: a JSON POST per alert; ``ntfy``: an ntfy topic URL (Title, Priority, Tags headers);
    ``desktop``: a desktop notification (notify-send) where there is a desktop; ``bell``: the terminal
    bell in the TUI. ``kinds``: the kinds sent (default every one); ``resolved``: say when an incident
    clears. Rate: the same kind again within ``repeat_after_s`` of its last alert is folded into the
    next one, and at most ``max_per_hour`` messages go out an hour. Delivery: each try at most
    ``timeout_s``, ``retries`` more tries with back-off on a connection error, a timeout, 429 or 5xx."""

    webhook: str | None = setting(None, check=sink_url)
    ntfy: str | None = setting(None, check=sink_url)
    desktop: bool = False
    bell: bool = False
    kinds: tuple[str, ...] = setting(ALERT_KINDS, check=alert_kinds)
    resolved: bool = True
    repeat_after_s: float = setting(600.0, check=_seconds(0, 86400))
    max_per_hour: int = setting(30, check=_count(1, 3600))
    timeout_s: float = setting(10.0, check=_seconds(0.1, 120))
    retries: int = setting(3, check=_count(0, 10))

    @property
    def configured(self) -> bool:
        """A sink is set (the bell alone sends nothing out)."""
        return bool(self.webhook or self.ntfy or self.desktop)

    def wants(self, kind: str) -> bool:
        return kind in self.kinds


def parse_alerts(raw: Any, err: Callable[[str | None, str, str], Exception]) -> AlertSettings:
    """The ``[alerts]`` table, checked; ``err(key, field_path, message)`` makes the loader's error."""
    if not isinstance(raw, dict):
        raise err(None, "alerts", "must be a table")
    fields = kinds(AlertSettings)
    for key, value in raw.items():
        if key not in fields:
            raise err(key, f"alerts.{key_path(key)}", f"unknown field (known: {', '.join(sorted(fields))})")
        if not check_type(value, fields[key]):
            raise err(key, f"alerts.{key}", f"must be {type_name(fields[key])}")
    for key, rule in checks(AlertSettings).items():
        if key in raw and (problem := rule(raw[key])):
            raise err(key, f"alerts.{key}", problem)
    values = dict(raw)
    if "kinds" in values:
        values["kinds"] = tuple(dict.fromkeys(values["kinds"]))
    for key in ("repeat_after_s", "timeout_s"):
        if key in values:
            values[key] = float(values[key])
    return AlertSettings(**values)
