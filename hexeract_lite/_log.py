"""The package's loggers: every module that logs takes its logger from here.

A library logs, it does not print: without the application's own logging setup,
Python's last-resort handler would write the worker's warnings to stderr. The
``hexeract_lite`` logger gets a :class:`logging.NullHandler` when this module is first
imported, which is before any of the package's loggers exists (and only then: the
commands that never log, ``hexeract scheduler list`` among them, do not import
:mod:`logging` at all).
"""

from __future__ import annotations

import logging

logging.getLogger("hexeract_lite").addHandler(logging.NullHandler())


def package_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)``, a logger under ``hexeract_lite``."""
    return logging.getLogger(name)
