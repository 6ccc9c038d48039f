"""The suite's one two-station configuration (stations A and B on a GB300 pair, rank 0 and 1, their
rail and RDMA device), for tests that only need *a* pair: write it once here, not once per file.

Every address in it is one no test can reach by mistake: the hosts are loopback (127.0.0.1 and
127.0.0.2), the rail addresses RFC 2544's benchmark range (198.18.0.0/15, as the simulator's rail).

``TWO_STATIONS`` is the two ``[[stations]]`` tables, to end a TOML document whose top-level keys
(profile, [env], [overrides]) the test writes above it; ``two_station_toml`` builds the whole file."""

from __future__ import annotations

from console.config import Config, parse_config

GB300 = "glm53-nvfp4-2x-gb300-vllm"
HOSTS = ("127.0.0.1", "127.0.0.2")
RAIL_IPS = ("198.18.0.1", "198.18.0.2")


def stations_toml(host_a: str = HOSTS[0], host_b: str = HOSTS[1], *, rail: bool = True, rdma: bool = True,
                  rail_ips: tuple[str, str] = RAIL_IPS, each: str = "", only: dict[str, str] | None = None) -> str:
    """The two tables; ``rail=False`` leaves out the rail (and the RDMA device): names, hosts, ranks only.
    ``each``: TOML lines added to both tables (``port = 22``); ``only``: lines for one station's table,
    by name (``{"A": 'user = "ops"'}``)."""
    out = []
    for name, host, rank, ip in (("A", host_a, 0, rail_ips[0]), ("B", host_b, 1, rail_ips[1])):
        text = f'[[stations]]\nname = "{name}"\nhost = "{host}"\nrank = {rank}\n'
        if rail:
            text += 'rail_netdev = "enp1s0f1np1"\n' + ('rdma_device = "mlx5_0"\n' if rdma else "") + f'rail_ip = "{ip}"\n'
        for extra in (each, (only or {}).get(name, "")):
            if extra:
                text += extra.rstrip("\n") + "\n"
        out.append(text)
    return "\n".join(out)


TWO_STATIONS = stations_toml()


def two_station_toml(profile: str = GB300, above: str = "", **kw) -> str:
    """A whole config: ``profile``, then ``above`` (top-level keys and tables), then the pair."""
    return f'profile = "{profile}"\n{above}\n' + stations_toml(**kw)


def two_station_config(profile: str = GB300, above: str = "", path: str = "two-stations.toml", **kw) -> Config:
    return parse_config(two_station_toml(profile, above, **kw), path)
