# Shared by the scripts/provision-* scripts (sourced, not run): logging, the cache lock, the Go
# toolchain, heartbeats for long builds, and the scratch module that builds commands of the
# k8s.io/kubernetes module at a release.

# provision_init <name>: START_TS, CACHE_ROOT, and log/die prefixed with <name>.
provision_init() {
  PROVISION_NAME="$1"
  START_TS=$(date +%s)
  CACHE_ROOT="${HCLOUD_CCM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hcloud-ccm}"
  BUILD_PID=""
  PROVISION_WORK=""
}
log() { printf '[%s +%3ss] %s\n' "$PROVISION_NAME" "$(($(date +%s) - START_TS))" "$*" >&2; }
die() {
  printf '[%s] FAILED: %s\n' "$PROVISION_NAME" "$1" >&2
  printf '[%s] Retry with: %s\n' "$PROVISION_NAME" "${2:-scripts/$PROVISION_NAME}" >&2
  exit 1
}

# provision_lock <file>: take the lock (fd 9), waiting up to an hour for another run.
provision_lock() {
  exec 9>"$1"
  if ! flock -n 9; then
    log "another provisioning run holds $1; waiting for it (up to 60 min)"
    flock -w 3600 9 || die "timed out waiting for the lock $1"
  fi
}

# find_go: the go binary on stdout (PATH, else /usr/local/go/bin/go).
find_go() {
  local go
  go="$(command -v go || true)"
  [[ -n "$go" ]] || go=/usr/local/go/bin/go
  [[ -x "$go" ]] || return 1
  echo "$go"
}

# provision_workdir <dir>: a fresh scratch directory, removed (and any build killed) on exit.
provision_workdir() {
  PROVISION_WORK="$1"
  trap provision_cleanup EXIT
  rm -rf "$PROVISION_WORK"
  mkdir -p "$PROVISION_WORK"
}
provision_cleanup() {
  if [[ -n "${BUILD_PID:-}" ]]; then kill "$BUILD_PID" 2>/dev/null || true; fi
  if [[ -n "${PROVISION_WORK:-}" ]]; then rm -rf "$PROVISION_WORK" 2>/dev/null || true; fi
}

# run_with_heartbeat <label> <logfile> <cmd...>: run, logging "still running" every 30 s.
run_with_heartbeat() {
  local label="$1" logfile="$2"; shift 2
  local t0; t0=$(date +%s)
  ( "$@" ) >"$logfile" 2>&1 &
  BUILD_PID=$!
  while kill -0 "$BUILD_PID" 2>/dev/null; do
    for _ in $(seq 30); do kill -0 "$BUILD_PID" 2>/dev/null || break; sleep 1; done
    kill -0 "$BUILD_PID" 2>/dev/null && log "  $label: still running ($(($(date +%s) - t0))s)"
  done
  local rc=0
  wait "$BUILD_PID" || rc=$?
  BUILD_PID=""
  return $rc
}

# install_dir <stage> <dest>: replace <dest> with <stage> (a rename, so readers never see half).
install_dir() {
  rm -rf "$2.tmp"
  mv "$1" "$2.tmp"
  rm -rf "$2"
  mv "$2.tmp" "$2"
}

# kubernetes_release <1.MINOR|1.MINOR.PATCH|v...>: the full release on stdout. A minor maps to
# the patch release pinned here (the suite's versions; the official CCM v1.35.0 supports
# 1.33-1.36, 1.37 is the newest Kubernetes).
kubernetes_release() {
  local requested="${1#v}"
  case "$requested" in
    1.33) echo "1.33.13" ;;
    1.34) echo "1.34.4" ;;
    1.35) echo "1.35.4" ;;
    1.36) echo "1.36.3" ;;
    1.37) echo "1.37.2" ;;
    *)
      [[ "$requested" =~ ^1\.[0-9]+\.[0-9]+$ ]] || return 1
      echo "$requested" ;;
  esac
}

# module_dir <go> <module@version>: download the module, print its directory.
module_dir() {
  "$1" mod download -json "$2" 2>/dev/null | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' | head -1 | grep .
}

# kubernetes_scratch_module <go> <vX.Y.Z> <dir> <module name>: a go.mod in <dir> that requires
# k8s.io/kubernetes at the release and replaces each staging module (required at v0.0.0 and
# replaced with ./staging upstream, which a module download leaves out) with its published
# release v0.Y.Z. Commands are then built with `go get` + `go build` inside <dir>.
kubernetes_scratch_module() {
  local go="$1" version="$2" dir="$3" name="$4"
  local release="${version#v}" gomod staging module
  (cd /tmp && "$go" mod download -json "k8s.io/kubernetes@$version" >/dev/null) || return 1
  gomod="$("$go" env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$version.mod"
  [[ -f "$gomod" ]] || return 1
  staging=$(sed -n '/^replace (/,/^)/p' "$gomod" | awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print $1}')
  [[ -n "$staging" ]] || return 1
  mkdir -p "$dir"
  {
    echo "// Scratch module: builds commands of k8s.io/kubernetes $version (scripts/lib/provision.sh)."
    echo "module $name"
    echo
    echo "go $(awk '$1 == "go" {print $2; exit}' "$gomod")"
    echo
    echo "require k8s.io/kubernetes $version"
    echo
    echo "replace ("
    for module in $staging; do echo "	$module => $module v0.${release#1.}"; done
    echo ")"
  } >"$dir/go.mod"
}

# kubernetes_ldflags <vX.Y.Z>: strip symbols and stamp the version so `--version` and `/version`
# tell the truth.
kubernetes_ldflags() {
  local version="$1" minor flags="-s -w" pkg
  minor="${version#v1.}"
  minor="${minor%%.*}"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags="$flags -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    flags="$flags -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$flags"
}

# apt_install <log file> <package...>: install Debian packages, one installer at a time. Tests
# run provisioning scripts in parallel (two image tests, a real-node test), and two apt-gets at
# once fail on dpkg's lock ("Could not get lock /var/lib/dpkg/lock-frontend"). Every script
# installs through here: our own lock serialises our installers (waiting up to 20 min), and
# DPkg::Lock::Timeout waits for an apt-get started by anything else. A package another run
# installed meanwhile is simply already there.
apt_install() {
  local logfile="$1"; shift
  local sudo="" cache_root lock
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  cache_root="${HCLOUD_CCM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hcloud-ccm}"
  mkdir -p "$cache_root"
  lock="$cache_root/apt.lock"
  (
    exec 8>"$lock"
    flock -w 1200 8 || { echo "timed out after 20 min waiting for $lock (another apt-get of ours)"; exit 1; }
    $sudo apt-get -o DPkg::Lock::Timeout=600 update -q &&
      DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -q "$@"
  ) >"$logfile" 2>&1
}
