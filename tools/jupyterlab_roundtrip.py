"""Edit, run and save notebooks through a real JupyterLab server, as its front end does, then show `git status`.

    .venv/bin/python tools/jupyterlab_roundtrip.py notebooks/scratch/evaluate.ipynb \
        --set 'overrides=["retrieval.stages.0.k1=1.2"]'
    .venv/bin/python tools/jupyterlab_roundtrip.py notebooks/evaluate.ipynb        # Run All + Save, no edit

Starts `jupyter lab` on 127.0.0.1 (a token of its own, no browser), and for each notebook: reads it
through the contents API, sets the parameters given with ``--set NAME=PYTHON-EXPRESSION`` in its
parameters cell, starts a kernel by a session (``POST /api/sessions``), runs every code cell over
the kernel's websocket channels collecting the outputs as JupyterLab does, and saves the notebook
back through the contents API (``PUT``: JupyterLab's Save). Then it stops the server and prints
``git status --porcelain --untracked-files=all``. Documented in docs/notebooks.md ("Iterating in
JupyterLab"); the same round trip is tested, in process, by tests/test_experience.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import secrets
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.websocket import websocket_connect

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """One `jupyter lab` server process and the REST calls JupyterLab's front end makes."""

    def __init__(self, root: Path) -> None:
        self.port, self.token = free_port(), secrets.token_hex(16)
        command = [
            sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={self.port}", "--ip=127.0.0.1",
            f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={root}",
            "--allow-root",  # containers run as root; the server listens on 127.0.0.1 only, with a token
        ]  # fmt: skip
        self.process = subprocess.Popen(command, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.base = f"http://127.0.0.1:{self.port}"
        self.http = AsyncHTTPClient()

    async def call(self, method: str, path: str, body: object = None) -> dict:
        request = HTTPRequest(
            f"{self.base}{path}",
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
            body=None if body is None else json.dumps(body),
            request_timeout=300,
        )
        response = await self.http.fetch(request)
        return json.loads(response.body) if response.body else {}

    async def ready(self) -> None:
        for _ in range(120):
            if self.process.poll() is not None:
                break
            try:
                await self.call("GET", "/api/status")
                return
            except (ConnectionError, OSError):
                await asyncio.sleep(0.5)
        raise SystemExit(f"jupyter lab did not answer on {self.base}: {self.process.stderr.read().decode()[-2000:]}")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def set_parameters(cell_source: str, values: dict[str, str]) -> str:
    """The parameters cell with ``name: type = value`` lines given new values (the rest kept)."""
    for name, value in values.items():
        pattern = re.compile(rf"^({re.escape(name)}\s*:[^=]*=\s*)(.*?)(\s+#.*)?$", re.MULTILINE)
        cell_source, n = pattern.subn(lambda m, v=value: m.group(1) + v + (m.group(3) or ""), cell_source)
        if n != 1:
            raise SystemExit(f"--set {name}: no line `{name}: TYPE = VALUE` in the parameters cell")
    return cell_source


async def run_cell(ws, session: str, code: str) -> tuple[list[dict], int | None, str]:
    """Execute one cell; its outputs as nbformat dicts, its execution count, and its status."""
    msg_id = uuid.uuid4().hex
    header = {"msg_id": msg_id, "msg_type": "execute_request", "session": session, "username": "lab",
              "version": "5.3", "date": ""}  # fmt: skip
    content = {"code": code, "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False}
    await ws.write_message(json.dumps(
        {"header": header, "parent_header": {}, "metadata": {}, "content": content, "channel": "shell"}
    ))  # fmt: skip
    outputs: list[dict] = []
    count, status, idle, replied = None, "?", False, False
    while not (idle and replied):
        msg = json.loads(await ws.read_message())
        if msg.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        kind, body = msg["header"]["msg_type"], msg["content"]
        if kind == "stream":
            outputs.append({"output_type": "stream", "name": body["name"], "text": body["text"]})
        elif kind in ("display_data", "execute_result"):
            out = {"output_type": kind, "data": body["data"], "metadata": body.get("metadata", {})}
            if kind == "execute_result":
                out["execution_count"] = body["execution_count"]
            outputs.append(out)
        elif kind == "error":
            outputs.append({"output_type": "error", **{k: body[k] for k in ("ename", "evalue", "traceback")}})
        elif kind == "execute_reply":
            count, status, replied = body.get("execution_count"), body["status"], True
        elif kind == "status" and body["execution_state"] == "idle":
            idle = True
    return outputs, count, status


async def round_trip(lab: Lab, notebook: str, values: dict[str, str]) -> None:
    path = quote(notebook)
    model = await lab.call("GET", f"/api/contents/{path}?content=1&type=notebook")
    nb = model["content"]
    if values:
        cell = next(c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", []))
        cell["source"] = set_parameters(cell["source"], values)
        print(f"{notebook}: parameters cell edited: {', '.join(f'{k} = {v}' for k, v in values.items())}")
    session = await lab.call("POST", "/api/sessions", {"path": notebook, "type": "notebook", "name": "",
                                                       "kernel": {"name": "python3"}})  # fmt: skip
    kernel = session["kernel"]["id"]
    ws = await websocket_connect(
        HTTPRequest(f"ws://127.0.0.1:{lab.port}/api/kernels/{kernel}/channels?session_id={session['id']}",
                    headers={"Authorization": f"token {lab.token}"})
    )  # fmt: skip
    started = time.monotonic()
    failed = 0
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        cell["outputs"], cell["execution_count"], status = await run_cell(ws, session["id"], cell["source"])
        failed += status != "ok"
    ws.close()
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
    stderr = [o["text"] for o in outputs if o["output_type"] == "stream" and o["name"] == "stderr"]
    print(f"{notebook}: Run All: {len(outputs)} outputs, {failed} failed cells, {time.monotonic() - started:.1f} s")
    print(f"{notebook}: stderr outputs (warnings): {len(stderr)}" + "".join(f"\n  {t.strip()}" for t in stderr))
    await lab.call("PUT", f"/api/contents/{path}", {"type": "notebook", "format": "json", "content": nb})
    print(f"{notebook}: saved through the contents API (JupyterLab's Save)")
    await lab.call("DELETE", f"/api/sessions/{session['id']}")


async def main_async(args: argparse.Namespace) -> int:
    values = dict(item.split("=", 1) for item in args.set)
    lab = Lab(args.root)
    try:
        await lab.ready()
        print(f"jupyter lab on 127.0.0.1:{lab.port}")
        for notebook in args.notebooks:
            await round_trip(lab, notebook, values)
    finally:
        lab.stop()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="+", help="notebook paths relative to the repository root")
    parser.add_argument("--set", action="append", default=[], help="NAME=PYTHON-EXPRESSION in the parameters cell")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this tool's)")
    args = parser.parse_args()
    code = asyncio.run(main_async(args))
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=args.root,
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    print("$ git status --porcelain --untracked-files=all")
    print(status if status else "(nothing)")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
