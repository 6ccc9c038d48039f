"""GPU health parsing and flags: every variant of a row (``[N/A]``, ``N/A``,
``[Not Supported]``, an NVML error in a cell, an error line among good rows, CRLF, padding), the
older drivers' field names, flags only when they say something, GB10 never flagged."""

from __future__ import annotations

import pytest

from console.probes import gpu_health as gh

B300 = "1, 00000001:01:00.0, 0x0000000000000000, 5, 5, 16, 16, 0, [N/A], No, 850.10, 1000.00, 1000.00, 1965, 2100, 97"
GB10 = ("0, 0000000F:01:00.0, 0x0000000000000000, [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], [N/A], 11.50, [N/A], "
        "[N/A], 2405, 3003, 50")


def test_a_healthy_busy_gpu_has_no_flag():
    (h,) = gh.parse_health(B300)
    assert (h.index, h.bus_id, h.reasons, h.pcie_gen, h.pcie_width_max, h.ecc_uncorrected) == (
        1, "00000001:01:00.0", 0, 5, 16, 0)
    assert h.retired_pending is None and h.remap_pending is False and h.power_limit_w == 1000.0
    assert gh.flags(h) == [] and gh.worst(gh.flags(h)) is None


def test_gb10_na_fields_are_missing_never_a_flag():
    (h,) = gh.parse_health(GB10)
    assert h.pcie_gen is None and h.ecc_uncorrected is None and h.power_limit_w is None and h.error is None
    assert gh.flags(h) == []


@pytest.mark.parametrize("na", ["[N/A]", "N/A", "[Not Supported]", "Not Supported", "[Unknown Error]", ""])
def test_every_missing_form_is_missing(na):
    row = B300.replace(", 0, [N/A], No,", f", {na}, {na}, {na},")
    (h,) = gh.parse_health(row)
    assert h.ecc_uncorrected is None and h.remap_pending is None and gh.flags(h) == []


def test_crlf_padding_and_an_error_line_among_good_rows():
    text = ("  " + B300 + "  \r\n"
            "Unable to determine the device handle for GPU00000000:02:00.0: Unknown Error\r\n"
            + B300.replace("1, 00000001", "3, 00000003") + "\r\n\r\n")
    rows = gh.parse_health(text)
    assert [h.index for h in rows] == [1, -1, 3]
    assert rows[1].error.startswith("Unable to determine") and rows[1].bus_id == "00000000:02:00.0"
    assert gh.flags(rows[1]) == []  # the GPU loop says the GPU is lost; health adds no false flag


def test_the_older_driver_refusal_is_an_invalid_field():
    with pytest.raises(gh.InvalidField) as exc:
        gh.parse_health('Field "clocks_event_reasons.active" is not a valid field to query.\n')
    assert exc.value.name == "clocks_event_reasons.active"
    assert "clocks_throttle_reasons.active" in gh.query(gh.THROTTLE_PREFIX)
    assert gh.fields(gh.THROTTLE_PREFIX)[3:] == gh.fields()[3:]


def test_pcie_trained_down_is_a_flag_while_busy_but_gen1_at_idle_is_power_saving():
    down = B300.replace(", 5, 5, 16, 16,", ", 3, 5, 8, 16,")
    assert [f.text for f in gh.flags(gh.parse_health(down)[0])] == ["PCIe Gen3 x8 (max Gen5 x16)"]
    idle = B300.replace("0x0000000000000000, 5, 5,", "0x0000000000000001, 1, 5,")
    assert gh.flags(gh.parse_health(idle)[0]) == []


def test_ecc_pending_remap_power_cap_and_throttling():
    row = (B300.replace(", 0, [N/A], No,", ", 2, [N/A], Yes,").replace("1000.00, 1000.00", "600.00, 1000.00")
           .replace("0x0000000000000000", "0x0000000000000048").replace("1965, 2100", "1200, 2100"))
    fl = gh.flags(gh.parse_health(row)[0])
    assert [(f.kind, f.level, f.text) for f in fl] == [
        ("ecc", "error", "2 uncorrected ECC"),
        ("pending", "warn", "row remap pending (reset)"),
        ("throttle", "error", "throttled: HW slowdown, thermal (HW) (SM 1200/2100 MHz)"),
        ("power-cap", "warn", "power-capped 600/1000 W")]
    assert gh.worst(fl) == "error" and all(f.fix for f in fl)
    d = gh.to_dict(gh.parse_health(row)[0])
    assert d["clocks_event_reasons"] == "0x0000000000000048" and d["ecc_uncorrected"] == 2 and len(d["flags"]) == 4


def test_rounds_of_the_loop():
    r = gh.HealthRounds(None)
    assert r.feed(B300) is None
    assert r.feed(B300.replace("1, 00000001", "2, 00000002")) is None
    first = r.feed(B300)
    assert [h.index for h in first] == [1, 2] and r.expected == 2
    assert r.feed(B300.replace("1, 00000001", "2, 00000002")) is not None
    assert r.feed("Failed to initialize NVML: Driver/library version mismatch") is None
