"""Label a handful of docs-benchmark items in the labeling view, in headless Chromium, as an
assessor would; then review migrated labels in the same view. Screenshots of both are saved.

    python tools/label_docs_in_browser.py BENCHMARK --out DIR [--shots docs/screenshots]

BENCHMARK is the docs benchmark built by the three commands of docs/docs-benchmark.md. In order:

1. pool: each piece of evidence of ``LABELS`` (a question, a page, a quote of it, a grade) becomes a
   pool item from targeted search, the chunk (default chunking) that holds the quote; the pool and
   its blank ``sheet.csv`` go to ``DIR/pool``;
2. label: ``rageval judge label-view`` on that sheet (a real server on 127.0.0.1), opened in
   headless Chromium (selenium); for each item the quote is selected in the document with a DOM
   ``Range`` (as a mouse leaves it), a grade picked, the assessor named, Save clicked;
3. ``rageval judge import`` and ``rageval judge adjudicate`` (no disagreement, so an empty
   adjudication file) into ``DIR/docs-v2``; each new judgment's offsets must be the quote's;
4. review: ``rageval migrate-labels DIR/docs-v2 --from <default chunking> --to <100-word chunks>``,
   then the review file in the same view: the first row accepted, the second accepted at another
   grade (moved), the third rejected; the file must then hold those decisions.

Offline; needs Debian's ``chromium`` and ``chromium-driver`` and ``pip install selenium``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rageval.benchmark.chunking import chunk_document  # noqa: E402
from rageval.benchmark.loading import load_benchmark  # noqa: E402
from rageval.benchmark.migration import read_review  # noqa: E402
from rageval.benchmark.schema import ChunkingConfig  # noqa: E402
from rageval.judging import pool, write_pool  # noqa: E402
from rageval.judging.labelview import SheetSource, open_sheet, read_sheet, serve  # noqa: E402
from rageval.judging.schema import ExtraItem  # noqa: E402

ASSESSOR = "browser-assessor"
SHOTS = ("docs-label-view.png", "docs-migration-review.png")
# Evidence the quote helper's questions.yaml does not hold: (question, page, quote, grade).
LABELS = [
    ("hx-catch-all-errors", "httpx/compatibility", "where as `httpx` exposes a top level `HTTPError`", 1),
    ("hx-catch-all-errors", "httpx/quickstart", "except httpx.HTTPError as exc:", 2),
    ("hx-enable-http2", "httpx/advanced/transports", '"all://": httpx.HTTPTransport(http2=True),', 1),
    (
        "hx-session-equivalent",
        "httpx/advanced/clients",
        "the `Client` will reuse the underlying TCP connection, instead of recreating one for every single request.",
        2,
    ),
    ("hx-session-equivalent", "httpx/async", "make sure you're not instantiating multiple client instances", 1),
]

# Selects arguments[0] in #doc (first occurrence at or after arguments[1], JS string offsets) as a
# mouse would leave it, and sends the mouseup the page listens to.
SELECT = """
const doc = document.getElementById('doc');
const at = doc.textContent.indexOf(arguments[0], arguments[1]);
if (at < 0) return 'not found';
const walker = document.createTreeWalker(doc, NodeFilter.SHOW_TEXT);
const range = document.createRange();
let seen = 0, node;
while ((node = walker.nextNode())) {
  const size = node.data.length;
  if (seen <= at && at < seen + size) range.setStart(node, at - seen);
  const end = at + arguments[0].length;
  if (seen < end && end <= seen + size) range.setEnd(node, end - seen);
  seen += size;
}
const chosen = window.getSelection();
chosen.removeAllRanges();
chosen.addRange(range);
if (chosen.toString() !== arguments[0]) return 'selected ' + chosen.toString();
document.dispatchEvent(new MouseEvent('mouseup', {bubbles: true}));
return 'ok';
"""


# Scrolls the document box (only) to its first highlight of arguments[0], the page to its top.
SCROLL = """
const doc = document.getElementById('doc');
const mark = doc.querySelector(arguments[0]);
doc.scrollTop = mark.offsetTop - doc.offsetTop - doc.clientHeight / 3;
document.querySelector('main').scrollTop = 0;
"""


def rageval(*args: str) -> str:
    command = [sys.executable, "-c", "from rageval.cli import main; main()", *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"rageval {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    print(f"$ rageval {' '.join(args)}\n{done.stdout.rstrip()}", flush=True)
    return done.stdout


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or "chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver") or "chromedriver"), options=options)


def served(sheet: Path):
    http = serve(open_sheet(SheetSource(sheet=sheet)), 0)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    return http, f"http://127.0.0.1:{http.server_address[1]}"


def make_pool(benchmark_dir: Path, out: Path) -> tuple[Path, dict[str, tuple[int, int]]]:
    """The pool of LABELS' chunks; returns its folder and each item's quote offsets."""
    benchmark = load_benchmark(benchmark_dir)
    chunking = ChunkingConfig()
    extra, quotes = [], {}
    for line, (query_id, document_id, quote, _) in enumerate(LABELS, start=1):
        text = benchmark.documents[document_id].text
        start = text.find(quote)
        if start < 0 or text.find(quote, start + 1) >= 0:
            raise SystemExit(f"{document_id}: the quote {quote!r} is not found exactly once")
        chunk = next(c for c in chunk_document(benchmark.documents[document_id], chunking) if c.start <= start < c.end)
        extra.append((line, ExtraItem(queryId=query_id, documentId=document_id, start=chunk.start, end=chunk.end)))
        quotes[query_id, document_id] = (start, start + len(quote))
    result = pool({}, benchmark, "dev", 1, extra=extra, seed=0, extra_file="LABELS")
    write_pool(result, out)
    return out, quotes


def label(pool_dir: Path, shots: Path) -> None:
    """Every item of the sheet labelled in the browser: the quote selected, a grade, Save."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    manifest = json.loads((pool_dir / "pool.json").read_text())
    by_item = {item["itemId"]: (item["queryId"], item["documentId"]) for item in manifest["items"]}
    http, url = served(pool_dir / "sheet.csv")
    driver = browser()
    try:
        driver.get(url)
        wait = WebDriverWait(driver, 20)
        for n, row in enumerate(read_sheet(pool_dir / "sheet.csv")):
            query_id, document_id = by_item[row.itemId]
            _, _, quote, grade = next(x for x in LABELS if x[:2] == (query_id, document_id))
            wait.until(seen.element_to_be_clickable((By.CSS_SELECTOR, f"li[data-item-id='{row.itemId}']"))).click()
            wait.until(seen.text_to_be_present_in_element((By.ID, "documentId"), document_id))
            said = driver.execute_script(SELECT, quote, 0)
            if said != "ok":
                raise SystemExit(f"{row.itemId}: {said}")
            wait.until(seen.text_to_be_present_in_element((By.ID, "evidence"), quote))
            driver.execute_script(SCROLL, "mark.selected")
            driver.find_element(By.ID, f"grade-{grade}").click()
            assessor = driver.find_element(By.ID, "assessor")
            assessor.clear()
            assessor.send_keys(ASSESSOR)
            if n == 0:
                driver.execute_script("document.querySelector('main').scrollTop = 0")  # the query in view
                driver.save_screenshot(str(shots / SHOTS[0]))
            driver.find_element(By.ID, "save").click()
            wait.until(seen.text_to_be_present_in_element((By.ID, "status"), "Saved."))
            print(f"labelled {row.itemId} ({query_id}, {document_id}) grade {grade} in the browser", flush=True)
    finally:
        driver.quit()
        http.shutdown()
        http.server_close()


def review(review_file: Path, shots: Path) -> None:
    """The first three rows of a migration review decided in the browser."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    rows = [row for _, row in read_review(review_file)]
    decisions = [("accept", rows[0].grade), ("accept", 2 if rows[1].grade != 2 else 1), ("reject", rows[2].grade)]
    http, url = served(review_file)
    driver = browser()
    try:
        driver.get(url)
        wait = WebDriverWait(driver, 20)
        for n, (decision, grade) in enumerate(decisions):
            wait.until(seen.element_to_be_clickable((By.CSS_SELECTOR, f"li[data-item-id='row-{n + 1}']"))).click()
            wait.until(seen.text_to_be_present_in_element((By.ID, "title"), rows[n].chunkId))
            driver.execute_script(SCROLL, "mark")
            driver.find_element(By.ID, f"decision-{decision}").click()
            driver.find_element(By.ID, f"grade-{grade}").click()
            reviewer = driver.find_element(By.ID, "assessor")
            reviewer.clear()
            reviewer.send_keys("browser-reviewer")
            if n == 1:
                driver.execute_script("document.querySelector('main').scrollTop = 0")  # the query in view
                driver.save_screenshot(str(shots / SHOTS[1]))
            driver.find_element(By.ID, "save").click()
            wait.until(seen.text_to_be_present_in_element((By.ID, "status"), "Saved."))
            print(f"reviewed row {n + 1} ({rows[n].queryId}, {rows[n].chunkId}): {decision}, grade {grade}", flush=True)
    finally:
        driver.quit()
        http.shutdown()
        http.server_close()
    after = [row for _, row in read_review(review_file)]
    got = [(row.status, row.decision, row.grade) for row in after[:3]]
    if got != [("reviewed", d, g) for d, g in decisions]:
        raise SystemExit(f"the review file holds {got}, not the decisions made")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("benchmark", type=Path, help="the docs benchmark folder (docs/docs-benchmark.md)")
    parser.add_argument("--out", type=Path, required=True, help="a new folder for the pool and the new version")
    parser.add_argument("--shots", type=Path, default=ROOT / "docs" / "screenshots", help="screenshot folder")
    args = parser.parse_args(argv)
    if args.out.exists():
        raise SystemExit(f"{args.out} exists; give a new folder")
    args.shots.mkdir(parents=True, exist_ok=True)
    pool_dir, quotes = make_pool(args.benchmark, args.out / "pool")
    label(pool_dir, args.shots)
    rageval("judge", "import", str(pool_dir), str(pool_dir / "sheet.csv"))
    (pool_dir / "adjudication.csv").write_text("itemId,grade,note\n")
    version = args.out / "docs-v2"
    rageval("judge", "adjudicate", str(pool_dir), "--file", str(pool_dir / "adjudication.csv"), "--out", str(version))
    new = load_benchmark(version)
    for (query_id, document_id), span in quotes.items():
        case = next(c for c in new.cases if c.queryId == query_id)
        if not any((j.documentId, j.start, j.end) == (document_id, *span) for j in case.relevant):
            raise SystemExit(f"{query_id}: no judgment of {document_id} {span[0]}-{span[1]} in {version}")
        print(f"{query_id}: judgment {document_id} {span[0]}-{span[1]} = the selected quote", flush=True)
    (args.out / "chunking-a.yaml").write_text("{}\n")
    (args.out / "chunking-b.yaml").write_text("size: 100\n")
    rageval(
        "migrate-labels",
        str(version),
        "--from",
        str(args.out / "chunking-a.yaml"),
        "--to",
        str(args.out / "chunking-b.yaml"),
    )
    review(next(version.glob("chunk-labels-*.jsonl")), args.shots)
    print(f"screenshots: {args.shots / 'docs-label-view.png'}, {args.shots / 'docs-migration-review.png'}")


if __name__ == "__main__":
    main()
