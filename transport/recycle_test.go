package transport

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"unsafe"
)

// TestFreeRxZeroes: a recycled message record is zero but for the arrays freeRx keeps
// (empty), whatever fields rxMsg gains: freeRx resets it field by field, so a new field
// it misses would carry one message's state into the next.
func TestFreeRxZeroes(t *testing.T) {
	e, err := NewEndpoint(DefaultConfig(), rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	r := &rxMsg{}
	v := reflect.ValueOf(r).Elem()
	for i := range v.NumField() {
		setNonZero(t, settable(v.Field(i)))
		if v.Field(i).IsZero() {
			t.Fatalf("field %s not set", v.Type().Field(i).Name)
		}
	}
	e.freeRx(r)
	kept := map[string]bool{"chunks": true, "spans": true, "ec": true}
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch {
		case kept[name] && f.Len() != 0:
			t.Errorf("%s: %d entries left, want its array empty", name, f.Len())
		case !kept[name] && !f.IsZero():
			t.Errorf("%s not reset: %v", name, settable(f).Interface())
		}
	}
	if len(e.freeRxs) != 1 || e.freeRxs[0] != r {
		t.Errorf("record not kept for reuse: %d kept", len(e.freeRxs))
	}
}

func settable(f reflect.Value) reflect.Value {
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

// setNonZero gives v a value other than its zero (slices: empty but not nil).
func setNonZero(t *testing.T, v reflect.Value) {
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 0, 1))
	case reflect.Struct:
		for i := range v.NumField() {
			setNonZero(t, settable(v.Field(i)))
		}
	default:
		t.Fatalf("rxMsg field of kind %s: teach setNonZero to fill it", v.Kind())
	}
}
