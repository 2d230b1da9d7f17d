//go:build !linux

package nsenter

import "errors"

// errNoNetns: named network namespaces (bind mounts under NsDir) are Linux's.
var errNoNetns = errors.New("nsenter: network namespaces: not supported on this OS (Linux only)")

// PrepareDir fails: network namespaces are Linux's.
func PrepareDir() error { return errNoNetns }

// IsMountPoint fails: mountinfo is Linux's.
func IsMountPoint(string) (bool, error) { return false, errNoNetns }

// Delete fails: network namespaces are Linux's.
func Delete(string) error { return errNoNetns }
