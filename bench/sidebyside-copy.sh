#!/usr/bin/env bash
# Make a writable copy of the shared side-by-side benchmark with what
# docs/benchmarks.md measures beyond it: the `seatq-onsale` item (the on-sale
# mix, run exactly like `seatq-spread`) with its ratio to spread; the
# set-based reference with seatq's writes (`sql-setbk`: a booking row for
# every request booked; `sql-setfair`: and a result naming every seat; both
# bench/sidebyside/booked.sql); graphile-worker's latency at idle
# (bench/peers/gw_latency.mjs, installed with the other peers); and the peers'
# package-lock.json, which the shared copy may lack and `npm ci` needs.
#
#   bench/sidebyside-copy.sh [SOURCE] DEST     (SOURCE: ../shared/bench)
#   DEST/sidebyside.sh --out F.jsonl            (from the checkout's root)
#
# It edits the copy by matching lines of the shared script; if those lines
# have changed, it stops and says which, rather than make a copy that runs
# without the items.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)

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

if ! grep -q sql-setfair "$dest/sidebyside.sh"; then
  cp "$here/sidebyside/booked.sql" "$dest/sql/"
  echo 'SELECT process_set_booked(1000, false);' >"$dest/sql/setbk.pgb"
  echo 'SELECT process_set_booked(1000, true);' >"$dest/sql/setfair.pgb"
  edit "$dest/sidebyside.sh" ',sql-set,sql-batch"' ',sql-set,sql-setbk,sql-setfair,sql-batch"'
  edit "$dest/sidebyside.sh" '^has_any sql-set sql-batch && need pgbench' 'has_any sql-set sql-setbk sql-setfair sql-batch \&\& need pgbench'
  edit "$dest/sidebyside.sh" '^has_any sql-set sql-batch && build_sql_template' 'has_any sql-set sql-setbk sql-setfair sql-batch \&\& build_sql_template'
  edit "$dest/sidebyside.sh" '-f setbased.sql -c' '-f setbased.sql -f booked.sql -c'
  edit "$dest/sidebyside.sh" '^\( *\)sql-set) *run_sql "$1" "$2" set.pgb 1000 2 ;;' \
    '&\n\1sql-setbk)    run_sql "$1" "$2" setbk.pgb 1000 2 ;;\n\1sql-setfair)  run_sql "$1" "$2" setfair.pgb 1000 2 ;;'
  edit "$dest/report.mjs" '^\( *\)\["sql-set", "SQL set-based `process_set(1000)`, pgbench c=2"\],' \
    '&\n\1["sql-setbk", "SQL set-based with booking rows, bare results, pgbench c=2"],\n\1["sql-setfair", "SQL set-based with booking rows and full results, pgbench c=2"],'
  edit "$dest/report.mjs" '^\( *\)\["seatq spread / set-based SQL (c=2)", "seatq-spread skip-locked", "sql-set"\],' \
    '&\n\1["seatq spread / set-based SQL with booking rows and full results", "seatq-spread skip-locked", "sql-setfair"],\n\1["set-based SQL with booking rows / set-based", "sql-setbk", "sql-set"],\n\1["set-based SQL with booking rows and full results / set-based", "sql-setfair", "sql-set"],'
fi

# sidebyside.sh copies every peers/*.mjs next to the installed peers.
cp "$here/peers/gw_latency.mjs" "$dest/peers/"

if [ ! -f "$dest/peers/package-lock.json" ]; then
  (cd "$dest/peers" && npm install --package-lock-only --no-audit --no-fund >/dev/null) ||
    die "npm could not write $dest/peers/package-lock.json"
fi
echo "$dest/sidebyside.sh"
