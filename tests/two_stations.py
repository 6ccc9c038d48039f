"""The suite's one two-station configuration (stations A and B on a GB300 pair, rank 0 and 1, their
rail and RDMA device), for tests that only need *a* pair: write it once here, not once per file.

``TWO_STATIONS`` is the two ``[[stations]]`` tables, to end a TOML document whose top-level keys
(profile, [env], [overrides]) the test writes above it; ``two_station_toml`` builds the whole file."""

from __future__ import annotations

from console.config import Config, parse_config

GB300 = "glm53-nvfp4-2x-gb300-vllm"


def stations_toml(host_a: str = "station-a", host_b: str = "station-b", *, rail: bool = True, rdma: bool = True,
                  rail_ips: tuple[str, str] = ("192.168.100.10", "192.168.100.11")) -> str:
    """The two tables; ``rail=False`` leaves out the rail (and the RDMA device): names, hosts, ranks only."""
    out = []
    for name, host, rank, ip in (("A", host_a, 0, rail_ips[0]), ("B", host_b, 1, rail_ips[1])):
        text = f'[[stations]]\nname = "{name}"\nhost = "{host}"\nrank = {rank}\n'
        if rail:
            text += 'rail_netdev = "enp1s0f1np1"\n' + ('rdma_device = "mlx5_0"\n' if rdma else "") + f'rail_ip = "{ip}"\n'
        out.append(text)
    return "\n".join(out)


TWO_STATIONS = stations_toml()


def two_station_toml(profile: str = GB300, above: str = "", **kw) -> str:
    """A whole config: ``profile``, then ``above`` (top-level keys and tables), then the pair."""
    return f'profile = "{profile}"\n{above}\n' + stations_toml(**kw)


def two_station_config(profile: str = GB300, above: str = "", path: str = "two-stations.toml", **kw) -> Config:
    return parse_config(two_station_toml(profile, above, **kw), path)
