package httplock

import "net/http"

// KeyFunc names the lock a request must hold. It returns ok false (or an
// empty key) when the request has no key; see WithPassUnkeyed for what
// happens then. It is called once per request, on the request as the
// middleware received it.
type KeyFunc func(r *http.Request) (key string, ok bool)

// PathValue returns a KeyFunc that uses the path wildcard name of the
// route that matched the request (http.Request.PathValue, as set by a Go
// 1.22 http.ServeMux pattern such as "POST /orders/{id}"). A missing or
// empty value is no key.
func PathValue(name string) KeyFunc {
	return func(r *http.Request) (string, bool) {
		v := r.PathValue(name)
		return v, v != ""
	}
}

// Header returns a KeyFunc that uses the first value of the request header
// name, such as "Idempotency-Key". A missing or empty header is no key. The
// value comes from the client as sent: use WithKeyPrefix to keep it apart
// from other locks, and bound header sizes with http.Server.MaxHeaderBytes.
func Header(name string) KeyFunc {
	return func(r *http.Request) (string, bool) {
		v := r.Header.Get(name)
		return v, v != ""
	}
}
