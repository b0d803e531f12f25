#!/usr/bin/env python
"""Django's command-line utility for Paddock."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings")
    from django.core.exceptions import ImproperlyConfigured

    try:
        import django
        from django.core.management import execute_from_command_line

        django.setup()
    except ImproperlyConfigured as exc:
        # One line naming the variable, no traceback.
        sys.stderr.write(f"configuration error: {exc}\n")
        sys.exit(2)
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
