"""The simulator's commands get the world's profile as ``World.create`` built it: each command is a fresh
interpreter, and parsing and checking the profile's TOML again cost ~15 ms of its ~75 (a hang capture
starts ~25 commands a station). A command that never asks for the profile does not load the config at all."""

from __future__ import annotations

import json
import subprocess
import sys

from console.sim.world import PROFILE_FILE, World

PROBE = """
import json, sys
from console.sim.world import World
w = World(sys.argv[1])
before = "console.config.schema" in sys.modules
p = w.profile
print(json.dumps([before, p.name, p.gpu.name, "console.config.profiles" in sys.modules, "tomllib" in sys.modules]))
"""


def _probe(root) -> list:
    out = subprocess.run([sys.executable, "-c", PROBE, str(root)], capture_output=True, text=True, timeout=60,
                         check=True)
    return json.loads(out.stdout)


def test_a_command_reads_the_built_profile_without_parsing_toml(tmp_path):
    World.create(tmp_path / "w", "glm53-nvfp4-2x-gb300-vllm")
    schema_before, name, gpu, profiles_loaded, toml_loaded = _probe(tmp_path / "w")
    assert (name, gpu) == ("glm53-nvfp4-2x-gb300-vllm", World(tmp_path / "w").profile.gpu.name)
    assert not schema_before  # nothing loads the config until the profile is asked for
    assert not profiles_loaded and not toml_loaded


def test_a_torn_or_foreign_profile_file_falls_back_to_the_profile_by_name(tmp_path):
    World.create(tmp_path / "w", "glm53-nvfp4-2x-gb300-vllm")
    (tmp_path / "w" / PROFILE_FILE).write_bytes(b"\x80\x04 torn")
    assert _probe(tmp_path / "w")[1:4] == ["glm53-nvfp4-2x-gb300-vllm", World(tmp_path / "w").profile.gpu.name, True]
    other = World.create(tmp_path / "o", "glm53-flash-nvfp4-2x-gb10-sglang")  # a file built for another profile
    (tmp_path / "w" / PROFILE_FILE).write_bytes((tmp_path / "o" / PROFILE_FILE).read_bytes())
    assert _probe(tmp_path / "w")[1] == "glm53-nvfp4-2x-gb300-vllm" != other.profile.name
