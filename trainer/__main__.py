"""``python -m trainer``: see :mod:`trainer.cli.main`."""

import sys

from trainer.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
