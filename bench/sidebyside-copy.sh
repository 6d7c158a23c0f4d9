#!/usr/bin/env bash
# Make a writable copy of the shared side-by-side benchmark with what
# docs/benchmarks.md measures beyond it: the `seatq-onsale` item (the on-sale
# mix, run exactly like `seatq-spread`) with its ratio to spread, and the
# peers' package-lock.json, which the shared copy may lack and `npm ci` needs.
#
#   bench/sidebyside-copy.sh [SOURCE] DEST     (SOURCE: ../shared/bench)
#   DEST/sidebyside.sh --out F.jsonl            (from the checkout's root)
#
# It edits the copy by matching lines of the shared script; if those lines
# have changed, it stops and says which, rather than make a copy that runs
# without the item.
set -euo pipefail

die() { echo "sidebyside-copy: $*" >&2; exit 2; }

case $# in
  1) src=../shared/bench; dest=$1 ;;
  2) src=$1; dest=$2 ;;
  *) die "usage: $0 [SOURCE] DEST" ;;
esac
[ -f "$src/sidebyside.sh" ] && [ -f "$src/report.mjs" ] || die "$src has no sidebyside.sh and report.mjs"
[ -e "$dest" ] && die "$dest exists; give a new folder"

mkdir -p "$dest"
cp -r "$src/." "$dest/"
chmod -R u+w "$dest"

# Replace the one line that matches $2 in file $1 with $3 (sed's replacement
# syntax), or stop.
edit() {
  local file=$1 match=$2 with=$3
  [ "$(grep -c -- "$match" "$file")" = 1 ] || die "expected one line matching '$match' in $file"
  sed -i "s|$match|$with|" "$file"
}

if ! grep -q seatq-onsale "$dest/sidebyside.sh"; then
  edit "$dest/sidebyside.sh" 'ALL_ITEMS="seatq-spread,seatq-hot,' 'ALL_ITEMS="seatq-spread,seatq-hot,seatq-onsale,'
  edit "$dest/sidebyside.sh" '^if has_any seatq-spread seatq-hot; then' 'if has_any seatq-spread seatq-hot seatq-onsale; then'
  edit "$dest/sidebyside.sh" '^has_any seatq-spread seatq-hot && line+=' 'has_any seatq-spread seatq-hot seatq-onsale \&\& line+='
  edit "$dest/sidebyside.sh" '^\( *\)seatq-hot) *run_seatq "$1" "$2" hot skip-locked,blocking ;;' \
    '&\n\1seatq-onsale) run_seatq "$1" "$2" on-sale skip-locked ;;'
  edit "$dest/report.mjs" '^\( *\)\["seatq-hot blocking", "seatq hot, blocking"\],' \
    '&\n\1["seatq-onsale skip-locked", "seatq on-sale mix, skip-locked"],'
  edit "$dest/report.mjs" '^\( *\)\["hot skip-locked / hot blocking", "seatq-hot skip-locked", "seatq-hot blocking"\],' \
    '&\n\1["on-sale / spread (skip-locked)", "seatq-onsale skip-locked", "seatq-spread skip-locked"],'
fi

if [ ! -f "$dest/peers/package-lock.json" ]; then
  (cd "$dest/peers" && npm install --package-lock-only --no-audit --no-fund >/dev/null) ||
    die "npm could not write $dest/peers/package-lock.json"
fi
echo "$dest/sidebyside.sh"
