"""The dashboard: the stations side by side (or the fleet table), the diagnosis panel, the keys."""

from __future__ import annotations

from console.config import Config, gpus_per_station

ENGINE_NAME = {"vllm": "vLLM", "sglang": "SGLang"}


def setup_title(config: Config, read_only: bool = False) -> str:
    """What the header says is being served, derived from the stations configured (a 2x profile
    on 4 stations is "4x GB300 · vLLM TP=4", never the profile's "2x" name). DEMO comes first so a
    narrow header keeps it."""
    p = config.profile
    n = len(config.stations)
    gpus = gpus_per_station(p) * n
    model = p.model.rsplit("/", 1)[-1] or p.name
    gpu = p.gpu.name.removeprefix("NVIDIA ").strip()
    parts = ["DEMO"] if config.simulated else []
    parts += [f"{model} on {gpus}x {gpu}", f"{ENGINE_NAME.get(p.engine, p.engine)} TP={config.tensor_parallel}",
              f"{n} station{'s' if n != 1 else ''}"]
    if read_only:
        parts.append("read-only")
    return " · ".join(parts)
