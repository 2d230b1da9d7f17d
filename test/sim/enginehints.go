package sim

import (
	"reflect"
	"unsafe"

	"github.com/smartt-transport/smartt/transport"
)

// noHeap stands for the timer heap header of an engine whose field was not found: an
// empty slice, so timerTop gives 0.
var noHeap [2]uintptr

// engineHints returns what the simulator prefetches before calling into an engine (it
// runs thousands, and finds each one's state out of cache): the header of the engine's
// timer heap, which NextTimeout reads first, and the header of its connection table,
// which HandlePacket reads first. The engine exports no addresses: the fields are found
// by name (TestEngineHints fails if they are renamed; until then the hints are only
// missing). Both stay valid for the engine's life: Go's heap objects do not move and a
// map's header is allocated once. They are hints, read only to prefetch.
func engineHints(ep *transport.Endpoint) (heap *[2]uintptr, conns uintptr) {
	heap = &noHeap
	v := reflect.ValueOf(ep).Elem()
	if f := v.FieldByName("theap"); f.IsValid() && f.Kind() == reflect.Slice {
		heap = (*[2]uintptr)(unsafe.Pointer(f.UnsafeAddr())) // the slice's data pointer and length
	}
	if f := v.FieldByName("conns"); f.IsValid() && f.Kind() == reflect.Map {
		conns = f.Pointer()
	}
	return heap, conns
}

// timerTop returns the address of the first entry of the timer heap whose header is
// heap (0: empty), the connection NextTimeout reads after the header.
func timerTop(heap *[2]uintptr) uintptr {
	if heap[1] == 0 {
		return 0
	}
	return heap[0]
}
