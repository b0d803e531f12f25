"""Loaded first (``-p tests.pytest_env`` in pyproject): test-run defaults for settings.

Tests use the development defaults (``DEBUG=1``: random persisted SECRET_KEY under var/)
unless the environment (CI) sets the variables itself.
"""

import os

os.environ.setdefault("DEBUG", "1")
os.environ.setdefault(
    "PADDOCK_VAR_DIR", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "var", "test")
)
