# Sourced by bin/start. supervise NAME COMMAND...: run COMMAND, and run it again
# whenever it exits, until this shell is stopped (TERM). A worker killed mid-job
# comes back and resumes the job; the web server and the database stay up.
# Between quick failures it waits 1, 2, 4 ... up to 30 s, so a command that cannot
# start does not spin; after a minute of running the wait starts at 1 s again.
supervise() {
  local name="$1"
  shift
  local child="" delay=1 started rc
  trap 'if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null; wait "$child" 2>/dev/null; fi; exit 0' TERM
  while true; do
    started=$SECONDS
    "$@" &
    child=$!
    wait "$child" && rc=0 || rc=$?
    child=""
    if [ $((SECONDS - started)) -ge 60 ]; then delay=1; fi
    echo "ragsite: the $name stopped (exit status $rc); starting it again in ${delay} s" >&2
    sleep "$delay" &
    wait $! || true
    delay=$((delay * 2 > 30 ? 30 : delay * 2))
  done
}
