"""Simulated ``ibv_devinfo [-d DEV]`` (tab-indented, as libibverbs prints it)."""

from __future__ import annotations

import hashlib
import sys

from console.sim.shims._net import rail_by_device, rails, roce_mtu


def _block(ctx, r) -> str:
    h = hashlib.sha1(f"{ctx.station}/{r.device}".encode()).hexdigest()
    guid = ":".join(h[i:i + 4] for i in range(0, 16, 4))
    mtu, enum = roce_mtu(r.mtu)
    state = "PORT_ACTIVE (4)" if r.port_active else "PORT_DOWN (1)"
    return "\n".join([
        f"hca_id:\t{r.device}",
        "\ttransport:\t\t\tInfiniBand (0)",
        "\tfw_ver:\t\t\t\t40.44.1036",
        f"\tnode_guid:\t\t\t{guid}",
        f"\tsys_image_guid:\t\t\t{guid}",
        "\tvendor_id:\t\t\t0x02c9",
        "\tvendor_part_id:\t\t\t4131",
        "\thw_ver:\t\t\t\t0x0",
        "\tboard_id:\t\t\tNVD0000000087",
        "\tphys_port_cnt:\t\t\t1",
        "\t\tport:\t1",
        f"\t\t\tstate:\t\t\t{state}",
        "\t\t\tmax_mtu:\t\t4096 (5)",
        f"\t\t\tactive_mtu:\t\t{mtu} ({enum})",
        "\t\t\tsm_lid:\t\t\t0",
        "\t\t\tport_lid:\t\t0",
        "\t\t\tport_lmc:\t\t0x00",
        "\t\t\tlink_layer:\t\tEthernet",
        "",
    ])


def main(argv: list[str], ctx) -> int:
    dev = None
    for i, a in enumerate(argv):
        if a in ("-d", "--ib-dev"):
            dev = argv[i + 1]
        elif a.startswith("--ib-dev="):
            dev = a.split("=", 1)[1]
    if dev is None:
        print("\n".join(_block(ctx, r) for r in rails(ctx.world, ctx.station)))
        return 0
    r = rail_by_device(ctx.world, ctx.station, dev)
    if r is None:
        print(f"IB device '{dev}' wasn't found", file=sys.stderr)
        return 255
    print(_block(ctx, r))
    return 0
