"""The scan registry against what reads it: the docs' scan tables, torch_versions' capabilities, the ATen
gradient forms and Caffe2's operators. (A scan registered at run time: tests/test_new_scan.py.)"""
import os
import re

import pytest
from caffe2.python import workspace

from pycumsum_op.scans import CONVERTERS, SCANS, AtenForm, PortableForm, Refused, aten_backward
from pycumsum_op.torch_versions import SINCE

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")
ARGUMENT_NAMES = {"`exclusive`": "exclusive", "`reverse`": "reverse", "`dtype=`": "dtype"}


def table_rows(document: str, header: str) -> list:
    """The rows (lists of cells) of the Markdown table in docs/``document`` whose header row starts with ``header``."""
    with open(os.path.join(DOCS, document), encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def documented(rows, pattern: str) -> dict:
    """{op name: its row} for every op name ``pattern`` finds in a row's first cell."""
    return {op_name: row for row in rows for op_name in re.findall(pattern, row[0])}


def arguments_in(text: str) -> frozenset:
    return frozenset(name for marker, name in ARGUMENT_NAMES.items() if marker in text)


def test_the_ops_table_lists_the_family_as_registered():
    """docs/ops.md's scan family table (PyCumSum has its own section): one row per op, its arguments,
    its outputs and the value an exclusive scan starts with, as the registry says."""
    rows = documented(table_rows("ops.md", "| net method (function form, brew helper)"), r"`net\.(\w+)\(")
    family = {entry.op_name: entry for entry in SCANS.values() if entry.name != "cumsum"}
    assert sorted(rows) == sorted(family)
    for op_name, row in rows.items():
        entry = family[op_name]
        text = " ".join(row)
        assert arguments_in(text) == entry.arguments, op_name
        assert ("indices" in row[2]) == (len(entry.outputs) == 2), op_name
        assert "`torch.{}`".format(entry.name) in row[1]
        if entry.identity is not None:
            assert "starts with {})".format({1.0: "1", float("-inf"): "-inf"}[entry.identity]) in row[3], op_name


def test_the_lowering_table_lists_every_aten_form_as_registered():
    """docs/lowering.md's table: a row per scan with an ATen form, its arguments and its ATen operator."""
    rows = documented(table_rows("lowering.md", "| scan | forward to `\"aten\"`"), r"`(Py\w+)`")
    lowered = {entry.op_name: entry for entry in SCANS.values() if isinstance(entry.aten, AtenForm)}
    assert sorted(rows) == sorted(lowered)
    for op_name, row in rows.items():
        entry = lowered[op_name]
        assert arguments_in(row[0]) == entry.arguments, op_name
        assert "`{}`".format(entry.aten.operator) in row[1], op_name


@pytest.mark.parametrize("name", sorted(SCANS))
def test_each_entry_names_what_exists(name):
    """Capabilities are torch_versions' names, gradient forms are ones aten_gradient emits, portable
    operators are Caffe2's, refusals say why."""
    entry = SCANS[name]
    if isinstance(entry.aten, AtenForm):
        assert {entry.aten.needs, entry.aten.backward_needs} - {None} <= set(SINCE)
        assert entry.aten.backward is getattr(aten_backward, entry.aten.backward.__name__)
    if isinstance(entry.portable, PortableForm):
        assert entry.portable.combine in workspace.RegisteredOperators()
    for target in CONVERTERS:
        form = entry.form(target)
        assert not isinstance(form, Refused) or len(form.reason) > 20
