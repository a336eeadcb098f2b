// Package nilness tells a nil interface from one holding a nil pointer,
// map, func, slice or channel, which a plain == nil comparison misses: a
// typed nil client handed to a constructor must be refused, not
// dereferenced on first use.
package nilness

import "reflect"

// IsNil reports whether v is nil or holds a nil pointer, interface, map,
// func, slice or channel.
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Func, reflect.Slice, reflect.Chan:
		return rv.IsNil()
	}
	return false
}
