package daemon

import (
	"reflect"

	"github.com/smartt-transport/smartt/transport"
)

// AddStats adds every counter of src to dst: the unsigned integers of transport.Stats, its
// arrays and nested structs, so a counter added to the engine is summed over shards
// without a change here (TestAddStatsCoversEveryField).
func AddStats(dst, src *transport.Stats) { AddCounters(dst, src) }

// AddCounters adds every numeric field of *src to *dst (arrays and nested structs
// included); T must hold nothing else (socket-layer counters summed over shards).
func AddCounters[T any](dst, src *T) {
	addValue(reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem())
}

func addValue(d, s reflect.Value) {
	switch d.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		d.SetUint(d.Uint() + s.Uint())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		d.SetInt(d.Int() + s.Int())
	case reflect.Float32, reflect.Float64:
		d.SetFloat(d.Float() + s.Float())
	case reflect.Array:
		for i := 0; i < d.Len(); i++ {
			addValue(d.Index(i), s.Index(i))
		}
	case reflect.Struct:
		for i := 0; i < d.NumField(); i++ {
			addValue(d.Field(i), s.Field(i))
		}
	default:
		panic("daemon.AddStats: transport.Stats has a field of kind " + d.Kind().String() + " it cannot sum")
	}
}
