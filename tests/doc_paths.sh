#!/usr/bin/env bash
# tools/check_doc_paths.py passes on docs/architecture.md, and fails on a copy
# of the page with a missing file planted: a root path, a public header, a
# FOLDER/NAME under src/, and a bare name in a folder's paragraph.
source "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
check="$root/tools/check_doc_paths.py"
python3 "$check" "$root" || { fail "docs/architecture.md itself fails the check"; finish; }
pass "every file docs/architecture.md names exists"
plant() { # plant NAME TEXT: the page with TEXT after the **study/** paragraph's first line, expect TEXT's name caught
    mkdir -p "$TMP/t/docs"
    for d in src include tools tests examples cmake bench CMakeLists.txt; do ln -sfn "$root/$d" "$TMP/t/$d"; done
    awk -v t="$2" '{print} /^\*\*study\/\*\*/ {print t}' "$root/docs/architecture.md" > "$TMP/t/docs/architecture.md"
    local out
    if out=$(python3 "$check" "$TMP/t"); then fail "$1 planted" "not caught"
    else has "$1 planted is caught" "$out" "$3"; fi
}
plant "a root path" 'the `tools/no_such_tool.py` check' '`tools/no_such_tool.py` names no file'
plant "a public header" 'see `diffattn/no_such.h`' '`diffattn/no_such.h` names no file'
plant "a src path" 'in `tasks/no_such_task.c`' '`tasks/no_such_task.c` names no file'
plant "a bare name of the paragraph's folder" 'the writer (`tasks.c`)' 'src/study/tasks.c'
finish
