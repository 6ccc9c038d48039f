"""Fleet cells cut at their column's edge end in an ellipsis (80 columns: the engine column is 19)."""

from console.ui.widgets.fleet_table import FleetRow, cells, layout_for


def test_a_value_wider_than_its_column_ends_in_an_ellipsis():
    row = FleetRow("A", 0, True, "live", 0.4, "graphs", "capturing CUDA graphs", 230000.0, 256703.0, 90,
                   "gdrdma", "")
    cols = layout_for(80)
    got = dict(zip([label for label, _ in cols], cells(row, 0.93, dict(cols)["GPU memory"], columns=cols),
                   strict=False))
    width = dict(cols)["engine"]
    assert len("capturing CUDA graphs") > width
    assert got["engine"].plain.endswith("…") and got["engine"].cell_len == width
    assert got["station"].plain.startswith("A")  # short values untouched
    wide = layout_for(200)
    full = dict(zip([label for label, _ in wide], cells(row, 0.93, dict(wide)["GPU memory"], columns=wide),
                    strict=False))
    assert full["engine"].plain == "capturing CUDA graphs"
