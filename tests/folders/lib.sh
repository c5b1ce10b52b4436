# Sourced by the folder tests (folders.sh, resume.sh): pass / fail counting
# and command checks against $work/out.
fails=0 passes=0
ok() { passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
run() { # run DESCRIPTION EXPECTED_RC COMMAND... (output in $work/out)
  local what=$1 want=$2
  shift 2
  "$@" >"$work/out" 2>&1
  local rc=$?
  [ "$rc" -eq "$want" ] && ok || { fail "$what: exit $rc, wanted $want"; sed 's/^/    /' "$work/out"; }
}
has() { grep -q -- "$2" "$work/out" && ok || { fail "$1: no '$2' in:"; sed 's/^/    /' "$work/out"; }; }
