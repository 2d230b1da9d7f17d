//go:build !linux

package nstest

// ifaNoDAD is Linux's IFA_F_NODAD; elsewhere namespaces are not created (New fails).
const ifaNoDAD = 0x02
