"""`LoweringError`: what every lowering step raises for a net (or op) it cannot lower."""


class LoweringError(ValueError):
    """A net (or one op of it) cannot be lowered; the message names the op, the blob and the remedy."""
