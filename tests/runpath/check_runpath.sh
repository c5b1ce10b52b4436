#!/usr/bin/env bash
# check_runpath.sh DIR...: every ELF file below each DIR may carry only
# absolute or $ORIGIN-relative RUNPATH / RPATH entries. An empty entry
# ("a::b", a trailing ':') or a relative one is searched from the current
# directory: a program run inside a folder holding a libjson-c.so.5 would
# load that stranger's library.
set -euo pipefail
command -v readelf >/dev/null || { echo "readelf not found (binutils)"; exit 1; }
bad=0 checked=0
for dir in "$@"; do
  [ -d "$dir" ] || { echo "no such directory: $dir"; exit 1; }
  while IFS= read -r -d '' f; do
    [ "$(head -c 4 "$f" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ] || continue
    checked=$((checked + 1))
    # "Library runpath: [a:b]" / "Library rpath: [a:b]"
    while IFS= read -r paths; do
      IFS=: read -r -a entries <<<"$paths"
      [ "${paths: -1}" = : ] && entries+=("")
      [ -n "$paths" ] || entries=("")
      for e in "${entries[@]}"; do
        case $e in
          /* | '$ORIGIN' | '$ORIGIN/'* | '${ORIGIN}' | '${ORIGIN}/'*) ;;
          *) echo "$f: run path [$paths] has the entry '$e' (empty or relative)"; bad=$((bad + 1)) ;;
        esac
      done
    done < <(readelf -d "$f" 2>/dev/null | sed -n 's/.*Library r[a-z]*path: \[\(.*\)\]$/\1/p')
  done < <(find "$dir" -type f -print0)
done
[ "$checked" -gt 0 ] || { echo "no ELF files found in $*"; exit 1; }
[ "$bad" -eq 0 ] || { echo "$bad bad run path entries"; exit 1; }
echo "$checked ELF files: every run path entry absolute or \$ORIGIN-relative"
