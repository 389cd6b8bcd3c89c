"""Data: sources of rows, value parsing, column kinds and the pipeline."""
