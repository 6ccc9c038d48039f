"""One rule for "is this name a secret?" (console/secrets.py), and every consumer agrees with it:
the config (extra_env on stdin, masked overrides), engine flags refused as overrides, the container
environment (docker inspect), env-file evidence (checks), the env-file import, the diagnosis and the
bundle's free-text masking. Before this rule there were five that disagreed: ``GCP_CREDENTIALS`` kept its
value in check evidence, ``DB_PASSWD`` was no secret to the config (so its value went into the argv)."""

from __future__ import annotations

import pytest

from console.config import masked_overrides, parse_config, secret_values
from console.config.envfile_import import config_from_envs
from console.secrets import (
    MASK,
    is_secret_name,
    mask_values,
    masked_env,
    redact_env_lines,
    redact_text,
)
from console.diagnosis import redact
from console.probes.docker_env import REDACTED, parse_env_list
from console.service import engines
from tests.two_stations import stations_toml

SECRET = [
    "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "GITHUB_TOKEN", "AWS_SESSION_TOKEN", "hf_token", "accessToken",
    "API_KEY", "OPENAI_API_KEY", "VLLM_API_KEY", "NGC_API_KEY", "KEY", "APIKEY", "apiKey", "x-api-key",
    "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "API_KEYS",
    "CLIENT_SECRET", "SECRET_KEY_BASE", "MY_SECRET",
    "DB_PASSWORD", "MYSQL_ROOT_PASSWORD", "PGPASSWORD", "password",
    "DB_PASSWD", "LDAP_PASSWD",
    "SSH_KEY_PASSPHRASE",
    "GCP_CREDENTIALS", "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_CREDENTIAL",
    "MY_PASS", "SSHPASS",
    "MYSQL_PWD", "REDISCLI_AUTH",
    "--api-key", "--hf-token", "--token", "admin_api_key",
]
NOT_SECRET = [
    "NCCL_SOCKET_IFNAME", "CUDA_VISIBLE_DEVICES", "NCCL_IB_HCA", "NCCL_IB_TC", "VLLM_HOST_IP",
    "NCCL_IB_PKEY",  # an InfiniBand partition key index, shown by the NCCL workbench
    "KEYBOARD", "HOTKEY", "MONKEY_PATCH", "KEYMAP",
    "TOKENIZERS_PARALLELISM", "MAX_NUM_BATCHED_TOKENS", "max_num_batched_tokens", "tokenizer",
    "return_tokens_as_token_ids",  # a vLLM flag: TOKEN mid-name is not the secret
    "PASSTHROUGH_MODE", "SSL_KEYFILE", "--ssl-keyfile",
    "PWD", "OLDPWD", "SSH_AUTH_SOCK",
    # references to where a secret is, not the secret
    "API_KEY_FILE", "MYSQL_ROOT_PASSWORD_FILE", "HF_TOKEN_PATH", "api_key_env", "secret_env",
    "", "_",
]


@pytest.mark.parametrize("name", SECRET)
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", NOT_SECRET)
def test_names_that_are_no_secret(name):
    assert not is_secret_name(name)
    assert is_secret_name(name, listed=(name,))  # overrides.secret_env wins over the patterns


CFG = """
profile = "glm53-nvfp4-2x-gb300-vllm"
[overrides]
secret_env = ["ODD_NAME"]
[overrides.extra_env]
DB_PASSWD = "passwdvalue"
GCP_CREDENTIALS = "credvalue"
ODD_NAME = "oddvalue"
TOKENIZERS_PARALLELISM = "false"
NCCL_IB_PKEY = "0x8001"
""" + stations_toml("a.example", "b.example")


def test_config_and_launch_treat_passwd_and_credentials_as_secrets():
    """Before: DB_PASSWD and (for docker env) GCP_CREDENTIALS were not secret to the config, so the
    value went into the docker run argv and the preview."""
    cfg = parse_config(CFG)
    assert masked_overrides(cfg)["extra_env"] == {
        "DB_PASSWD": MASK, "GCP_CREDENTIALS": MASK, "ODD_NAME": MASK, "TOKENIZERS_PARALLELISM": "false",
        "NCCL_IB_PKEY": "0x8001"}
    assert set(secret_values(cfg)) == {"passwdvalue", "credvalue", "oddvalue"}
    assert engines.secret_extra_env(cfg) == ["DB_PASSWD", "GCP_CREDENTIALS", "ODD_NAME"]
    spec = engines.build_launch(cfg, cfg.head, engines.StationRuntime(("GPU-1",), "img@sha256:" + "a" * 64))
    argv = " ".join(spec.argv)
    assert "passwdvalue" not in argv and "credvalue" not in argv and "passwdvalue" not in spec.preview()
    assert "TOKENIZERS_PARALLELISM=false" in spec.argv and "NCCL_IB_PKEY=0x8001" in spec.argv


def test_engine_flags_by_the_same_rule():
    cfg = parse_config(CFG.replace("[overrides]\n", '[overrides]\nmax_num_batched_tokens = 8192\n'
                                                    'extra_args = ["--return-tokens-as-token-ids"]\n'))
    spec = engines.build_launch(cfg, cfg.head, engines.StationRuntime(("GPU-1",), "img@sha256:" + "a" * 64))
    assert "--max-num-batched-tokens" in spec.argv and "--return-tokens-as-token-ids" in spec.argv
    for extra in ('db_password = "x"', 'extra_args = ["--admin-api-key=abc"]'):
        cfg = parse_config(CFG.replace("[overrides]\n", f"[overrides]\n{extra}\n"))
        with pytest.raises(engines.EngineConfigError, match="secret"):
            engines.build_launch(cfg, cfg.head, engines.StationRuntime(("GPU-1",), "img@sha256:" + "a" * 64))


def test_env_file_evidence_masks_credentials_and_passwd():
    """Before: checks.redact_env("GCP_CREDENTIALS=s3cr3t") kept the value."""
    text = "GCP_CREDENTIALS=s3cr3t\nexport DB_PASSWD='pw123'\nexport NCCL_IB_PKEY=0x8001\nRANK=0"
    assert redact_env_lines(text) == ("GCP_CREDENTIALS=<redacted>\nexport DB_PASSWD=<redacted>\n"
                                      "export NCCL_IB_PKEY=0x8001\nRANK=0")


def test_container_environment_hides_by_the_same_rule():
    env = parse_env_list(["DB_PASS=pw", "MYSQL_PWD=pw2", "NCCL_IB_PKEY=0x8001", "TOKENIZERS_PARALLELISM=false",
                          "GCP_CREDENTIALS=c", "PWD=/workspace"])
    assert env == {"DB_PASS": REDACTED, "MYSQL_PWD": REDACTED, "NCCL_IB_PKEY": "0x8001",
                   "TOKENIZERS_PARALLELISM": "false", "GCP_CREDENTIALS": REDACTED, "PWD": "/workspace"}


def test_env_import_notes_every_secret_it_leaves_out():
    text = ('RANK=0\nNETDEV=cx8r1\nLOCAL_IP=10.0.0.1\nPEER_IP=10.0.0.2\nDB_PASSWD=pw\nGCP_CREDENTIALS=c\n'
            'NCCL_IB_PKEY=0x8001\n')
    imp = config_from_envs([("a.env", text)], "glm53-nvfp4-2x-gb300-vllm")
    left_out = sorted(n.split(": ", 1)[1].split()[0] for n in imp.notes if "not copied" in n)
    assert left_out == ["DB_PASSWD", "GCP_CREDENTIALS"]  # and not NCCL_IB_PKEY (was: "secret" by KEY)
    assert "pw" not in repr(imp.config)


@pytest.mark.parametrize("line, masked", [
    ("export HF_TOKEN=hf_abcdefgh12345", "export HF_TOKEN=***"),
    ("DB_PASSWD=pw123 started", "DB_PASSWD=*** started"),
    ("GCP_CREDENTIALS: 'abc'", "GCP_CREDENTIALS: '***'"),
    ("server_args=ServerArgs(model_path='/m', api_key='sk-123', port=30000)",
     "server_args=ServerArgs(model_path='/m', api_key='***', port=30000)"),
    ("non-default args: {'api_key': ['sk-9'], 'max_num_seqs': 32}", "non-default args: {'api_key': ['***'], 'max_num_seqs': 32}"),
    ('{"accessToken": "abc.def"}', '{"accessToken": "***"}'),
    ("python3 -m vllm serve m --api-key sk-42 --max-num-seqs 16", "python3 -m vllm serve m --api-key *** --max-num-seqs 16"),
    ("--hf-token=hf_abcdefghijk", "--hf-token=***"),
    ("Authorization: Bearer abc.def-ghi", "Authorization: Bearer ***"),
    ("x-api-key: abc", "x-api-key: ***"),
    ("mysql password: hunter2", "mysql password: ***"),
])
def test_free_text_masks_values_after_secret_names(line, masked):
    assert redact_text(line) == masked
    assert redact(line) == masked  # the diagnosis evidence and the bundle use the same rule


@pytest.mark.parametrize("line", [
    "TOKENIZERS_PARALLELISM=false", "max_num_batched_tokens=8192", "NCCL_IB_PKEY=0x8001",
    "Missing key: model.layers.0.weight", "json: unexpected token: '<'", "--max-num-batched-tokens 8192",
    "KeyError: 'model.embed_tokens'", "NCCL_SOCKET_IFNAME=enp1s0f1np1", "12:30:45 loaded",
])
def test_free_text_leaves_what_is_no_secret(line):
    assert redact_text(line) == line


def test_masking_helpers():
    assert masked_env({"HF_TOKEN": "x", "RANK": 0, "ODD": "y"}, listed=("ODD",)) == {
        "HF_TOKEN": MASK, "RANK": 0, "ODD": MASK}
    assert mask_values("key abcd and abcdef", ["abcd", "abcdef", ""]) == "key *** and ***"
