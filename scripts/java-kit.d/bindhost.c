/*
 * bindhost.c: an LD_PRELOAD shim for the Java kits of scripts/java-kit.
 *
 * RocketMQ 4.9.8 binds its remoting servers and the HA listener to the wildcard address, and
 * has no setting to change that. Tests must listen on loopback only, so this shim wraps
 * bind(2): a wildcard IPv4 address (INADDR_ANY) becomes the host in FERROMQ_BIND_HOST
 * (127.0.0.1 when unset), and a wildcard IPv6 address (in6addr_any) becomes that host in its
 * IPv4-mapped form (::ffff:a.b.c.d). Every other address, the port and other families pass
 * through unchanged. A FERROMQ_BIND_HOST that is not an IPv4 address fails every wildcard
 * bind with EADDRNOTAVAIL, so a typo never falls back to listening everywhere.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

static int bind_host(struct in_addr *host)
{
    const char *text = getenv("FERROMQ_BIND_HOST");
    if (text == NULL || text[0] == '\0')
        text = "127.0.0.1";
    return inet_pton(AF_INET, text, host) == 1 ? 0 : -1;
}

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
    static bind_fn real_bind;
    if (real_bind == NULL)
        real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
    if (real_bind == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (addr == NULL)
        return real_bind(fd, addr, len);

    struct in_addr host;
    if (addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        struct sockaddr_in v4;
        memcpy(&v4, addr, sizeof v4);
        if (v4.sin_addr.s_addr != htonl(INADDR_ANY))
            return real_bind(fd, addr, len);
        if (bind_host(&host) != 0) {
            errno = EADDRNOTAVAIL;
            return -1;
        }
        v4.sin_addr = host;
        return real_bind(fd, (const struct sockaddr *)&v4, sizeof v4);
    }
    if (addr->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 v6;
        memcpy(&v6, addr, sizeof v6);
        if (!IN6_IS_ADDR_UNSPECIFIED(&v6.sin6_addr))
            return real_bind(fd, addr, len);
        if (bind_host(&host) != 0) {
            errno = EADDRNOTAVAIL;
            return -1;
        }
        memset(&v6.sin6_addr, 0, sizeof v6.sin6_addr);
        v6.sin6_addr.s6_addr[10] = 0xff;
        v6.sin6_addr.s6_addr[11] = 0xff;
        memcpy(&v6.sin6_addr.s6_addr[12], &host, 4);
        return real_bind(fd, (const struct sockaddr *)&v6, sizeof v6);
    }
    return real_bind(fd, addr, len);
}
