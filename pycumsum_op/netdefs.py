"""NetDef helpers shared by the doctor and the converters (protobuf only: no kernels, no torch)."""


def blob_names(netdef) -> set:
    """Every blob name a NetDef uses (external inputs/outputs, op inputs/outputs)."""
    names = set(netdef.external_input) | set(netdef.external_output)
    for op in netdef.op:
        names.update(op.input)
        names.update(op.output)
    return names
