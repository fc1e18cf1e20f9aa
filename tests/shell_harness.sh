#!/usr/bin/env bash
# Every tests/*.sh runs on the one harness, tests/lib.sh: it sources it, at
# the start of a line (not commented out). Checked on two planted scripts too.
source "$(dirname "$0")/lib.sh"
dir=$(cd "$(dirname "$0")" && pwd)
uses_lib() { grep -qxF 'source "$(dirname "$0")/lib.sh"' "$1"; }

printf '#!/usr/bin/env bash\nT=$(mktemp -d)\n# source "$(dirname "$0")/lib.sh"\n' > "$TMP/planted.sh"
check "a planted script without the harness is caught" eval '! uses_lib "$TMP/planted.sh"'
printf '#!/usr/bin/env bash\nsource "$(dirname "$0")/lib.sh"\nfinish\n' > "$TMP/good.sh"
check "a planted script with the harness passes" uses_lib "$TMP/good.sh"
for f in "$dir"/*.sh; do
  # lib.sh and the extensions a test sources after it (serve_lib.sh) are not tests
  [[ $(basename "$f") == lib.sh || $(basename "$f") == *_lib.sh ]] && continue
  check "$(basename "$f") sources lib.sh" uses_lib "$f"
done
finish
