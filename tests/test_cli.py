"""The command line as a user meets it: sample verdicts, JSON schema, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stabdiag.cli import app

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
EXPECTED = {  # run: (verdict, root layer)
    "grpo_math_healthy": ("pass", None),
    "grpo_math_reward_hacking": ("fail", 1),
    "grpo_math_numeric_blowup": ("fail", 3),
    "grpo_math_version_mismatch": ("fail", 4),
    "grpo_policy_collapse": ("fail", 2),
    "grpo_easy_data": ("warn", 1),
}
runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, list(args))


@pytest.fixture(scope="module")
def sample_report():
    result = invoke("check", str(SAMPLES), "--format", "json")
    assert result.exit_code == 1, result.output
    return json.loads(result.stdout)


def test_samples_give_the_expected_verdicts_and_roots(sample_report):
    got = {r["run"]: (r["verdict"], r["root_layer"]) for r in sample_report["runs"]}
    assert got == EXPECTED


def test_json_matches_the_schema(sample_report):
    assert isinstance(sample_report["stabdiag_version"], str)
    for run in sample_report["runs"]:
        assert run["verdict"] in ("pass", "warn", "fail")
        assert [layer["layer"] for layer in run["layers"]] == [1, 2, 3, 4]
        for layer in run["layers"]:
            assert layer["status"] in ("pass", "warn", "fail", "unknown")
            assert layer["onset_step"] is None or isinstance(layer["onset_step"], int)
        for f in run["findings"]:
            assert {"rule", "layer", "severity", "start_step", "end_step", "message", "evidence",
                    "downstream", "check_first"} <= set(f)
            assert f["severity"] in ("warn", "fail") and isinstance(f["downstream"], bool)
            assert isinstance(f["check_first"], list) and isinstance(f["evidence"], dict)
        for u in run["unknown"]:
            assert isinstance(u["rule"], str) and isinstance(u["missing"], list)
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in run["signals"].items())


def test_reward_hacking_marks_layer3_downstream_and_says_resumed(sample_report):
    run = next(r for r in sample_report["runs"] if r["run"] == "grpo_math_reward_hacking")
    layer3 = [f for f in run["findings"] if f["layer"] == 3]
    assert {f["rule"] for f in layer3} >= {"L3.nonfinite-values", "L3.grad-norm-spike", "L3.grad-norm-precursor"}
    assert all(f["downstream"] for f in layer3)
    assert not any(f["downstream"] for f in run["findings"] if f["layer"] == 1)
    nonfinite = next(f for f in layer3 if f["rule"] == "L3.nonfinite-values")
    assert nonfinite["evidence"]["step"] == 312
    precursor = next(f for f in layer3 if f["rule"] == "L3.grad-norm-precursor")
    assert precursor["evidence"]["lead"] >= 20
    assert run["resumed"] is True
    assert run["framework"] == "verl"


def test_version_mismatch_reports_the_ratio(sample_report):
    run = next(r for r in sample_report["runs"] if r["run"] == "grpo_math_version_mismatch")
    finding = run["findings"][0]
    assert finding["rule"] == "L4.logprob-mismatch"
    assert 0.80 <= finding["evidence"]["ratio"] <= 0.86


def test_terminal_report_shows_root_check_first_and_downstream():
    result = invoke("check", str(SAMPLES / "grpo_math_reward_hacking"))
    assert result.exit_code == 1
    out = result.stdout
    # the headline may name a rule too noisy to tell between the verdict and the root (AIME's 0.197 -> 0.151
    # from 30 problems: L1.eval-below-start)
    assert out.startswith("grpo_math_reward_hacking  FAIL") and "root: layer 1 (data & reward)" in out.splitlines()[0]
    assert "Check first (layer 1, data & reward)" in out
    assert "do not fix from the bottom up" in out
    assert "resumed" in out


def test_fail_on_and_exit_zero():
    healthy = str(SAMPLES / "grpo_math_healthy")
    easy = str(SAMPLES / "grpo_easy_data")
    assert invoke("check", healthy).exit_code == 0
    assert invoke("check", easy).exit_code == 0
    assert invoke("check", easy, "--fail-on", "warn").exit_code == 1
    assert invoke("check", str(SAMPLES), "--exit-zero").exit_code == 0


def test_select_and_ignore():
    run = str(SAMPLES / "grpo_math_reward_hacking")
    data = json.loads(invoke("check", run, "--format", "json", "--select", "L3").stdout)
    assert {f["layer"] for f in data["runs"][0]["findings"]} == {3}
    data = json.loads(invoke("check", run, "--format", "json", "--ignore", "L1").stdout)
    assert data["runs"][0]["root_layer"] == 3


def test_map_overrides_the_alias_table(tmp_path):
    # (a name no pattern reads: `my_loss` would be guessed as the loss, issue 44 item 8)
    (tmp_path / "m.csv").write_text("step,my_objective\n" + "".join(f"{s},1.0\n" for s in range(1, 50)) + "50,nan\n")
    # nothing it knows is never a pass
    assert json.loads(invoke("check", str(tmp_path), "--format", "json").stdout)["runs"][0]["verdict"] == "unknown"
    result = invoke("check", str(tmp_path), "--format", "json", "--map", "loss=my_objective")
    run = json.loads(result.stdout)["runs"][0]
    assert run["signals"]["loss"] == "my_objective" and run["root_layer"] == 3


def test_with_merges_extra_series(tmp_path):
    drift = tmp_path / "drift.csv"
    drift.write_text("step,logprob_delta\n" + "".join(f"{s},0.2\n" for s in range(1, 41)))
    result = invoke("check", str(SAMPLES / "grpo_math_healthy"), "--with", str(drift), "--format", "json")
    run = json.loads(result.stdout)["runs"][0]
    assert run["root_layer"] == 4 and run["signals"]["logprob_delta"] == "logprob_delta"


def test_signals_json_schema():
    result = invoke("signals", str(SAMPLES / "grpo_math_reward_hacking"), "--format", "json")
    assert result.exit_code == 0, result.output
    run = json.loads(result.stdout)["runs"][0]
    assert run["signals"]["reward"]["key"] == "critic/score/mean"
    loss = run["signals"]["loss"]
    assert loss["key"] == "actor/pg_loss" and loss["points"] == 400
    assert loss["first_step"] == 1 and loss["last_step"] == 400 and loss["nonfinite"] == 89
    assert "eval:math500" in run["signals"] and isinstance(run["unmapped"], list)
    text = invoke("signals", str(SAMPLES / "grpo_math_reward_hacking")).stdout
    assert "critic/score/mean" in text and "unmapped" in text and "critic/rewards/mean" in text


def test_rules_list_and_explain():
    listing = invoke("rules", "list")
    assert listing.exit_code == 0 and "L1.reward-eval-divergence" in listing.stdout
    explain = invoke("rules", "explain", "L1.reward-eval-divergence")
    assert explain.exit_code == 0
    for part in ("Why it matters", "Check first", "Example", "fires:"):
        assert part in explain.stdout
    assert json.loads(invoke("rules", "explain", "L3.loss-spike", "--format", "json").stdout)["layer"] == 3


def _bad(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content)
    return str(path)


@pytest.mark.parametrize("make_args, problem", [
    (lambda t: ["check", str(t / "missing.csv")], "no such file or directory"),
    (lambda t: ["check", _bad(t, "empty.csv", "")], "file is empty"),
    (lambda t: ["check", _bad(t, "nostep.csv", "loss\n1.0\n")], "no step column"),
    (lambda t: ["check", _bad(t, "junk.csv", "step,loss\n1,1.0\n2,zzz\n")], "non-numeric value"),
    (lambda t: ["check", _bad(t, "bin.csv", "\x00\x01\x02garbage")], "binary data"),
    (lambda t: ["check", _bad(t, "notes.txt", "hello")], "not a metric log"),
    (lambda t: ["check", str(SAMPLES), "--fail-on", "error"], "--fail-on: expected one of warn, fail"),
    (lambda t: ["check", str(SAMPLES), "--map", "rewrd=x"], "unknown signal 'rewrd'"),
    (lambda t: ["check", str(SAMPLES / "grpo_math_healthy"), "--map", "reward=nokey"], "has no key 'nokey'"),
    (lambda t: ["rules", "explain", "L9.nothing"], "no rule 'L9.nothing'"),
])
def test_bad_input_exits_2_with_one_error_line(tmp_path, make_args, problem):
    result = invoke(*make_args(tmp_path))
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert problem in lines[0]
    assert "Traceback" not in result.output


def test_version_and_python_m():
    assert invoke("--version").stdout.startswith("stabdiag ")
    proc = subprocess.run([sys.executable, "-m", "stabdiag", "check", str(SAMPLES / "grpo_math_healthy")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "PASS" in proc.stdout


def test_heavy_modules_stay_out_of_import_and_check_help():
    code = ("import sys, stabdiag\n"
            "from typer.testing import CliRunner\n"
            "from stabdiag.cli import app\n"
            "CliRunner().invoke(app, ['check', '--help'])\n"
            "heavy = [m for m in ('torch', 'transformers', 'matplotlib', 'wandb', 'tensorboard') if m in sys.modules]\n"
            "print(','.join(heavy))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


def test_one_command_app_reads_as_the_whole_app(tmp_path):
    # `stabdiag check ...` runs an app holding only check (typer builds every command at each start):
    # each command's help, a usage error and a run's report must read exactly as through the whole app
    from stabdiag.cli import app_for

    names = [c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands]
    assert "check" in names and len(names) > 1
    for name in names:
        solo = app_for([name, "--help"])
        assert [c.callback for c in solo.registered_commands] == \
            [c.callback for c in app.registered_commands if (c.name or c.callback.__name__.replace("_", "-")) == name]
        whole, alone = runner.invoke(app, [name, "--help"]), runner.invoke(solo, [name, "--help"])
        assert (alone.exit_code, alone.output) == (whole.exit_code, whole.output), name
    args = ["check", str(SAMPLES / "grpo_math_reward_hacking"), "--no-such-flag"]
    whole, alone = runner.invoke(app, args), runner.invoke(app_for(args), args)
    assert whole.exit_code == alone.exit_code == 2 and alone.output == whole.output
    args = ["check", str(SAMPLES / "grpo_math_reward_hacking"), "--format", "json"]
    whole, alone = runner.invoke(app, args), runner.invoke(app_for(args), args)
    assert whole.exit_code == alone.exit_code == 1 and alone.stdout == whole.stdout
    for args in (["rules", "list"], ["--version"], [], ["chek"]):
        assert app_for(args) is app
