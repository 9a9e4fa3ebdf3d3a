"""The release path's workflows: review, shadow, online, the release record, and promotion and
rollback on the MLflow registry. Their pure parts are :mod:`rageval.release`."""
