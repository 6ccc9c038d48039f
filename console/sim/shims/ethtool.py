"""Simulated ``ethtool IFACE`` (``Settings for ...`` with Speed / Link detected)."""

from __future__ import annotations

import sys

from console.sim.shims._net import rail_by_netdev


def main(argv: list[str], ctx) -> int:
    args = [a for a in argv if not a.startswith("-")]
    if not args:
        print("ethtool: bad command line argument(s)\nFor more information run ethtool -h", file=sys.stderr)
        return 1
    iface = args[-1]
    r = rail_by_netdev(ctx.world, ctx.station, iface)
    if r is None:
        print(f"netlink error: no device matches name ({iface})", file=sys.stderr)
        return 1
    if "-S" in argv:
        from console.sim.workbench import nic_rdma_bytes

        print("NIC statistics:\n     rx_packets: 0\n     tx_packets: 0\n     rx_symbol_err_phy: 0\n"
              "     rx_crc_errors_phy: 0\n     link_down_events_phy: 0")
        for k, v in nic_rdma_bytes(ctx.world, ctx.station, iface).items():
            print(f"     {k}: {v}")
        return 0
    speed = f"{r.speed_mbps}Mb/s" if r.up else "Unknown!"
    duplex = "Full" if r.up else "Unknown! (255)"
    lines = [
        f"Settings for {iface}:",
        "\tSupported ports: [ FIBRE ]",
        "\tSupported link modes:   Not reported",
        "\tSupports auto-negotiation: Yes",
        f"\tSpeed: {speed}",
        f"\tDuplex: {duplex}",
        "\tAuto-negotiation: on",
        "\tPort: Direct Attach Copper",
        "\tPHYAD: 0",
        "\tTransceiver: internal",
        f"\tLink detected: {'yes' if r.up else 'no'}",
    ]
    print("\n".join(lines))
    return 0
