#!/usr/bin/env bash
# The stabdiag GitHub Action's check step (action.yml), runnable anywhere with the same environment:
#   STABDIAG_PATHS       run files or folders, one per line (required; a path may hold spaces)
#   STABDIAG_FAIL_ON     warn or fail (default fail)
#   STABDIAG_ARGS        more `stabdiag check` options, lines split as a shell splits words (no expansion);
#                        --isolated is added unless they name --config
#   STABDIAG_OUTPUT_DIR  where the reports go (default $RUNNER_TEMP/stabdiag)
#   STABDIAG_PYTHON      the interpreter stabdiag is installed in (default the venv install.sh made)
#   GITHUB_STEP_SUMMARY, GITHUB_OUTPUT  the files the Actions runner reads (optional elsewhere)
# One read of the logs writes the annotations (stdout, within what GitHub shows) and the JSON, JUnit,
# Markdown, HTML, SARIF and text reports; the text report is printed in the log (commands stopped around
# it, so no line of it is read as one), the Markdown report becomes the job summary, and the counts of
# the JSON report's summary become the step's outputs.  The step exits with stabdiag's exit code.
set -uo pipefail

temp=${RUNNER_TEMP:-${TMPDIR:-/tmp}}
python=${STABDIAG_PYTHON:-$temp/stabdiag-venv/bin/python}
out=${STABDIAG_OUTPUT_DIR:-$temp/stabdiag}
paths=()
while IFS= read -r line || [ -n "$line" ]; do
    line=${line%$'\r'}
    [ -n "${line//[[:space:]]/}" ] && paths+=("$line")
done <<< "${STABDIAG_PATHS:-}"
if [ ${#paths[@]} -eq 0 ]; then
    echo "::error title=stabdiag::the paths input is empty: name the run files or folders to check, one per line"
    exit 2
fi
# the args input as words, each line split as a shell would (quotes respected, nothing expanded)
extra=()
args=${STABDIAG_ARGS:-}
if [ -n "${args//[[:space:]]/}" ]; then
    words=$("$python" -c 'import shlex, sys
for line in sys.argv[1].splitlines():
    for word in shlex.split(line):
        print(word)' "$args") || {
        echo "::error title=stabdiag::the args input cannot be split into words (an unclosed quote?)"
        exit 2
    }
    [ -n "$words" ] && mapfile -t extra <<< "$words"
fi
isolated=(--isolated)
for word in ${extra[@]+"${extra[@]}"}; do
    case "$word" in --config|--config=*|--isolated) isolated=() ;; esac
done
mkdir -p "$out"

"$python" -m stabdiag check "${paths[@]}" --fail-on "${STABDIAG_FAIL_ON:-fail}" ${isolated[@]+"${isolated[@]}"} \
    --format github -o "$out/stabdiag.json" -o "$out/stabdiag.xml" -o "$out/stabdiag.md" \
    -o "$out/stabdiag.html" -o "$out/stabdiag.sarif" -o "$out/stabdiag.txt" ${extra[@]+"${extra[@]}"}
code=$?

if [ -f "$out/stabdiag.txt" ] && [ "$code" -ne 2 ]; then
    token="stabdiag-report-$RANDOM$RANDOM"
    echo "::group::stabdiag report"
    echo "::stop-commands::$token"
    cat "$out/stabdiag.txt"
    echo "::$token::"
    echo "::endgroup::"
fi
summary=${GITHUB_STEP_SUMMARY:-/dev/null}
if [ -f "$out/stabdiag.md" ] && [ "$code" -ne 2 ]; then
    cat "$out/stabdiag.md" >> "$summary"
    printf '\nThe full reports (HTML, JSON, JUnit, SARIF) are in `%s` (the `report-dir` output).\n' "$out" >> "$summary"
else
    printf '## stabdiag\n\nstabdiag could not check the runs (exit %s); the error is in the step log.\n' \
        "$code" >> "$summary"
fi
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    {
        echo "exit-code=$code"
        echo "report-dir=$out"
        if [ -f "$out/stabdiag.json" ] && [ "$code" -ne 2 ]; then
            "$python" -c 'import json, sys
s = json.load(open(sys.argv[1]))["summary"]
for key in ("verdict", "runs", "fail", "warn", "unknown", "pass"):
    print(f"{key}={s[key]}")' "$out/stabdiag.json"
        fi
    } >> "$GITHUB_OUTPUT"
fi
exit "$code"
