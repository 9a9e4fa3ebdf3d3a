"""One configuration run in process: benchmark and chunks through the retrieval pipeline into
rankings, per-stage measures, the evidence trail and the context budget. Pure: nothing is recorded
here; :mod:`rageval.tracking` records an :class:`~rageval.experiment.run.ExperimentResult`."""
