//go:build !linux

// Package xsk is an AF_XDP socket; AF_XDP is Linux's, so elsewhere the package is empty
// and transport/udp's afxdp datapath reports that it is not supported.
package xsk
