"""Serving trained agents over REST: ``POST /api/agents/{id}/act``, serve tokens, call counts."""
