/* hello SOCKET_A SOCKET_B HOST_B:PORT: one message from daemon A to daemon B.
 * cc hello.c $(pkg-config --cflags --libs smartt) */
#include <smartt.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    smartt_session *a = NULL, *b = NULL;
    smartt_addr to;
    smartt_event m;
    uint32_t ep;
    int r = argc == 4 ? smartt_open(&a, argv[1], NULL) : SMARTT_EINVAL;
    if (!r) r = smartt_open(&b, argv[2], NULL);
    if (!r) r = smartt_bind(a, 0, NULL, 5000);
    if (!r) r = smartt_bind(b, 0, &ep, 5000);                /* the daemon picks B's endpoint */
    if (!r) r = smartt_addr_parse(&to, argv[3], ep);
    if (!r) r = smartt_send(a, &to, "hello", 5, NULL, 5000); /* returns once Sent */
    if (!r) r = smartt_recv(b, &m, 5000);
    if (r)
        return fprintf(stderr, "hello: %s\n", smartt_strerror(r)), 1;
    printf("received \"%.*s\" over smartt-msg/%d\n", (int)m.size, (const char *)m.data, smartt_version(b));
    smartt_release(b, &m);
    smartt_close(a);
    smartt_close(b);
    return 0;
}
