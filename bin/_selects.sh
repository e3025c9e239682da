# Sourced by bin/test. selects TREE ARGS...: whether the pytest arguments ARGS select
# tests of the tree TREE: no path at all (the whole suite), "tests" or "." or a path
# inside that tree, unless it is --ignore'd. The value of an option that takes one
# (-p no:cacheprovider, -k docx, --ignore tests/browser) is not a path.

# pytest's options whose value may come as the next argument.
_SELECTS_VALUED=" -p -k -m -c -o -r -W --ignore --ignore-glob --deselect --rootdir --confcutdir --basetemp --junitxml --junit-xml --maxfail --tb --durations --durations-min --log-level --log-file --override-ini --import-mode --capture --cov --cov-report --timeout "

selects() {
  local tree=$1 named=0 arg value_next=0 option=""
  shift
  for arg in "$@"; do
    if [ "$value_next" = 1 ]; then
      value_next=0
      if [ "$option" = --ignore ]; then
        case "$arg" in "$tree" | "$tree"/ | ./"$tree" | ./"$tree"/) return 1 ;; esac
      fi
      continue
    fi
    case "$arg" in
      --ignore="$tree" | --ignore="$tree"/ | --ignore=./"$tree" | --ignore=./"$tree"/) return 1 ;;
      -*)
        case "$_SELECTS_VALUED" in *" $arg "*) value_next=1 option=$arg ;; esac
        continue
        ;;
    esac
    named=1
    arg=${arg%%::*}
    arg=${arg#./}
    case "$arg" in
      "" | . | tests | tests/ | "$tree" | "$tree"/*) return 0 ;;
    esac
  done
  [ "$named" = 0 ]
}
