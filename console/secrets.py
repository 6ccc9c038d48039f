"""The one answer to "is this name a secret?", and the maskers that follow from it.

Every place that shows, stores or passes on a ``NAME=value`` asks :func:`is_secret_name`: the config
(``[overrides.extra_env]`` values that travel on stdin, never in an argv), the engine flags refused
as overrides, the container environment the NCCL workbench shows, env-file evidence in checks, the
env-file import, the diagnosis evidence and the support bundle. Pure: no I/O, no other console module.

The rule works on the *words* of a name (split at ``_``, ``-``, ``.``; case ignored), so that one rule
fits env names (``HF_TOKEN``), engine flags (``--api-key``), TOML/JSON keys (``api_key``, ``apiKey``):

* a word containing SECRET, PASSWORD, PASSWD, PASSPHRASE or CREDENTIAL (``PGPASSWORD``,
  ``SECRET_KEY_BASE``, ``GOOGLE_APPLICATION_CREDENTIALS``);
* a last word ending in TOKEN (``HF_TOKEN``, ``accessToken``; not ``TOKENS``/``TOKENIZERS``: counts and
  switches such as ``MAX_NUM_BATCHED_TOKENS``, ``TOKENIZERS_PARALLELISM``);
* a last word KEY or KEYS, or ending in APIKEY/PRIVATEKEY/ACCESSKEY (``OPENAI_API_KEY``, ``apiKey``),
  and ``..._KEY_ID`` (``AWS_ACCESS_KEY_ID``); not ``NCCL_IB_PKEY`` (an InfiniBand partition key
  index), ``KEYBOARD``, ``HOTKEY`` or ``SSL_KEYFILE`` (a path);
* a last word ending in PASS (``DB_PASS``, ``SSHPASS``; ``BYPASS`` is the accepted false positive);
* a last word PWD or AUTH after another word (``MYSQL_PWD`` is MySQL's documented password variable,
  ``REDISCLI_AUTH`` redis-cli's); never ``PWD``/``OLDPWD`` (the shell's directories) nor
  ``SSH_AUTH_SOCK`` (a socket path);
* a last word PROXY after another word (``HTTPS_PROXY``, ``all_proxy``: a proxy URL routinely carries
  ``user:password@``); never ``NO_PROXY`` (a host list);
* but never a name whose last word says it holds a reference to the secret, not the secret itself:
  ``..._FILE``, ``..._PATH``, ``..._DIR``, ``..._ENV``, ``..._NAME`` (``API_KEY_FILE``,
  ``MYSQL_ROOT_PASSWORD_FILE`` as docker's convention, ``HF_TOKEN_PATH``, our own ``api_key_env``
  and ``secret_env``);
* any name the operator lists in ``overrides.secret_env`` (over every rule above).

In free text (``redact_text``) a bare ``token=``/``key=``/``pass=``/``auth=`` assignment is masked too
(an ``=`` right after the word: an assignment, where ``token: '<'`` is prose); so are an HTTP
``Authorization:`` header's credentials (``Basic``, ``Bearer``, ... or none) and API keys by their
shape (``hf_...``, ``sk-...``). ``mask_tree`` applies the rule to a parsed document's keys as well
as its values (the one tree masker: the hang archive and `hang-report --json`).

Secrets by value: a URL's userinfo (``http://user:password@host``) is a secret wherever it appears
(``mask_url``, and ``redact_text`` for free text); ``is_secret_value`` says a value carries one, so
that value travels and shows like a secret-named one. A URL that is itself a credential (an alert
sink's webhook or ntfy topic) is shown by ``mask_sink_url`` and masked by value everywhere
(``sink_url_secrets``, through the config's ``secret_values``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Collection, Mapping

from console.line_templates import TemplateMemo, templates

MASK = "***"

_WORDS = re.compile(r"[_\-.\s]+")
_ANYWHERE = ("SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL")
_KEY_ENDINGS = ("APIKEY", "PRIVATEKEY", "ACCESSKEY")
_AFTER_A_WORD = ("PWD", "AUTH", "PROXY")
_NOT_AFTER = {"NO"}  # NO_PROXY
_REFERENCE = ("FILE", "PATH", "DIR", "ENV", "NAME")


def is_secret_name(name: str, listed: Collection[str] = ()) -> bool:
    """True when a variable, flag or key called ``name`` holds a secret (see the module's rule), or
    when ``name`` is in ``listed`` (the config's ``overrides.secret_env``)."""
    if name in listed:
        return True
    words = [w for w in _WORDS.split(name.upper().lstrip("-")) if w]
    if not words or (words[-1] in _REFERENCE and len(words) > 1):
        return False
    if any(part in w for w in words for part in _ANYWHERE):
        return True
    last = words[-1]
    if last == "ID" and len(words) > 1 and words[-2] == "KEY":
        return True
    return (last.endswith("TOKEN") or last in ("KEY", "KEYS") or last.endswith(_KEY_ENDINGS)
            or last.endswith("PASS")
            or (last in _AFTER_A_WORD and len(words) > 1 and words[-2] not in _NOT_AFTER))


# scheme://userinfo@ : the userinfo (no "/", "@" or whitespace; "user:password" or a bare token)
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]{0,20}://)(?P<user>[^\s/@:'\"<>]*)"
                           r"(?::(?P<password>[^\s/@'\"<>]*))?@")


def _userinfo(m: re.Match[str]) -> str:
    if m.group("password") is not None:
        return f"{m.group('scheme')}{m.group('user')}:{MASK}@"
    if m.group("scheme").lower().startswith("http") and m.group("user"):
        return f"{m.group('scheme')}{MASK}@"  # https://<token>@host: the bare user is the credential
    return m.group(0)  # ssh://root@host: a user name, no secret


def mask_url(text: str) -> str:
    """``text`` with the password of every URL's userinfo (``http://user:***@host``) masked, and a bare
    http(s) userinfo (a token as the user name) too. ``ssh://root@host`` is left as it is."""
    if "@" not in text or "://" not in text:
        return text
    return _URL_USERINFO.sub(_userinfo, text)


def url_secrets(text: str) -> list[str]:
    """The secret parts of the URL userinfo in ``text`` (passwords; bare http(s) tokens)."""
    if "@" not in text or "://" not in text:
        return []
    out = []
    for m in _URL_USERINFO.finditer(text):
        if m.group("password"):
            out.append(m.group("password"))
        elif m.group("password") is None and m.group("scheme").lower().startswith("http") and m.group("user"):
            out.append(m.group("user"))
    return out


def sink_url_secrets(url: str) -> list[str]:
    """The secret parts of a URL that *is* a credential (an alert sink: a webhook's path carries its
    token, as Slack's and Discord's do; an ntfy topic is its own password; a query may carry
    ``?auth=``): the whole URL, its path and query (8 characters or more) and its userinfo."""
    if not url or "://" not in url:
        return []
    scheme, _, rest = url.partition("://")
    where = rest.find("/") if "/" in rest else len(rest)
    tail = rest[where:]
    out = [url, *url_secrets(url)]
    if len(tail) >= 8:
        out.append(tail)
    return sorted({s for s in out if s}, key=len, reverse=True)


def mask_sink_url(url: str) -> str:
    """A credential URL as it may be shown: scheme, host and port, with the userinfo and everything
    after the host as ``***`` (``https://hooks.example.com/***``)."""
    if not url or "://" not in url:
        return MASK
    scheme, _, rest = url.partition("://")
    cut = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    host = rest[:cut]
    if "@" in host:
        host = f"{MASK}@{host.rpartition('@')[2]}"
    return f"{scheme}://{host}" + (f"/{MASK}" if rest[cut:].strip("/") else "")


def is_secret_value(value: object) -> bool:
    """True when ``value`` carries a secret whatever its name: a URL with credentials in its userinfo."""
    return isinstance(value, str) and bool(url_secrets(value))


def masked_env(env: Mapping[str, object], listed: Collection[str] = (), mask: str = MASK) -> dict[str, object]:
    """``env`` with the value of every secret name replaced by ``mask``."""
    return {k: mask if is_secret_name(str(k), listed) or is_secret_value(v) else v for k, v in env.items()}


_ENV_LINE = re.compile(r"^(\s*(?:export\s+)?)([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def redact_env_lines(text: str, mask: str = "<redacted>") -> str:
    """Env-file text (``export NAME=value`` lines) with the values of secret names as ``mask``."""
    out = []
    for line in text.splitlines():
        m = _ENV_LINE.match(line)
        if m and is_secret_name(m.group(2)):
            line = f"{m.group(1)}{m.group(2)}={mask}"
        out.append(mask_url(line))
    return "\n".join(out)


def mask_values(text: str, values: Collection[str], mask: str = MASK) -> str:
    """``text`` with every known secret value (longest first) replaced by ``mask``."""
    for v in sorted(values, key=len, reverse=True):
        if v:
            text = text.replace(v, mask)
    return text


# Free text (logs, remote output, check evidence): a value is masked when it follows a secret name.
_HUB_TOKEN = re.compile(r"\bhf_[A-Za-z0-9]{8,}")
_SK_TOKEN = re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")  # OpenAI-style API keys (sk-..., sk-proj-...)
# An HTTP Authorization header, whatever the scheme: the credentials after it
_AUTH_HEADER = re.compile(r"(\b(?:proxy-)?authorization['\"]?\s*[:=]\s*['\"]?"
                          r"(?:(?:basic|bearer|token|digest|negotiate|apikey|aws4-hmac-sha256)\s+)?)"
                          r"[^\s'\",}\]]+", re.I)
_BEARER = re.compile(r"(\bBearer\s+)[A-Za-z0-9._~+/=-]+", re.I)
# NAME=value, NAME: value, 'name': 'value', name='value', name=['value'] (Python reprs of server args)
_ASSIGNMENT = re.compile(r"(?P<name>\b[A-Za-z_][A-Za-z0-9_.-]*)(?P<sep>['\"]?\s*[:=]\s*\[?['\"]?)"
                         r"(?P<value>[^\s'\",})\]]+)")
# --flag value, --flag=value
_FLAG = re.compile(r"(?P<name>--[A-Za-z0-9][A-Za-z0-9_-]*)(?P<sep>=|\s+)(?P<q>['\"]?)(?P<value>[^\s'\"]+)")
# The quick hint: a word one of these names must hold. One list, three shapes of it: a case-blind
# regex for a name, plain lowercase words for a substring test, and the hinted-assignment pattern.
_HINT_WORDS = ("token", "key", "secret", "pass", "credential", "pwd", "auth", "proxy")
_HINT = re.compile("|".join(_HINT_WORDS), re.I)
# A hint inside a name right before its separator: without one no assignment on the line can be a
# secret's (vLLM's stats line says "tokens/s" on every line: it never reaches the sub below).
_HINTED_ASSIGNMENT = re.compile(rf"(?:{'|'.join(_HINT_WORDS)})[a-z0-9_.-]*['\"]?\s*[:=]")
# Bare words too common in prose to mask after ("Missing key: ...", "unexpected token: '<'").
_PROSE_WORDS = frozenset({"KEY", "KEYS", "TOKEN", "PASS", "AUTH", "PROXY"})


def _hinted_secret(name: str) -> bool:
    """``is_secret_name`` behind its quick test: a log line names many things ("throughput",
    "Running"), and the full rule costs ~12 µs a name (vLLM's stats line has "tokens" in it, so the
    line-level hint alone lets every line of it through: 50k lines/s/station fell to ~2k/s)."""
    return _HINT.search(name) is not None and is_secret_name(name)


def _assigned_secret(m: re.Match[str]) -> bool:
    """A secret name before this assignment's value: a bare prose word (``token``, ``key``) only when
    an ``=`` follows it (``token=abc``), never a colon (``unexpected token: '<'``)."""
    name = m.group("name")
    if not _hinted_secret(name):
        return False
    return name.upper() not in _PROSE_WORDS or "=" in m.group("sep")


def redact_text(text: str) -> str:
    """Mask what looks like a secret in free text: hub tokens (``hf_...``), API keys (``sk-...``),
    Bearer credentials, an Authorization header's credentials, the
    value after a secret name (``HF_TOKEN=...``, ``'api_key': '...'``, ``--api-key ...``), URL userinfo
    (``http://user:***@host``)."""
    text = mask_url(text)
    if "hf_" in text:
        text = _HUB_TOKEN.sub("hf_***", text)
    if "sk-" in text:
        text = _SK_TOKEN.sub("sk-***", text)
    if "earer" in text:
        text = _BEARER.sub(r"\1***", text)
    low = text.lower()  # (substring tests: a case-blind regex costs ~15 us on every log line)
    if not any(w in low for w in _HINT_WORDS):
        return text
    if "authorization" in low:
        text = _AUTH_HEADER.sub(lambda m: m.group(0) if m.group(0).endswith(MASK) else f"{m.group(1)}{MASK}", text)
    if "--" in text:
        text = _FLAG.sub(lambda m: m.group(0) if not _hinted_secret(m.group("name"))
                         else f"{m.group('name')}{m.group('sep')}{m.group('q')}{MASK}", text)
    if ("=" in text or ":" in text) and _HINTED_ASSIGNMENT.search(low):
        text = _ASSIGNMENT.sub(lambda m: m.group(0) if not _assigned_secret(m)
                               or m.group("value") == MASK
                               else f"{m.group('name')}{m.group('sep')}{MASK}", text)
    return text


# What a line must hold before ``redact_text`` can change it: before its hint-word gate, URL userinfo,
# a hub token, Bearer, a flag; after it, a hinted assignment. One pattern a word: a literal first word
# is searched for at C speed (~0.25 ns/char), the alternation of all eight is ~12 ns/char.
_TRIGGER_SCANS = [re.compile(re.escape(t)) for t in ("@", "hf_", "earer", "--")]
_HINTED_SCANS = [re.compile(rf"{w}[a-z0-9_.-]*['\"]?\s*[:=]") for w in _HINT_WORDS]


def redact_lines(lines: list[str]) -> list[str]:
    """``[redact_text(line) for line in lines]``, with the quick tests done once over the whole batch
    (a log flood is hundreds of thousands of lines a second; vLLM's stats line says "tokens" twice on
    every line): the triggers and the hinted assignments are searched for in the joined text, and only
    the lines holding one go through ``redact_text``. Every line it would change is among them (in the
    joined text a hinted assignment may run on into the next line: the hint word's line is then
    redacted for nothing, never one line less).

    An ASCII batch is tested by template, as the catalogue's scan is (``console.catalogue.scan``): the
    lower-cased line without its digits, whose answer is kept. Deleting digits never breaks a trigger
    or a hinted assignment, so a template says "look" for every line that needs it."""
    if len(lines) < 4:
        return [redact_text(line) for line in lines]
    joined = "\n".join(lines)
    if joined.isascii():  # (lower-casing a non-ASCII line may change its length or make ASCII of it)
        tmpl = templates(joined)
        if len(tmpl) != len(lines):  # (a line break inside a line)
            return [redact_text(line) for line in lines]
        look = list(itertools.compress(range(len(lines)), _LOOK(tmpl)))
    else:
        low = joined.lower()
        if len(low) != len(joined) or joined.count("\n") != len(lines) - 1:
            return [redact_text(line) for line in lines]
        look = _flagged(joined, low)
    if not look:
        return lines
    out = list(lines)
    for n in look:
        out[n] = redact_text(lines[n])
    return out


def _flagged(joined: str, low: str) -> list[int]:
    """The lines (of ``joined``, its lower case ``low`` of the same length) holding a trigger or a
    hinted assignment, in order, each once."""
    at = [m.start() for p in _TRIGGER_SCANS for m in p.finditer(joined)]  # where a line may hold a secret
    at += [m.start() for p in _HINTED_SCANS for m in p.finditer(low)]
    out: list[int] = []
    n = prev = 0
    for i in sorted(at):  # (the line of each position: the line breaks before it, counted once)
        n += joined.count("\n", prev, i)
        prev = i
        if not out or out[-1] != n:
            out.append(n)
    return out


def _looks(new: list[str]) -> list[bool]:
    """Whether each template holds a trigger or a hinted assignment (its lines go through ``redact_text``)."""
    text = "\n".join(new)
    flagged = set(_flagged(text, text))
    return [i in flagged for i in range(len(new))]


_LOOK = TemplateMemo(_looks)


def text_masker(values: Collection[str] = ()):
    """The one masking function for text that leaves the console's hands (log lines on the screen, in
    ``watch --logs`` and a launch's progress; bundles): every known secret ``values`` (the config's,
    ``console.config.secret_values``) and then ``redact_text``. Values shorter than 4 characters are
    not masked by value (they would mask ordinary words); the name rule still covers them."""
    known = sorted({v for v in values if len(v) >= 4}, key=len, reverse=True)

    def by_value(text: str) -> str:
        for v in known:
            if v in text:
                text = text.replace(v, MASK)
        return text

    def mask(text: str) -> str:
        return redact_text(by_value(text))

    def mask_lines(lines: list[str]) -> list[str]:
        """``[mask(line) for line in lines]``, the quick tests once over the batch (``redact_lines``)."""
        if known:
            joined = "\n".join(lines)
            if any(v in joined for v in known):
                lines = [by_value(line) for line in lines]
        return redact_lines(lines)

    mask.lines = mask_lines  # type: ignore[attr-defined]
    return mask


def mask_tree(obj: object, mask: Callable[[str], str] | None = None, listed: Collection[str] = (),
              max_nodes: int = 100_000) -> object:
    """A parsed document (dicts, lists, strings, numbers) with its secrets masked, in keys as well as
    values: every string (key or value) through ``mask`` (default ``redact_text``; the config's
    ``text_masker`` adds its own secret values), the whole value of a secret-named key (the one rule,
    ``is_secret_name``, or an ``...Authorization`` header) as ``MASK``. Bounded: past ``max_nodes`` nodes
    or 200 levels, and for a node of another type, the rest is ``MASK`` (never a string of an untrusted
    object)."""
    text = mask or redact_text
    budget = [max_nodes]

    def one(o: object, depth: int) -> object:
        budget[0] -= 1
        if budget[0] < 0 or depth > 200:
            return MASK
        if isinstance(o, str):
            return text(o)
        if o is None or isinstance(o, (bool, int, float)):
            return o
        if isinstance(o, dict):
            out = {}
            for k, v in o.items():
                key = text(k) if isinstance(k, str) else (k if isinstance(k, (bool, int, float)) else MASK)
                secret = isinstance(k, str) and (is_secret_name(k, listed) or k.lower().endswith("authorization"))
                out[key] = MASK if secret and v not in (None, "") else one(v, depth + 1)
            return out
        if isinstance(o, (list, tuple)):
            return [one(v, depth + 1) for v in o]
        return MASK

    return one(obj, 0)
