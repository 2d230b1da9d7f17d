package nstest

import "golang.org/x/sys/unix"

// ifaNoDAD makes an address usable at once, without duplicate-address detection.
const ifaNoDAD = unix.IFA_F_NODAD
