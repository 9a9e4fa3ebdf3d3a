"""``rageval demo`` end to end: the sweep, the gate and the whole release path in one real store."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from typer.testing import CliRunner

from rageval.tracking.registry import CHAMPION, Registry
from rageval.tracking.store import Tracker

ROOT = Path(__file__).resolve().parents[1]


def _ids(output: str, label: str) -> str:
    found = re.search(rf"^{label} ([0-9a-f]{{32}})", output, re.M)
    assert found, f"no {label!r} line in:\n{output}"
    return found.group(1)


def test_the_demo_walks_the_release_path_to_a_champion(tmp_path: Path) -> None:
    from rageval.cli import app

    # The shipped release policy holds shadow evidence to min RBO 0.8 / top-1 change 0.2, which the
    # demo pair fails (the demo then stops at the release); this test takes the demo's shadow limits.
    policy = yaml.safe_load((ROOT / "params" / "release" / "policy.yaml").read_text())
    demo_rules = yaml.safe_load((ROOT / "params" / "shadow" / "demo-rules.yaml").read_text())
    policy["shadow"].update(min_rbo=demo_rules["min_rbo"], max_top1_change=demo_rules["max_top1_change"])
    policy_file = tmp_path / "release-demo.yaml"
    policy_file.write_text(yaml.safe_dump(policy))
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"

    result = CliRunner().invoke(app, ["demo", "--tracking-uri", store, "--release-policy", str(policy_file)])
    out = result.output
    assert result.exit_code == 0, out
    assert "stopped:" not in out
    tracker = Tracker(store)
    layers = {name: _ids(out, name) for name in ("gate", "review", "shadow", "online")}
    assert re.search(r"^review [0-9a-f]{32} \(scripted\)", out, re.M)
    assert re.search(r"^shadow [0-9a-f]{32} \(SIMULATED\): PASS", out, re.M)
    assert re.search(r"^online [0-9a-f]{32} \(SIMULATED\): PASS", out, re.M)
    for name in ("review", "shadow", "online"):
        assert tracker.run(layers[name]).tags.get("rageval.simulated") == "true", name

    release = tracker.run(_ids(out, "release")).tags
    assert release["rageval.kind"] == "release" and release["rageval.verdict"] == "pass"
    assert {name: tracker.run(_ids(out, "release")).params[name] for name in layers} == layers

    family = release["rageval.release.family"]
    champion = Registry(tracker).alias(family, CHAMPION)
    assert champion is not None and champion.evaluation_run == release["rageval.candidates"]
    # The demo's evidence is simulated: its promotion and registry version say so plainly.
    assert re.search(r"^promotion [0-9a-f]{32} \(SIMULATED\): champion", out, re.M)
    promotion = tracker.run(_ids(out, "promotion"))
    assert promotion.tags["rageval.simulated"] == "true" and "(SIMULATED)" in promotion.name
    assert champion.tags["rageval.simulated"] == "true"
    version = Registry(tracker).client.get_model_version(family, champion.version)
    assert version.description.startswith("SIMULATED: promoted by release run")

    drill = tracker.run(_ids(out, "rollback drill"))
    assert drill.tags["rageval.kind"] == "rollback" and drill.tags["rageval.verdict"] == "pass"
    assert drill.metrics["identical"] == drill.metrics["sample_queries"] > 0
    assert re.search(r"^re-promotion [0-9a-f]{32}", out, re.M)

    items = re.findall(r"^\s*(\d+)\. (PASS|FAIL) ", out, re.M)
    assert [int(n) for n, _ in items] == list(range(1, 11))


def test_a_missing_release_policy_is_refused_before_the_sweep(tmp_path: Path) -> None:
    from rageval.cli import app

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    missing = tmp_path / "nope.yaml"
    result = CliRunner().invoke(app, ["demo", "--tracking-uri", store, "--release-policy", str(missing)])
    assert result.exit_code == 2
    assert f"{missing}: --release-policy: file not found" in result.output
    assert "sweep " not in result.output
