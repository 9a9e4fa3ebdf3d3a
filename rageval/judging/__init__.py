"""Relevance judging: pools from runs, blind assessor sheets, imported labels and adjudication."""
