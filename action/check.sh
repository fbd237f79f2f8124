#!/usr/bin/env bash
# The stabdiag GitHub Action's check step (action.yml), runnable anywhere with the same environment:
#   STABDIAG_PATHS       run files or folders, separated by spaces or newlines (required)
#   STABDIAG_FAIL_ON     warn or fail (default fail)
#   STABDIAG_ARGS        more `stabdiag check` options, split into words
#   STABDIAG_OUTPUT_DIR  where the reports go (default $RUNNER_TEMP/stabdiag)
#   STABDIAG_PYTHON      the interpreter stabdiag is installed in (default python3)
#   GITHUB_STEP_SUMMARY, GITHUB_OUTPUT  the files the Actions runner reads (optional elsewhere)
# One read of the logs writes the annotations (stdout) and the JSON, JUnit, Markdown and HTML reports;
# the Markdown report becomes the job summary.  The step exits with stabdiag's exit code.
set -uo pipefail

if [ -z "${STABDIAG_PATHS:-}" ]; then
    echo "::error title=stabdiag::the paths input is empty: name the run files or folders to check"
    exit 2
fi
python=${STABDIAG_PYTHON:-python3}
out=${STABDIAG_OUTPUT_DIR:-${RUNNER_TEMP:-${TMPDIR:-/tmp}}/stabdiag}
mkdir -p "$out"
read -r -d '' -a paths <<< "$STABDIAG_PATHS" || true
read -r -d '' -a extra <<< "${STABDIAG_ARGS:-}" || true

"$python" -m stabdiag check "${paths[@]}" --fail-on "${STABDIAG_FAIL_ON:-fail}" --format github \
    -o "$out/stabdiag.json" -o "$out/stabdiag.xml" -o "$out/stabdiag.md" -o "$out/stabdiag.html" \
    ${extra[@]+"${extra[@]}"}
code=$?

summary=${GITHUB_STEP_SUMMARY:-/dev/null}
if [ -f "$out/stabdiag.md" ] && [ "$code" -ne 2 ]; then
    cat "$out/stabdiag.md" >> "$summary"
else
    printf '## stabdiag\n\nstabdiag could not check the runs (exit %s); the error is in the step log.\n' \
        "$code" >> "$summary"
fi
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    { echo "exit-code=$code"; echo "report-dir=$out"; } >> "$GITHUB_OUTPUT"
fi
exit "$code"
