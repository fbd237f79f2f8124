"""Configuration: [tool.stabdiag] in pyproject.toml or stabdiag.toml; precedence default < file < flag;
every bad file or flag exits 2 with one `error:` line naming the file and the key."""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stabdiag.cli import app
from stabdiag.judge.config import find_config, read_config, resolve_settings

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
runner = CliRunner()


@pytest.fixture()
def run_dir(tmp_path, monkeypatch):
    """A copy of the reward-hacking run in a clean tmp tree; the cwd is an empty sibling folder (the
    project: config files are written there, since one inside the run directory is never read)."""
    target = tmp_path / "runs" / "hack"
    shutil.copytree(SAMPLES / "grpo_math_reward_hacking", target)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return target


def write(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def check(*args: str):
    return runner.invoke(app, ["check", *args])


def rules_of(result) -> set[str]:
    assert result.exit_code in (0, 1), result.output
    return {f["rule"] for f in json.loads(result.stdout)["runs"][0]["findings"]}


# --- where the file is found ------------------------------------------------------------------------
def test_stabdiag_toml_in_the_cwd_is_used(run_dir):
    write(Path.cwd(), "stabdiag.toml", 'select = ["L3"]\n')
    assert rules_of(check(str(run_dir), "-f", "json")) <= {"L3.nonfinite-values", "L3.grad-norm-spike",
                                                            "L3.grad-norm-precursor", "L3.loss-spike"}


def test_stabdiag_toml_next_to_the_run_is_not_used(run_dir):
    write(run_dir, "stabdiag.toml", 'select = ["L3"]\n')
    result = check(str(run_dir), "-f", "json")
    assert any(not r.startswith("L3.") for r in rules_of(result))
    assert "stabdiag.toml: not read: a config file beside the data being judged" in result.stderr


def test_pyproject_in_the_cwd_is_used(run_dir):
    write(Path.cwd(), "pyproject.toml", '[project]\nname = "x"\n[tool.stabdiag]\nignore = ["L3"]\n')
    found = rules_of(check(str(run_dir), "-f", "json"))
    assert found and not any(r.startswith("L3.") for r in found)


def test_pyproject_without_the_table_is_skipped_and_stabdiag_toml_wins(run_dir, tmp_path):
    write(Path.cwd(), "pyproject.toml", '[tool.ruff]\nline-length = 100\n')
    write(tmp_path, "stabdiag.toml", 'fail-on = "warn"\n')               # the folder above the cwd
    cfg = find_config([str(run_dir)])
    assert cfg is not None and cfg.path == tmp_path / "stabdiag.toml"
    write(Path.cwd(), "pyproject.toml", '[tool.stabdiag]\nfail-on = "fail"\n')
    write(Path.cwd(), "stabdiag.toml", 'fail-on = "warn"\n')
    assert find_config([str(run_dir)]).path == Path.cwd().resolve() / "stabdiag.toml"
    assert read_config(Path.cwd() / "pyproject.toml").where.endswith("pyproject.toml [tool.stabdiag]")


def test_no_config_anywhere_means_defaults(run_dir):
    settings, _ = resolve_settings(find_config([str(run_dir)]), {})
    assert settings.file is None and settings.fail_on == "fail"
    assert set(settings.origin.values()) == {"default"}


# --- precedence: file < flag ------------------------------------------------------------------------
def test_fail_on_from_file_and_flag_wins(run_dir):
    easy = run_dir.parent / "easy"
    shutil.copytree(SAMPLES / "grpo_easy_data", easy)          # verdict: warn
    assert check(str(easy)).exit_code == 0
    write(Path.cwd(), "stabdiag.toml", 'fail-on = "warn"\n')
    assert check(str(easy)).exit_code == 1
    assert check(str(easy), "--fail-on", "fail").exit_code == 0


def test_select_and_ignore_flags_replace_the_files_lists(run_dir):
    write(Path.cwd(), "stabdiag.toml", 'select = ["L3"]\nignore = ["L3.grad-norm-spike"]\n')
    from_file = rules_of(check(str(run_dir), "-f", "json"))
    assert "L3.nonfinite-values" in from_file and "L3.grad-norm-spike" not in from_file
    flagged = rules_of(check(str(run_dir), "-f", "json", "--select", "L1"))
    assert flagged and all(r.startswith("L1.") for r in flagged)
    unignored = rules_of(check(str(run_dir), "-f", "json", "--ignore", "L1"))
    assert "L3.grad-norm-spike" in unignored


def test_params_from_file_and_flag_wins_per_parameter(run_dir):
    # the sample's grad norm climbs 11.5x its baseline before the NaN: a 50x bar is not met
    base = rules_of(check(str(run_dir), "-f", "json"))
    assert "L3.grad-norm-precursor" in base
    write(Path.cwd(), "stabdiag.toml", """
        [params."L3.grad-norm-precursor"]
        rise_ratio = 50
    """)
    assert "L3.grad-norm-precursor" not in rules_of(check(str(run_dir), "-f", "json"))
    back = check(str(run_dir), "-f", "json", "--param", "L3.grad-norm-precursor.rise_ratio=1.5")
    assert "L3.grad-norm-precursor" in rules_of(back)


def test_map_from_file_and_flag_wins_per_signal(run_dir):
    write(Path.cwd(), "stabdiag.toml", '[map]\nreward = "critic/rewards/mean"\nloss = "actor/pg_loss"\n')
    signals = json.loads(check(str(run_dir), "-f", "json").stdout)["runs"][0]["signals"]
    assert signals["reward"] == "critic/rewards/mean" and signals["loss"] == "actor/pg_loss"
    result = check(str(run_dir), "-f", "json", "--map", "reward=critic/score/mean")
    signals = json.loads(result.stdout)["runs"][0]["signals"]
    assert signals["reward"] == "critic/score/mean" and signals["loss"] == "actor/pg_loss"


def test_rules_dirs_are_relative_to_the_file(run_dir):
    text = (resources.files("stabdiag") / "judge" / "checklist" / "layer2_policy.toml").read_text(encoding="utf-8")
    block = "[[rule]]" + text.split("[[rule]]")[1]
    block = block.replace('id       = "L2.policy-moving-fast"', 'id       = "L2.custom-copy"')
    extra = Path.cwd() / "ci_rules"
    extra.mkdir()
    write(extra, "custom.toml", block)
    write(Path.cwd(), "stabdiag.toml", 'rules = ["ci_rules"]\nselect = ["L2.custom-copy"]\n')
    result = check(str(run_dir), "--show-settings")
    assert result.exit_code == 0
    assert re.search(r"select +L2.custom-copy  \(file stabdiag.toml", result.stdout.replace(str(run_dir) + "/", ""))


def test_show_settings_says_where_each_value_came_from(run_dir):
    write(Path.cwd(), "stabdiag.toml", """
        fail-on = "warn"
        select = ["L1", "L3"]
        [map]
        reward = "critic/score/mean"
        [params."L3.grad-norm-spike"]
        ratio_vs_ema = 8
    """)
    result = check(str(run_dir), "--show-settings", "--select", "L2", "--param", "L3.loss-spike.min_ratio=20")
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line for line in result.stdout.splitlines()}
    assert lines["config"].endswith("stabdiag.toml")
    assert "warn" in lines["fail-on"] and "(file " in lines["fail-on"]
    assert "L2" in lines["select"] and "(flag --select)" in lines["select"]
    assert "reward=critic/score/mean" in lines["map"] and "(file " in lines["map"]
    assert "L3.grad-norm-spike.ratio_vs_ema=8" in lines["params"]
    assert "L3.loss-spike.min_ratio=20" in lines["params"] and "flag --param" in lines["params"]
    assert "(default)" in lines["ignore"] and "(default)" in lines["rules"]


def test_explicit_config_file(run_dir, tmp_path):
    cfg = write(tmp_path, "ci.toml", 'select = ["L1"]\n')
    found = rules_of(check(str(run_dir), "-f", "json", "--config", str(cfg)))
    assert found and all(r.startswith("L1.") for r in found)


# --- every bad case: exit 2, one line, file and key named --------------------------------------------
BAD_FILES = [
    ('fail_on = "warn"\n', "unknown key 'fail_on' (keys are kebab-case: did you mean 'fail-on'?)"),
    ('colour = true\n', "unknown key 'colour'"),
    ('fail-on = "error"\n', "fail-on: expected one of warn, fail; got 'error'"),
    ('select = ["L9"]\n', "select: unknown rule id or prefix 'L9'"),
    ('ignore = "L1.nope"\n', "ignore: unknown rule id or prefix 'L1.nope'"),
    ('select = 3\n', "select: expected a list of strings; got 3"),
    ('rules = ["missing"]\n', "rules: rules directory"),
    ('[map]\nrewrd = "critic/score/mean"\n', "map.rewrd: unknown signal 'rewrd' (did you mean 'reward'?)"),
    ('map = "reward=x"\n', "map: expected a table"),
    ('[map]\nreward = "no/such/key"\n', "map.reward: run 'hack' has no key 'no/such/key'"),
    ('[params."L9.nothing"]\nx = 1\n', "params.L9.nothing.x: unknown rule id 'L9.nothing'"),
    ('[params."L3.grad-norm-spike"]\nratio = 3\n', "params.L3.grad-norm-spike.ratio: rule L3.grad-norm-spike "
                                                  "(detector spike_vs_ema) has no parameter 'ratio'"),
    ('[params."L3.grad-norm-spike"]\nratio_vs_ema = 0.5\n', "params.L3.grad-norm-spike.ratio_vs_ema: 0.5 is "
                                                            "outside the allowed range [1.5, "),
    ('[params."L3.grad-norm-spike"]\nratio_vs_ema = "big"\n', "params.L3.grad-norm-spike.ratio_vs_ema: expected "
                                                              "a number; got 'big'"),
    ('params = { "L3.grad-norm-spike" = 3 }\n', "params: expected tables of parameters per rule"),
    ('select = [\n', "not valid TOML"),
]


@pytest.mark.parametrize("body,expected", BAD_FILES, ids=[e.split(":")[0][:28] for _, e in BAD_FILES])
@pytest.mark.parametrize("kind", ["stabdiag.toml", "pyproject.toml"])
def test_bad_config_is_one_error_line_naming_file_and_key(run_dir, body, expected, kind):
    if kind == "pyproject.toml":
        if body.startswith("["):
            body = body.replace("[map]", "[tool.stabdiag.map]").replace("[params.", "[tool.stabdiag.params.")
        else:
            body = "[tool.stabdiag]\n" + body
    write(Path.cwd(), kind, body)
    result = check(str(run_dir))
    assert result.exit_code == 2, result.output
    err = result.stderr
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    where = f"{run_dir / kind}" if not str(run_dir).startswith(str(Path.cwd())) else kind
    assert where in err or kind in err
    if kind == "pyproject.toml" and "not valid TOML" not in expected:
        assert "[tool.stabdiag]" in err
    assert expected in err, err


def test_pyproject_tool_stabdiag_must_be_a_table(run_dir):
    write(Path.cwd(), "pyproject.toml", '[tool]\nstabdiag = 1\n')
    result = check(str(run_dir))
    assert result.exit_code == 2 and "pyproject.toml: [tool.stabdiag] must be a table" in result.stderr


def test_missing_explicit_config(run_dir):
    result = check(str(run_dir), "--config", "nope.toml")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: nope.toml: cannot read the config file")


BAD_FLAGS = [
    (["--param", "L3.grad-norm-spike"], "error: --param: expected RULE.NAME=VALUE"),
    (["--param", "ratio_vs_ema=3"], "error: --param: expected RULE.NAME=VALUE"),
    (["--param", "L3.grad-norm-spike.ratio_vs_ema=x"], "error: --param L3.grad-norm-spike.ratio_vs_ema: expected a "
                                                       "number; got 'x'"),
    (["--param", "L3.grad-norm-spike.ratio_vs_ema=0"], "error: --param L3.grad-norm-spike.ratio_vs_ema: "
                                                       "0 is outside the allowed range [1.5, "),
    (["--param", "L3.nope.x=1"], "error: --param L3.nope.x: unknown rule id 'L3.nope'"),
    (["--select", "L7"], "error: --select: unknown rule id or prefix 'L7'"),
    (["--ignore", "L2.entropy-colapse"], "error: --ignore: unknown rule id or prefix 'L2.entropy-colapse'"),
    (["--fail-on", "error"], "error: --fail-on: expected one of warn, fail; got 'error'"),
]


@pytest.mark.parametrize("args,expected", BAD_FLAGS)
def test_bad_flags_are_one_error_line(run_dir, args, expected):
    result = check(str(run_dir), *args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(expected) and result.stderr.count("\n") == 1, result.stderr


def test_flag_wins_even_when_the_file_value_is_fine_but_different(run_dir):
    write(Path.cwd(), "stabdiag.toml", '[params."L3.grad-norm-spike"]\nratio_vs_ema = 80\n')
    settings, _ = resolve_settings(find_config([str(run_dir)]),
                                   {"param": ["L3.grad-norm-spike.ratio_vs_ema=6"]})
    assert settings.params == {"L3.grad-norm-spike": {"ratio_vs_ema": 6.0}}
