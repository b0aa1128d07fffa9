# Shared by tests/demo/run.sh and tests/bench/run.sh (sourced, not run).
# Expects `say` and STOP_TIMEOUT (seconds) to be defined by the caller.

# stop_child PID NAME: SIGTERM, a bounded wait, then SIGKILL.
stop_child() {
    local pid="$1" name="$2" i
    [[ -n "$pid" ]] || return 0
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < STOP_TIMEOUT * 10; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            say "$name did not stop within ${STOP_TIMEOUT}s; killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    wait "$pid" 2>/dev/null || true
}
