/* The smartt provider's address vector: names are a peer daemon's address and port
 * plus an endpoint; FI_AV_MAP and FI_AV_TABLE both hand out table indexes. */
#include "sfi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sfi_name_from(unsigned char n[SFI_ADDRLEN], const smartt_addr *a)
{
    memset(n, 0, SFI_ADDRLEN);
    memcpy(n, a->addr, 16);
    n[16] = (unsigned char)(a->port >> 8), n[17] = (unsigned char)a->port;
    for (int i = 0; i < 4; i++)
        n[20 + i] = (unsigned char)(a->endpoint >> (24 - 8 * i));
}

void sfi_name_to(smartt_addr *a, const unsigned char n[SFI_ADDRLEN])
{
    memcpy(a->addr, n, 16);
    a->port = (uint16_t)(n[16] << 8 | n[17]);
    a->endpoint = (uint32_t)n[20] << 24 | (uint32_t)n[21] << 16 | (uint32_t)n[22] << 8 | n[23];
}

/* local_listen copies the local daemon's "listen" HOST:PORT into buf. */
static int local_listen(char *buf, size_t len)
{
    const char *env = getenv("SMARTT_FI_ADDR");
    if (env && *env) {
        snprintf(buf, len, "%s", env);
        return 0;
    }
    char *body = NULL;
    int r = smartt_get(NULL, "/v1/status", &body, 2000);
    const char *p = body && r == 200 ? strstr(body, "\"listen\"") : NULL;
    if (p)
        p = strchr(p + 8, '"');
    const char *q = p ? strchr(p + 1, '"') : NULL;
    if (!q || (size_t)(q - p - 1) >= len) {
        free(body);
        return -FI_ENODATA;
    }
    memcpy(buf, p + 1, (size_t)(q - p - 1));
    buf[q - p - 1] = 0;
    free(body);
    return 0;
}

/* sfi_local_name fills name with the local daemon's address (an unspecified listen
 * address becomes loopback) and endpoint ep. */
int sfi_local_name(unsigned char name[SFI_ADDRLEN], uint32_t ep)
{
    char hp[128];
    smartt_addr a;
    int r = local_listen(hp, sizeof hp);
    if (r)
        return r;
    char t[160];
    if (!strncmp(hp, "0.0.0.0:", 8))
        snprintf(t, sizeof t, "127.0.0.1:%s", hp + 8);
    else if (!strncmp(hp, "[::]:", 5))
        snprintf(t, sizeof t, "[::1]:%s", hp + 5);
    else
        snprintf(t, sizeof t, "%s", hp);
    if (smartt_addr_parse(&a, t, ep))
        return -FI_EINVAL;
    sfi_name_from(name, &a);
    return 0;
}

/* sfi_parse_name: node "HOST[:PORT]" (no port: the local daemon's, else 23600), service the
 * endpoint (default 0); no node: the local daemon. */
int sfi_parse_name(unsigned char name[SFI_ADDRLEN], const char *node, const char *service)
{
    char *end;
    unsigned long ep = 0;
    if (service && *service) {
        ep = strtoul(service, &end, 10);
        if (*end || ep > 0xffffffffu)
            return -FI_EINVAL;
    }
    if (!node)
        return sfi_local_name(name, (uint32_t)ep);
    smartt_addr a;
    if (!smartt_addr_parse(&a, node, (uint32_t)ep)) {
        sfi_name_from(name, &a);
        return 0;
    }
    char hp[160], loc[128];
    if (local_listen(loc, sizeof loc))
        snprintf(loc, sizeof loc, "0.0.0.0:23600"); /* no daemon to ask: smarttd's default port */
    const char *port = strrchr(loc, ':');
    if (!port || strlen(node) > 100)
        return -FI_EINVAL;
    snprintf(hp, sizeof hp, strchr(node, ':') ? "[%s]%s" : "%s%s", node, port);
    if (smartt_addr_parse(&a, hp, (uint32_t)ep))
        return -FI_EINVAL;
    sfi_name_from(name, &a);
    return 0;
}

const unsigned char *sfi_av_get(sfi_av *av, fi_addr_t a)
{
    if (!av || a >= av->n || !av->valid[a])
        return NULL;
    return av->tab[a];
}

static size_t name_hash(const unsigned char n[SFI_ADDRLEN])
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (int i = 0; i < SFI_ADDRLEN; i++)
        h = (h ^ n[i]) * 1099511628211ull;
    return (size_t)(h ^ (h >> 29));
}

/* sfi_av_find maps a sender's name back to its address (FI_ADDR_NOTAVAIL if absent);
 * removed entries stay in the hash and are skipped. */
fi_addr_t sfi_av_find(sfi_av *av, const unsigned char name[SFI_ADDRLEN])
{
    if (!av || !av->hcap)
        return FI_ADDR_NOTAVAIL;
    fi_addr_t found = FI_ADDR_NOTAVAIL;
    for (size_t i = name_hash(name) & (av->hcap - 1);; i = (i + 1) & (av->hcap - 1)) {
        uint32_t x = av->hash[i];
        if (!x)
            return found;
        if (av->valid[x - 1] && !memcmp(av->tab[x - 1], name, SFI_ADDRLEN))
            found = x - 1; /* the newest insertion of a name wins */
    }
}

static void hash_put(sfi_av *av, size_t idx)
{
    size_t i = name_hash(av->tab[idx]) & (av->hcap - 1);
    while (av->hash[i])
        i = (i + 1) & (av->hcap - 1);
    av->hash[i] = (uint32_t)(idx + 1);
}

/* hash_fit keeps the hash at most half full for want entries. */
static int hash_fit(sfi_av *av, size_t want)
{
    if (want * 2 <= av->hcap)
        return 0;
    if (want > 0x7fffffff)
        return -FI_ENOMEM;
    size_t nc = av->hcap ? av->hcap : 128;
    while (nc < want * 2)
        nc *= 2;
    uint32_t *h = calloc(nc, sizeof *h);
    if (!h)
        return -FI_ENOMEM;
    free(av->hash);
    av->hash = h, av->hcap = nc;
    for (size_t i = 0; i < av->n; i++)
        hash_put(av, i);
    return 0;
}

static int av_grow(sfi_av *av, size_t want)
{
    if (want <= av->cap)
        return 0;
    size_t nc = av->cap ? av->cap : 64;
    while (nc < want)
        nc *= 2;
    void *t = realloc(av->tab, nc * SFI_ADDRLEN);
    if (!t)
        return -FI_ENOMEM;
    av->tab = t;
    unsigned char *v = realloc(av->valid, nc);
    if (!v)
        return -FI_ENOMEM;
    av->valid = v;
    av->cap = nc;
    return 0;
}

static int av_insert(struct fid_av *f, const void *addr, size_t count, fi_addr_t *fi_addr,
                     uint64_t flags, void *ctx)
{
    (void)ctx;
    sfi_av *av = container_of(f, sfi_av, av);
    if (flags & ~(uint64_t)FI_MORE)
        return -FI_EBADFLAGS;
    if (!addr && count)
        return -FI_EINVAL;
    pthread_mutex_lock(&av->dom->lock);
    int r = av_grow(av, av->n + count);
    if (!r)
        r = hash_fit(av, av->n + count);
    int done = 0;
    for (size_t i = 0; !r && i < count; i++) {
        const unsigned char *n = (const unsigned char *)addr + i * SFI_ADDRLEN;
        memcpy(av->tab[av->n], n, SFI_ADDRLEN);
        av->valid[av->n] = 1;
        hash_put(av, av->n);
        if (fi_addr)
            fi_addr[i] = av->n;
        av->n++;
        done++;
    }
    pthread_mutex_unlock(&av->dom->lock);
    return r ? r : done;
}

static int av_insertsvc(struct fid_av *f, const char *node, const char *service,
                        fi_addr_t *fi_addr, uint64_t flags, void *ctx)
{
    unsigned char n[SFI_ADDRLEN];
    int r = sfi_parse_name(n, node, service);
    if (r)
        return r;
    return av_insert(f, n, 1, fi_addr, flags, ctx);
}

static int av_insertsym(struct fid_av *f, const char *node, size_t nodecnt, const char *service,
                        size_t svccnt, fi_addr_t *fi_addr, uint64_t flags, void *ctx)
{
    (void)f, (void)node, (void)nodecnt, (void)service, (void)svccnt, (void)fi_addr, (void)flags, (void)ctx;
    return -FI_ENOSYS;
}

static int av_remove(struct fid_av *f, fi_addr_t *fi_addr, size_t count, uint64_t flags)
{
    sfi_av *av = container_of(f, sfi_av, av);
    if (flags)
        return -FI_EBADFLAGS;
    int r = 0;
    pthread_mutex_lock(&av->dom->lock);
    for (size_t i = 0; i < count; i++) {
        if (fi_addr[i] < av->n && av->valid[fi_addr[i]])
            av->valid[fi_addr[i]] = 0;
        else
            r = -FI_EINVAL;
    }
    pthread_mutex_unlock(&av->dom->lock);
    return r;
}

static int av_lookup(struct fid_av *f, fi_addr_t a, void *addr, size_t *addrlen)
{
    sfi_av *av = container_of(f, sfi_av, av);
    if (!addrlen)
        return -FI_EINVAL;
    pthread_mutex_lock(&av->dom->lock);
    const unsigned char *n = sfi_av_get(av, a);
    int r = 0;
    if (!n)
        r = -FI_ENOENT;
    else if (addr)
        memcpy(addr, n, *addrlen < SFI_ADDRLEN ? *addrlen : SFI_ADDRLEN);
    pthread_mutex_unlock(&av->dom->lock);
    *addrlen = SFI_ADDRLEN;
    return r;
}

static const char *av_straddr(struct fid_av *f, const void *addr, char *buf, size_t *len)
{
    (void)f;
    char s[96] = "smartt://?";
    smartt_addr a;
    if (addr) {
        sfi_name_to(&a, addr);
        memcpy(s, "smartt://", 9);
        smartt_addr_format(&a, s + 9, sizeof s - 9);
    }
    if (buf && len && *len) {
        strncpy(buf, s, *len - 1);
        buf[*len - 1] = 0;
    }
    if (len)
        *len = strlen(s) + 1;
    return buf;
}

static int av_set(struct fid_av *f, struct fi_av_set_attr *a, struct fid_av_set **s, void *c)
{
    (void)f, (void)a, (void)s, (void)c;
    return -FI_ENOSYS;
}

static struct fi_ops_av av_ops = {
    .size = sizeof(struct fi_ops_av), .insert = av_insert, .insertsvc = av_insertsvc,
    .insertsym = av_insertsym, .remove = av_remove, .lookup = av_lookup,
    .straddr = av_straddr, .av_set = av_set,
};

static int av_close(struct fid *fid)
{
    sfi_av *av = container_of(fid, sfi_av, av.fid);
    if (av->refs)
        return -FI_EBUSY;
    av->dom->refs--;
    free(av->tab);
    free(av->valid);
    free(av->hash);
    free(av);
    return 0;
}

static int av_bind(struct fid *fid, struct fid *b, uint64_t flags)
{
    (void)fid, (void)b, (void)flags;
    return -FI_ENOSYS; /* no EQ: inserts are synchronous */
}

static struct fi_ops av_fi_ops = {
    .size = sizeof(struct fi_ops), .close = av_close, .bind = av_bind,
    .control = sfi_no_control, .ops_open = sfi_no_ops_open,
};

int sfi_av_open(struct fid_domain *d, struct fi_av_attr *attr, struct fid_av **out, void *ctx)
{
    if (!attr || !out)
        return -FI_EINVAL;
    if (attr->type != FI_AV_UNSPEC && attr->type != FI_AV_MAP && attr->type != FI_AV_TABLE)
        return -FI_EINVAL;
    if (attr->flags & (FI_EVENT | FI_READ | FI_SYMMETRIC))
        return -FI_ENOSYS;
    if (attr->name)
        return -FI_ENOSYS; /* no shared AVs */
    sfi_domain *dom = container_of(d, sfi_domain, d);
    sfi_av *av = calloc(1, sizeof *av);
    if (!av)
        return -FI_ENOMEM;
    av->dom = dom;
    av->type = attr->type == FI_AV_UNSPEC ? FI_AV_TABLE : attr->type;
    if (av_grow(av, attr->count && attr->count < 65536 ? attr->count : 64)) {
        free(av->tab);
        free(av->valid);
        free(av);
        return -FI_ENOMEM;
    }
    av->av.fid.fclass = FI_CLASS_AV;
    av->av.fid.context = ctx;
    av->av.fid.ops = &av_fi_ops;
    av->av.ops = &av_ops;
    pthread_mutex_lock(&dom->lock);
    dom->refs++;
    pthread_mutex_unlock(&dom->lock);
    *out = &av->av;
    return 0;
}
