"""Screenshots of the MLflow UI over a rageval store, in headless Chromium: what a person browsing
the runs sees. Not a test (it needs Chromium and chromedriver, which the project does not install);
a check to run by hand after `rageval demo`:

    rageval demo --tracking-uri sqlite:////tmp/demo/mlflow.db
    apt-get install chromium chromium-driver       # Debian's; selenium drives it (a dependency here)
    python tools/ui_screenshots.py --out docs/screenshots/experience/ --tracking-uri sqlite:////tmp/demo/mlflow.db

Starts `rageval ui` on a free loopback port and saves, each page opened fresh in model-training
mode: runs.png (the evaluations' runs table with its default columns), evaluation.png (an
evaluation run's page), charts.png (the experiment's chart view, MLflow's default: by key),
charts-headline.png and runs-headline.png (the saved view "Headline first": the configured measures
first, as charts and as runs-table columns), release-link.png (the page a link
in the release run's description opens, clicked as a person would), release.png (the release run),
registry.png (the registered model's versions). Prints what each page showed and the address
each link opened, and counts the columns (params, metric keys, tags) of every experiment.
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
from rageval.tracking.views import view_link

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


def columns(tracker: Tracker) -> dict[str, tuple[int, int, int]]:
    """Per experiment: the params, metric keys and tags (``mlflow.*`` aside) its runs table can show."""
    out = {}
    for experiment in tracker.client.search_experiments():
        runs = tracker.client.search_runs([experiment.experiment_id], max_results=5000)
        params = {k for r in runs for k in r.data.params}
        metrics = {k for r in runs for k in r.data.metrics}
        tags = {k for r in runs for k in r.data.tags if not k.startswith("mlflow.")}
        if runs:
            out[experiment.name] = (len(params), len(metrics), len(tags))
    return out


def close_assistant(driver: Any) -> None:
    """Close the MLflow Assistant side panel (a third of the page) when it is open."""
    from selenium.webdriver.common.by import By

    for button in driver.find_elements(By.CSS_SELECTOR, '[data-component-id="mlflow.assistant.chat_panel.close"]'):
        button.click()
        time.sleep(1)


def browser(chromium: str, chromedriver: str) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in [*CHROMIUM_FLAGS, "--headless=new", "--window-size=1600,1000"]:
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(chromedriver), options=options)


def shoot(driver: Any, url: str, out: Path, settle: float = 8) -> str:
    driver.get(url)
    time.sleep(settle)  # the UI keeps polling (never network-idle); give it time to render
    close_assistant(driver)
    driver.save_screenshot(str(out))
    from selenium.webdriver.common.by import By

    return " ".join(driver.find_element(By.TAG_NAME, "body").text.split())


def follow_release_link(driver: Any, url: str, out: Path) -> str:
    """Open the release run and click the first link its description holds to another run."""
    from selenium.webdriver.common.by import By

    shoot(driver, url, out.with_name("release.png"))
    links = [
        a
        for a in driver.find_elements(By.CSS_SELECTOR, "a[href*='/runs/']")
        if "#/experiments/" in (a.get_attribute("href") or "")
    ]
    if not links:
        return "no run link in the release run's description"
    target = links[0].get_attribute("href")
    driver.get(target)
    time.sleep(8)
    close_assistant(driver)
    driver.save_screenshot(str(out))
    text = " ".join(driver.find_element(By.TAG_NAME, "body").text.split())
    return f"link {target} opened {driver.current_url}: {text[:300]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("shots"))
    parser.add_argument("--tracking-uri", default=None)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args()

    tracker = Tracker(args.tracking_uri)
    for name, (p, m, t) in columns(tracker).items():
        print(f"columns of {name}: {p} params + {m} metric keys + {t} tags = {p + m + t}")
    experiment, evaluation = newest(tracker, "evaluation")
    _, release = newest(tracker, "release")
    release_experiment = tracker.run(release).experiment_id
    model = tracker.run(release).tags.get("rageval.release.family", "")
    args.out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    rageval = Path(sys.executable).parent / "rageval"
    command = [str(rageval), "ui", "--port", str(port), "--tracking-uri", tracker.uri]
    server = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    mode = f"?{UI_MODE}"
    pages = {
        "runs.png": f"{base}/#/experiments/{experiment}/runs{mode}",
        "evaluation.png": f"{base}/#/experiments/{experiment}/runs/{evaluation}{mode}",
        "charts.png": f"{base}/#/experiments/{experiment}/runs{mode}&compareRunsMode=CHART",
        # the evaluations' saved view "Headline first" (rageval.tracking.views), as the description links it
        "charts-headline.png": f"{base}/{view_link(experiment)}",
        "runs-headline.png": f"{base}/{view_link(experiment, charts=False)}",
        "registry.png": f"{base}/#/models/{model}{mode}",
    }
    driver = None
    try:
        wait_for(f"{base}/health")
        driver = browser(args.chromium, args.chromedriver)
        for name, url in pages.items():
            text = shoot(driver, url, args.out / name)
            print(f"{name}: {url}\n  {text[:600]}\n")
        release_url = f"{base}/#/experiments/{release_experiment}/runs/{release}{mode}"
        print(f"release-link.png: {follow_release_link(driver, release_url, args.out / 'release-link.png')}\n")
    finally:
        if driver is not None:
            driver.quit()
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    print(f"screenshots in {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
