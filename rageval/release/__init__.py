"""The release path's pure parts: human review, shadow traffic, online evidence, the traffic
import policy, the release decision and the release checklist — functions over values, no store.
Their workflows are :mod:`rageval.workflows.release`."""
