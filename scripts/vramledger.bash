# bash completion for vramledger (installed as
# share/bash-completion/completions/vramledger). Commands and options come
# from the installed binary's own --help, so they never drift; --model also
# completes the bundled model names.
_vramledger() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd=${COMP_WORDS[1]}
  local vl=${COMP_WORDS[0]}
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "$("$vl" --help 2>/dev/null | awk '/^  [a-z]/ {print $1}') --help --version --paths" -- "$cur"))
  elif [ "$prev" = "--model" ]; then
    local data
    data=$("$vl" --paths 2>/dev/null | awk '$1 == "data" {print $2}')
    COMPREPLY=($(compgen -W "$(ls "$data/models" 2>/dev/null | sed -n 's/\.json$//p')" -- "$cur") $(compgen -f -- "$cur"))
  elif [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$("$vl" "$cmd" --help 2>/dev/null | grep -o -- '--[a-z][a-z0-9-]*' | sort -u)" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -F _vramledger vramledger
