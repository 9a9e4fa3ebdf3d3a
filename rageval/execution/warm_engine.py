"""papermill's nbclient engine, given a started kernel (``km``) to run on: nbclient leaves a kernel
it did not start running, and its client's sockets open; this closes the sockets, and the kernel's
:class:`~rageval.execution.kernels.WarmKernel` kills it (without the graceful shutdown's 0.1–1 s of
polling: the last cell has run and its outputs are in).

Imported (papermill with it) only when a notebook runs on a warm kernel:
:func:`rageval.execution.notebooks.execute_notebook` registers :class:`WarmEngine` then.
"""

from __future__ import annotations

import logging
from typing import Any

from papermill.clientwrap import PapermillNotebookClient
from papermill.engines import NBClientEngine
from papermill.iorw import write_ipynb


class WarmClient(PapermillNotebookClient):  # type: ignore[misc]
    def execute(self, **kwargs: Any) -> Any:
        try:
            return super().execute(cleanup_kc=False, **kwargs)
        finally:  # the client's sockets now; the kernel is killed by its WarmKernel, unwaited
            if self.kc is not None:
                self.kc.stop_channels()
                self.kc = None


class WarmEngine(NBClientEngine):  # type: ignore[misc]
    @classmethod
    def execute_notebook(cls, nb: Any, kernel_name: str, output_path: Any = None, **kwargs: Any) -> Any:
        # papermill writes the whole notebook at every cell's start and end (about 40 writes of
        # the evaluation notebook, each a JSON dump and a schema check, in this process while
        # it logs the handed-back result); the run reads it once, after the last cell. So it is
        # written once: by papermill after the last cell (or with a cell's error), and here,
        # as far as it ran, when the execution itself fails (a timeout, an interrupt).
        try:
            return super().execute_notebook(nb, kernel_name, output_path=None, **kwargs)
        except BaseException:
            if output_path is not None:
                write_ipynb(nb, output_path)
            raise

    @classmethod
    def execute_managed_notebook(  # long: overrides papermill's NBClientEngine.execute_managed_notebook, whose signature is papermill's
        cls,
        nb_man: Any,
        kernel_name: str,
        log_output: bool = False,
        stdout_file: Any = None,
        stderr_file: Any = None,
        start_timeout: int = 60,
        execution_timeout: int | None = None,
        **kwargs: Any,
    ) -> Any:
        kwargs.pop("input_path", None)
        kwargs.pop("kernel_manager_class", None)  # the kernel is started already
        return WarmClient(
            nb_man,
            timeout=execution_timeout,
            startup_timeout=start_timeout,
            kernel_name=kernel_name,
            log=logging.getLogger("papermill"),
            log_output=log_output,
            stdout_file=stdout_file,
            stderr_file=stderr_file,
            **kwargs,
        ).execute()
