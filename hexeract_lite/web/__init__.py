"""The local web console: :func:`create_app` serves a store's overview, schedules,
dead letters and timeline as an ASGI application (``hexeract scheduler ui`` runs it).

Needs the ``web`` extra (``pip install 'hexeract_lite[web]'``).
"""

from __future__ import annotations

from .app import create_app

__all__ = ["create_app"]
