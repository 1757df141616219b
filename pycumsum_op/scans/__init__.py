"""The scan registry: one `Scan` entry per scan op, which every layer above reads.

`family` registers torch's scans (cumsum, cumprod, cummax, cummin, logcumsumexp) on import;
`register` adds another one, anywhere, at any time.
"""
from . import aten_backward, family
from .registry import (ALL_ARGUMENTS, CONVERTERS, INPUT, SCANS, AtenForm, PortableForm, Refused, Scan, listen,
                       register, scan, unregister)

__all__ = ["Scan", "AtenForm", "PortableForm", "Refused", "SCANS", "CONVERTERS", "ALL_ARGUMENTS", "INPUT", "scan",
           "register", "unregister", "listen", "family", "aten_backward"]
