#!/usr/bin/env bash
# The manual page renders without a warning (groff -man -ww, man -l); it and
# both completions know every option `amn --help` lists; bash completion
# completes commands, options, --to targets from the loaded plugins and
# files; `cmake --install` puts them where man, bash-completion and zsh look.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init docs "$1" "$2"
bin=$build/bin
# The completion lists name the writers: the full list needs the
# safetensors plugin; a build without it reports the test as skipped.
need_plugin safetensors
page=$src/doc/amn.1

groff -man -Tutf8 -ww -z "$page" >"$work/w" 2>&1 && [ ! -s "$work/w" ] && pass \
  || { fail "groff warnings:"; cat "$work/w"; }
if command -v man >/dev/null; then
  LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$page" >"$work/man" 2>"$work/w"
  [ ! -s "$work/w" ] && pass || { fail "man -l warnings:"; cat "$work/w"; }
  grep -q "amn, *anamnesis" "$work/man" && pass || fail "man -l: no NAME section"
else
  echo "SKIP: man is not installed"
fi

# Every option of every --help, in the page and both completions.
opts=$( { "$bin/amn" --help; for c in parse inspect remember convert plugins; do "$bin/amn" $c --help; done; } \
  | grep -o -- '--[a-z][a-z-]*' | sort -u)
[ "$(echo "$opts" | wc -l)" -ge 20 ] && pass || fail "too few options found in --help: $opts"
for o in $opts; do
  grep -q -- "${o//-/\\\\-}" "$page" && pass || fail "man page lacks $o"
  grep -q -- "$o" "$src/completions/amn.bash" && pass || fail "bash completion lacks $o"
  grep -q -- "$o" "$src/completions/_amn" && pass || fail "zsh completion lacks $o"
done

# bash completion, driven as bash does.
complete_words() { # complete_words WORD... (the last is the one completed)
  PATH=$bin:$PATH bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _amn; printf "%s\n" "${COMPREPLY[@]}"' \
    _ "$src/completions/amn.bash" "$@"
}
complete_words amn re | grep -x remember >/dev/null && pass || fail "bash: command"
complete_words amn --plugin-dir /tmp con | grep -x convert >/dev/null && pass || fail "bash: command after --plugin-dir"
complete_words amn convert x --to "" >"$work/t"
for f in $("$bin/amn" plugins | awk '$1 == "format" && /write\]/ { print $2 }'); do
  grep -qx "$f" "$work/t" && pass || fail "bash: --to lacks $f"
done
grep -qx safetensors "$work/t" && pass || fail "bash: --to lacks safetensors"
complete_words amn remember x --to "" | grep -x f16 >/dev/null && pass || fail "bash: remember --to dtypes"
complete_words amn convert x --max-r | grep -x -- --max-ratio >/dev/null && pass || fail "bash: option"
mkdir -p "$work/dir" && touch "$work/dir/model.gguf"
complete_words amn inspect "$work/dir/mo" | grep -x "$work/dir/model.gguf" >/dev/null && pass || fail "bash: files"
if command -v zsh >/dev/null; then
  zsh -n "$src/completions/_amn" && pass || fail "zsh: syntax"
  zc() { zsh -f "$src/tests/cli/zsh_complete.zsh" "$src/completions" "$bin" "$@" && pass || fail "zsh: $1"; }
  zc "amn rem" "remember"
  zc "amn convert x --to " $("$bin/amn" plugins | awk '$1 == "format" && /write\]/ { print $2 }')
  zc "amn parse x --max-" "--max-alloc" "--max-ratio" "--max-depth"
  zc "amn remember x --to " "bf16" "f16" "f32"
  zc "amn inspect $work/dir/mo" "model.gguf"
else
  echo "SKIP: zsh is not installed"
fi

# Installed where the tools look.
cmake --install "$build" --prefix "$work/prefix" >/dev/null 2>&1 || fail "cmake --install"
for f in share/man/man1/amn.1 share/man/man1/anamnesis.1 share/bash-completion/completions/amn \
         share/bash-completion/completions/anamnesis share/zsh/site-functions/_amn; do
  [ -e "$work/prefix/$f" ] && pass || fail "not installed: $f"
done

finish docs
