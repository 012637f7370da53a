"""One module per command (or command family) of ``hexeract scheduler``: each has
``add_parser(tree)``, which adds the command and its options to the tree, and the
handler that runs it. Heavy imports (the worker, migration, store backends) happen in
the handlers, so building the tree imports none of them."""
