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
* but never a name whose last word says it holds a reference to the secret, not the secret itself:
  ``..._FILE``, ``..._PATH``, ``..._DIR``, ``..._ENV``, ``..._NAME`` (``API_KEY_FILE``,
  ``MYSQL_ROOT_PASSWORD_FILE`` as docker's convention, ``HF_TOKEN_PATH``, our own ``api_key_env``
  and ``secret_env``);
* any name the operator lists in ``overrides.secret_env`` (over every rule above).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

MASK = "***"

_WORDS = re.compile(r"[_\-.\s]+")
_ANYWHERE = ("SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL")
_KEY_ENDINGS = ("APIKEY", "PRIVATEKEY", "ACCESSKEY")
_AFTER_A_WORD = ("PWD", "AUTH")
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
            or last.endswith("PASS") or (last in _AFTER_A_WORD and len(words) > 1))


def masked_env(env: Mapping[str, object], listed: Collection[str] = (), mask: str = MASK) -> dict[str, object]:
    """``env`` with the value of every secret name replaced by ``mask``."""
    return {k: mask if is_secret_name(str(k), listed) else v for k, v in env.items()}


_ENV_LINE = re.compile(r"^(\s*(?:export\s+)?)([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def redact_env_lines(text: str, mask: str = "<redacted>") -> str:
    """Env-file text (``export NAME=value`` lines) with the values of secret names as ``mask``."""
    out = []
    for line in text.splitlines():
        m = _ENV_LINE.match(line)
        if m and is_secret_name(m.group(2)):
            line = f"{m.group(1)}{m.group(2)}={mask}"
        out.append(line)
    return "\n".join(out)


def mask_values(text: str, values: Collection[str], mask: str = MASK) -> str:
    """``text`` with every known secret value (longest first) replaced by ``mask``."""
    for v in sorted(values, key=len, reverse=True):
        if v:
            text = text.replace(v, mask)
    return text


# Free text (logs, remote output, check evidence): a value is masked when it follows a secret name.
_HUB_TOKEN = re.compile(r"\bhf_[A-Za-z0-9]{8,}")
_BEARER = re.compile(r"(\bBearer\s+)[A-Za-z0-9._~+/=-]+", re.I)
# NAME=value, NAME: value, 'name': 'value', name='value', name=['value'] (Python reprs of server args)
_ASSIGNMENT = re.compile(r"(?P<name>\b[A-Za-z_][A-Za-z0-9_.-]*)(?P<sep>['\"]?\s*[:=]\s*\[?['\"]?)"
                         r"(?P<value>[^\s'\",})\]]+)")
# --flag value, --flag=value
_FLAG = re.compile(r"(?P<name>--[A-Za-z0-9][A-Za-z0-9_-]*)(?P<sep>=|\s+)(?P<q>['\"]?)(?P<value>[^\s'\"]+)")
# Every secret name holds one of these (a quick test before the name-by-name one).
_HINT = re.compile(r"TOKEN|KEY|SECRET|PASS|CREDENTIAL|PWD|AUTH", re.I)
# Bare words too common in prose to mask after ("Missing key: ...", "unexpected token: '<'").
_PROSE_WORDS = frozenset({"KEY", "KEYS", "TOKEN", "PASS", "AUTH"})


def _prose_secret(name: str) -> bool:
    return is_secret_name(name) and name.upper() not in _PROSE_WORDS


def redact_text(text: str) -> str:
    """Mask what looks like a secret in free text: hub tokens (``hf_...``), Bearer credentials, the
    value after a secret name (``HF_TOKEN=...``, ``'api_key': '...'``, ``--api-key ...``)."""
    if "hf_" in text:
        text = _HUB_TOKEN.sub("hf_***", text)
    if "earer" in text:
        text = _BEARER.sub(r"\1***", text)
    if not _HINT.search(text):
        return text
    if "--" in text:
        text = _FLAG.sub(lambda m: m.group(0) if not is_secret_name(m.group("name"))
                         else f"{m.group('name')}{m.group('sep')}{m.group('q')}{MASK}", text)
    if "=" in text or ":" in text:
        text = _ASSIGNMENT.sub(lambda m: m.group(0) if not _prose_secret(m.group("name"))
                               or m.group("value") == MASK
                               else f"{m.group('name')}{m.group('sep')}{MASK}", text)
    return text
