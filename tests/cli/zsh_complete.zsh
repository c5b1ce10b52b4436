# zsh -f zsh_complete.zsh COMPLETIONS_DIR BIN_DIR LINE WORD...
# Type LINE and two tabs into an interactive zsh (on a pseudo-terminal, through
# zsh/zpty) with amn's completion loaded; exit 0 once every WORD has appeared
# in what zsh prints (the listing or the inserted completion), 1 after 30 s.
zmodload zsh/zpty || exit 2
local dir=$1 bin=$2 line=$3
shift 3
zpty z zsh -f -i
zpty -w z "PS1='>'; fpath=($dir \$fpath); autoload -Uz compinit; compinit -u -D; path=($bin \$path)"
zpty -w z "zstyle ':completion:*' list-prompt ''; LISTMAX=1000; unsetopt beep"
zpty -w -n z "$line"$'\t\t'
local all= chunk w
integer i missing
for (( i = 0; i < 300; i++ )); do
  if zpty -r -t z chunk; then all+=$chunk; else sleep 0.1; fi
  missing=0
  for w in "$@"; do [[ $all == *"$w"* ]] || missing=1; done
  (( missing )) || break
done
zpty -d z
if (( missing )); then
  print -r -- "zsh completion of '$line' lacks one of: $*" >&2
  print -r -- "${all//$'\e'/^[}" | tail -5 >&2
  exit 1
fi
exit 0
