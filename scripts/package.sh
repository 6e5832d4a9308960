#!/usr/bin/env bash
# Builds pgmedic's release files from the checkout, into DIST (./dist):
#   pgmedic_VERSION_linux_amd64.tar.gz, pgmedic_VERSION_linux_arm64.tar.gz
#   pgmedic_VERSION_amd64.deb, pgmedic_VERSION_arm64.deb
# each holding the static binary (scripts/build.sh), a man page per command
# and the bash, zsh and fish completions (scripts/helpfiles), the README
# and the notices of what the binary carries. pg_query is C, so arm64 is
# cross-compiled with Debian's cross toolchain (gcc-aarch64-linux-gnu,
# installed by scripts/install-deps.sh).
#
# VERSION is the tag (v1.2.3 gives 1.2.3) or, between tags,
# 0.1.0~git<commits>.<commit>, which sorts before 0.1.0 for dpkg. Files are
# dated by the commit (SOURCE_DATE_EPOCH), so two runs on one commit make
# the same packages.
#
# usage: scripts/package.sh [--arch amd64|arm64]... [DIST]
set -euo pipefail
cd "$(dirname "$0")/.."

archs=()
dist=dist
while [ $# -gt 0 ]; do
  case $1 in
    --arch) archs+=("$2"); shift 2 ;;
    -*) echo "package: unknown option $1 (usage: scripts/package.sh [--arch amd64|arm64]... [DIST])" >&2; exit 2 ;;
    *) dist=$1; shift ;;
  esac
done
[ ${#archs[@]} -gt 0 ] || archs=(amd64 arm64)

commit=$(git rev-parse --short=12 HEAD)
if tag=$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null); then
  version=${tag#v}
else
  version="0.1.0~git$(git rev-list --count HEAD).${commit}"
fi
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  version="${version}+dirty"
fi
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}

# notices FILE: what the files are and under which terms the code the
# binary carries comes.
notices() {
  {
    echo "pgmedic $version (commit $commit), https://github.com/pgmedic/pgmedic"
    echo
    echo "Copyright the pgmedic developers. Licensed under the Apache License, Version 2.0:"
    echo "the LICENSE file beside this one in the tarball, /usr/share/common-licenses/Apache-2.0"
    echo "on Debian, https://www.apache.org/licenses/LICENSE-2.0 online."
    echo
    echo "The Go modules linked into the binary, each under its own licence, are"
    echo "listed by: go version -m \$(command -v pgmedic)"
    echo "It links libpg_query (BSD 3-Clause), which carries PostgreSQL's parser"
    echo "(PostgreSQL Licence), and Go types generated from libpg_query's pg_query.proto"
    echo "(BSD 3-Clause). The C library linked in is musl (MIT) on amd64 and the GNU C"
    echo "Library (LGPL 2.1 or later) on arm64. The HTML reports inline uPlot, under this licence:"
    echo
    cat internal/report/assets/vendor/uplot/LICENSE
  } > "$1"
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$dist"

# The man pages and completions describe the command tree, the same on
# every architecture: written once, by the host.
go run -ldflags "-X github.com/pgmedic/pgmedic/internal/cli.Version=${version} -X github.com/pgmedic/pgmedic/internal/cli.Commit=${commit}" \
  ./scripts/helpfiles "$work/help"
gzip -9n "$work"/help/man1/*.1

for arch in "${archs[@]}"; do
  case $arch in
    amd64) cc=musl-gcc ;;
    arm64) cc=aarch64-linux-gnu-gcc ;;
    *) echo "package: no build for architecture $arch (amd64 or arm64)" >&2; exit 2 ;;
  esac
  command -v "$cc" >/dev/null || { echo "package: $cc is missing, which builds pgmedic for $arch: run scripts/install-deps.sh" >&2; exit 2; }
  bin="$work/$arch/pgmedic"
  echo "package: building pgmedic $version for linux/$arch"
  CC=$cc GOARCH=$arch VERSION=$version COMMIT=$commit bash scripts/build.sh "$bin"

  # The tarball: a folder named for the release, as it unpacks.
  name="pgmedic_${version}_linux_${arch}"
  tree="$work/$name"
  mkdir -p "$tree/man/man1" "$tree/completions"
  cp "$bin" "$tree/pgmedic"
  cp "$work"/help/man1/* "$tree/man/man1/"
  cp "$work"/help/completions/* "$tree/completions/"
  cp README.md LICENSE "$tree/"
  # README's links lead into docs/: the guides, the rules, the reference
  # and the picture travel with it.
  (cd docs && find . -name '*.md' -o -name '*.png') | while read -r f; do
    install -D -m 0644 "docs/$f" "$tree/docs/$f"
  done
  notices "$tree/NOTICE"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
    -C "$work" -czf "$dist/$name.tar.gz" "$name"

  # The .deb: the binary in /usr/bin, the pages and completions where
  # man, bash-completion, zsh and fish look for packaged ones.
  root="$work/deb-$arch"
  install -D -m 0755 "$bin" "$root/usr/bin/pgmedic"
  install -d "$root/usr/share/man/man1" "$root/usr/share/doc/pgmedic"
  install -m 0644 "$work"/help/man1/* "$root/usr/share/man/man1/"
  install -D -m 0644 "$work/help/completions/pgmedic" "$root/usr/share/bash-completion/completions/pgmedic"
  install -D -m 0644 "$work/help/completions/_pgmedic" "$root/usr/share/zsh/vendor-completions/_pgmedic"
  install -D -m 0644 "$work/help/completions/pgmedic.fish" "$root/usr/share/fish/vendor_completions.d/pgmedic.fish"
  gzip -9nc README.md > "$root/usr/share/doc/pgmedic/README.md.gz"
  (cd docs && find . -name '*.md' -o -name '*.png') | while read -r f; do
    install -D -m 0644 "docs/$f" "$root/usr/share/doc/pgmedic/docs/$f"
  done
  notices "$root/usr/share/doc/pgmedic/copyright"
  mkdir -p "$root/DEBIAN"
  cat > "$root/DEBIAN/control" <<EOF
Package: pgmedic
Version: $version
Architecture: $arch
Maintainer: pgmedic developers <pgmedic@users.noreply.github.com>
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Recommends: postgresql-15 | postgresql, postgresql-contrib
Suggests: postgresql-15-hypopg, pgbouncer, python3-asyncpg, python3-psycopg, nodejs, npm
Section: database
Priority: optional
Homepage: https://github.com/pgmedic/pgmedic
Description: find why a PostgreSQL database is slow or failing, and prove it
 pgmedic reads a live database, its logs or its plans, finds what makes it
 slow or failing, proves each finding with a measured experiment on the
 server or on a twin, and hands over the fix. 'pgmedic demo' reproduces
 the incidents it knows on a throwaway cluster (it needs a PostgreSQL
 server installed: the recommended postgresql-15).
EOF
  find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
  dpkg-deb --root-owner-group -Zxz --build "$root" "$dist/pgmedic_${version}_${arch}.deb" >/dev/null
done
(cd "$dist" && sha256sum -- *"_${version}"* > "pgmedic_${version}_SHA256SUMS")
echo "package: pgmedic $version in $dist:"
for f in "$dist"/*"_${version}"*; do echo "  ${f##*/}"; done
