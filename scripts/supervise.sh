#!/usr/bin/env bash
# supervise.sh NAME COMMAND...: run COMMAND, and start it again whenever it exits (a crash, an
# "Unrecoverable error", a lost broker), after ANONWEB_RESTART_DELAY seconds (default 5).
# SIGTERM or SIGINT stops COMMAND and this loop. run.sh starts the worker through it.
set -uo pipefail
name="$1"
shift
delay="${ANONWEB_RESTART_DELAY:-5}"
child=""
stopping=0
stop() {
  stopping=1
  if [ -n "$child" ]; then
    kill -TERM "$child" 2>/dev/null
    wait "$child" 2>/dev/null
  fi
  exit 0
}
trap stop TERM INT
while true; do
  "$@" &
  child=$!
  wait "$child"
  status=$?
  child=""
  [ "$stopping" = 1 ] && exit 0
  echo "==> the $name exited (status $status); starting it again in ${delay}s" >&2
  sleep "$delay" &
  wait $!
done
