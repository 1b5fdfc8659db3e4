#!/usr/bin/env bash
# setup.sh installs what building and testing Switchyard needs on a fresh
# Debian machine, and skips whatever is already there. Safe to run again.
#
#   PostgreSQL server binaries  (Debian package postgresql)
#   Chromium's headless shell   (Debian package chromium-headless-shell; browser tests)
#   playwright driver           (playwright-core from npm, matched to the Go module)
#   templ, sqlc, staticcheck    (built from the pinned Go modules, cached by Go)
#
# Usage: scripts/setup.sh [--postgres|--tools|--no-browser]
#   (no option)   everything the tests need
#   --postgres    only the PostgreSQL server binaries (enough to run the console)
#   --tools       only the Go tools (make generate, make lint)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

# The playwright-core version must match the one mxschmitt/playwright-go
# was built for, or the driver refuses to start.
playwright_version="1.64.1"
driver_dir="${PLAYWRIGHT_DRIVER_PATH:-$root/.tools/playwright-driver-$playwright_version}"

mode="${1:-all}"
say() { printf 'setup: %s\n' "$*"; }

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"
	elif command -v sudo >/dev/null 2>&1; then sudo "$@"
	else say "need root to run: $*"; exit 1
	fi
}

apt_updated=""
apt_install() {
	if [ -z "$apt_updated" ]; then
		as_root apt-get update -qq
		apt_updated=1
	fi
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

have_pg_server() {
	local dir
	if command -v pg_config >/dev/null 2>&1; then
		dir="$(pg_config --bindir)"
		[ -x "$dir/postgres" ] && [ -x "$dir/initdb" ] && return 0
	fi
	for dir in /usr/lib/postgresql/*/bin; do
		[ -x "$dir/postgres" ] && [ -x "$dir/initdb" ] && return 0
	done
	return 1
}

install_postgres() {
	if have_pg_server; then
		say "PostgreSQL server binaries: present"
	else
		say "PostgreSQL server binaries: installing (apt postgresql)"
		apt_install postgresql
	fi
}

# The browser tests drive the headless shell (e2e/harness_test.go says why).
chromium_shell=/usr/lib/chromium/chromium-headless-shell
install_chromium() {
	if [ -x "$chromium_shell" ]; then
		say "chromium headless shell: present ($("$chromium_shell" --version 2>/dev/null | head -1))"
	else
		say "chromium headless shell: installing (apt chromium-headless-shell)"
		apt_install chromium-headless-shell
	fi
}

install_driver() {
	if [ -x "$driver_dir/node" ] && [ "$("$driver_dir/node" "$driver_dir/package/cli.js" --version 2>/dev/null)" = "Version $playwright_version" ]; then
		say "playwright driver $playwright_version: present in $driver_dir"
		return
	fi
	command -v node >/dev/null 2>&1 || { say "node is required for the playwright driver (apt-get install nodejs npm)"; exit 1; }
	say "playwright driver $playwright_version: installing into $driver_dir"
	local tmp
	tmp="$(mktemp -d)"
	(cd "$tmp" && npm pack --silent "playwright-core@$playwright_version" >/dev/null && tar -xzf "playwright-core-$playwright_version.tgz")
	# Replace only what is recognisably a driver directory: the path may come
	# from PLAYWRIGHT_DRIVER_PATH.
	if [ -e "$driver_dir" ]; then
		if [ -f "$driver_dir/package/cli.js" ]; then rm -rf "$driver_dir"
		else say "$driver_dir exists and is not a playwright driver directory; remove it or set PLAYWRIGHT_DRIVER_PATH elsewhere"; exit 1
		fi
	fi
	mkdir -p "$driver_dir"
	mv "$tmp/package" "$driver_dir/package"
	ln -s "$(command -v node)" "$driver_dir/node"
	rm -rf "$tmp"
}

build_tools() {
	say "templ, sqlc, staticcheck: building from pinned modules (cached after the first time)"
	go build -o /dev/null github.com/a-h/templ/cmd/templ
	go build -modfile=tools/go.mod -o /dev/null github.com/sqlc-dev/sqlc/cmd/sqlc
	go build -modfile=tools/go.mod -o /dev/null honnef.co/go/tools/cmd/staticcheck
}

case "$mode" in
	--postgres) install_postgres ;;
	--tools) build_tools ;;
	--no-browser) install_postgres; build_tools ;;
	all) install_postgres; install_chromium; install_driver; build_tools ;;
	*) say "unknown option $mode"; exit 2 ;;
esac
say "done"
