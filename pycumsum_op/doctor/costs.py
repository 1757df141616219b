"""What a recognised cumsum idiom computes (`describe`), and what it costs against PyCumSum (`cost_sentence`),
from the sizes its constants fix (C, the length of the scanned axis); N, the number of lanes scanned, is
whatever the input brings, so costs are per lane.

PyCumSum takes C adds per lane forward and C backward (the reverse cumulative sum of the output gradient),
and no memory besides its output and its gradient, which every form has.

>>> from pycumsum_op.doctor.patterns import CumsumIdiom, TRIANGULAR_PRODUCT
>>> print(cost_sentence(CumsumIdiom(TRIANGULAR_PRODUCT, (0,), ("MatMul",), "x", "y", -1, False, 128,
...                                 constant="triu")))
Per lane of 128: 16384 multiply-adds forward and 32768 backward (the input's and the constant's gradients), and the 128x128 constant 'triu' (64 KiB) plus its gradient (64 KiB); PyCumSum: 128 adds each way and no constant, 192x fewer operations and 128 KiB less memory.
"""
from .patterns import CUMSUM_OP, SPARSE_LENGTHS, TRIANGULAR_PRODUCT

#: Bytes of the float32 constants and gradients the idioms hold (their usual dtype).
_FLOAT_BYTES = 4


def _size(count: int) -> str:
    """A byte count in words.

    >>> _size(512), _size(65536), _size(3 << 20)
    ('512 bytes', '64 KiB', '3 MiB')
    """
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return "{:.3g} {}".format(count / scale, unit)
    return "{} bytes".format(count)


def cost_sentence(idiom) -> str:
    """One sentence: the idiom's time and memory per lane against PyCumSum's ("" when C is unknown)."""
    columns = idiom.columns
    if not columns or idiom.form not in (SPARSE_LENGTHS, TRIANGULAR_PRODUCT):
        return ""
    if idiom.form == SPARSE_LENGTHS:
        rows = columns * (columns - 1) // 2 if idiom.exclusive else columns * (columns + 1) // 2
        return ("Per lane of {c}: {r} gathered adds forward, and backward a gradient slice of {r} values "
                "({size}) where a dense gradient has {c}; PyCumSum: {c} adds each way, {ratio:.3g}x fewer "
                "operations.".format(c=columns, r=rows, size=_size(rows * _FLOAT_BYTES),
                                     ratio=2 * rows / (2 * columns)))
    square = columns * columns
    constant = _size(square * _FLOAT_BYTES)
    return ("Per lane of {c}: {f} multiply-adds forward and {b} backward (the input's and the constant's "
            "gradients), and the {c}x{c} constant {name!r} ({size}) plus its gradient ({size}); PyCumSum: {c} adds "
            "each way and no constant, {ratio:.3g}x fewer operations and {saved} less memory.".format(
                c=columns, f=square, b=2 * square, name=idiom.constant, size=constant,
                ratio=3 * square / (2 * columns), saved=_size(2 * square * _FLOAT_BYTES)))


def _computes(idiom) -> str:
    if idiom.form == CUMSUM_OP:
        what = "ONNX's CumSum"
    elif idiom.exclusive:
        what = "an EXCLUSIVE cumsum ({} is 0: off by one against torch.cumsum)".format(
            "the last entry" if idiom.reverse else "entry 0")
    else:
        what = "an inclusive cumsum (torch.cumsum)"
    return what + (", reversed (summing from the end)" if idiom.reverse else "")


def describe(idiom) -> str:
    """What the idiom's ops compute, what they cost and what replaces them."""
    along = ("along axis {}".format(idiom.axis) if idiom.axis is not None
             else "along the axis in {!r}".format(idiom.axis_blob))
    misplaced = ""
    if idiom.misplaced:
        misplaced = (" The dense conversion{} {} after SparseLengthsSum cannot cure the gradient: it is born sparse "
                     "at SparseLengthsSum's DATA input, before any conversion of its output.".format(
                         "s" if len(idiom.misplaced) > 1 else "",
                         ", ".join("op #{}".format(index) for index in idiom.misplaced)))
    where = idiom.where()
    cost = cost_sentence(idiom)
    return "{}{} compute{} {} of {!r} {}.{}{} strategy=\"pycumsum\" replaces {} by one net.{} with a dense " \
           "gradient.".format(where[0].upper(), where[1:], "s" if len(idiom.ops) == 1 else "", _computes(idiom),
                              idiom.blob_in, along, misplaced, " " + cost if cost else "",
                              "it" if len(idiom.ops) == 1 else "them", idiom.call())
