"""Config text -> a checked, frozen :class:`Config`, or one ``ConfigError`` naming the file, the line and
the field. The tables' known keys, TOML kinds and value rules come from the schema (``schema.py``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from console.config.alerts import parse_alerts
from console.config.engine_flags import serving_problem
from console.config.errors import (
    ConfigError,
    Kind,
    Locator,
    check_type,
    key_path,
    one,
    parse_toml,
    show,
    type_name,
)
from console.config.fields import checks, kinds, table
from console.config.paths import CONFIG_NAME, MAX_CONFIG_BYTES, MAX_KEY_FILE_BYTES, xdg_config_path
from console.config.profiles import DEFAULT_PROFILE, load_profile
from console.config.schema import (
    ApiSettings,
    Config,
    IncidentSettings,
    Profile,
    RecoverSettings,
    Station,
    UiSettings,
)
from console.config.validate import LIBRARY_VERDICTS, api_url, check_path, check_timeout, overrides_problem
from console.safe_files import MIB, FileProblem, expand, read_bytes, read_text
from console.sanitize import is_clean

# err(table, index, key, field_path, message): a ConfigError at the line of that table/key
_Err = Callable[[str | None, int | None, str | None, str, str], ConfigError]
_SETTINGS = (("api", ApiSettings), ("ui", UiSettings), ("incidents", IncidentSettings),
             ("recover", RecoverSettings))


def parse_config(text: str, path: str | None = None) -> Config:
    """Parse and validate config text; raises ConfigError with the line of the culprit.

    Only the first problem is reported, so the order of the checks is part of the behaviour: top-level
    keys, profile, stations, the settings tables' keys and kinds, their values, alerts, recover,
    overrides, the top-level values, keys."""
    loc = Locator(text)
    data = parse_toml(text, path)

    def err(tbl: str | None, index: int | None, key: str | None, fpath: str, msg: str) -> ConfigError:
        return ConfigError(path, loc.line_of(tbl, index, key), fpath, msg)

    _check_top_keys(data, err)
    profile = _profile(data.get("profile", DEFAULT_PROFILE), path, err)
    stations = _stations(data.get("stations"), path, err)
    api_raw, ui_raw, incidents_raw, recover_raw = _settings_tables(data, err)
    for key, rule in checks(ApiSettings).items():  # the values set in the file
        if key in api_raw and (problem := rule(api_raw[key])):
            raise err("api", None, key, f"api.{key}", problem)
    ui = _settings(UiSettings, ui_raw, "ui", err)
    incidents = _settings(IncidentSettings, incidents_raw, "incidents", err)
    alerts = parse_alerts(data.get("alerts", {}), lambda key, fpath, msg: err("alerts", None, key, fpath, msg))
    recover = _recover(recover_raw, incidents, err)
    overrides = _overrides(data.get("overrides", {}), profile, err)
    _check_top_values(data, err)
    keys = _keys(data.get("keys", {}), err)

    return Config(
        path=path,
        profile=profile,
        stations=tuple(stations),
        api=ApiSettings(**api_raw),
        ui=ui,
        incidents=incidents,
        alerts=alerts,
        recover=recover,
        overrides=dict(overrides),
        simulated=data.get("simulated", False),
        connect_timeout_s=float(data.get("connect_timeout_s", 10.0)),
        command_timeout_s=float(data.get("command_timeout_s", 30.0)),
        launch_script=data.get("launch_script"),
        keys={k: v.strip() for k, v in keys.items()},
    )


def _check_top_keys(data: dict[str, Any], err: _Err) -> None:
    """Every top-level key is a Config field (a typo fails here, not silently as a default)."""
    top = sorted(table(Config))
    for key in data:
        if key not in top:
            raise err(None, None, key, key_path(key), f"unknown field (known: {', '.join(top)})")


def _profile(profile_name: Any, path: str | None, err: _Err) -> Profile:
    """The profile named by ``profile``: a built-in name, or a .toml path relative to the config file.
    A problem inside a profile file points at that file; any other points at the ``profile`` key."""
    if not isinstance(profile_name, str) or not profile_name or not is_clean(profile_name):
        raise err(None, None, "profile", "profile", "must be a string (a built-in profile name or a .toml path)")
    is_file = profile_name.endswith(".toml") or os.sep in profile_name
    try:
        if path and is_file:
            profile_name = str((Path(path).parent / expand(profile_name)).resolve())
        return load_profile(profile_name)
    except ConfigError as exc:
        if is_file and exc.path != "<config>":  # the profile file itself is wrong: point there
            raise
        raise err(None, None, "profile", "profile", exc.message) from None
    except (OSError, RuntimeError, ValueError) as exc:  # resolve() on a looping symlink, an odd path
        raise err(None, None, "profile", "profile", f"cannot read profile: {one(exc)}") from None


def _check_kinds(raw: dict[str, Any], fields: dict[str, Kind], tbl: str, index: int | None, fp: str,
                 err: _Err) -> None:
    """Each key of a table is a known field with a value of its TOML kind (before any rule sees it)."""
    for key, value in raw.items():
        if key not in fields:
            raise err(tbl, index, key, f"{fp}.{key_path(key)}",
                      f"unknown field (known: {', '.join(sorted(fields))})")
        if not check_type(value, fields[key]):
            raise err(tbl, index, key, f"{fp}.{key}", f"must be {type_name(fields[key])}, got {show(value)}")


def _settings_tables(data: dict[str, Any], err: _Err) -> tuple[dict, dict, dict, dict]:
    """The raw [api], [ui], [incidents] and [recover] tables, each a table of known keys and kinds.
    An inline ``api_key`` is refused first: a secret does not belong in the config file."""
    raws = [data.get(tbl, {}) for tbl, _ in _SETTINGS]
    if isinstance(raws[0], dict) and "api_key" in raws[0]:
        raise err("api", None, "api_key", "api.api_key", "put the key in an env var (api_key_env) or a file")
    for (tbl, schema), raw in zip(_SETTINGS, raws, strict=True):
        if not isinstance(raw, dict):
            raise err(None, None, tbl, tbl, "must be a table")
        _check_kinds(raw, kinds(schema), tbl, None, tbl, err)
    api_raw, ui_raw, incidents_raw, recover_raw = raws
    return api_raw, ui_raw, incidents_raw, recover_raw


def _settings(schema: type, raw: dict[str, Any], tbl: str, err: _Err) -> Any:
    """The settings dataclass built from its (already kind-checked) table, with every field's rule
    applied to the built value, so a default is checked as well as a value set in the file."""
    settings = schema(**raw)
    for key, rule in checks(schema).items():  # every value, set or default
        if problem := rule(getattr(settings, key)):
            raise err(tbl, None, key, f"{tbl}.{key}", problem)
    return settings


def _recover(recover_raw: dict[str, Any], incidents: IncidentSettings, err: _Err) -> RecoverSettings:
    """[recover], checked; restarting needs incident capture, since the evidence is taken first."""
    raw = {k: tuple(x) if isinstance(x, list) else x for k, x in recover_raw.items()}
    recover = _settings(RecoverSettings, raw, "recover", err)
    if recover.on and not incidents.capture:  # the evidence is taken before any restart, or none is made
        raise err("recover", None, "on", "recover.on", "needs [incidents] capture = true (the evidence is "
                  "captured before every restart)")
    return recover


def _overrides(overrides: Any, profile: Profile, err: _Err) -> dict[str, Any]:
    """[overrides]: a table of known profile fields, and engine flags the profile's engine serves."""
    if not isinstance(overrides, dict):
        raise err(None, None, "overrides", "overrides", "must be a table")
    problem = overrides_problem(overrides)
    if problem:
        key, msg = problem
        raise err("overrides", None, key.split(".")[0], f"overrides.{key}", msg)
    if problem := serving_problem(profile.engine, overrides):  # the engine flags (console.config.engine_flags)
        key, msg = problem
        raise err("overrides", None, key, f"overrides.{key_path(key)}", msg)
    return overrides


def _check_top_values(data: dict[str, Any], err: _Err) -> None:
    """The top-level scalars: the timeouts, ``simulated`` and ``launch_script`` (absent ones default)."""
    for key in ("connect_timeout_s", "command_timeout_s"):
        if key in data and (problem := check_timeout(data[key])):
            raise err(None, None, key, key, problem)
    if not isinstance(data.get("simulated", False), bool):
        raise err(None, None, "simulated", "simulated", "must be true or false")
    launch_script = data.get("launch_script")
    if launch_script is not None and (not isinstance(launch_script, str) or not launch_script.strip()
                                      or check_path(launch_script)):
        raise err(None, None, "launch_script", "launch_script", "must be a path on the stations (e.g. ~/launch-glm53.sh)")


def _keys(keys: Any, err: _Err) -> dict[str, str]:
    """[keys]: binding id = key name strings. Only the shape is checked here; the binding ids and key
    names are checked by the TUI (console/ui/keymap.py)."""
    if not isinstance(keys, dict):
        raise err(None, None, "keys", "keys", "must be a table of binding id = \"key\"")
    for key, value in keys.items():
        if isinstance(value, dict):
            raise err("keys", None, None, f"keys.{key}", "binding ids have no dots; write them as in "
                      "docs/configuration.md (e.g. bench-run = \"f5\")")
        if not isinstance(value, str) or not value.strip():
            raise err("keys", None, key, f"keys.{key}", f"must be a key name like \"f5\" or \"ctrl+r,f5\", got {value!r}")
    return keys


def _stations(raw_stations: Any, path: str | None, err: _Err) -> list[Station]:
    """The ``[[stations]]`` tables: known fields of the right kind and shape, unique names, ranks 0..N-1."""
    _check_station_array(raw_stations, path, err)
    fields, rules = kinds(Station), checks(Station)
    required = [k for k, (_, req) in table(Station).items() if req]
    stations = [_station(i, raw, fields, rules, required, err) for i, raw in enumerate(raw_stations)]
    _check_unique_names(stations, err)
    _check_ranks(stations, err)
    return stations


def _check_station_array(raw_stations: Any, path: str | None, err: _Err) -> None:
    """``stations`` is a non-empty array of at most 256 tables (a missing or empty one has no line)."""
    if raw_stations is None:
        raise ConfigError(path, None, "stations", "at least one [[stations]] table is required")
    if not isinstance(raw_stations, list) or not all(isinstance(s, dict) for s in raw_stations):
        raise err(None, None, "stations", "stations", "must be an array of tables ([[stations]])")
    if not raw_stations:
        raise ConfigError(path, None, "stations", "at least one [[stations]] table is required")
    if len(raw_stations) > 256:
        raise err(None, None, "stations", "stations", f"at most 256 stations, got {len(raw_stations)}")


def _station(i: int, raw: dict[str, Any], fields: dict[str, Kind], rules: dict[str, Callable[[Any], str | None]],
             required: list[str], err: _Err) -> Station:
    """One ``[[stations]]`` table: kinds, then required fields (``host`` not for a local station),
    then each value's rule; ``host`` defaults to localhost."""
    fp = f"stations[{i}]"
    _check_kinds(raw, fields, "stations", i, fp, err)
    for key in required:
        if key not in raw and not (key == "host" and raw.get("local")):
            raise err("stations", i, None, f"{fp}.{key}", "required field is missing")
    if not raw["name"].strip():
        raise err("stations", i, "name", f"{fp}.name", "must not be empty")
    for key, value in raw.items():
        problem = rules[key](value) if key in rules else None
        if problem:
            raise err("stations", i, key, f"{fp}.{key}", problem)
    return Station(**{"host": "localhost", **raw})


def _check_unique_names(stations: list[Station], err: _Err) -> None:
    """No two stations share a name; the second of a pair is reported."""
    names = [s.name for s in stations]
    for i, s in enumerate(stations):
        if names.index(s.name) != i:
            raise err("stations", i, "name", f"stations[{i}].name", f"duplicate station name {s.name!r}")


def _check_ranks(stations: list[Station], err: _Err) -> None:
    """The ranks are 0..N-1, each once (the engine's node ranks)."""
    ranks = sorted(s.rank for s in stations)
    if ranks != list(range(len(stations))):
        i = _first_bad_rank(stations)
        raise err("stations", i, "rank", f"stations[{i}].rank",
                  f"ranks must be 0..{len(stations) - 1}, each once (got {ranks})")


def _first_bad_rank(stations: list[Station]) -> int:
    """The index of the first station that breaks the rank sequence (a repeat or one past N-1), so
    the error points at it; 0 when none does."""
    seen: set[int] = set()
    for idx, s in enumerate(stations):
        if s.rank in seen or s.rank >= len(stations):
            return idx
        seen.add(s.rank)
    return 0


def field_error(cfg: Config, tbl: str, key: str, message: str) -> ConfigError:
    """A ConfigError with the field's line, for a field checked after loading (the [keys] table
    against the screens' bindings)."""
    line = None
    if cfg.path:
        try:
            line = Locator(Path(cfg.path).read_text()).line_of(tbl, None, key)
        except OSError:
            pass
    return ConfigError(cfg.path, line, f"{tbl}.{key}", message)


def find_config(explicit: str | None) -> Path:
    """``--config``, then ./dgx-console.toml, then the XDG config dir."""
    if explicit:
        return expand(explicit)
    for cand in (Path.cwd() / CONFIG_NAME, xdg_config_path()):
        if cand.is_file():
            return cand
    raise ConfigError(None, None, "",
                      f"no config found (tried --config, ./{CONFIG_NAME}, {xdg_config_path()}); "
                      "try 'dgx-console demo' or 'dgx-console sim --write-config lab.toml'")


def load_config(explicit: str | None = None, *, library_checks_later: bool = False) -> Config:
    """The config, checked. ``library_checks_later``: without the checks that import the SSH and HTTP
    libraries (an identity file loaded by asyncssh, the API URL parsed by httpx), which the caller then
    runs itself (``library_checks``): the TUI does so after its first frame."""
    path = find_config(explicit)
    try:
        text = read_text(path, MAX_CONFIG_BYTES)
    except FileProblem as exc:
        raise ConfigError(path, None, "", str(exc)) from None
    token = LIBRARY_VERDICTS.set(not library_checks_later)
    try:
        cfg = parse_config(text, str(path))
        _check_files(cfg, text, "read-keys" if library_checks_later else "all")
    finally:
        LIBRARY_VERDICTS.reset(token)
    return cfg


def library_checks(cfg: Config) -> None:
    """What ``load_config(library_checks_later=True)`` left: the API URL as httpx reads it, each identity
    file as asyncssh loads it. Raises the ConfigError that loading would have raised."""
    try:  # (for the line numbers only)
        text = read_text(cfg.path, MAX_CONFIG_BYTES) if cfg.path else ""
    except (FileProblem, OSError):  # gone or changed since it was loaded: the errors carry no line
        text = ""
    if cfg.api.url is not None and (problem := api_url(cfg.api.url)):
        raise ConfigError(cfg.path, Locator(text).line_of("api", None, "url"), "api.url", problem)
    _check_files(cfg, text, "import-keys")


def _check_files(cfg: Config, text: str, which: Literal["all", "read-keys", "import-keys"]) -> None:
    """Files the config names that must be text when they exist (a binary known_hosts or key file
    fails here as one line, not later inside the SSH library). ``which``: every file with each identity
    file loaded by the SSH library (``all``), every file with identity files only read (``read-keys``),
    or only the identity files' load (``import-keys``)."""
    loc = Locator(text)
    files: list[tuple[str | None, str | None, int | None, str, str, int]] = []
    for i, s in enumerate(cfg.stations):
        if s.local:
            continue
        # unset: the SSH client reads ~/.ssh/known_hosts, so that file must be text as well
        files.append((s.known_hosts or "~/.ssh/known_hosts", "stations", i, "known_hosts",
                      f"stations[{i}].known_hosts", 64 * MIB))
        if s.identity_file:
            files.append((s.identity_file, "stations", i, "identity_file", f"stations[{i}].identity_file", MIB))
    if cfg.api.api_key_file:
        files.append((cfg.api.api_key_file, "api", None, "api_key_file", "api.api_key_file", MAX_KEY_FILE_BYTES))
    key_file_needed = bool(cfg.api.api_key_file) and not (cfg.api.api_key_env and os.environ.get(cfg.api.api_key_env))
    for name, tbl, index, key, fpath, limit in files:
        if which == "import-keys" and key != "identity_file":
            continue
        p = expand(name)
        if key == "api_key_file" and key_file_needed:  # configured and no env var wins: it must give a key
            if problem := _key_file_problem(p):
                raise ConfigError(cfg.path, loc.line_of(tbl, index, key), fpath, f"{p}: {problem}")
            continue
        if not os.path.exists(p):
            continue  # created on first trust / read when the key is needed
        try:
            if key == "identity_file" and which != "read-keys":
                _check_private_key(p)
            elif key == "identity_file":
                read_bytes(p, limit)
            else:
                read_text(p, limit)
        except FileProblem as exc:
            raise ConfigError(cfg.path, loc.line_of(tbl, index, key), fpath, f"{p}: {exc}") from None


def _key_file_problem(p: Path) -> str | None:
    """Why the API key file gives no key (a missing, looping or empty file silently meant "no key":
    every request then failed with 401 far from the cause)."""
    try:
        text = read_text(p, MAX_KEY_FILE_BYTES).strip()
    except FileProblem as exc:
        if os.path.islink(p) and not os.path.exists(p):
            return "a symlink that leads nowhere (dangling or looping); the API key is read from this file"
        return f"{exc}; the API key is read from this file (remove api_key_file for no key)"
    except OSError as exc:  # ELOOP and the like from the path itself
        return f"cannot read: {exc.strerror or exc}; the API key is read from this file"
    if not text:
        return "is empty; the API key is read from this file (remove api_key_file for no key)"
    if "\n" in text:
        return "must hold the key on one line"
    if not is_clean(text):
        return "holds control characters, not an API key"
    return None


def _check_private_key(p: Path) -> None:
    """A key file the SSH client can load (no passphrase: the agent holds encrypted keys)."""
    data = read_bytes(p, MIB)
    import asyncssh

    try:
        asyncssh.import_private_key(data)
    except (ValueError, asyncssh.Error) as exc:  # KeyImportError, KeyEncryptionError
        raise FileProblem(f"not a private key the SSH client can load without a passphrase ({one(exc)}); "
                          "use the agent for encrypted keys") from None
