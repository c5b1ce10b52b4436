# Shared by the shell tests (tests/*/*.sh). Each sources it through a path
# relative to itself, so that it is found wherever the script is run from (a
# build tree, a fresh clone, the cross-arch and sanitizer legs of .ci/run):
#
#   . "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
#   harness_init cli "$1" "$2"      # build, src, amn; $work: /tmp/amn-cli.XXXXXX
#   need_plugin safetensors         # SKIP (exit 77) in a build without it
#   expect "help" 0 --help; says "help" "remember FILE"
#   finish cli                      # "cli: N passed, M failed", exit 1 on a failure
#
# A test counts what it checked: `pass` for a check that held, `fail MESSAGE`
# ("FAIL: MESSAGE" on stdout) for one that did not. Commands whose exit code
# is checked leave their stdout and stderr in $work/out for the checks that
# follow (says, matches). Set KEEP=1 to keep $work for a look after a run.

fails=0 passes=0 skips=0
py=/usr/bin/python3 # the Python the checks and the fixture makers run under
pass() { passes=$((passes + 1)); }
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}
# indent FILE...: FILE's lines set off under a FAIL line
indent() { sed 's/^/    /' "$@"; }

# skip WHY: the test cannot run here (ctest reports it skipped, exit 77).
skip() {
  echo "SKIP: $*"
  exit 77
}

# harness_init NAME BUILD [SRC]: $build and $src as absolute paths (a test
# may cd), $amn the command line built there, and $work (work_dir NAME).
harness_init() {
  build=$(cd "$2" && pwd) || {
    echo "FAIL: no build directory '$2'"
    exit 1
  }
  if [ $# -ge 3 ]; then
    src=$(cd "$3" && pwd) || {
      echo "FAIL: no source directory '$3'"
      exit 1
    }
  fi
  amn=$build/bin/amn
  work_dir "$1"
}

# have WORDS: `amn plugins` lists WORDS ("format npz", "scheme bnb ", ...).
have() { "$amn" plugins 2>/dev/null | grep -q -- "$*"; }
# need_plugin NAME [WORDS]: skip unless the NAME plugin is built; WORDS is what
# `amn plugins` shows for it ("format NAME" by default).
need_plugin() { have "${2:-format $1}" || skip "needs the $1 plugin, not built"; }

# sanitized: the build runs under ASan/UBSan (its shadow memory and
# quarantine of freed blocks count in a peak RSS: bounds on it say nothing).
sanitized() { grep -Eq '^AMN_SANITIZE:[A-Z]+=.+' "$build/CMakeCache.txt" 2>/dev/null; }

# need_python MODULE: skip unless /usr/bin/python3 imports MODULE.
need_python() { /usr/bin/python3 -c "import $1" 2>/dev/null || skip "needs python3-$1"; }

# work_dir NAME: $work, a new folder /tmp/amn-NAME.XXXXXX, removed on exit
# (kept when KEEP is set); at_exit COMMAND runs COMMAND before that.
harness_at_exit=()
at_exit() { harness_at_exit+=("$1"); }
harness_exit() {
  local c
  for c in "${harness_at_exit[@]}"; do eval "$c"; done
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
work_dir() {
  work=$(mktemp -d "/tmp/amn-$1.XXXXXX") || {
    echo "FAIL: cannot make a work folder"
    exit 1
  }
  trap harness_exit EXIT
}

# run_rc WHAT WANT COMMAND...: COMMAND exits WANT (output in $work/out).
run_rc() {
  local what=$1 want=$2
  shift 2
  "$@" >"$work/out" 2>&1
  local rc=$?
  if [ "$rc" -eq "$want" ]; then pass; else
    fail "$what: exit $rc, wanted $want"
    indent "$work/out"
  fi
}
# expect WHAT WANT ARGS...: amn ARGS exits WANT (output in $work/out).
expect() {
  local what=$1 want=$2
  shift 2
  run_rc "$what" "$want" "$amn" "$@"
}
# says WHAT TEXT: the last checked command's output holds TEXT (a fixed string).
says() {
  if grep -qF -- "$2" "$work/out"; then pass; else
    fail "$1: no '$2' in:"
    indent "$work/out"
  fi
}
# matches WHAT REGEX: the last checked command's output matches REGEX (grep).
matches() {
  if grep -q -- "$2" "$work/out"; then pass; else
    fail "$1: no '$2' in:"
    indent "$work/out"
  fi
}
# expect_fail CODE WORDS... -- ARGS...: amn ARGS exits CODE ("any": any
# failure; then a success is all that is reported), its output ($work/log)
# holding every WORD (a grep pattern, any case).
expect_fail() {
  local code=$1 words=() w
  shift
  while [ "$1" != -- ]; do
    words+=("$1")
    shift
  done
  shift
  "$amn" "$@" >"$work/log" 2>&1
  local rc=$?
  if [ "$code" = any ] && [ "$rc" -eq 0 ]; then
    fail "$* succeeded"
    return
  elif [ "$code" != any ] && [ "$rc" -ne "$code" ]; then
    fail "$* exited $rc, wanted $code"
    cat "$work/log"
  else pass; fi
  for w in "${words[@]}"; do
    if grep -qi -- "$w" "$work/log"; then pass; else
      fail "$*: no '$w' in:"
      cat "$work/log"
    fi
  done
}
# same WHAT FILE1 FILE2: the two files hold the same bytes.
same() { cmp -s "$2" "$3" && pass || fail "$1: $2 and $3 differ"; }
# absent MESSAGE FILE...: none of the FILEs exists (a refused run wrote nothing).
absent() {
  local what=$1 f
  shift
  for f in "$@"; do
    [ ! -e "$f" ] || {
      fail "$what"
      return
    }
  done
  pass
}
# nothing_left WHAT [DIR]: no output named bad* in DIR ($work), nor its
# temporary (.bad*); what is found is removed for the next check.
nothing_left() {
  local d=${2:-$work}
  if ls -a "$d" | grep -q "^bad\|^\.bad"; then
    fail "$1: left an output"
    rm -rf "$d"/bad* "$d"/.bad*
  else pass; fi
}

# field FILE PYEXPR: the value of PYEXPR, d being FILE's JSON document.
field() {
  /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
    "$1" "$2"
}
# mkst FILE HEADER DATA_BYTES: a safetensors file with HEADER (JSON) and as
# many zero bytes of data.
mkst() {
  local n=${#2}
  printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x\\x00\\x00\\x00\\x00' $((n & 255)) \
    $((n >> 8 & 255)) $((n >> 16 & 255)) $((n >> 24 & 255)))" >"$1"
  printf '%s' "$2" >>"$1"
  head -c "$3" /dev/zero >>"$1"
}

# finish NAME [need-passes | skip-if-none]: the closing line and the exit
# code: 1 after any failure; else 77 (skipped) when the test counted groups
# of checks it could not run in $skips; else, when no check ran at all, 1
# with need-passes and 77 with skip-if-none.
finish() {
  if [ "$skips" -gt 0 ]; then
    echo "$1: $passes passed, $fails failed, $skips skipped"
  else
    echo "$1: $passes passed, $fails failed"
  fi
  [ "$fails" -eq 0 ] || exit 1
  [ "$skips" -eq 0 ] || exit 77
  if [ "$passes" -eq 0 ]; then
    case ${2:-} in
      need-passes) exit 1 ;;
      skip-if-none) exit 77 ;;
    esac
  fi
  exit 0
}
