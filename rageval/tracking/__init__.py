"""The only package that imports mlflow: the store facade (:mod:`~rageval.tracking.store`) and the
record layout of rageval's runs (artifact names, manifest, seal, verify)."""
