"""Deployment tooling that runs without the virtualenv (standard library only)."""
