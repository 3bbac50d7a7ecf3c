# Sourced by .ci/run and scripts/test.sh: runs named phases and prints how long each took.
#
#   phase NAME COMMAND...   prints a header, runs COMMAND, records NAME, its seconds and
#                           whether it passed; returns COMMAND's status
#   phase_table TITLE       prints the recorded phases and their total (an EXIT trap calls
#                           it, so a failed run prints the table too)

phase_names=()
phase_secs=()
phase_states=()

phase() {
    local name=$1 start=$SECONDS status=0
    shift
    printf '\n==== %s (%s)\n' "$name" "$(date -u +%H:%M:%S)"
    "$@" || status=$?
    phase_names+=("$name")
    phase_secs+=($((SECONDS - start)))
    if [ "$status" = 0 ]; then phase_states+=(ok); else phase_states+=("failed ($status)"); fi
    return "$status"
}

phase_table() {
    local i total=0
    printf '\n==== %s\n' "$1"
    printf '%-40s %7s  %s\n' phase seconds result
    for i in "${!phase_names[@]}"; do
        printf '%-40s %7d  %s\n' "${phase_names[$i]}" "${phase_secs[$i]}" "${phase_states[$i]}"
        total=$((total + phase_secs[i]))
    done
    printf '%-40s %7d\n' "total of the phases" "$total"
}
