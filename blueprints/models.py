"""Blueprints and their revisions (models arrive with the library)."""
