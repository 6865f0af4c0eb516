# gpufleet boot script prelude: logging, the failure marker, bounded retries.
set -u
export DEBIAN_FRONTEND=noninteractive
R="${GPUFLEET_ROOT:-}"  # a root prefix for the files written (tests); empty on a node
mkdir -p "$R@@DIR@@" "$R/var/log"
LOG="$R/var/log/@@TAG@@.log"
say() {
  echo "@@TAG@@: $*" >> "$LOG"
  { echo "@@TAG@@: $*" > /dev/console; } 2>/dev/null || true
}
fail() {
  say "FAILED: $*"
  printf 'status=failed\nscript=@@TAG@@\nreason=%s\n' "$*" > "$R@@FAILED@@"
  rm -f "$R@@READY@@"
  exit 0  # the machine still boots; the marker says what failed
}
retry() {
  local n=1
  until "$@"; do
    [ "$n" -ge @@RETRIES@@ ] && return 1
    sleep $((n * ${GPUFLEET_RETRY_SECONDS:-10})); n=$((n + 1))
  done
}
apt_get() { apt-get -o DPkg::Lock::Timeout=600 -y -q "$@"; }
