"""``python -m trainer``: the command line (:mod:`trainer.cli.main` parses, ``commands`` runs,
``inputs`` reads files and flags, ``output`` prints)."""
