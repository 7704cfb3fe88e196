"""Scripts that reproduce the figures of docs/analysis.md (`python -m analysis.scripts.NAME`)."""
