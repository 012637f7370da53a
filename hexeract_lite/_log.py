"""The package's loggers: every module that logs takes its logger from here, and the
``hexeract_lite`` logger gets a :class:`logging.NullHandler` when this is first imported.
"""

from __future__ import annotations

import logging

logging.getLogger("hexeract_lite").addHandler(logging.NullHandler())


def package_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)``, a logger under ``hexeract_lite``."""
    return logging.getLogger(name)
