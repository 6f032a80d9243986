# shellcheck shell=bash
# The one implementation of "build a pinned tool into the user's cache" for tools/*/build.sh (sourced, not run).
#
# A build script computes its version and the digest of what decides the build (cb_digest), names the cache
# directory (cb_setup), returns the cached result when it is complete, and otherwise opens the build (cb_open:
# log, temporary sibling directory, traps), runs its steps (cb_run, with cb_heartbeat while Go compiles) and
# installs (cb_install: the temporary directory renamed into place, so a present directory is complete). Every
# line it says starts with "[build LABEL]" and goes to stderr and to CACHE/logs/NAME.log, where the tools' own
# output goes too; a failure prints the log's last lines and installs nothing.

# cb_digest DIR PATTERN...: the first 12 hex digits of the sha256 of DIR's top-level files matching the name
# patterns, concatenated in name order.
cb_digest() {
  local dir=$1 args=() pattern
  shift
  for pattern in "$@"; do
    [[ ${#args[@]} -eq 0 ]] || args+=(-o)
    args+=(-name "$pattern")
  done
  (cd "$dir" && find . -maxdepth 1 \( "${args[@]}" \) -print0 | LC_ALL=C sort -z | xargs -0 cat | sha256sum | cut -c1-12)
}

# cb_setup LABEL CACHE NAME: sets cb_dest (CACHE/NAME) and cb_log (CACHE/logs/NAME.log).
cb_setup() {
  cb_label=$1
  cb_cache=$2
  cb_name=$3
  cb_dest=$cb_cache/$cb_name
  cb_log=$cb_cache/logs/$cb_name.log
  cb_ticker=
}

cb_say() {
  printf '[build %s] %s\n' "$cb_label" "$*" >&2
  printf '[build %s] %s\n' "$cb_label" "$*" >> "$cb_log"
}

cb_elapsed() {
  local s=$(( $(date +%s) - cb_start ))
  printf '%dm%02ds' $((s / 60)) $((s % 60))
}

# Killed, then waited for here: left to bash's asynchronous reaping, a later wait of the shell (the EXIT trap's rm)
# could find the ticker's record gone and print "wait_for: No record of process" (bash 5.2, seen once in a CI rehearsal).
cb_stop_heartbeat() {
  if [[ -n "$cb_ticker" ]]; then
    kill "$cb_ticker" 2>/dev/null || true
    wait "$cb_ticker" 2>/dev/null || true
  fi
  cb_ticker=
}

# cb_open: starts the log and the clock, makes the temporary directory cb_tmp; on exit it is removed (with the
# heartbeat stopped), on an interrupt the build says so and exits 130.
cb_open() {
  cb_start=$(date +%s)
  mkdir -p "$cb_cache/logs"
  : > "$cb_log"
  cb_tmp=$(mktemp -d "$cb_cache/.$cb_name.XXXXXX")
  trap 'cb_stop_heartbeat; rm -rf "$cb_tmp"' EXIT
  trap 'cb_say "interrupted after $(cb_elapsed); nothing was installed"; exit 130' INT TERM
}

# cb_require COMMAND FIX: exit 2 saying what to install when COMMAND is not on PATH.
cb_require() {
  command -v "$1" >/dev/null || { cb_say "$1 is not on PATH: $2"; exit 2; }
}

# cb_heartbeat SECONDS: a "still compiling" line every SECONDS until cb_install or a failure, so a cold build is
# seen to progress. One-second sleeps: a sleep left when the ticker is killed holds stderr open for a second at most.
cb_heartbeat() {
  local every=$1
  ( n=0; while sleep 1; do n=$((n + 1)); (( n % every )) || cb_say "still compiling ($(cb_elapsed))"; done ) >/dev/null &
  cb_ticker=$!
}

# cb_run DIR WHAT COMMAND...: COMMAND in DIR, its output into the log; on failure "WHAT failed after ...", the log's
# last lines, exit 1 (nothing installed).
cb_run() {
  local dir=$1 what=$2
  shift 2
  if ! (cd "$dir" && "$@") >> "$cb_log" 2>&1; then
    cb_stop_heartbeat
    cb_say "${what:+$what }failed after $(cb_elapsed); last lines of $cb_log:"
    tail -n 25 "$cb_log" | sed 's/^/  /' >&2
    exit 1
  fi
}

# cb_install COMPLETE: renames cb_tmp to cb_dest; when another build installed it first, keeps that one if the
# command COMPLETE (run with the directory as its argument) says it is complete.
cb_install() {
  cb_stop_heartbeat
  if ! mv -T "$cb_tmp" "$cb_dest" 2>/dev/null; then
    "$1" "$cb_dest" || { cb_say "could not install into $cb_dest"; exit 1; }
    cb_say "a concurrent build installed $cb_dest first; keeping it"
  fi
  chmod 0755 "$cb_dest"
  cb_say "installed in $cb_dest in $(cb_elapsed)"
}
