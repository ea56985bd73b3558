#!/usr/bin/env bash
# Run anonweb locally: the web server and a Celery worker, on embedded defaults
# (SQLite and a file-system broker under var/). Ctrl-C stops both.
# First run: creates .venv, installs dependencies, migrates, creates demo users and data.
set -euo pipefail
cd "$(dirname "$0")"
. scripts/venv.sh
ensure_venv ""

mkdir -p var
# A real secret key, made once and kept under var/, so the app runs with DEBUG off.
if [ -z "${SECRET_KEY:-}" ]; then
  if [ ! -s var/secret_key ]; then
    .venv/bin/python -c 'import secrets; print(secrets.token_urlsafe(50))' > var/secret_key
    chmod 600 var/secret_key
  fi
  SECRET_KEY="$(cat var/secret_key)"
  export SECRET_KEY
fi
# The audit trail's HMAC key, made once and kept under var/: never in the database.
if [ -z "${ANONWEB_AUDIT_KEY:-}" ] && [ ! -s var/audit_key ]; then
  (umask 077; .venv/bin/python -c 'import secrets; print(secrets.token_urlsafe(48))' > var/audit_key)
fi
export DJANGO_SETTINGS_MODULE=anonweb.settings
HOST="${ANONWEB_HOST:-127.0.0.1}"
PORT="${ANONWEB_PORT:-8000}"

.venv/bin/python manage.py migrate --noinput -v0
.venv/bin/python manage.py collectstatic --noinput -v0
.venv/bin/python manage.py bootstrap_demo

pids=()
stop() {
  trap - INT TERM EXIT
  echo
  echo "==> stopping web server and worker"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
}
trap stop INT TERM EXIT

# The worker is started again if it exits (scripts/supervise.sh); Ctrl-C stops it for good.
scripts/supervise.sh worker .venv/bin/celery -A anonweb.celery worker --beat --schedule var/celerybeat-schedule --loglevel=INFO --concurrency="${ANONWEB_WORKER_CONCURRENCY:-2}" --queues "${ANONWEB_QUEUE:-anonweb}" &
pids+=($!)
.venv/bin/gunicorn anonweb.wsgi:application --bind "$HOST:$PORT" --workers 2 --threads 4 \
  --access-logfile - --graceful-timeout 5 &
pids+=($!)
echo "==> anonweb is starting at http://$HOST:$PORT/ (Ctrl-C to stop)"
# Stop everything as soon as either process exits.
wait -n "${pids[@]}"
