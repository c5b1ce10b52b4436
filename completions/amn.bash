# bash completion for amn / anamnesis: commands, options, --to targets (the
# formats the loaded plugins can write, from `amn plugins`) and files.
# Standalone: uses compgen only, so it works without the bash-completion
# package too.

_amn_writable_formats() {
    # "               format NAME  [read inspect write] ..." lines of `amn plugins`
    "${1:-amn}" plugins 2>/dev/null | awk '$1 == "format" && /write\]/ { print $2 }'
}

_amn_encode_targets() {
    # "               encode NAME  TARGET... (amn forget --to TARGET)" lines of `amn plugins`
    "${1:-amn}" plugins 2>/dev/null | awk '$1 == "encode" { for (i = 3; i <= NF && $i !~ /^\(/; i++) print $i }'
}

_amn() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
    local prog=${COMP_WORDS[0]} cmd="" i
    local commands="parse inspect info remember dequantize convert plugins forget quantize scan"
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
        --plugin-dir) ((i++)) ;;
        -*) ;;
        *) cmd=${COMP_WORDS[i]}; break ;;
        esac
    done
    local limits="--max-alloc --max-total --max-items --max-ratio --max-header --max-depth"
    local opts
    case $cmd in
    "") opts="--plugin-dir --help --version" ;;
    parse) opts="--json --full --from --help $limits" ;;
    inspect | info) opts="--json --full --to --from --help $limits" ;;
    remember | dequantize) opts="--to -o --output --force --threads --shard-size --only-shards --write-index --resume --dedup-tied --from --json --quiet --progress --no-sync --help $limits" ;;
    convert) opts="--to --out-dtype --via -o --output --force --threads --shard-size --only-shards --write-index --opt --gguf-kv --gguf-metadata --imatrix --split-max-tensors --split-max-size --from --json --quiet --progress --no-sync --help $limits" ;;
    plugins) opts="--json --help" ;;
    scan) opts="--json --from --help" ;;
    forget | quantize) opts="--to --block-size --keep --pure --output-tensor-type --token-embedding-type --leave-output-tensor --tensor-type --allow-requantize --imatrix --keep-split -o --output --force --threads --shard-size --only-shards --write-index --resume --dedup-tied --from --json --quiet --progress --no-sync --help $limits" ;;
    esac
    case $prev in
    --plugin-dir)
        COMPREPLY=($(compgen -d -- "$cur")); return ;;
    --to)
        if [ "$cmd" = convert ]; then
            COMPREPLY=($(compgen -W "$(_amn_writable_formats "$prog") $(_amn_encode_targets "$prog") bf16" -- "$cur"))
        elif [ "$cmd" = forget ] || [ "$cmd" = quantize ]; then
            COMPREPLY=($(compgen -W "$(_amn_encode_targets "$prog")" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "bf16 f16 f32" -- "$cur"))
        fi
        return ;;
    --out-dtype) COMPREPLY=($(compgen -W "bf16 f16 f32 keep q8_0 auto" -- "$cur")); return ;;
    --via) COMPREPLY=($(compgen -W "f32 f16 bf16" -- "$cur")); return ;;
    --from)
        COMPREPLY=($("$prog" plugins 2>/dev/null | awk '$1 == "format" && /read/ { print $2 }' | grep -- "^$cur")); return ;;
    -o | --output | --gguf-metadata | --imatrix)
        COMPREPLY=($(compgen -f -- "$cur")); compopt -o filenames 2>/dev/null; return ;;
    --threads | --opt | --gguf-kv | --block-size | --keep | --tensor-type | --shard-size | --only-shards | --max-*) COMPREPLY=(); return ;;
    esac
    if [ -z "$cmd" ] && [[ $cur != -* ]]; then
        COMPREPLY=($(compgen -W "$commands" -- "$cur")); return
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur")); return
    fi
    [ "$cmd" = plugins ] && return
    COMPREPLY=($(compgen -f -- "$cur"))
    compopt -o filenames 2>/dev/null
}
complete -F _amn amn anamnesis
