# Sourced after lib.sh by the tests that write GGUF files with llama.cpp's own
# gguf-py (node-llama-cpp's source bundle) and numpy.
#   find_gguf_py || skip "$GGUF_PY_MISSING"   # sets PY (a python3 with numpy) and GP (gguf-py's folder)
find_gguf_py() {
  local bundle=tools/llamacpp/node_modules/node-llama-cpp/llama/gitRelease.bundle p
  PY=
  for p in python3 /usr/bin/python3; do "$p" -c 'import numpy' 2>/dev/null && { PY=$p; break; }; done
  GGUF_PY_MISSING="no python3 with numpy (apt-get install python3-numpy)"
  [[ -n $PY ]] || return 1
  GP=$(dirname "$BIN")/llamacpp-include/gguf-py
  [[ -d $GP/gguf ]] && return 0
  GGUF_PY_MISSING="$bundle missing (tools/install-deps.sh installs node-llama-cpp)"
  [[ -f $bundle ]] || return 1
  git -C "$TMP" init -q && git -C "$TMP" fetch -q "$(realpath $bundle)" HEAD &&
    git -C "$TMP" archive FETCH_HEAD gguf-py | tar -x -C "$TMP" || { echo "cannot extract gguf-py from $bundle"; exit 1; }
  GP=$TMP/gguf-py
}
