"""Subcommands of the pycumsum-op command line, one module each (see pycumsum_op/cli.py)."""
