"""Run configurations: the strict model of ``params/*.yaml``, loading with ``--set`` overrides, and
sweep files that expand into many configurations."""
