"""One module per command (or command family) of ``hexeract scheduler``: each has
``add_parser(tree)`` and the handler that runs it, which alone does the heavy imports."""
