"""Screenshots of the MLflow UI over a rageval store, in headless Chromium: what a person browsing
the runs sees. Not a test (it needs Chromium and Playwright, which the project does not install);
a check to run by hand after `rageval demo`:

    rageval demo                                   # or any store with evaluation and gate runs
    pip install playwright                         # into any environment; uses the system Chromium
    python benchmarks/ui_screenshots.py --out shots/ [--tracking-uri URI] [--chromium /usr/bin/chromium]

Starts `rageval ui` on a free loopback port, opens the newest demo experiment and saves:
experiment.png (the page it opens on), runs.png (the runs table and its metric columns),
figure.png (an evaluation run's figure previewed), notebook.png (its executed notebook as HTML),
gate.png (the gate run's description). Prints what each page showed (title, headings, text found).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from rageval.tracking.store import Tracker

# MLflow 3.17's UI opens in its GenAI mode unless the URL asks for the model-training one.
UI_MODE = "workflowType=machine_learning"

# Chromium on a closed network: no background connections, no first-run or sync traffic.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(url: str, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"the UI did not answer at {url} within {seconds:.0f} s")


def newest(tracker: Tracker, kind: str) -> tuple[str, str]:
    """(experiment ID, run ID) of the newest sealed run of ``kind``."""
    runs = [
        r
        for r in tracker.client.search_runs(experiment_ids=experiments(tracker))
        if r.data.tags.get("rageval.kind") == kind
    ]
    if not runs:
        raise SystemExit(f"no {kind} run in the store: run `rageval demo` first")
    run = max(runs, key=lambda r: r.info.start_time)
    return run.info.experiment_id, run.info.run_id


def experiments(tracker: Tracker) -> list[str]:
    return [e.experiment_id for e in tracker.client.search_experiments()]


# Metric columns a person adds to the runs table first: the headline of every evaluation run.
HEADLINE = (
    "nDCG_at_10",
    "R_at_20",
    "Hit_at_5",
    "MRR",
    "latency/total/p95_ms",
    "context_tokens_mean",
    "permission_leaks",
)


def close_assistant(page: Any) -> None:
    """Close the MLflow Assistant side panel (a third of the page) when it is open."""
    close = page.locator('[data-component-id="mlflow.assistant.chat_panel.close"]')
    if close.count():
        close.first.click()
        time.sleep(1)


def show_columns(page: Any, metrics: tuple[str, ...]) -> None:
    """Add ``metrics`` as columns of the runs table, through its column picker, as a person would."""
    page.get_by_text("Show more columns").click()
    time.sleep(1)
    picker = page.locator("[role=dialog]").last
    for metric in metrics:
        picker.get_by_text(metric, exact=True).first.click()
        time.sleep(0.3)
    page.keyboard.press("Escape")
    time.sleep(2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("shots"))
    parser.add_argument("--tracking-uri", default=None)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    tracker = Tracker(args.tracking_uri)
    experiment, evaluation = newest(tracker, "evaluation")
    _, gate = newest(tracker, "gate")
    args.out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    rageval = Path(sys.executable).parent / "rageval"
    command = [str(rageval), "ui", "--port", str(port), "--tracking-uri", tracker.uri]
    server = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    mode = f"?{UI_MODE}"
    pages = {
        "experiment.png": f"{base}/#/experiments/{experiment}{mode}",
        "runs.png": f"{base}/#/experiments/{experiment}/runs{mode}",
        "figure.png": f"{base}/#/experiments/{experiment}/runs/{evaluation}/artifacts/figures/slices.png{mode}",
        "notebook.png": f"{base}/#/experiments/{experiment}/runs/{evaluation}/artifacts/notebook/evaluate.html{mode}",
        "gate.png": f"{base}/#/experiments/{experiment}/runs/{gate}{mode}",
    }
    try:
        wait_for(f"{base}/health")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=args.chromium, args=CHROMIUM_FLAGS)
            for name, url in pages.items():
                page = browser.new_page(viewport={"width": 2400, "height": 1100})  # a fresh page: no state carried over
                page.goto(url)
                page.wait_for_load_state("load")
                time.sleep(8)  # the UI keeps polling (never network-idle); give it time to render
                close_assistant(page)
                if name == "runs.png":
                    show_columns(page, HEADLINE)
                page.screenshot(path=str(args.out / name))
                text = " ".join(page.inner_text("body").split())
                print(f"{name}: {url}\n  {text[:600]}\n")
                page.close()
            browser.close()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    print(f"screenshots in {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
