#!/bin/bash
# bin/install-deps.sh [--check]: makes sure the kit can run: a JDK 17 or newer (java and
# javac). Everything else is in the kit's lib/. When the JDK is missing it installs the first
# of openjdk-17-jdk-headless, openjdk-21-jdk-headless and default-jdk-headless that apt offers
# (or $JDK_PACKAGE), as root or through sudo. When the JDK is there it returns at once.
# --check: install nothing; exit 1 (saying what) when the JDK is missing.
set -euo pipefail
. "$(dirname "$(readlink -f "$0")")/env.sh"
CHECK=0
case "${1:-}" in
--check) CHECK=1 ;;
'') ;;
*) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac
jdk_ok() { [ "$(rmq_java_major "$JAVA")" -ge 17 ] && [ "$(rmq_java_major "$JAVAC")" -ge 17 ]; }
if jdk_ok; then
    echo "install-deps: nothing to install (java $(rmq_java_major "$JAVA") at $JAVA, javac at $JAVAC)"
    exit 0
fi
if [ $CHECK = 1 ]; then
    echo "install-deps --check: no JDK 17 or newer (java: ${JAVA:-none}, javac: ${JAVAC:-none})"
    exit 1
fi
SUDO=()
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: run as root to install a JDK" >&2; exit 1; }
    SUDO=(sudo -n)
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q >/dev/null
pkg=${JDK_PACKAGE:-}
if [ -z "$pkg" ]; then
    for p in openjdk-17-jdk-headless openjdk-21-jdk-headless default-jdk-headless; do
        c=$(apt-cache policy "$p" 2>/dev/null | awk '/Candidate:/ {print $2}')
        if [ -n "$c" ] && [ "$c" != "(none)" ]; then pkg=$p; break; fi
    done
fi
[ -n "$pkg" ] || { echo "install-deps: apt offers no JDK package" >&2; exit 1; }
"${SUDO[@]}" mkdir -p /usr/share/man/man1 # slim images lack it; the JDK's postinst needs it
echo "install-deps: apt-get install $pkg"
"${SUDO[@]}" apt-get install -y -q --no-install-recommends "$pkg" >/dev/null
# shellcheck source=env.sh
. "$KIT/bin/env.sh"
jdk_ok || { echo "install-deps: still no JDK 17 or newer after installing $pkg" >&2; exit 1; }
echo "install-deps: installed $pkg (java at $JAVA)"
