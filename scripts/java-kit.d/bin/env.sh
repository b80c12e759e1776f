# shellcheck shell=bash disable=SC2034 # sourced: the variables it sets are for its caller
# bin/env.sh: sourced by the kit's commands; a test that runs java itself may source it too.
# Written by ferromq's scripts/java-kit. Sourcing writes nothing. It sets:
#   KIT          the kit's root (this file's folder's parent)
#   KIT_VERSION  the RocketMQ version (KIT/VERSION), KIT_MAJOR its first number
#   JAVA, JAVAC  $RMQ_JAVA if set, else a JDK 17 under /usr/lib/jvm, else $JAVA_HOME/bin/java,
#                else java on PATH; javac beside it
#   CP           the kit's classpath: KIT/lib/* (RocketMQ and every dependency); with
#                KIT_CLIENT=grpc (5.x kits) the gRPC client's KIT/lib-grpc/* instead, for
#                bin/javac-client and bin/java-run
#   OPENS        the --add-opens/--add-exports the broker's store needs on JDK 17 (its direct
#                buffer cleaner) and netty uses; harmless for clients
#   CLIENT_LOG   -Dlogback.configurationFile=... for client JVMs (conf/ of the kit)
#   BIND_HOST    $FERROMQ_BIND_HOST, else 127.0.0.1: where servers listen, and the
#                brokerIP1/brokerIP2 the broker command writes by default
#   LD_PRELOAD   KIT/native/libbindhost.so first (exported): a wildcard bind() becomes BIND_HOST
# and defines:
#   rmq_logdir [DIR]  RMQ_LOGDIR := DIR, else $RMQ_LOGDIR, else a new mktemp dir (said on
#                     stderr); made, with DIR/logs, and exported. It is the JVM's user.home.
#   rmq_flags         fills the array RMQ_FLAGS with what every kit JVM gets:
#                       -Duser.home=$RMQ_LOGDIR      logs/rocketmqlogs/, the name server's kv
#                                                    store, client offsets: never the real home
#                       -Drocketmq.home.dir=$KIT     upstream's ROCKETMQ_HOME (conf/ is read there)
#                       -Drocketmq.client.logUseSlf4j=true (4.x: the client logs via logback)
#                       -Djava.net.preferIPv4Stack=true
#                       -XX:ErrorFile=$RMQ_LOGDIR/hs_err_pid%p.log
#   rmq_need_deps     exits 2 with the remedy when java is missing or older than 17
# JVM_EXTRA (env) is appended by every command to its java command line (word-split, so the
# last -D of a key wins over the kit's).

KIT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
KIT_VERSION=$(cat "$KIT/VERSION")
KIT_MAJOR=${KIT_VERSION%%.*}

JAVA=${RMQ_JAVA:-}
if [ -z "$JAVA" ]; then
    for _j in /usr/lib/jvm/java-17-openjdk-*/bin/java "${JAVA_HOME:+$JAVA_HOME/bin/java}" \
        "$(command -v java 2>/dev/null)"; do
        if [ -n "$_j" ] && [ -x "$_j" ]; then JAVA=$_j; break; fi
    done
    unset _j
fi
JAVAC=
if [ -n "$JAVA" ] && [ -x "$(dirname "$(readlink -f "$JAVA")")/javac" ]; then
    JAVAC=$(dirname "$(readlink -f "$JAVA")")/javac
else
    JAVAC=$(command -v javac 2>/dev/null || true)
fi

if [ "${KIT_CLIENT:-}" = grpc ]; then
    CP="$KIT/lib-grpc/*"
else
    CP="$KIT/lib/*"
fi
OPENS="--add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/sun.nio.ch=ALL-UNNAMED"
OPENS="$OPENS --add-exports java.base/sun.nio.ch=ALL-UNNAMED"
OPENS="$OPENS --add-opens java.base/jdk.internal.ref=ALL-UNNAMED"
OPENS="$OPENS --add-exports java.base/jdk.internal.ref=ALL-UNNAMED"
OPENS="$OPENS --add-opens java.base/java.lang=ALL-UNNAMED --add-opens java.base/java.util=ALL-UNNAMED"
OPENS="$OPENS --add-opens java.base/jdk.internal.misc=ALL-UNNAMED"
OPENS="$OPENS --add-exports java.base/jdk.internal.misc=ALL-UNNAMED"
if [ "$KIT_MAJOR" = 4 ]; then
    CLIENT_LOG="-Dlogback.configurationFile=$KIT/conf/logback_client.xml"
else
    CLIENT_LOG="-Drmq.logback.configurationFile=$KIT/conf/rmq.client.logback.xml"
fi
BIND_HOST=${FERROMQ_BIND_HOST:-127.0.0.1}
export FERROMQ_BIND_HOST=$BIND_HOST
export LD_PRELOAD="$KIT/native/libbindhost.so${LD_PRELOAD:+:$LD_PRELOAD}"

rmq_logdir() {
    if [ -n "${1:-}" ]; then
        RMQ_LOGDIR=$1
    elif [ -z "${RMQ_LOGDIR:-}" ]; then
        RMQ_LOGDIR=$(mktemp -d "${TMPDIR:-/tmp}/rmq-java.XXXXXX") || return 1
        echo "rmq-java: logs and user.home in $RMQ_LOGDIR" >&2
    fi
    mkdir -p "$RMQ_LOGDIR/logs" || return 1
    RMQ_LOGDIR=$(cd "$RMQ_LOGDIR" && pwd)
    export RMQ_LOGDIR
}

rmq_flags() {
    RMQ_FLAGS=("-Duser.home=$RMQ_LOGDIR" "-Drocketmq.home.dir=$KIT"
        -Drocketmq.client.logUseSlf4j=true -Djava.net.preferIPv4Stack=true
        "-XX:ErrorFile=$RMQ_LOGDIR/hs_err_pid%p.log")
}

# The major version of a JDK tool: its release file, else its -version.
rmq_java_major() {
    local tool=$1 v
    if [ -z "$tool" ] || [ ! -x "$tool" ]; then
        echo 0
        return
    fi
    v=$(sed -n 's/^JAVA_VERSION="\([0-9]*\).*/\1/p' \
        "$(dirname "$(dirname "$(readlink -f "$tool")")")/release" 2>/dev/null || true)
    [ -n "$v" ] || v=$("$tool" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
    echo "${v:-0}"
}

rmq_need_deps() {
    if [ "$(rmq_java_major "$JAVA")" -lt 17 ]; then
        echo "rmq-java: no java 17 or newer${JAVA:+ (found $JAVA)}; run $KIT/bin/install-deps.sh" \
            "(as root) or set RMQ_JAVA" >&2
        exit 2
    fi
}
