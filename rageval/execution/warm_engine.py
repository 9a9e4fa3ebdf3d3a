"""papermill's nbclient engine, given a started kernel (``km``) to run on: nbclient leaves a kernel
it did not start running, and its client's sockets open; this closes the sockets, and the kernel's
:class:`~rageval.execution.kernels.WarmKernel` kills it (without the graceful shutdown's 0.1–1 s of
polling: the last cell has run and its outputs are in). Its client is :class:`PromptKernelClient`.

Imported (papermill with it) only when a notebook runs on a warm kernel:
:func:`rageval.execution.notebooks.execute_notebook` registers :class:`WarmEngine` then.
"""

from __future__ import annotations

import logging
import time
from queue import Empty
from typing import Any

from jupyter_client.asynchronous import AsyncKernelClient
from papermill.clientwrap import PapermillNotebookClient
from papermill.engines import NBClientEngine
from papermill.iorw import write_ipynb

# How long a new client waits for the kernel's status on IOPub after its kernel_info reply, before it
# asks again (jupyter_client waits 0.2 s). The status is published before the reply is sent.
IOPUB_WAIT_S = 0.02


class PromptKernelClient(AsyncKernelClient):  # type: ignore[misc]
    """jupyter_client's client, ready without a 0.2 s wait at every notebook's start (measured: 0.21 s
    of each `rageval run` and sweep member). Its IOPub socket has just connected when it first asks
    for kernel_info, and ZMQ drops what the kernel publishes until the subscription reaches it: the
    "busy" of that first request is lost, and jupyter_client's readiness check waits 0.2 s for it before
    asking again. Here it asks again after :data:`IOPUB_WAIT_S`; otherwise it is jupyter_client's check."""

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        while True:
            self.kernel_info()
            try:
                reply = await self.shell_channel.get_msg(timeout=1)
            except Empty:
                reply = None
            if reply is not None and reply["msg_type"] == "kernel_info_reply":
                try:
                    await self.iopub_channel.get_msg(timeout=IOPUB_WAIT_S)
                except Empty:
                    pass  # IOPub not subscribed yet when that status went out: ask again
                else:
                    self._handle_kernel_info_reply(reply)
                    return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout} seconds")


class WarmClient(PapermillNotebookClient):  # type: ignore[misc]
    def execute(self, **kwargs: Any) -> Any:
        self.km.client_factory = PromptKernelClient  # the client nbclient makes for this notebook
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
