# deb-common.sh: the body both packages are built with, sourced by build-deb.sh (sitegate) and
# build-sim-deb.sh (sitegate-sim), which only put their own files into $root. One changelog
# for both, so a version bump is one entry (docs/packaging.md).
# shellcheck shell=bash

# deb_begin NAME ARCH: the Debian architecture ($debarch), a work folder removed on exit
# ($work) and the package's tree in it ($root); NAME says who refuses.
deb_begin() {
  me=$1
  case "$2" in x64) debarch=amd64 ;; arm64) debarch=arm64 ;; *) echo "$me: no .deb for $2 (docs/packaging.md, armhf)" >&2; exit 2 ;; esac
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  root=$work/root
  mkdir -p "$root"
}

# deb_docs PACKAGE VERSION CLI OVERRIDES: the changelog (its newest entry must be this
# release; a native package carries it as changelog.gz, Debian policy 12.7), the manual page
# made from CLI's --help, and the lintian overrides.
deb_docs() {
  local pkg=$1 version=$2 cli=$3 overrides=$4 top date
  top=$(dpkg-parsechangelog -l "$here/debian/changelog" -S Version)
  [ "$top" = "$version" ] || { echo "$me: packaging/debian/changelog starts at $top, not $version: add an entry for $version" >&2; exit 2; }
  date=$(dpkg-parsechangelog -l "$here/debian/changelog" -S Timestamp)
  install -d "$root/usr/share/doc/$pkg" "$root/usr/share/man/man1" "$root/usr/share/lintian/overrides"
  gzip -9n < "$here/debian/changelog" > "$root/usr/share/doc/$pkg/changelog.gz"
  node "$here/man-page.mjs" "$pkg" "$cli" "$version" "$date" | gzip -9n > "$root/usr/share/man/man1/$pkg.1.gz"
  install -m 644 "$overrides" "$root/usr/share/lintian/overrides/$pkg"
}

# deb_pack PACKAGE VERSION SCRIPTS OUTDIR < FIELDS: no folder the package leaves empty; md5sums
# of every file but the conffiles under /etc (dpkg keeps theirs), so `dpkg --verify` checks the
# rest; the maintainer scripts from SCRIPTS (@VERSION@ filled in); the control file, its own
# fields (Depends on, Description) from stdin; then OUTDIR/PACKAGE_VERSION_DEBARCH.deb.
deb_pack() {
  local pkg=$1 version=$2 scripts=$3 outdir=$4 s out
  find "$root" -mindepth 1 -type d -empty -delete
  mkdir -p "$root/DEBIAN"
  ( cd "$root" && find . -type f ! -path './DEBIAN/*' ! -path './etc/*' -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum ) > "$root/DEBIAN/md5sums"
  chmod 644 "$root/DEBIAN/md5sums"
  for s in postinst prerm postrm; do
    sed "s/@VERSION@/$version/g" "$scripts/$s" > "$root/DEBIAN/$s"
    chmod 755 "$root/DEBIAN/$s"
  done
  {
    printf 'Package: %s\nVersion: %s\nArchitecture: %s\n' "$pkg" "$version" "$debarch"
    printf 'Maintainer: %s\n' "${DEB_MAINTAINER:-sitegate maintainers <sitegate@example.com>}"
    printf 'Section: net\nPriority: optional\nInstalled-Size: %s\n' "$(du -sk --exclude=DEBIAN "$root" | cut -f1)"
    cat
  } > "$root/DEBIAN/control"
  mkdir -p "$outdir"
  out="$outdir/${pkg}_${version}_${debarch}.deb"
  dpkg-deb --root-owner-group -Zxz -z6 --build "$root" "$out.tmp" >/dev/null
  mv "$out.tmp" "$out"
  echo "$out"
}
