_nsqctl_completion() {
    local IFS=$'
'
    COMPREPLY=( $( env COMP_WORDS="${COMP_WORDS[*]}" \
                   COMP_CWORD=$COMP_CWORD \
                   _NSQCTL_COMPLETE=complete_bash $1 ) )
    return 0
}

complete -o default -F _nsqctl_completion nsqctl
