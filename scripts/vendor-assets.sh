#!/usr/bin/env bash
# vendor-assets.sh copies the console's pinned browser libraries out of their
# npm packages into web/static/vendor/, and records what it copied in
# web/static/vendor/VERSIONS (package@version per line) and
# web/static/vendor/SHA256SUMS (sha256sum format, names relative to vendor/).
#
# Usage:
#   scripts/vendor-assets.sh          fetch the pinned versions with npm pack
#   scripts/vendor-assets.sh --check  verify the committed files offline
#
# To upgrade a library, change its version below, run the script, and commit
# this script together with everything it changed in web/static/vendor/.
# Running it twice with the same pins leaves the files unchanged.
set -euo pipefail

# htmx.org stays on 2.0.x: htmx 4 is a different API, and the extensions
# below are written for htmx 2.
readonly HTMX_VERSION=2.0.11
# htmx-ext-sse 2.2.4 declares htmx.org ^2.0.2.
readonly HTMX_EXT_SSE_VERSION=2.2.4
# idiomorph's dist/idiomorph-ext.min.js bundles Idiomorph together with the
# htmx 2 extension that registers the "morph" swap (hx-ext="morph").
readonly IDIOMORPH_VERSION=0.8.0
readonly UPLOT_VERSION=1.6.32

# assets lists "package@version  file in the package  name in vendor/".
readonly -a assets=(
	"htmx.org@${HTMX_VERSION} dist/htmx.min.js htmx.min.js"
	"htmx-ext-sse@${HTMX_EXT_SSE_VERSION} dist/sse.min.js htmx-ext-sse.js"
	"idiomorph@${IDIOMORPH_VERSION} dist/idiomorph-ext.min.js idiomorph-ext.min.js"
	"uplot@${UPLOT_VERSION} dist/uPlot.iife.min.js uPlot.iife.min.js"
	"uplot@${UPLOT_VERSION} dist/uPlot.min.css uPlot.min.css"
)

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly root
readonly vendor="${root}/web/static/vendor"
tmp=""

die() {
	echo "vendor-assets: $*" >&2
	exit 1
}

cleanup() {
	if [[ -n "${tmp}" ]]; then
		rm -rf -- "${tmp}"
	fi
}

# versions prints each pinned package@version once, in the order of assets.
versions() {
	local entry
	for entry in "${assets[@]}"; do
		echo "${entry%% *}"
	done | awk '!seen[$0]++'
}

# names prints the vendored file names, sorted so SHA256SUMS is stable.
names() {
	local entry
	for entry in "${assets[@]}"; do
		echo "${entry##* }"
	done | LC_ALL=C sort
}

check() {
	[[ -f "${vendor}/SHA256SUMS" ]] || die "${vendor}/SHA256SUMS is missing; run scripts/vendor-assets.sh"
	cd "${vendor}"
	if ! sha256sum --check --strict --quiet SHA256SUMS; then
		die "web/static/vendor does not match SHA256SUMS; run scripts/vendor-assets.sh"
	fi
	if ! diff -u <(names) <(awk '{ print $2 }' SHA256SUMS | LC_ALL=C sort); then
		die "SHA256SUMS does not list the files this script vendors; run scripts/vendor-assets.sh"
	fi
	if ! diff -u <(versions) VERSIONS; then
		die "VERSIONS does not match the versions pinned in scripts/vendor-assets.sh; run scripts/vendor-assets.sh"
	fi
	echo "vendor-assets: web/static/vendor matches SHA256SUMS and VERSIONS"
}

# fetch unpacks each package once into a temporary directory, stages the
# files there, and only then copies them into vendor/, so a failed download
# leaves the committed files as they were.
fetch() {
	command -v npm >/dev/null || die "npm is not installed"
	tmp="$(mktemp -d)"
	trap cleanup EXIT
	local stage="${tmp}/stage" entry pkg src dst dir tarball
	mkdir -p "${stage}"
	for entry in "${assets[@]}"; do
		read -r pkg src dst <<<"${entry}"
		dir="${tmp}/pkg/${pkg}"
		if [[ ! -d "${dir}" ]]; then
			tarball="$(npm pack --silent --pack-destination "${tmp}" "${pkg}")"
			mkdir -p "${dir}"
			tar -xzf "${tmp}/${tarball}" -C "${dir}" --strip-components=1
		fi
		[[ -f "${dir}/${src}" ]] || die "${pkg} has no ${src}"
		install -m 0644 "${dir}/${src}" "${stage}/${dst}"
	done
	# Keep each package's licence beside its files (uPlot's MIT licence asks
	# for its notice to travel with copies). They are not served.
	mkdir -p "${stage}/licenses"
	local lic
	while read -r pkg; do
		lic="$(find "${tmp}/pkg/${pkg}" -maxdepth 1 -iname 'LICEN[CS]E*' | head -1)"
		[[ -n "${lic}" ]] || die "${pkg} ships no licence file"
		install -m 0644 "${lic}" "${stage}/licenses/${pkg%@*}.txt"
	done < <(versions)
	(cd "${stage}" && names | xargs sha256sum -- >SHA256SUMS)
	versions >"${stage}/VERSIONS"
	chmod 0644 "${stage}/SHA256SUMS" "${stage}/VERSIONS"

	mkdir -p "${vendor}"
	cp -r -- "${stage}"/* "${vendor}/"
	echo "vendor-assets: wrote $(names | wc -l) files to web/static/vendor:"
	sed 's/^/  /' "${vendor}/VERSIONS"
}

case "${1:-}" in
"") fetch ;;
--check) check ;;
*) die "usage: $0 [--check]" ;;
esac
