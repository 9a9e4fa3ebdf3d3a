"""The labeling view: a real server on 127.0.0.1 over a pool's sheet, driven by headless Chromium
(Debian's chromium and chromium-driver, through selenium) and by plain HTTP; the saved sheet must be
one ``judge import`` accepts, holding the exact offsets of the text selected in the page."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import DOCS, write_tiny
from servers import REQUIRE
from typer.testing import CliRunner

from rageval.benchmark.loading import load_benchmark
from rageval.cli import app
from rageval.judging import import_sheets, pool, read_pool, write_pool
from rageval.judging.labelview import LabelSheet, SheetSource, open_sheet, read_sheet, serve, sheet_bytes
from rageval.judging.schema import ExtraItem

# Text that is not ASCII (a UTF-16 surrogate pair before the evidence) and text that looks like HTML.
DELTA = (
    "# Delta 🚀 café\n\n<b>not bold</b> & <script>window.hacked = 1</script>\n\n"
    "The retry budget is three attempts per publish; after that the job is parked.\n\nEnd."
)
EVIDENCE = "three attempts per publish"
QUERY = 'retry budget <img src=x onerror="window.hacked=2">'
SHOTS = Path(os.environ.get("RAGEVAL_LABELVIEW_SHOTS", "")) if os.environ.get("RAGEVAL_LABELVIEW_SHOTS") else None


@pytest.fixture
def pool_dir(tmp_path: Path) -> Path:
    """A tiny benchmark with the document above, and a pool of two items of its case q1 from targeted search."""
    docs = [*DOCS, {"id": "delta", "title": "Delta <i>title</i>", "text": DELTA}]
    cases = [
        {
            "queryId": "q1",
            "query": QUERY,
            "corpusVersion": "tiny-1",
            "relevant": [{"documentId": "alpha", "grade": 3, "start": 9, "end": 57}],
            "split": "dev",
        }
    ]
    root = write_tiny(tmp_path / "tiny", documents=docs, cases=cases)
    benchmark = load_benchmark(root)
    paragraph = DELTA.index("The retry")
    extra = [
        (1, ExtraItem(queryId="q1", documentId="delta", start=paragraph, end=len(DELTA) - len("\n\nEnd."))),
        (2, ExtraItem(queryId="q1", documentId="gamma", start=0, end=10)),
    ]
    result = pool({}, benchmark, "dev", 1, extra=extra, seed=0)
    write_pool(result, tmp_path / "pool")
    return tmp_path / "pool"


@pytest.fixture
def server(pool_dir: Path, request: pytest.FixtureRequest):
    """The view of the pool's sheet (``sheet.csv`` unless the test is parametrised) on a free port."""
    name = getattr(request, "param", "sheet.csv")
    http = serve(LabelSheet(SheetSource(sheet=pool_dir / name)), 0)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{http.server_address[1]}", pool_dir / name
    http.shutdown()
    http.server_close()
    thread.join(5)


def delta_item(pool_dir: Path) -> str:
    return next(item.itemId for item in read_pool(pool_dir).items if item.documentId == "delta")


def post(url: str, body: dict) -> tuple[int, dict]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


# --------------------------------------------------------------------------- in headless Chromium


def chromium():
    """A headless Chromium driven by selenium; skipped (failed under RAGEVAL_REQUIRE_SERVICES) where absent."""
    driver_path = shutil.which("chromedriver")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        driver_path = None
    if not (driver_path and browser):
        message = "no headless Chromium here (apt-get install chromium chromium-driver; pip install selenium)"
        if os.environ.get(REQUIRE):
            pytest.fail(f"{REQUIRE} is set: {message}")
        pytest.skip(message)
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(driver_path), options=options)


# Selects the first occurrence of arguments[0] in #doc (a JS string: offsets in UTF-16 units) as a
# user's mouse would leave it, then sends the mouseup the page listens to.
SELECT = """
const doc = document.getElementById('doc');
const at = doc.textContent.indexOf(arguments[0]);
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


def test_label_in_the_browser_saves_the_exact_span(server, pool_dir, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    url, sheet = server
    shots = SHOTS or tmp_path / "shots"
    shots.mkdir(parents=True, exist_ok=True)
    item = delta_item(pool_dir)
    driver = chromium()
    try:
        driver.get(url)
        wait = WebDriverWait(driver, 15)
        wait.until(seen.presence_of_element_located((By.CSS_SELECTOR, f"li[data-item-id='{item}']"))).click()
        wait.until(seen.text_to_be_present_in_element((By.ID, "documentId"), "delta"))
        doc = driver.find_element(By.ID, "doc")

        # The page shows the texts as text: the document exactly, no element made from the query or document.
        assert driver.execute_script("return document.getElementById('doc').textContent") == DELTA
        assert driver.find_element(By.ID, "query").text == QUERY
        assert driver.find_element(By.ID, "title").text == "Delta <i>title</i>"
        assert driver.find_elements(By.CSS_SELECTOR, "main img, main script, #doc b, #title i") == []
        assert driver.execute_script("return window.hacked === undefined")
        # Until the assessor selects, the evidence is the pooled passage.
        passage = "The retry budget is three attempts per publish; after that the job is parked."
        assert [m.text for m in doc.find_elements(By.CSS_SELECTOR, "mark")] == [passage]
        assert driver.find_element(By.ID, "evidence").text == passage

        assert driver.execute_script(SELECT, EVIDENCE) == "ok"
        wait.until(seen.text_to_be_present_in_element((By.ID, "evidence"), EVIDENCE))
        marks = [(m.get_attribute("class"), m.text) for m in doc.find_elements(By.CSS_SELECTOR, "mark")]
        after = "; after that the job is parked."
        assert marks == [("pooled", "The retry budget is "), ("selected", EVIDENCE), ("pooled", after)]
        driver.find_element(By.ID, "grade-2").click()
        driver.find_element(By.ID, "assessor").send_keys("ana")
        driver.find_element(By.ID, "notes").send_keys("=budget stated exactly")
        driver.save_screenshot(str(shots / "1-before-save.png"))
        driver.find_element(By.ID, "save").click()
        wait.until(seen.text_to_be_present_in_element((By.ID, "status"), "Saved."))
        assert "done" in driver.find_element(By.CSS_SELECTOR, f"li[data-item-id='{item}']").get_attribute("class")
        driver.save_screenshot(str(shots / "2-after-save.png"))
    finally:
        driver.quit()

    start = DELTA.index(EVIDENCE)  # a Python (code point) offset: the page counted 🚀 as one character,
    assert len(DELTA[:start].encode("utf-16-le")) // 2 == start + 1  # not as the two units JS strings hold
    row = next(r for r in read_sheet(sheet) if r.itemId == item)
    assert (row.start, row.end, row.grade, row.assessor, row.notes) == (
        start,
        start + len(EVIDENCE),
        2,
        "ana",
        "=budget stated exactly",
    )
    assert "'=budget stated exactly" in sheet.read_text(encoding="utf-8")  # the CSV stays spreadsheet-safe
    labels = import_sheets(read_pool(pool_dir), [sheet])
    assert labels[["item_id", "query_id", "assessor", "grade", "notes"]].values.tolist() == [
        [item, "q1", "ana", 2, "=budget stated exactly"]
    ]
    assert (shots / "1-before-save.png").stat().st_size > 10_000
    assert (shots / "2-after-save.png").stat().st_size > 10_000

    # Imported and adjudicated, the label is a span judgment of exactly the selected text.
    judgment, note = import_and_adjudicate(pool_dir, [sheet], "itemId,grade,note\n")
    assert (judgment.documentId, judgment.start, judgment.end, judgment.grade) == (
        "delta",
        start,
        start + len(EVIDENCE),
        2,
    )
    assert DELTA[judgment.start : judgment.end] == EVIDENCE
    paragraph = DELTA.index("The retry")
    assert note["pooled"] == [paragraph, len(DELTA) - len("\n\nEnd.")]  # the passage it narrowed


def import_and_adjudicate(pool_dir: Path, sheets: list[Path], adjudication: str):
    """`rageval judge import` then `rageval judge adjudicate`, as a user runs them: the delta
    judgment of q1 in the new version, and its note."""
    result = CliRunner().invoke(app, ["judge", "import", str(pool_dir), *map(str, sheets)])
    assert result.exit_code == 0, result.output
    (pool_dir / "adjudication.csv").write_text(adjudication)
    out = pool_dir.parent / "tiny-v2"
    result = CliRunner().invoke(
        app, ["judge", "adjudicate", str(pool_dir), "--file", str(pool_dir / "adjudication.csv"), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    case = next(c for c in load_benchmark(out).cases if c.queryId == "q1")
    judgment = next(j for j in case.relevant if j.documentId == "delta")
    notes = [json.loads(line) for line in (out / "judgment-notes.jsonl").read_text().splitlines()]
    return judgment, next(n for n in notes if n["documentId"] == "delta")


# --------------------------------------------------------------------------- over HTTP


@pytest.mark.parametrize("server", ["sheet.jsonl"], indirect=True)
def test_jsonl_sheet_saved_in_its_format_and_imported(server, pool_dir):
    url, sheet = server
    item = delta_item(pool_dir)
    start = DELTA.index(EVIDENCE)
    status, body = post(f"{url}/api/items/{item}", {"assessor": "bo", "grade": 3, "start": start, "end": start + 5})
    assert status == 200 and body["saved"]["grade"] == 3
    lines = [json.loads(line) for line in sheet.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 2
    saved = next(line for line in lines if line["itemId"] == item)
    assert (saved["start"], saved["end"], saved["assessor"], saved["grade"]) == (start, start + 5, "bo", 3)
    assert DELTA[saved["start"] : saved["end"]] == "three"
    assert import_sheets(read_pool(pool_dir), [sheet])["grade"].tolist() == [3]
    result = CliRunner().invoke(app, ["judge", "import", str(pool_dir), str(sheet)])
    assert result.exit_code == 0 and "1 labels on 1 items" in result.output, result.output
    assert [json.loads(line)["grade"] for line in (pool_dir / "labels.jsonl").read_text().splitlines()] == [3]
    # The item as the page reads it back: the label so far and the whole document.
    with urllib.request.urlopen(f"{url}/api/items/{item}", timeout=10) as response:
        shown = json.loads(response.read())
    assert (shown["text"], shown["selected"], shown["grade"]) == (DELTA, [start, start + 5], 3)


@pytest.mark.parametrize(
    ("label", "says"),
    [
        ({"assessor": "ana", "grade": 7, "start": 0, "end": 5}, "grade 7 is outside the rubric"),
        ({"assessor": "ana", "grade": 2, "start": 5, "end": 10_000}, "is not a span of the document"),
        ({"assessor": "ana", "grade": 2, "start": 5, "end": 5}, "is not a span of the document"),
        ({"assessor": " ", "grade": 2, "start": 0, "end": 5}, "a grade without an assessor"),
        ({"assessor": "ana", "grade": "2", "start": 0, "end": 5}, "grade"),
        ({"assessor": "ana", "grade": 2, "start": 0, "end": 5, "extra": 1}, "extra"),
    ],
)
def test_a_bad_label_is_refused_and_the_sheet_kept(server, pool_dir, label, says):
    url, sheet = server
    before = sheet.read_bytes()
    status, body = post(f"{url}/api/items/{delta_item(pool_dir)}", label)
    assert status == 400 and any(says in problem for problem in body["problems"]), body
    assert all(problem.startswith((f"{sheet}:", "<label>")) for problem in body["problems"])  # where, for the fix
    assert sheet.read_bytes() == before
    assert [p.name for p in sheet.parent.iterdir() if p.name.startswith(".")] == []  # no temporary left


def test_unknown_item_and_page(server):
    url, _ = server
    for path, code in (("/api/items/i-nothing", 400), ("/nowhere", 404)):
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(url + path, timeout=10)
        with caught.value as error:
            assert error.code == code
            assert json.loads(error.read())["problems"]


def test_cli_names_a_busy_port(pool_dir):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(app, ["judge", "label-view", str(pool_dir / "sheet.csv"), "--port", str(port)])
    assert result.exit_code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.output


def test_cli_names_a_missing_sheet(tmp_path):
    result = CliRunner().invoke(app, ["judge", "label-view", str(tmp_path / "sheet.csv")])
    assert result.exit_code == 2 and "file not found" in result.output


def test_the_command_serves_the_page_until_interrupted(pool_dir):
    """`rageval judge label-view` as a user starts it: a real process, the page on 127.0.0.1, Ctrl-C."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    command = [sys.executable, "-c", "from rageval.cli import main; main()", "judge", "label-view"]
    # Ctrl-C's SIGINT as a terminal delivers it: a shell's background job (`.ci/run &`) would have
    # handed it on ignored, and Python keeps an ignored SIGINT ignored.
    process = subprocess.Popen(
        [*command, str(pool_dir / "sheet.jsonl"), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        first = process.stdout.readline()
        assert first.startswith(f"labeling {pool_dir / 'sheet.jsonl'} at http://127.0.0.1:"), first
        url = first.split(" at ")[1].split(" ")[0]
        with urllib.request.urlopen(url, timeout=10) as response:
            assert "<title>rageval labeling view</title>" in response.read().decode()
        with urllib.request.urlopen(url + "api/sheet", timeout=10) as response:
            sheet = json.loads(response.read())
        assert [level["grade"] for level in sheet["rubric"]] == [0, 1, 2, 3]
        assert sorted(item["itemId"] for item in sheet["items"]) == sorted(i.itemId for i in read_pool(pool_dir).items)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
        assert process.stdout.read().strip() == "stopped"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()  # reaped here, not left for a later test's garbage collection to warn about
        process.stdout.close()


def test_a_save_keeps_a_label_written_into_the_file_meanwhile(server, pool_dir):
    """The server reads the sheet again before it writes: a row filled elsewhere since the start stays."""
    url, sheet = server
    rows = read_sheet(sheet)
    item = delta_item(pool_dir)
    gamma = next(row.itemId for row in rows if row.itemId != item)
    edited = [row.model_copy(update={"assessor": "ana", "grade": 0}) if row.itemId == gamma else row for row in rows]
    sheet.write_bytes(sheet_bytes(edited, ".csv"))
    status, _ = post(f"{url}/api/items/{item}", {"assessor": "ana", "grade": 1, "start": 0, "end": 7})
    assert status == 200
    grades = {row.itemId: row.grade for row in read_sheet(sheet)}
    assert grades == {gamma: 0, item: 1}
    assert sorted(import_sheets(read_pool(pool_dir), [sheet])["grade"]) == [0, 1]


def test_cli_names_a_sheet_without_its_pool(pool_dir, tmp_path):
    alone = tmp_path / "elsewhere" / "sheet.csv"
    alone.parent.mkdir()
    shutil.copy(pool_dir / "sheet.csv", alone)
    result = CliRunner().invoke(app, ["judge", "label-view", str(alone), "--port", "0"])
    assert result.exit_code == 2
    said = "no pool here (keep the sheet beside its pool.json, or give --pool)"
    assert f"{alone.parent / 'pool.json'}: {said}" in result.output


def test_selected_evidence_becomes_the_span_judgment_and_a_disagreement_needs_the_adjudicator(pool_dir, tmp_path):
    """Two assessors select different evidence in the passage: adjudication is refused until a row
    gives the span; labels without a selection judge the pooled passage as before."""
    item = delta_item(pool_dir)
    start = DELTA.index(EVIDENCE)
    sheets = []
    for assessor, (a, b) in (("ana", (start, start + len(EVIDENCE))), ("bo", (start, start + 5))):
        path = tmp_path / f"sheet-{assessor}.jsonl"
        rows = [
            row.model_copy(update={"assessor": assessor, "grade": 3, "start": a, "end": b})
            for row in read_sheet(pool_dir / "sheet.jsonl")
            if row.itemId == item
        ]
        path.write_bytes(sheet_bytes(rows, ".jsonl"))
        sheets.append(path)
    labels = import_sheets(read_pool(pool_dir), sheets)
    assert labels[["assessor", "start", "end"]].values.tolist() == [
        ["ana", start, start + len(EVIDENCE)],
        ["bo", start, start + 5],
    ]
    result = CliRunner().invoke(app, ["judge", "import", str(pool_dir), *map(str, sheets)])
    assert result.exit_code == 0, result.output
    (pool_dir / "adjudication.csv").write_text("itemId,grade,note\n")
    refused = CliRunner().invoke(
        app, ["judge", "adjudicate", str(pool_dir), "--file", str(pool_dir / "adjudication.csv")]
    )
    assert refused.exit_code == 2
    assert (
        f"the assessors selected different evidence (ana {start}-{start + len(EVIDENCE)}, bo {start}-{start + 5})"
        in refused.output
    )
    assert f"add a row: {item},<final grade>,<note>,<start>,<end>" in refused.output

    judgment, note = import_and_adjudicate(
        pool_dir, sheets, f"itemId,grade,note,start,end\n{item},3,the whole phrase,{start},{start + len(EVIDENCE)}\n"
    )
    assert (judgment.start, judgment.end, judgment.grade) == (start, start + len(EVIDENCE), 3)
    assert note["adjudication"]["note"] == "the whole phrase"


def test_a_label_without_a_selection_judges_the_pooled_passage(pool_dir, tmp_path):
    item = delta_item(pool_dir)
    path = tmp_path / "sheet-hand.jsonl"
    rows = [
        r.model_copy(update={"assessor": "cy", "grade": 1})
        for r in read_sheet(pool_dir / "sheet.jsonl")
        if r.itemId == item
    ]
    path.write_bytes(sheet_bytes(rows, ".jsonl"))
    judgment, note = import_and_adjudicate(pool_dir, [path], "itemId,grade,note\n")
    pooled = next(i for i in read_pool(pool_dir).items if i.itemId == item)
    assert (judgment.start, judgment.end, judgment.grade) == (pooled.start, pooled.end, 1)
    assert "pooled" not in note
    labels = (pool_dir / "labels.jsonl").read_text()
    assert '"start"' not in labels  # nothing selected, nothing recorded


# --------------------------------------------------------------------------- label-migration review


@pytest.fixture
def review(tmp_path):
    """A tiny benchmark whose whole-document chunking labels are migrated to 6-word chunks: the
    review file ``rageval migrate-labels`` writes, served by the view."""
    from rageval.benchmark.migration import migrate_labels
    from rageval.benchmark.schema import ChunkingConfig

    benchmark = load_benchmark(write_tiny(tmp_path / "tiny"))
    small = ChunkingConfig(size=6, overlap=0, headings=False)
    path, proposals = migrate_labels(benchmark, ChunkingConfig(method="none"), small)
    http = serve(open_sheet(SheetSource(sheet=path)), 0)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{http.server_address[1]}", path, benchmark, small
    http.shutdown()
    http.server_close()
    thread.join(5)


def test_migration_review_in_the_browser_accepts_rejects_and_regrades(review, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as seen
    from selenium.webdriver.support.ui import WebDriverWait

    from rageval.benchmark.migration import chunk_labels, read_review

    url, path, benchmark, small = review
    rows = [row for _, row in read_review(path)]
    first, second = rows[0], rows[1]  # q1's two chunks of alpha, from the span alpha[9:57] of grade 3
    alpha = benchmark.documents["alpha"].text
    driver = chromium()
    try:
        driver.get(url)
        wait = WebDriverWait(driver, 15)
        wait.until(seen.text_to_be_present_in_element((By.ID, "documentId"), "alpha"))
        assert driver.find_element(By.ID, "who").text == "Reviewer"
        assert driver.find_element(By.ID, "decision").is_displayed()
        # The migrated chunk [0, 34) in yellow, the judged span [9, 57) it came from in green.
        marks = [
            (m.get_attribute("class"), m.get_attribute("textContent"))
            for m in driver.find_elements(By.CSS_SELECTOR, "#doc mark")
        ]
        assert (first.start, first.end) == (0, 34)
        assert marks == [("pooled", alpha[0:9]), ("selected", alpha[9:34]), ("selected", alpha[34:57])]
        assert driver.find_element(By.ID, "grade-3").is_selected()  # the proposed grade
        driver.find_element(By.ID, "decision-accept").click()
        driver.find_element(By.ID, "grade-2").click()  # the chunk holds only part of the evidence
        driver.find_element(By.ID, "assessor").send_keys("ana")
        driver.find_element(By.ID, "notes").send_keys("half the sentence")
        if SHOTS:
            driver.save_screenshot(str(SHOTS / "migration-review.png"))
        driver.find_element(By.ID, "save").click()
        wait.until(seen.text_to_be_present_in_element((By.ID, "status"), "Saved."))
        driver.find_element(By.CSS_SELECTOR, "li[data-item-id='row-2']").click()
        wait.until(seen.text_to_be_present_in_element((By.ID, "title"), second.chunkId))
        driver.find_element(By.ID, "decision-reject").click()
        driver.find_element(By.ID, "save").click()
        wait.until(seen.text_to_be_present_in_element((By.ID, "status"), "Saved."))
        done = driver.find_elements(By.CSS_SELECTOR, "#items li.done")
        assert [li.get_attribute("data-item-id") for li in done] == ["row-1", "row-2"]
    finally:
        driver.quit()

    after = [row for _, row in read_review(path)]
    assert (after[0].status, after[0].decision, after[0].grade, after[0].reviewer, after[0].note) == (
        "reviewed",
        "accept",
        2,
        "ana",
        "half the sentence",
    )
    assert (after[1].status, after[1].decision, after[1].grade, after[1].reviewer) == ("reviewed", "reject", 3, "ana")
    assert all(row.status == "proposed" for row in after[2:]) and after[2:] == rows[2:]
    # The review is what the chunk qrels of that chunking now read: accepted at 2, rejected gone.
    from rageval.benchmark.chunking import chunk_corpus

    chunks = chunk_corpus(benchmark.documents.values(), small)
    labels = chunk_labels(benchmark, chunks, small, "dev")
    assert labels.source == "migrated"
    assert labels.qrels["q1"] == {first.chunkId: 2}


@pytest.mark.parametrize(
    ("decision", "says"),
    [
        ({"assessor": "ana", "grade": 9, "decision": "accept"}, "grade 9 is outside the rubric"),
        ({"assessor": " ", "grade": 2, "decision": "accept"}, "a decision without a reviewer"),
        ({"assessor": "ana", "grade": 2, "decision": "maybe"}, "decision"),
        ({"assessor": "ana", "grade": 2}, "decision"),
    ],
)
def test_a_bad_review_decision_is_refused_and_the_file_kept(review, decision, says):
    url, path, _, _ = review
    before = path.read_bytes()
    status, body = post(f"{url}/api/items/row-1", decision)
    assert status == 400 and any(says in problem for problem in body["problems"]), body
    assert path.read_bytes() == before
