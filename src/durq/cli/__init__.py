"""The ``durq`` command line: one module per verb group, wired in :mod:`durq.cli.main`."""
