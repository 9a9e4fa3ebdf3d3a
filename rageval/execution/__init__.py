"""Execution infrastructure: notebook kernels (warm kernels, the kernel pool, the fork server,
preloading), papermill execution, a sweep's notebook slots, the result hand-off, the HTML render,
and the local tracking server's processes. The workflows orchestrate; this runs what they ask."""
