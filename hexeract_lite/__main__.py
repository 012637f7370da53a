"""``python -m hexeract_lite``: the ``hexeract`` command."""

from .cli import main

raise SystemExit(main())
