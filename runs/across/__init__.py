"""Across runs: the figures of the history, model, leaderboard and overview pages and their API (``figures``),
and their pages (``views``)."""
