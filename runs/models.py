"""Runs, responses and point assessments (models arrive with the run engine)."""
